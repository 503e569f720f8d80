package testutil

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// CancelAtEachPhase holds a checker to its contract on cancellation: run is called once for each of
// phases, in order, and the context it gets is cancelled as run reports (through onPhase) that it
// begins that phase. Each call must then end without a result and with an error that matches
// context.Canceled and says "stopped in <phase>", having begun exactly the phases up to that one.
func CancelAtEachPhase(t testing.TB, phases []string, run func(ctx context.Context, onPhase func(string)) (result bool, err error)) {
	t.Helper()
	for i, at := range phases {
		ctx, cancel := context.WithCancel(context.Background())
		var got []string
		result, err := run(ctx, func(name string) {
			got = append(got, name)
			if name == at {
				cancel()
			}
		})
		cancel()
		if !errors.Is(err, context.Canceled) || result || !strings.Contains(err.Error(), "stopped in "+at) {
			t.Fatalf("cancelled in %s: result %v, error %v; want context.Canceled in %s", at, result, err, at)
		}
		if !slices.Equal(got, phases[:i+1]) {
			t.Errorf("cancelled in %s: the check went on to %q", at, got)
		}
	}
}
