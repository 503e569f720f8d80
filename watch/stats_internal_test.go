package watch

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
)

// storedSize is the size of the value etcd holds at the etcd key of key.
func storedSize(t *testing.T, s *Store, key string) int64 {
	t.Helper()
	etcdKey, err := s.EtcdKey(key, false)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.client.Get(context.Background(), etcdKey)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read %s: %v %v", etcdKey, resp, err)
	}
	return int64(len(resp.Kvs[0].Value))
}

func mustStats(t *testing.T, s *Store) storage.Stats {
	t.Helper()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st
}

// TestStatsCountsKeys: without a size estimate Stats is etcd's count of the resource's keys (other
// resources' keys are not counted) and no size, as upstream's store.Stats with
// SizeBasedListCostEstimate off; a canceled context is an error.
func TestStatsCountsKeys(t *testing.T) {
	s, b := newTestStorage(t, Config{})
	other := newStorageOn(t, b, Config{ResourcePrefix: "/services/"})
	mustCreate(t, s, pod("ns", "a", nil))
	mustCreate(t, s, pod("ns", "b", nil))
	if err := other.Create(context.Background(), "/services/ns/c", pod("ns", "c", nil), nil, 0); err != nil {
		t.Fatal(err)
	}
	if got := mustStats(t, s); got != (storage.Stats{ObjectCount: 2}) {
		t.Errorf("Stats = %+v, want 2 objects and no size", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Stats(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Stats with a canceled context: %v, want context.Canceled", err)
	}
}

// TestStatsSizeEstimate mirrors upstream's TestStats with SizeBasedListCostEstimate: the estimate
// averages the sizes of the values lists and watches read, counts the keys of its KeysFunc, follows
// updates and deletions a watch sees, and fails with the KeysFunc's error.
func TestStatsSizeEstimate(t *testing.T) {
	s, _ := newTestStorage(t, Config{})
	if err := s.EnableResourceSizeEstimation(s.keys); err != nil {
		t.Fatal(err)
	}
	list := func() {
		t.Helper()
		if err := s.GetList(context.Background(), "/pods/", storage.ListOptions{Recursive: true, Predicate: storage.Everything}, &unstructured.UnstructuredList{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustStats(t, s); got != (storage.Stats{}) {
		t.Errorf("empty: %+v", got)
	}
	a := mustCreate(t, s, pod("ns", "a", nil))
	if got := mustStats(t, s); got != (storage.Stats{ObjectCount: 1}) {
		t.Errorf("before any read the count is known, the size not: %+v", got)
	}
	list()
	aSize := storedSize(t, s, "/pods/ns/a")
	if got := mustStats(t, s); got != (storage.Stats{ObjectCount: 1, EstimatedAverageObjectSizeBytes: aSize}) {
		t.Errorf("after a list: %+v, want size %d", got, aSize)
	}

	// A watch reports the new value of a and the deletion of b.
	w := mustWatch(t, s, "/pods/", storage.ListOptions{ResourceVersion: a.GetResourceVersion(), Recursive: true, Predicate: storage.Everything})
	mustCreate(t, s, pod("ns", "b", nil))
	list()
	if err := s.GuaranteedUpdate(context.Background(), "/pods/ns/a", &unstructured.Unstructured{}, false, nil,
		storage.SimpleUpdate(func(obj runtime.Object) (runtime.Object, error) {
			obj.(*unstructured.Unstructured).SetLabels(map[string]string{"size": "larger-than-before"})
			return obj, nil
		}), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(context.Background(), "/pods/ns/b", &unstructured.Unstructured{}, nil, storage.ValidateAllObjectFunc, nil, storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []apiwatch.EventType{apiwatch.Added, apiwatch.Modified, apiwatch.Deleted} {
		if ev := next(t, w); ev.Type != want {
			t.Fatalf("event %s, want %s", eventString(ev), want)
		}
	}
	newSize := storedSize(t, s, "/pods/ns/a")
	if newSize == aSize {
		t.Fatal("the update did not change the stored size")
	}
	if got := mustStats(t, s); got != (storage.Stats{ObjectCount: 1, EstimatedAverageObjectSizeBytes: newSize}) {
		t.Errorf("after the watch: %+v, want size %d", got, newSize)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Stats(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Stats with a canceled context: %v, want context.Canceled", err)
	}
}

// TestEnableResourceSizeEstimationErrors: a nil KeysFunc, a second estimate and an estimate after
// Close are refused with their sentinels, as upstream refuses the first two.
func TestEnableResourceSizeEstimationErrors(t *testing.T) {
	s, _ := newTestStorage(t, Config{})
	if err := s.EnableResourceSizeEstimation(nil); !errors.Is(err, ErrNilKeysFunc) {
		t.Errorf("nil KeysFunc: %v", err)
	}
	if err := s.EnableResourceSizeEstimation(s.keys); err != nil {
		t.Fatal(err)
	}
	if err := s.EnableResourceSizeEstimation(s.keys); !errors.Is(err, ErrSizeEstimationEnabled) {
		t.Errorf("second estimate: %v", err)
	}
	s.Close()
	closed, _ := newTestStorage(t, Config{})
	closed.Close()
	if err := closed.EnableResourceSizeEstimation(closed.keys); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// TestSizeEstimatorOrderAndCleanup: a value older than the one recorded (lists and watches report
// out of order) changes nothing, nor does an old deletion; keys the KeysFunc no longer returns are
// dropped once the refresh interval has passed, and a KeysFunc error keeps them.
func TestSizeEstimatorOrderAndCleanup(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	keys := make(chan []string, 1)
	keysErr := errors.New("keys unavailable")
	getKeys := func(context.Context) ([]string, error) {
		select {
		case k := <-keys:
			return k, nil
		default:
			return nil, keysErr
		}
	}
	e := newResourceSizeEstimator("/registry", getKeys, clk, testutil.DiscardLogger())
	defer e.close()
	e.update([]*mvccpb.KeyValue{{Key: []byte("/registry/pods/ns/a"), Value: make([]byte, 10), ModRevision: 5}})
	e.updateKey(&mvccpb.KeyValue{Key: []byte("/registry/pods/ns/a"), Value: make([]byte, 99), ModRevision: 4})
	e.deleteKey(&mvccpb.KeyValue{Key: []byte("/registry/pods/ns/a"), ModRevision: 3})
	e.updateKey(&mvccpb.KeyValue{Key: []byte("/registry/pods/ns/b"), Value: make([]byte, 20), ModRevision: 6})
	keys <- []string{"/pods/ns/a", "/registry/pods/ns/b"}
	st, err := e.stats(context.Background())
	if err != nil || st != (storage.Stats{ObjectCount: 2, EstimatedAverageObjectSizeBytes: 15}) {
		t.Fatalf("stats = %+v %v, want 2 objects of 15 bytes", st, err)
	}
	if _, err := e.stats(context.Background()); !errors.Is(err, keysErr) {
		t.Errorf("stats with a failing KeysFunc: %v", err)
	}

	// The refresh: a KeysFunc error keeps every size, a later answer drops b.
	size := func() int {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.keys)
	}
	testutil.WaitFor(t, "the refresh timer", func() bool { return clk.HasWaiters() })
	clk.Step(2 * sizerRefreshInterval)
	testutil.WaitFor(t, "the failed refresh to wait again", func() bool { return clk.HasWaiters() })
	if size() != 2 {
		t.Fatalf("a failed refresh dropped sizes: %d left", size())
	}
	keys <- []string{"/pods/ns/a"}
	clk.Step(2 * sizerRefreshInterval)
	testutil.WaitFor(t, "the refresh to drop b", func() bool { return size() == 1 })
}

// TestWatchSignalsInitialized: an etcd3 watch signals its initialization once it is started, as
// upstream's watcher.Watch (it cannot tell when it has caught up); a refused watch does not.
func TestWatchSignalsInitialized(t *testing.T) {
	s, _ := newTestStorage(t, Config{})
	calls := 0
	ctx := storage.WithWatchInitializedSignal(context.Background(), func() { calls++ })
	if _, err := s.Watch(ctx, "/pods/", storage.ListOptions{ResourceVersion: "x", Recursive: true, Predicate: storage.Everything}); err == nil {
		t.Fatal("a bad resourceVersion was accepted")
	}
	if calls != 0 {
		t.Fatalf("a refused watch signalled %d times", calls)
	}
	w, err := s.Watch(ctx, "/pods/", storage.ListOptions{Recursive: true, Predicate: storage.Everything})
	if err != nil {
		t.Fatal(err)
	}
	defer stopAndDrain(w)
	if calls != 1 {
		t.Errorf("a started watch signalled %d times, want 1", calls)
	}
}
