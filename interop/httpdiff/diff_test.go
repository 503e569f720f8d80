package httpdiff

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"

	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
	"github.com/listwatch/listwatch/interop/internal/seeds"
	"github.com/listwatch/listwatch/proptest/kubemodel"
)

func TestMain(m *testing.M) {
	// The upstream server logs its life through klog (process-wide); the test says what differed.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m, kubeapiserver.GoleakOptions()...)
}

// The seeds and requests a run uses: the defaults in `make test`, the environment for long runs.
// Seed 20 pages through objects with generated names, whose continue tokens name them.
const (
	seedsEnv     = "LISTWATCH_HTTPDIFF_SEEDS"
	opsEnv       = "LISTWATCH_HTTPDIFF_OPS"
	defaultSeeds = "1-2,20"
	defaultOps   = 150
	// With -short (the inner loop, make stress): one seed, fewer requests.
	shortSeeds = "1"
	shortOps   = 60
)

// TestHTTPDifferential runs, for each seed, the same random requests over HTTP against a real
// apiextensions-apiserver and listwatch's chain, both serving widgets.example.com/v1, and requires
// the same answers (status, headers that carry meaning, body) and the same watch streams, once
// what is each server's own is normalized (uids, timestamps, managedFields, generated names,
// resourceVersions by their place among the writes).
func TestHTTPDifferential(t *testing.T) {
	def, ops := defaultSeeds, defaultOps
	if testing.Short() {
		def, ops = shortSeeds, shortOps
	}
	seeds.Run(t, seedsEnv, def, opsEnv, ops, "requests", runSeed)
}

func runSeed(t *testing.T, seed uint64, ops int) stats {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &runner{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)), ctx: ctx, servers: startServers(t)}
	t.Cleanup(r.stopAll)
	// The apiserver sleeps 2 s in the first create after a CRD is Established (crdHandler
	// serveResource); one write before the test's keeps that sleep out of its requests.
	for _, s := range r.servers {
		for _, req := range []struct{ method, path string }{{"POST", collection("warmup")}, {"DELETE", collection("warmup") + "/warmup"}} {
			var body []byte
			if req.method == "POST" {
				body = encode(r.widget("warmup", "warmup", nil))
			}
			resp, err := s.do(ctx, req.method, req.path, "application/json", body)
			if err != nil || resp.code >= 300 {
				t.Fatalf("%s: warm-up %s: %v %d %s", s.name, req.method, err, resp.code, resp.raw)
			}
		}
		s.h = kubemodel.NewHistory(s.st.Rev())
	}
	for range ops {
		switch n := r.rng.IntN(100); {
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
			r.stopWatch()
		}
		if t.Failed() && r.fails > 20 {
			t.Fatalf("seed %d: stopping after %d differences", seed, r.fails)
		}
	}
	r.sync()
	for _, p := range r.watches {
		if !p.stopped {
			r.finish(p)
		}
	}
	t.Logf("seed %d: %s", seed, r.stats)
	return r.stats
}
