package cache

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
	"github.com/listwatch/listwatch/watch"
)

// storedAverage is the average size of the pods' values as etcd holds them.
func (e *env) storedAverage() int64 {
	e.t.Helper()
	resp, err := e.client.Get(e.ctx, "/registry/pods/", clientv3.WithPrefix())
	if err != nil {
		e.t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	var total int64
	for _, kv := range resp.Kvs {
		total += int64(len(kv.Value))
	}
	return total / int64(len(resp.Kvs))
}

func (e *env) stats() storage.Stats {
	e.t.Helper()
	// A consistent list first, as upstream's assertStats: the cache then has every write.
	if err := e.cacher.GetList(e.ctx, "/pods/", storage.ListOptions{Recursive: true, Predicate: storage.Everything}, &unstructured.UnstructuredList{}); err != nil {
		e.t.Fatal(err)
	}
	st, err := e.cacher.Stats(e.ctx)
	if err != nil {
		e.t.Fatalf("Stats: %v", err)
	}
	return st
}

// TestStatsSizeEstimate: by default (SizeBasedListCostEstimate on) New enables the storage's size
// estimate with the cache's keys, and Stats, the storage's, counts them and averages the stored sizes
// the storage has read, through deletions too; with the gate off it is etcd's count and no size
// (cacher.go NewCacherFromConfig, CacheDelegator.Stats).
func TestStatsSizeEstimate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []envOption
		size bool
	}{
		{name: "estimate", size: true},
		{name: "gate off", opts: []envOption{withoutSizeEstimate}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts...)
			check := func(after string, count int64) {
				t.Helper()
				want := storage.Stats{ObjectCount: count}
				if tc.size {
					want.EstimatedAverageObjectSizeBytes = e.storedAverage()
				}
				if got := e.stats(); got != want {
					t.Errorf("after %s: Stats = %+v, want %+v", after, got, want)
				}
			}
			check("nothing", 0)
			e.create(storagetest.Pod("ns", "a"))
			e.create(storagetest.Pod("ns", "b", storagetest.Labels("size=larger-than-a")))
			check("two creates", 2)
			if tc.size && e.storedAverage() == 0 {
				t.Fatal("no stored size to estimate")
			}
			if err := e.cacher.Delete(e.ctx, "/pods/ns/a", &unstructured.Unstructured{}, nil, storage.ValidateAllObjectFunc, nil, storage.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			check("a delete", 1)
		})
	}
}

// TestStatsErrors: a storage error reaches the caller (a canceled context; with the estimate, the
// cache's keys cannot be read without the storage's current revision), and New fails when the
// storage refuses the estimate.
func TestStatsErrors(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.cacher.Stats(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Stats with a canceled context: %v, want context.Canceled", err)
	}
	e.storage.failCurrentRV.Store(true)
	if _, err := e.cacher.Stats(e.ctx); err == nil {
		t.Error("Stats without the storage's current revision succeeded")
	}
	e.storage.failCurrentRV.Store(false)

	// The storage already keeps an estimate (the env's Cacher enabled it): a second Cacher is refused.
	_, err := New(Config{Storage: e.storage, ResourcePrefix: "/pods/", Logger: testutil.DiscardLogger()})
	if !errors.Is(err, watch.ErrSizeEstimationEnabled) {
		t.Errorf("New over a storage refusing the estimate: %v, want ErrSizeEstimationEnabled", err)
	}
}

// signalRecorder counts the initialization signals of one watch and whether the watcher was
// registered when each came.
type signalRecorder struct {
	c          *Cacher
	calls      int
	registered bool
}

func (s *signalRecorder) signal() {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.calls++
	s.registered = len(s.c.live) > 0
}

func (s *signalRecorder) count() int {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.calls
}

// TestWatchSignalsInitialized: Watch signals the initialization carried in the context once, after
// the watcher is registered and its initial events are sent, as upstream's cacheWatcher.process
// calls utilflowcontrol.WatchInitialized; a refused watch (bad key, 410 too old, an unready cache)
// does not, as upstream's error paths do not.
func TestWatchSignalsInitialized(t *testing.T) {
	e := newEnv(t, withFakeClock)
	a := e.create(storagetest.Pod("ns", "a"))
	e.create(storagetest.Pod("ns", "b"))
	e.syncCache()

	rec := &signalRecorder{c: e.cacher}
	ctx := storage.WithWatchInitializedSignal(e.ctx, rec.signal)
	w := e.watchCtx(ctx, "/pods/", storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything, Recursive: true})
	for range 2 {
		if ev, _ := w.next(); ev.Type != apiwatch.Added {
			t.Fatalf("initial event %v", ev.Type)
		}
	}
	e.waitFor("the initialization signal", func() bool { return rec.count() > 0 })
	c := e.create(storagetest.Pod("ns", "c"))
	w.expect(ev(apiwatch.Added, c))
	if rec.count() != 1 || !rec.registered {
		t.Errorf("signalled %d times, registered %v; want once, registered", rec.count(), rec.registered)
	}

	refused := &signalRecorder{c: e.cacher}
	rctx := storage.WithWatchInitializedSignal(e.ctx, refused.signal)
	if _, err := e.cacher.Watch(rctx, "pods", storage.ListOptions{Predicate: storage.Everything}); err == nil {
		t.Error("a bad key was accepted")
	}
	lists := e.storage.lists.Load()
	gen := e.generation()
	e.storage.breakWatch(t, &apierrors.NewResourceExpired("The resourceVersion for the provided watch is too old.").ErrStatus)
	e.eventually("the cache relists", func() bool { return e.generation() == gen+1 && e.storage.lists.Load() > lists })
	tooOld := e.watchCtx(rctx, "/pods/", storage.ListOptions{ResourceVersion: a.GetResourceVersion(), Predicate: storage.Everything, Recursive: true})
	if ev, _ := tooOld.next(); ev.Type != apiwatch.Error {
		t.Fatalf("too old watch: %v, want ERROR", ev.Type)
	}
	e.cacher.Stop()
	if _, err := e.cacher.Watch(rctx, "/pods/", storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything, Recursive: true}); err == nil {
		t.Error("a stopped cache accepted a watch")
	}
	if n := refused.count(); n != 0 {
		t.Errorf("refused watches signalled %d times", n)
	}
}
