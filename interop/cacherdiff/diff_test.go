package cacherdiff

import (
	"context"
	"testing"

	"k8s.io/apiserver/pkg/apis/example"

	"github.com/listwatch/listwatch/interop/internal/cachepair"
	"github.com/listwatch/listwatch/interop/internal/diffrun"
	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
	"github.com/listwatch/listwatch/interop/internal/seeds"
	"github.com/listwatch/listwatch/proptest/kubemodel"
)

func TestMain(m *testing.M) { kubeapiserver.VerifyTestMain(m) }

// TestCacherDifferential runs, for each seed, the same random history and the same random requests
// against upstream's Cacher and listwatch's cache over the same store, and requires the same answer
// to every list, get and failing write and the same events on every watch; bookmarks and
// terminations are held to upstream's guarantees (kubemodel). `make test` runs seeds 1-3 of 250
// operations; the environment names others for long runs.
func TestCacherDifferential(t *testing.T) {
	seeds.Run(t, seeds.Config{SeedsVar: "LISTWATCH_CACHERDIFF_SEEDS", Seeds: "1-3",
		CountVar: "LISTWATCH_CACHERDIFF_OPS", Count: 250, Unit: "operations",
		ShortSeeds: "1", ShortCount: 100}, runSeed)
}

// runSeed plays one seed: ops random operations, then every open watch finished and compared.
func runSeed(t *testing.T, seed uint64, ops int) stats {
	r := newRunner(t, seed)
	r.Play(ops, func() {
		r.UnpauseDue(r.stats.writes)
		switch n := r.Rng.IntN(100); {
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
			r.StopWatch()
		}
	})
	r.stats.Tally = r.Tally
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
	r := &runner{ctx: ctx, cli: cli}
	r.Runner = diffrun.New[watchReq](t, seed, 0x9e3779b97f4a7c15, r)

	// Objects written before the caches start: a watch from before their list is too old.
	rev, err := cli.Get(ctx, "compact_rev_key")
	if err != nil {
		t.Fatal(err)
	}
	r.h = kubemodel.NewHistory(rev.Header.Revision)
	writer := cachepair.Storage(t, cli, cachepair.Setup{})
	for range 4 + r.Rng.IntN(6) {
		ns, name := r.namespace(), pick(r.Rng, podNames)
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
	t.Cleanup(r.StopAll)
	return r
}
