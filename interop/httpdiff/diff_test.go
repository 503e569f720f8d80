package httpdiff

import (
	"testing"

	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
	"github.com/listwatch/listwatch/interop/internal/seeds"
)

func TestMain(m *testing.M) { kubeapiserver.VerifyTestMain(m) }

// TestHTTPDifferential runs, for each seed, the same random requests over HTTP against a real
// apiextensions-apiserver and listwatch's chain, both serving widgets.example.com/v1, and requires
// the same answers (status, headers that carry meaning, body) and the same watch streams, once
// what is each server's own is normalized (uids, timestamps, managedFields, generated names,
// resourceVersions by their place among the writes). `make test` runs seeds 1, 2 and 20 (which
// pages through objects with generated names, whose continue tokens name them) of 150 requests; the
// environment names others for long runs.
func TestHTTPDifferential(t *testing.T) {
	seeds.Run(t, seeds.Config{SeedsVar: "LISTWATCH_HTTPDIFF_SEEDS", Seeds: "1-2,20",
		CountVar: "LISTWATCH_HTTPDIFF_OPS", Count: 150, Unit: "requests",
		ShortSeeds: "1", ShortCount: 60}, runSeed)
}

func runSeed(t *testing.T, seed uint64, ops int) stats {
	r := newRunner(t, seed, 0x5851f42d4c957f2d)
	r.warmUp(collection("warmup"), encode(r.widget("warmup", "warmup", nil)))
	r.Play(ops, func() {
		switch n := r.Rng.IntN(100); {
		case n < 40:
			r.write()
		case n < 50:
			r.badWrite()
		case n < 68:
			r.list()
		case n < 76:
			r.get()
		case n < 90:
			r.openWatch()
		default:
			r.StopWatch()
		}
	})
	r.stats.Tally = r.Tally
	t.Logf("seed %d: %s", seed, r.stats)
	return r.stats
}
