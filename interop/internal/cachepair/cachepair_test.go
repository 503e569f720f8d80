package cachepair

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/apis/example"
	"k8s.io/apiserver/pkg/features"
	k8sstorage "k8s.io/apiserver/pkg/storage"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
)

func TestMain(m *testing.M) { kubeapiserver.VerifyTestMain(m) }

func newServed(t *testing.T) (*Cache, *Cache, func(string) string) {
	t.Helper()
	st := NewStore()
	t.Cleanup(func() { st.Close() })
	var caches []*Cache
	for _, b := range Builders {
		caches = append(caches, b.Build(t, Serve(t, st, nil), Setup{}))
	}
	return caches[0], caches[1], func(name string) string { return "/pods/ns/" + name }
}

func create(t *testing.T, s k8sstorage.Interface, key, name string) *example.Pod {
	t.Helper()
	out := &example.Pod{}
	if err := s.Create(context.Background(), key, &example.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}, out, 0); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBuildersServe: both caches are ready when built, serve a write made through either, and
// consumed the list failures injected for them.
func TestBuildersServe(t *testing.T) {
	up, lw, key := newServed(t)
	a := create(t, up.Storage, key("a"), "a")
	b := create(t, lw.Storage, key("b"), "b")
	for _, c := range []*Cache{up, lw} {
		if !c.Ready() {
			t.Errorf("%s: not ready", c.Name)
		}
		if n := c.Faults.ListErrorsLeft(); n != 0 {
			t.Errorf("%s: %d injected list errors left", c.Name, n)
		}
		list := &example.PodList{}
		if err := c.Storage.GetList(context.Background(), "/pods/", k8sstorage.ListOptions{Recursive: true, Predicate: k8sstorage.Everything}, list); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if len(list.Items) != 2 || list.Items[0].ResourceVersion != a.ResourceVersion || list.Items[1].ResourceVersion != b.ResourceVersion {
			t.Errorf("%s: listed %+v, want a at %s and b at %s", c.Name, list.Items, a.ResourceVersion, b.ResourceVersion)
		}
	}
}

// TestRelist: after Relist, a watch from before it is too old on both caches, and the cache
// serves.
func TestRelist(t *testing.T) {
	up, lw, key := newServed(t)
	first := create(t, up.Storage, key("a"), "a")
	create(t, up.Storage, key("b"), "b")
	for _, c := range []*Cache{up, lw} {
		t.Run(c.Name, func(t *testing.T) {
			w, err := c.Storage.Watch(context.Background(), "/pods/", k8sstorage.ListOptions{ResourceVersion: first.ResourceVersion, Recursive: true, Predicate: k8sstorage.Everything})
			if err != nil {
				t.Fatal(err)
			}
			ev := next(t, w)
			w.Stop()
			if ev.Type != watch.Added || ev.Object.(interface{ GetName() string }).GetName() != "b" {
				t.Fatalf("before the relist: %v %+v, want ADDED b", ev.Type, ev.Object)
			}
			c.Relist(t)
			w, err = c.Storage.Watch(context.Background(), "/pods/", k8sstorage.ListOptions{ResourceVersion: first.ResourceVersion, Recursive: true, Predicate: k8sstorage.Everything})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			ev = next(t, w)
			st, ok := ev.Object.(*metav1.Status)
			if ev.Type != watch.Error || !ok || st.Code != 410 {
				t.Errorf("after the relist: %v %+v, want ERROR 410", ev.Type, ev.Object)
			}
		})
	}
}

func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch closed")
		}
		if co, ok := ev.Object.(runtime.CacheableObject); ok {
			ev.Object = co.GetObject()
		}
		return ev
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("no event")
	}
	return watch.Event{}
}

// TestObserveCompaction: with ListFromCacheSnapshot, each cache answers an exact list below a
// compaction it observed with 410 from etcd instead of its snapshot. Listwatch's sees the compaction
// as upstream's does: its etcd3 storage follows compact_rev_key, and its compactor's poll fires.
func TestObserveCompaction(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.ListFromCacheSnapshot, true)
	for _, b := range Builders {
		t.Run(b.Name, func(t *testing.T) {
			c, cli := onFreshStore(t, b.Build)
			first := create(t, c.Storage, "/pods/ns/a", "a")
			second := create(t, c.Storage, "/pods/ns/b", "b")
			exact := k8sstorage.ListOptions{ResourceVersion: first.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact,
				Recursive: true, Predicate: k8sstorage.Everything}
			if err := c.Storage.GetList(context.Background(), "/pods/", exact, &example.PodList{}); err != nil {
				t.Fatalf("exact list before the compaction: %v", err)
			}
			if !c.Clock.HasPollers() {
				t.Fatalf("%s cache made no compactor poll timer", c.Name)
			}
			rv := mustParse(t, second.ResourceVersion)
			CompactEtcd(context.Background(), t, cli, rv)
			c.ObserveCompaction(context.Background(), t, rv)
			err := c.Storage.GetList(context.Background(), "/pods/", exact, &example.PodList{})
			if !apierrors.IsResourceExpired(err) {
				t.Errorf("exact list below the compaction: %v, want 410", err)
			}
		})
	}
}

// TestBuildersFollowListFromCacheSnapshot: both caches are built with the gate's current value.
// With it off neither keeps snapshots nor so a compactor poll, and an exact list goes to etcd: a
// compaction below it is a 410 at once, without the cache observing anything (with the gate on the
// cache would answer from its snapshot until its compactor polls). Failure mode: listwatch's cache
// built with snapshots whatever the gate.
func TestBuildersFollowListFromCacheSnapshot(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("ListFromCacheSnapshot=%t", on), func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.ListFromCacheSnapshot, on)
			for _, b := range Builders {
				t.Run(b.Name, func(t *testing.T) {
					c, cli := onFreshStore(t, b.Build)
					if c.Clock.HasPollers() != on {
						t.Fatalf("%s cache has a compactor poll: %t, want %t", c.Name, c.Clock.HasPollers(), on)
					}
					if on {
						return
					}
					first := create(t, c.Storage, "/pods/ns/a", "a")
					create(t, c.Storage, "/pods/ns/b", "b")
					exact := k8sstorage.ListOptions{ResourceVersion: first.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact,
						Recursive: true, Predicate: k8sstorage.Everything}
					CompactEtcd(context.Background(), t, cli, mustParse(t, first.ResourceVersion)+1)
					err := c.Storage.GetList(context.Background(), "/pods/", exact, &example.PodList{})
					if !apierrors.IsResourceExpired(err) {
						t.Errorf("exact list below the compaction: %v, want 410 from etcd", err)
					}
				})
			}
		})
	}
}

func mustParse(t *testing.T, rv string) int64 {
	t.Helper()
	n, err := k8sstorage.APIObjectVersioner{}.ParseResourceVersion(rv)
	if err != nil {
		t.Fatal(err)
	}
	return int64(n)
}

// TestBreakableWatch: a broken watch sends one ERROR and closes, a stopped one closes; the inner
// watch is stopped either way.
func TestBreakableWatch(t *testing.T) {
	inner := watch.NewFake()
	w := newBreakableWatch(inner)
	go inner.Add(&example.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}})
	if ev := <-w.ResultChan(); ev.Type != watch.Added {
		t.Fatalf("forwarded %v", ev.Type)
	}
	w.breakWith(apierrors.NewResourceExpired("gone"))
	ev, ok := <-w.ResultChan()
	if st, isStatus := ev.Object.(*metav1.Status); !ok || ev.Type != watch.Error || !isStatus || st.Code != 410 {
		t.Fatalf("broken: %v %v %+v, want ERROR 410", ok, ev.Type, ev.Object)
	}
	if _, ok := <-w.ResultChan(); ok {
		t.Fatal("still open after the ERROR")
	}
	if !inner.IsStopped() {
		t.Error("the inner watch was not stopped")
	}

	inner = watch.NewFake()
	w = newBreakableWatch(inner)
	w.Stop()
	w.Stop()
	if _, ok := <-w.ResultChan(); ok {
		t.Fatal("still open after Stop")
	}
	if !inner.IsStopped() {
		t.Error("the inner watch was not stopped")
	}
}

// TestPollClock: only the poll period is held; FirePollers waits for the poll to run, and fails
// when nobody waits on a poll timer.
func TestPollClock(t *testing.T) {
	c := NewPollClock()
	if c.HasPollers() {
		t.Fatal("pollers before any timer")
	}
	real := c.NewTimer(time.Millisecond)
	select {
	case <-real.C():
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("a timer of another period did not fire")
	}
	p := c.NewTimer(CompactorPollPeriod)
	polls := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-p.C()
		polls <- struct{}{}
		p.Reset(CompactorPollPeriod)
	}()
	if err := c.FirePollers(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-polls:
	default:
		t.Error("FirePollers returned before the poll ran")
	}
	<-done
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.FirePollers(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("firing a poll timer nobody waits on: %v, want the deadline", err)
	}
}

// TestListRecorder: a list through either storage is recorded with its key, revision and limit
// under the context's key; gets and lists without the key are not.
func TestListRecorder(t *testing.T) {
	st := NewStore()
	t.Cleanup(func() { st.Close() })
	recorder := NewRecorder()
	cli := Serve(t, st, recorder)
	for _, b := range Builders {
		t.Run(b.Name, func(t *testing.T) {
			// An exact list below every snapshot of a cache goes to etcd from both caches
			// (cacher.go ShouldDelegateExactRV): write twice before the cache lists.
			plain := Storage(t, cli, Setup{})
			early := create(t, plain, "/pods/ns/"+b.Name+"-early", b.Name+"-early")
			create(t, plain, "/pods/ns/"+b.Name+"-late", b.Name+"-late")
			c := b.Build(t, cli, Setup{})
			ctx := context.WithValue(context.Background(), storagetesting.RecorderContextKey, b.Name)
			opts := k8sstorage.ListOptions{ResourceVersion: early.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact,
				Recursive: true, Predicate: k8sstorage.SelectionPredicate{Label: k8sstorage.Everything.Label, Field: k8sstorage.Everything.Field, Limit: 7}}
			if err := c.Storage.GetList(ctx, "/pods/ns/", opts, &example.PodList{}); err != nil {
				t.Fatal(err)
			}
			if err := c.Storage.Get(ctx, "/pods/ns/"+b.Name+"-early", k8sstorage.GetOptions{}, &example.Pod{}); err != nil {
				t.Fatal(err)
			}
			got := recorder.ListRequestForKey(b.Name)
			want := []storagetesting.RecordedList{{Key: "/registry/pods/ns/", Revision: mustParse(t, early.ResourceVersion), Limit: 7}}
			if len(got) != 1 || got[0] != want[0] {
				t.Errorf("recorded %+v, want %+v", got, want)
			}
		})
	}
}

// onFreshStore is the cache build builds over a fresh store, and the client it reads etcd through.
func onFreshStore(t *testing.T, build Builder) (*Cache, *clientv3.Client) {
	t.Helper()
	st := NewStore()
	t.Cleanup(func() { st.Close() })
	cli := Serve(t, st, nil)
	return build(t, cli, Setup{}), cli
}

// TestUpstreamAfterCutFeatureCheck: an earlier test's feature check, cut short when its client
// closed, does not leave the upstream cache sending consistent lists to etcd (what made every
// upstream List case of TestCacherConformance record an etcd list on a loaded CI machine).
func TestUpstreamAfterCutFeatureCheck(t *testing.T) {
	st := NewStore()
	t.Cleanup(func() { st.Close() })
	recorder := NewRecorder()
	cli := Serve(t, st, recorder)

	cut := etcdfeature.NewDefaultFeatureSupportChecker()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cut.CheckClient(ctx, cli, k8sstorage.RequestWatchProgress)
	orig := etcdfeature.DefaultFeatureSupportChecker
	etcdfeature.DefaultFeatureSupportChecker = cut
	t.Cleanup(func() { etcdfeature.DefaultFeatureSupportChecker = orig })

	up := Upstream(t, cli, Setup{})
	create(t, up.Storage, "/pods/ns/a", "a")
	listCtx := context.WithValue(context.Background(), storagetesting.RecorderContextKey, t.Name())
	list := &example.PodList{}
	if err := up.Storage.GetList(listCtx, "/pods/", k8sstorage.ListOptions{Recursive: true, Predicate: k8sstorage.Everything}, list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("listed %d pods, want 1", len(list.Items))
	}
	if got := recorder.ListRequestForKey(t.Name()); len(got) != 0 {
		t.Errorf("the consistent list went to etcd: %+v", got)
	}
}
