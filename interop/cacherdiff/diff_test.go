package cacherdiff

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/apiserver/pkg/apis/example"
	"k8s.io/klog/v2"

	"github.com/listwatch/listwatch/interop/internal/cachepair"
	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
	"github.com/listwatch/listwatch/interop/internal/seeds"
	"github.com/listwatch/listwatch/proptest/kubemodel"
)

func TestMain(m *testing.M) {
	// Upstream's Cacher logs its life through klog (process-wide); the test says what differed.
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m, kubeapiserver.GoleakOptions()...)
}

// The seeds and operations a run uses: the defaults in `make test`, the environment for long runs.
const (
	seedsEnv     = "LISTWATCH_CACHERDIFF_SEEDS"
	opsEnv       = "LISTWATCH_CACHERDIFF_OPS"
	defaultSeeds = "1-3"
	defaultOps   = 250
	// With -short (the inner loop, make stress): one seed, fewer operations.
	shortSeeds = "1"
	shortOps   = 100
)

// TestCacherDifferential runs, for each seed, the same random history and the same random requests
// against upstream's Cacher and listwatch's cache over the same store, and requires the same answer
// to every list, get and failing write and the same events on every watch; bookmarks and
// terminations are held to upstream's guarantees (kubemodel).
func TestCacherDifferential(t *testing.T) {
	def, ops := defaultSeeds, defaultOps
	if testing.Short() {
		def, ops = shortSeeds, shortOps
	}
	seeds.Run(t, seedsEnv, def, opsEnv, ops, "operations", runSeed)
}

// runSeed plays one seed: ops random operations, then every open watch finished and compared.
func runSeed(t *testing.T, seed uint64, ops int) stats {
	r := newRunner(t, seed)
	for range ops {
		r.unpauseDue()
		switch n := r.rng.IntN(100); {
		case n < 45:
			r.write()
		case n < 50:
			r.failingWrite()
		case n < 52:
			r.compact()
		case n < 68:
			r.list()
		case n < 74:
			r.get()
		case n < 86:
			r.openWatch()
		default:
			r.stopWatch()
		}
		if t.Failed() && r.fails > 20 {
			t.Fatalf("seed %d: stopping after %d differences", seed, r.fails)
		}
	}
	r.finishAll()
	t.Logf("seed %d: %s", seed, r.stats)
	return r.stats
}

// newRunner starts a store with a few pods, then both caches over it, each through its own client.
func newRunner(t *testing.T, seed uint64) *runner {
	st := cachepair.NewStore()
	t.Cleanup(func() { st.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cli := cachepair.Serve(t, st, nil)
	r := &runner{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), ctx: ctx, cli: cli}

	// Objects written before the caches start: a watch from before their list is too old.
	rev, err := cli.Get(ctx, "compact_rev_key")
	if err != nil {
		t.Fatal(err)
	}
	r.h = kubemodel.NewHistory(rev.Header.Revision)
	writer := cachepair.Storage(t, cli, cachepair.Setup{})
	for range 4 + r.rng.IntN(6) {
		ns, name := r.namespace(), pick(r.rng, podNames)
		key := podKey(ns, name)
		if r.h.State(key) != nil {
			continue
		}
		out := &example.Pod{}
		if err := writer.Create(ctx, key, r.randomPod(ns, name), out, 0); err != nil {
			t.Fatal(err)
		}
		r.apply(key, rvOf(t, out), out)
	}
	r.listRV = r.h.Rev
	setup := cachepair.Setup{NodeNameTrigger: true}
	r.caches[0] = cachepair.Upstream(t, cachepair.Serve(t, st, nil), setup)
	r.caches[1] = cachepair.Listwatch(t, cachepair.Serve(t, st, nil), setup)
	// Whatever happens, every watch is stopped and its reader gone before the caches stop.
	t.Cleanup(r.stopAll)
	return r
}

// finishAll brings both caches to etcd's revision and finishes every open watch.
func (r *runner) finishAll() {
	r.t.Helper()
	r.sync()
	for _, p := range r.watches {
		if !p.stopped {
			r.finish(p)
		}
	}
}
