package clientgo

import (
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	clientfeatures "k8s.io/client-go/features"
)

// watchListOverride is the WatchListClient value tests force: 0 keeps client-go's default (on in
// v0.37), 1 turns it on, 2 off.
var watchListOverride atomic.Int32

// testGates is client-go's gate set with WatchListClient under the tests' control.
type testGates struct{ base clientfeatures.Gates }

func (g testGates) Enabled(f clientfeatures.Feature) bool {
	if f == clientfeatures.WatchListClient {
		switch watchListOverride.Load() {
		case 1:
			return true
		case 2:
			return false
		}
	}
	return g.base.Enabled(f)
}

// setWatchListClient forces client-go's WatchListClient gate for the reflectors created until the
// test ends.
func setWatchListClient(t *testing.T, on bool) {
	t.Helper()
	v := int32(2)
	if on {
		v = 1
	}
	watchListOverride.Store(v)
	t.Cleanup(func() { watchListOverride.Store(0) })
}

func TestMain(m *testing.M) {
	// Replaced before any client exists: client-go complains when gates it already read change.
	clientfeatures.ReplaceFeatureGates(testGates{base: clientfeatures.FeatureGates()})
	goleak.VerifyTestMain(m)
}
