package testutil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestPollTimesOut(t *testing.T) {
	polls := 0
	err := Poller{Timeout: 20 * PollInterval}.Poll("the impossible", func() bool { polls++; return false })
	if err == nil || err.Error() != "timed out after 20ms waiting for the impossible" {
		t.Fatalf("Poll = %v, want a timeout naming the condition and the deadline", err)
	}
	if polls < 2 {
		t.Errorf("the condition was polled %d times before the timeout", polls)
	}
	// A condition that comes true before the deadline is a success, however many polls it took.
	n := 0
	if err := (Poller{}).Poll("the fifth poll", func() bool { n++; return n == 5 }); err != nil || n != 5 {
		t.Errorf("Poll = %v after %d polls, want nil after 5", err, n)
	}
}

func TestPollSteps(t *testing.T) {
	steps := 0
	if err := (Poller{Step: func() { steps++ }}).Poll("true", func() bool { return true }); err != nil || steps != 0 {
		t.Errorf("a condition that holds at once: Poll = %v after %d steps, want nil after none", err, steps)
	}
	if err := Poll("three steps", func() bool { return steps == 3 }, func() { steps++ }); err != nil || steps != 3 {
		t.Errorf("Poll = %v after %d steps, want nil after 3", err, steps)
	}
}

// TestWaitForFailsTheTest: WaitFor fails the test with Fatal, naming the condition and the
// deadline, and does not return; a condition that holds passes. It runs on a Recorder, which it
// checks too: Fatal ends the goroutine, Errorf is recorded, and Failed says either.
func TestWaitForFailsTheTest(t *testing.T) {
	returned := false
	rec := Record(t, func(tb testing.TB) {
		tb.Errorf("before %d", 1)
		Poller{Timeout: 5 * PollInterval}.WaitFor(tb, "nothing", func() bool { return false })
		returned = true
	})
	if returned || rec.FatalMessage() != "timed out after 5ms waiting for nothing" {
		t.Errorf("WaitFor returned %t with failure %q, want a failure naming the condition", returned, rec.FatalMessage())
	}
	if errs := rec.Errors(); len(errs) != 1 || errs[0] != "before 1" || !rec.Failed() {
		t.Errorf("recorded errors %q, failed %t; want [before 1], true", errs, rec.Failed())
	}
	// A condition that holds passes without a failure.
	rec = Record(t, func(tb testing.TB) { WaitFor(tb, "something", func() bool { return true }) })
	if rec.Failed() {
		t.Errorf("WaitFor failed with %q on a condition that holds", rec.FatalMessage())
	}
}

// TestCloseAtCleanup: the stop functions run at the test's cleanup, the later registered first; one
// that fails fails the test with its error named, one that succeeds adds nothing.
func TestCloseAtCleanup(t *testing.T) {
	var order []string
	var rec *Recorder
	t.Run("inner", func(t *testing.T) {
		rec = Record(t, func(tb testing.TB) {
			CloseAtCleanup(tb, "closing the store", func() error { order = append(order, "store"); return nil })
			CloseAtCleanup(tb, "stopping the server", func() error { order = append(order, "server"); return errors.New("boom") })
		})
		if len(order) != 0 {
			t.Errorf("stopped %v before the cleanup", order)
		}
	})
	if strings.Join(order, ",") != "server,store" {
		t.Errorf("stopped %v at the cleanup, want [server store]", order)
	}
	if errs := rec.Errors(); len(errs) != 1 || errs[0] != "stopping the server: boom" || rec.FatalMessage() != "" {
		t.Errorf("recorded errors %q, fatal %q; want [stopping the server: boom] alone", errs, rec.FatalMessage())
	}
}

func TestSyncBuffer(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	const writers, lines = 4, 200
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				fmt.Fprintf(&b, "w%d-%d\n", w, i)
			}
		}()
	}
	for range 50 {
		_ = b.String()
	}
	wg.Wait()
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
	// Each writer's lines stay whole and in its order.
	next := make([]int, writers)
	for _, l := range got {
		var w, i int
		if _, err := fmt.Sscanf(l, "w%d-%d", &w, &i); err != nil || i != next[w] {
			t.Fatalf("line %q out of order or torn (%v)", l, err)
		}
		next[w]++
	}
}

func TestDiscardLogger(t *testing.T) {
	l := DiscardLogger()
	l.Error("dropped")
	if l.Enabled(t.Context(), slog.LevelError) {
		t.Error("the discard logger reports a level as enabled")
	}
}

// TestWaitTimeoutFrom: the environment variable sets the bound; unset, it is a minute; a value that
// is not a positive duration is refused, naming the variable.
func TestWaitTimeoutFrom(t *testing.T) {
	for _, c := range []struct {
		v    string
		want time.Duration
	}{{"", time.Minute}, {"5m", 5 * time.Minute}, {"90s", 90 * time.Second}} {
		if got, err := waitTimeoutFrom(c.v); err != nil || got != c.want {
			t.Errorf("%s=%q: %v, %v; want %v", WaitTimeoutVar, c.v, got, err, c.want)
		}
	}
	for _, v := range []string{"5", "soon", "-1m", "0s"} {
		if _, err := waitTimeoutFrom(v); err == nil || !strings.Contains(err.Error(), WaitTimeoutVar) {
			t.Errorf("%s=%q: %v, want an error naming the variable", WaitTimeoutVar, v, err)
		}
	}
}

// TestCancelAtEachPhase: a run that stops where it is cancelled passes; one that goes on to a later
// phase, returns a result, or ends without naming the phase is reported.
func TestCancelAtEachPhase(t *testing.T) {
	phases := []string{"a", "b", "c"}
	// stopAt runs the phases until its context ends; overrun phases more begin after that.
	stopAt := func(overrun int, result bool, word string) func(context.Context, func(string)) (bool, error) {
		return func(ctx context.Context, onPhase func(string)) (bool, error) {
			for i, p := range phases {
				onPhase(p)
				if ctx.Err() != nil {
					for _, q := range phases[i+1 : min(len(phases), i+1+overrun)] {
						onPhase(q)
					}
					return result, fmt.Errorf("check %s in %s: %w", word, p, ctx.Err())
				}
			}
			return true, nil
		}
	}
	if r := Record(t, func(tb testing.TB) { CancelAtEachPhase(tb, phases, stopAt(0, false, "stopped")) }); r.Failed() {
		t.Errorf("a run that stops where cancelled: %v %q", r.Errors(), r.FatalMessage())
	}
	for name, run := range map[string]func(context.Context, func(string)) (bool, error){
		"goes on":        stopAt(1, false, "stopped"),
		"gives a result": stopAt(0, true, "stopped"),
		"names no phase": stopAt(0, false, "ended"),
	} {
		if r := Record(t, func(tb testing.TB) { CancelAtEachPhase(tb, phases, run) }); !r.Failed() {
			t.Errorf("a run that %s passed", name)
		}
	}
}
