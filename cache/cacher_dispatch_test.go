package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	goruntime "runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
	"weak"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
)

// fillSlowWatcher opens a watcher that never reads and writes the 21 events it can hold (10 in
// result, one in hand, 10 in input); it returns the watcher and the events. It first steps the fake
// clock so that the dispatcher has its whole budget, and nothing moves the clock while it fills: a
// watcher (this one, or a reader opened before) whose goroutine has not yet moved its input along is
// then waited for, however long the scheduler keeps that goroutine off a core, instead of being
// closed by a budget that ran out.
func fillSlowWatcher(t *testing.T, e *env, opts storage.ListOptions) (*recorder, []*unstructured.Unstructured) {
	t.Helper()
	e.clock.Step(10 * time.Second)
	opts.ResourceVersion = strconv.FormatUint(e.syncCache(), 10)
	opts.Recursive = true
	slow := e.watch("/pods/", opts)
	cw := slow.w.(*cacheWatcher)
	var created []*unstructured.Unstructured
	for i := range 21 {
		created = append(created, e.create(storagetest.Pod("ns", fmt.Sprintf("p%02d", i))))
	}
	e.waitProcessed(e.lastRV)
	e.waitFor("the slow watcher is full", func() bool { return len(cw.input) == cap(cw.input) && len(cw.result) == cap(cw.result) })
	return slow, created
}

// TestSlowWatcherClosedWithoutError: a watcher still full once the budget is spent is closed without
// an ERROR, after a gap-free prefix of its events; the reader next to it gets everything; a re-watch
// from the last delivered RV gets exactly the rest. The budget is either empty when the event comes
// (the watcher is closed at once) or spent while the dispatcher waits (the fake clock moves past it).
// The reader reads what it holds before the event that overflows the slow watcher: it has room for
// it, so the verdict does not depend on whether the test or the dispatcher runs first.
func TestSlowWatcherClosedWithoutError(t *testing.T) {
	for _, budget := range []string{"empty", "spent"} {
		t.Run(budget, func(t *testing.T) {
			e := newEnv(t, withFakeClock)
			reader := e.watch("/pods/", storage.ListOptions{ResourceVersion: strconv.FormatUint(e.syncCache(), 10), Predicate: storage.Everything, Recursive: true})
			slow, created := fillSlowWatcher(t, e, storage.ListOptions{Predicate: storage.Everything})
			var want []string
			for _, c := range created {
				want = append(want, ev(watch.Added, c))
			}
			reader.expect(want...)
			if budget == "empty" {
				// The dispatcher is idle (every write is processed) and the clock stands still: what
				// the test takes, the dispatcher cannot have.
				if got := e.cacher.budget.takeAvailable(); got != maxBudget {
					t.Fatalf("budget before the overflow: %v, want %v", got, maxBudget)
				}
			}
			more := e.create(storagetest.Pod("ns", "overflow"))
			created = append(created, more)
			reader.expect(ev(watch.Added, more))
			// Reading the slow watcher while the dispatcher still waits for it would rescue it: let the
			// budget run out first.
			e.eventually("the dispatcher gives up on the slow watcher", func() bool { return e.cacher.lastProcessedRV.Load() >= rvOf(t, more) })
			expectClosedPrefixThenResume(t, e, slow.next, "", created)
			reader.expectNothing()
		})
	}
}

// expectClosedPrefixThenResume reads a slow watcher through next until it closes, requiring a
// gap-free prefix of the ADDED events of created and no ERROR, then re-watches /pods/ from the last
// resourceVersion it delivered (from, when it delivered none) and requires exactly the rest.
func expectClosedPrefixThenResume(t *testing.T, e *env, next func() (watch.Event, bool), from string, created []*unstructured.Unstructured) {
	t.Helper()
	i := 0
	for {
		got, ok := next()
		if !ok {
			break
		}
		if want := ev(watch.Added, created[i]); describe(got) != want {
			t.Fatalf("slow watcher event %d: %s, want %s", i, describe(got), want)
		}
		from = created[i].GetResourceVersion()
		i++
	}
	if i == len(created) {
		t.Fatal("the slow watcher was not closed")
	}
	resumed := e.watch("/pods/", storage.ListOptions{ResourceVersion: from, Predicate: storage.Everything, Recursive: true})
	var want []string
	for _, c := range created[i:] {
		want = append(want, ev(watch.Added, c))
	}
	resumed.expect(want...)
	resumed.expectNothing()
}

// TestBlockedWatcherRescuedWithinBudget: with budget available the dispatcher waits for a full watcher;
// if it makes room in time nothing is lost and it stays open. Failure mode: stepping the clock by the
// budget instead closes it (TestSlowWatcherClosedWithoutError).
func TestBlockedWatcherRescuedWithinBudget(t *testing.T) {
	e := newEnv(t, withFakeClock)
	slow, created := fillSlowWatcher(t, e, storage.ListOptions{Predicate: storage.Everything})
	waiters := e.clock.Waiters()
	created = append(created, e.create(storagetest.Pod("ns", "p21")))
	e.waitFor("the dispatcher blocks on the watcher", func() bool { return e.clock.Waiters() > waiters })
	var want []string
	for _, c := range created {
		want = append(want, ev(watch.Added, c))
	}
	slow.expect(want...)
	next := e.create(storagetest.Pod("ns", "p22"))
	slow.expect(ev(watch.Added, next))
}

// TestBookmarksNeverBlock: a bookmark for a full watcher is dropped, neither waiting for it nor closing
// it, even with budget to spare.
func TestBookmarksNeverBlock(t *testing.T) {
	e := newEnv(t, withFakeClock)
	p := storage.Everything
	p.AllowWatchBookmarks = true
	slow, created := fillSlowWatcher(t, e, storage.ListOptions{Predicate: p})
	cw := slow.w.(*cacheWatcher)
	bucketOf := func() (int64, bool) { return e.bookmarkBucketOf(cw) }
	orig, ok := bucketOf()
	if !ok {
		t.Fatal("the watcher is not queued for a bookmark")
	}
	// A minute on, the bookmark is due; the dispatcher's timer fires within 1.25 s. Once dispatched, the
	// watcher is queued again for the next one, unless the dispatch stopped it.
	e.clock.Step(time.Minute)
	e.eventually("the bookmark is dispatched and the watcher queued again", func() bool {
		id, ok := bucketOf()
		return ok && id != orig
	})
	e.cacher.mu.Lock()
	stopped := cw.stopped
	e.cacher.mu.Unlock()
	if stopped {
		t.Fatal("a bookmark closed the watcher")
	}
	var want []string
	for _, c := range created {
		want = append(want, ev(watch.Added, c))
	}
	slow.expect(want...)
	next := e.create(storagetest.Pod("ns", "next"))
	got, _ := slow.next()
	if got.Type == watch.Bookmark {
		got, _ = slow.next()
	}
	if describe(got) != ev(watch.Added, next) {
		t.Fatalf("got %s", describe(got))
	}
}

// bookmarkBucketOf is the bookmark bucket w is queued in, if any.
func (e *env) bookmarkBucketOf(w *cacheWatcher) (int64, bool) {
	e.cacher.mu.Lock()
	defer e.cacher.mu.Unlock()
	for id, ws := range e.cacher.bookmarkWatchers.buckets {
		for _, x := range ws {
			if x == w {
				return id, true
			}
		}
	}
	return 0, false
}

// TestBookmarksFollowTheClock: every bookmark but the initial-events-end one comes from the
// dispatcher's timer on the Cacher's injected clock, so a watch on a fake clock gets none the test did
// not step to. A watch-list with bookmarks gets its end bookmark from its interval with no step, and
// stays queued as due at once (registration queues it so, as upstream's Cacher.Watch does): the first
// tick after it, however late, gives it a bookmark at the last processed resourceVersion, between
// whatever events it has been sent (upstream's RunWatchSemantics ignores bookmarks there; on a real
// clock that tick comes about a second after the watch opens, which a loaded machine may put between
// two creations). The one after that is due a bookmarkFrequency later.
// Failure mode: a bookmark timed by the real clock shows up in the fences before the steps.
func TestBookmarksFollowTheClock(t *testing.T) {
	// Nothing steps the clock before the test does (newEnv's wait for readiness would): the
	// dispatcher's first tick is then due within 1.25 s of the clock's start, and none is pending.
	e := newEnv(t, withFakeClock, withoutWaitingForReady)
	e.waitFor("the cacher is ready", e.cacher.Ready)
	var want []string
	for _, n := range []string{"p1", "p2", "p3"} {
		want = append(want, ev(watch.Added, e.create(storagetest.Pod("ns", n))))
	}
	e.waitProcessed(e.lastRV)
	opts := storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything, Recursive: true, SendInitialEvents: ptrTo(true)}
	opts.Predicate.AllowWatchBookmarks = true
	w := e.watch("/pods/ns", opts)
	w.expect(append(want, bookmark(e.lastRV, true))...)
	p4, p5 := e.create(storagetest.Pod("ns", "p4")), e.create(storagetest.Pod("ns", "p5"))
	if got, want := w.fence(), []string{ev(watch.Added, p4), ev(watch.Added, p5)}; !slices.Equal(got, want) {
		t.Fatalf("before any step: got %v, want %v", got, want)
	}
	e.clock.Step(1250 * time.Millisecond)
	w.expect(bookmark(e.lastRV, false))
	cw := w.w.(*cacheWatcher)
	e.waitFor("the watcher is queued for its next bookmark", func() bool {
		_, ok := e.bookmarkBucketOf(cw)
		return ok
	})
	w.expectNothing()
	e.clock.Step(defaultBookmarkFrequency + 1250*time.Millisecond)
	w.expect(bookmark(e.lastRV, false))
}

// TestStopDuringDispatch ports TestDispatchingBookmarkEventsWithConcurrentStop: watchers stopped while
// events and bookmarks are dispatched are stopped once the dispatch ends; input is never closed under
// the dispatcher (which would panic).
func TestStopDuringDispatch(t *testing.T) {
	e := newEnv(t, withFakeClock)
	p := storage.Everything
	p.AllowWatchBookmarks = true
	rv := strconv.FormatUint(e.syncCache(), 10)
	var wg sync.WaitGroup
	for i := range 200 {
		w, err := e.cacher.Watch(e.ctx, "/pods/", storage.ListOptions{ResourceVersion: rv, Predicate: p, Recursive: true})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			w.Stop()
			for range w.ResultChan() {
			}
		})
		if i%20 == 0 {
			e.create(storagetest.Pod("ns", fmt.Sprintf("p%d", i)))
		}
		e.clock.Step(time.Second)
	}
	wg.Wait()
	e.cacher.mu.Lock()
	defer e.cacher.mu.Unlock()
	if n := len(e.cacher.watchers.allWatchers); n != 0 {
		t.Fatalf("%d watcher scopes left registered", n)
	}
}

// TestTriggerIndexedWatchers: with the spec.nodeName trigger, a watcher selecting one node is indexed by
// it (channel size 10) and offered only events whose object is or was on that node, so moves between
// nodes still give DELETED and ADDED.
func TestTriggerIndexedWatchers(t *testing.T) {
	e := newEnv(t, withNodeNameTrigger)
	rv := strconv.FormatUint(e.syncCache(), 10)
	open := func(field string) *recorder {
		p := storagetest.PodPredicate("", field)
		p.IndexFields = []string{"spec.nodeName"}
		return e.watch("/pods/", storage.ListOptions{ResourceVersion: rv, Predicate: p, Recursive: true})
	}
	n1, n2, all := open("spec.nodeName=node1"), open("spec.nodeName=node2"), open("")
	e.cacher.mu.Lock()
	if len(e.cacher.watchers.valueWatchers["node1"]) != 1 || len(e.cacher.watchers.valueWatchers["node2"]) != 1 ||
		len(e.cacher.watchers.allWatchers[namespacedName{}]) != 1 {
		t.Errorf("index: %v %v", e.cacher.watchers.valueWatchers, e.cacher.watchers.allWatchers)
	}
	e.cacher.mu.Unlock()
	if c := cap(n1.w.(*cacheWatcher).input); c != 10 {
		t.Errorf("trigger watcher channel size %d", c)
	}
	on1 := e.create(storagetest.Pod("ns", "p", storagetest.Node("node1")))
	on2 := e.put(storagetest.Pod("ns", "p", storagetest.Node("node2")))
	on3 := e.put(storagetest.Pod("ns", "p", storagetest.Node("node3")))
	n1.expect(ev(watch.Added, on1), ev(watch.Deleted, atRV(on1, rvOf(t, on2))))
	n2.expect(ev(watch.Added, on2), ev(watch.Deleted, atRV(on2, rvOf(t, on3))))
	all.expect(ev(watch.Added, on1), ev(watch.Modified, on2), ev(watch.Modified, on3))
	n1.expectNothing()
	n2.expectNothing()
}

// TestTriggerNeedsIndexFields ports cacher.go Watch's choice of the trigger: a watcher is indexed by
// the trigger's value only if its predicate names the trigger's field in IndexFields (as the pod
// registry's MatchPod does) and pins it to one value; otherwise it is registered by scope and
// offered every event of it, with the channel size of an indexed resource without trigger.
func TestTriggerNeedsIndexFields(t *testing.T) {
	e := newEnv(t, withNodeNameTrigger)
	rv := strconv.FormatUint(e.syncCache(), 10)
	open := func(field string, indexFields ...string) *recorder {
		p := storagetest.PodPredicate("", field)
		p.IndexFields = indexFields
		return e.watch("/pods/", storage.ListOptions{ResourceVersion: rv, Predicate: p, Recursive: true})
	}
	indexed := open("spec.nodeName=node1", "spec.nodeName")
	unindexed := open("spec.nodeName=node1")
	otherIndex := open("spec.nodeName=node1", "metadata.namespace")
	notPinned := open("spec.nodeName!=node1", "spec.nodeName")
	got := registeredScopes(e.cacher)
	for _, tc := range []struct {
		r    *recorder
		want string
		size int
	}{
		{indexed, "trigger=node1", maxWatchChanSizeWithIndexAndTrigger},
		{unindexed, `{namespace="" name=""}`, minWatchChanSize},
		{otherIndex, `{namespace="" name=""}`, minWatchChanSize},
		{notPinned, `{namespace="" name=""}`, minWatchChanSize},
	} {
		cw := tc.r.w.(*cacheWatcher)
		if g := got[cw]; g != tc.want || cap(cw.input) != tc.size {
			t.Errorf("watcher %s registered under %s with channel size %d, want %s and %d", cw.identifier, g, cap(cw.input), tc.want, tc.size)
		}
	}
	on1 := e.create(storagetest.Pod("ns", "p", storagetest.Node("node1")))
	for _, r := range []*recorder{indexed, unindexed, otherIndex} {
		r.expect(ev(watch.Added, on1))
		r.expectNothing()
	}
	notPinned.expectNothing()
}

// TestScopeIndexedWatchers: a field selector pinning a namespace or name indexes the watcher by that
// scope; it still gets exactly its events.
func TestScopeIndexedWatchers(t *testing.T) {
	e := newEnv(t)
	rv := strconv.FormatUint(e.syncCache(), 10)
	ns := e.watch("/pods/", storage.ListOptions{ResourceVersion: rv, Predicate: storagetest.PodPredicate("", "metadata.namespace=a"), Recursive: true})
	named := e.watch("/pods/", storage.ListOptions{ResourceVersion: rv, Predicate: storagetest.PodPredicate("", "metadata.namespace=a,metadata.name=x"), Recursive: true})
	e.cacher.mu.Lock()
	if len(e.cacher.watchers.allWatchers[namespacedName{namespace: "a"}]) != 1 || len(e.cacher.watchers.allWatchers[namespacedName{namespace: "a", name: "x"}]) != 1 {
		t.Errorf("index: %v", e.cacher.watchers.allWatchers)
	}
	e.cacher.mu.Unlock()
	e.create(storagetest.Pod("b", "x"))
	y := e.create(storagetest.Pod("a", "y"))
	x := e.create(storagetest.Pod("a", "x"))
	ns.expect(ev(watch.Added, y), ev(watch.Added, x))
	named.expect(ev(watch.Added, x))
	named.expectNothing()
}

// registeredScopes is where the Cacher indexed each watcher: its scope, or "trigger=<value>".
func registeredScopes(c *Cacher) map[*cacheWatcher]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[*cacheWatcher]string{}
	for scope, ws := range c.watchers.allWatchers {
		for _, w := range ws {
			out[w] = fmt.Sprintf("{namespace=%q name=%q}", scope.namespace, scope.name)
		}
	}
	for value, ws := range c.watchers.valueWatchers {
		for _, w := range ws {
			out[w] = "trigger=" + value
		}
	}
	return out
}

// TestWatchScopedByRequest ports the scope rules of cacher.go Watch: the namespace and name of the
// request (on the context, as the apiserver's request.WithNamespace and RequestInfo put them) choose
// the index a watcher is registered under, the field selector's only where the request has none; a
// watcher still gets exactly its events. Failure mode: a watch on /pods/a/ made for a request in
// namespace a registered cluster-wide, where every event of the cluster is offered to it.
func TestWatchScopedByRequest(t *testing.T) {
	e := newEnv(t)
	rv := strconv.FormatUint(e.syncCache(), 10)
	open := func(scope storage.RequestScope, key string, recursive bool, field string) *recorder {
		return e.watchCtx(storage.WithRequestScope(e.ctx, scope), key, storage.ListOptions{ResourceVersion: rv,
			Predicate: storagetest.PodPredicate("", field), Recursive: recursive})
	}
	ns := open(storage.RequestScope{Namespace: "a"}, "/pods/a/", true, "")
	named := open(storage.RequestScope{Namespace: "a", Name: "x"}, "/pods/a/x", false, "metadata.name=x")
	// The request's namespace wins over a field selector naming another; such a watch sees nothing.
	mismatch := open(storage.RequestScope{Namespace: "a"}, "/pods/a/", true, "metadata.namespace=b")
	bySelector := open(storage.RequestScope{}, "/pods/", true, "metadata.namespace=b")
	nameOnly := open(storage.RequestScope{Name: "x"}, "/pods/", true, "metadata.name=x")
	cluster := open(storage.RequestScope{}, "/pods/", true, "")
	got := registeredScopes(e.cacher)
	for _, tc := range []struct {
		r    *recorder
		want string
	}{
		{ns, `{namespace="a" name=""}`},
		{named, `{namespace="a" name="x"}`},
		{mismatch, `{namespace="a" name=""}`},
		{bySelector, `{namespace="b" name=""}`},
		{nameOnly, `{namespace="" name="x"}`},
		{cluster, `{namespace="" name=""}`},
	} {
		if g := got[tc.r.w.(*cacheWatcher)]; g != tc.want {
			t.Errorf("watcher %s registered under %s, want %s", tc.r.w.(*cacheWatcher).identifier, g, tc.want)
		}
	}
	ax := e.create(storagetest.Pod("a", "x"))
	ay := e.create(storagetest.Pod("a", "y"))
	bx := e.create(storagetest.Pod("b", "x"))
	ns.expect(ev(watch.Added, ax), ev(watch.Added, ay))
	named.expect(ev(watch.Added, ax))
	bySelector.expect(ev(watch.Added, bx))
	nameOnly.expect(ev(watch.Added, ax), ev(watch.Added, bx))
	cluster.expect(ev(watch.Added, ax), ev(watch.Added, ay), ev(watch.Added, bx))
	for _, r := range []*recorder{ns, named, mismatch, bySelector, nameOnly, cluster} {
		r.expectNothing()
	}
}

// TestQuietNamespaceWatcherKeptDuringTraffic: a client of namespace a that briefly stops reading (its
// watcher's result is full and its goroutine waits with an event in hand) is not offered the events
// of namespace b, so however much b changes its input stays empty and it is kept open with nothing
// lost, as upstream's Cacher keeps it; a watcher offered b's traffic would be closed once the
// dispatcher's budget ran out (the fake clock steps while the reader of b gets all of b's events).
func TestQuietNamespaceWatcherKeptDuringTraffic(t *testing.T) {
	e := newEnv(t, withFakeClock)
	// A full budget while the quiet watcher fills (the clock stands still until b's traffic): a batch
	// of a's events larger than its input waits for its goroutine instead of closing it.
	e.clock.Step(10 * time.Second)
	rv := strconv.FormatUint(e.syncCache(), 10)
	quiet := e.watchCtx(storage.WithRequestScope(e.ctx, storage.RequestScope{Namespace: "a"}), "/pods/a/",
		storage.ListOptions{ResourceVersion: rv, Predicate: storage.Everything, Recursive: true})
	busy := e.watchCtx(storage.WithRequestScope(e.ctx, storage.RequestScope{Namespace: "b"}), "/pods/b/",
		storage.ListOptions{ResourceVersion: rv, Predicate: storage.Everything, Recursive: true})
	cw := quiet.w.(*cacheWatcher)
	var inA []*unstructured.Unstructured
	for i := range cap(cw.result) + 1 {
		inA = append(inA, e.create(storagetest.Pod("a", fmt.Sprintf("p%02d", i))))
	}
	e.waitProcessed(e.lastRV)
	e.waitFor("the quiet watcher's result is full", func() bool { return len(cw.result) == cap(cw.result) && len(cw.input) == 0 })
	for i := range 5 * cap(cw.input) {
		b := e.create(storagetest.Pod("b", fmt.Sprintf("p%02d", i)))
		busy.expectStepping(ev(watch.Added, b))
	}
	e.waitProcessed(e.lastRV)
	e.cacher.mu.Lock()
	stopped, queued := cw.stopped, len(cw.input)
	e.cacher.mu.Unlock()
	if stopped {
		t.Fatalf("the watcher of quiet namespace a was closed by namespace b's traffic (%d events queued in its input)", queued)
	}
	var want []string
	for _, u := range inA {
		want = append(want, ev(watch.Added, u))
	}
	quiet.expect(want...)
	more := e.create(storagetest.Pod("a", "more"))
	quiet.expect(ev(watch.Added, more))
	quiet.expectNothing()
}

// TestNamespacesScopedToThemselves: for the namespaces resource a scope naming the same namespace and
// name is cluster-wide, as namespaces carry no metadata.namespace field.
func TestNamespacesScopedToThemselves(t *testing.T) {
	e := newEnv(t, withResource("namespaces"))
	e.watch("/pods/", storage.ListOptions{Predicate: storagetest.PodPredicate("", "metadata.namespace=a,metadata.name=a"), Recursive: true, ResourceVersion: "0"})
	e.cacher.mu.Lock()
	defer e.cacher.mu.Unlock()
	if len(e.cacher.watchers.allWatchers[namespacedName{name: "a"}]) != 1 {
		t.Fatalf("index: %v", e.cacher.watchers.allWatchers)
	}
}

// TestEventsSerializedOnce: one event written by 100 watchers is encoded once: they share one
// CachingObject. A DELETED event's object is cached too, at the deletion's RV.
func TestEventsSerializedOnce(t *testing.T) {
	e := newEnv(t)
	rv := strconv.FormatUint(e.syncCache(), 10)
	var watchers []*recorder
	for range 100 {
		watchers = append(watchers, e.watch("/pods/", storage.ListOptions{ResourceVersion: rv, Predicate: storage.Everything, Recursive: true}))
	}
	created := e.create(storagetest.Pod("ns", "a"))
	deleted := e.remove(created)
	for _, want := range []string{ev(watch.Added, created), ev(watch.Deleted, atRV(created, rvOf(t, deleted)))} {
		enc := &countingEncoder{}
		var first runtime.Object
		var wg sync.WaitGroup
		for _, w := range watchers {
			got, _ := w.next()
			if describe(got) != want {
				t.Fatalf("got %s, want %s", describe(got), want)
			}
			if first == nil {
				first = got.Object
			} else if got.Object != first {
				t.Fatal("watchers got different objects for one event")
			}
			co, ok := got.Object.(runtime.CacheableObject)
			if !ok {
				t.Fatalf("event object %T is not cacheable", got.Object)
			}
			wg.Go(func() {
				if err := co.CacheEncode("json", enc.encode, io.Discard); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := enc.calls.Load(); n != 1 {
			t.Fatalf("%s encoded %d times", want, n)
		}
	}
}

// TestCacherStop: Stop terminates every watcher (a draining one included) and is idempotent; afterwards
// watches are refused with ErrStopped's message and Wait fails.
func TestCacherStop(t *testing.T) {
	e := newEnv(t)
	w := e.watch("/pods/", storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything, Recursive: true})
	draining := e.watch("/pods/", storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything, Recursive: true})
	for i := range 15 {
		e.create(storagetest.Pod("ns", fmt.Sprintf("p%d", i)))
	}
	e.waitProcessed(e.lastRV)
	draining.w.(*cacheWatcher).forget(true)
	e.cacher.Stop()
	e.cacher.Stop()
	for range w.w.ResultChan() {
	}
	_, err := e.cacher.Watch(e.ctx, "/pods/", storage.ListOptions{Predicate: storage.Everything, Recursive: true})
	if !apierrors.IsTooManyRequests(err) || err.Error() != ErrStopped.Error() {
		t.Fatalf("watch after stop: %v", err)
	}
	if err := e.cacher.Wait(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("wait after stop: %v", err)
	}
	// The draining watcher's goroutine has exited: its result channel is closed once read out.
	for range draining.w.ResultChan() {
	}
}

// TestStopDuringBlockedDispatch: Stop does not wait for the budget timer of a dispatch blocked on a
// slow watcher (on a fake clock that timer would never fire).
func TestStopDuringBlockedDispatch(t *testing.T) {
	e := newEnv(t, withFakeClock)
	fillSlowWatcher(t, e, storage.ListOptions{Predicate: storage.Everything})
	waiters := e.clock.Waiters()
	e.create(storagetest.Pod("ns", "overflow"))
	e.waitFor("the dispatcher blocks on the watcher", func() bool { return e.clock.Waiters() > waiters })
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		e.cacher.Stop()
	}()
	select {
	case <-stopped:
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("Stop waits for the blocked dispatch")
	}
}

// TestReplayedEventsShareEncoding: the watchers that replay one object at the same time, as initial
// events from resourceVersion 0 or from the history, all get one CachingObject, encoded once per
// encoder (upstream lets each copy and encode it); once they are gone the wrapper and its encodings
// are released, and the sharing keeps nothing of them.
func TestReplayedEventsShareEncoding(t *testing.T) {
	e := newEnv(t)
	before := e.syncCache()
	created := e.create(storagetest.Pod("ns", "a"))
	e.waitForCache(rvOf(t, created))
	for _, rv := range []string{"0", strconv.FormatUint(before, 10)} {
		var watchers []*recorder
		for range 20 {
			watchers = append(watchers, e.watch("/pods/", storage.ListOptions{ResourceVersion: rv, Predicate: storage.Everything, Recursive: true}))
		}
		enc := &countingEncoder{}
		var first runtime.Object
		for _, w := range watchers {
			got, _ := w.next()
			if describe(got) != ev(watch.Added, created) {
				t.Fatalf("rv %s: got %s", rv, describe(got))
			}
			if first == nil {
				first = got.Object
			} else if got.Object != first {
				t.Fatalf("rv %s: watchers replaying one object got different objects", rv)
			}
			co, ok := got.Object.(runtime.CacheableObject)
			if !ok {
				t.Fatalf("rv %s: event object %T is not cacheable", rv, got.Object)
			}
			if err := co.CacheEncode("json", enc.encode, io.Discard); err != nil {
				t.Fatal(err)
			}
		}
		if n := enc.calls.Load(); n != 1 {
			t.Fatalf("rv %s: encoded %d times, want 1", rv, n)
		}
		for _, w := range watchers {
			w.stop()
		}
	}

	// Released: once nobody holds them, the wrappers are collected and the next watcher wraps anew.
	elem, ok := e.cacher.watchCache.getByKey("/pods/ns/a")
	if !ok {
		t.Fatal("the pod is not cached")
	}
	replays := e.cacher.watchCache.replays
	e.eventually("the shared wrappers released", func() bool {
		goruntime.GC()
		replays.objects.mu.Lock()
		defer replays.objects.mu.Unlock()
		replays.events.mu.Lock()
		defer replays.events.mu.Unlock()
		if replays.objects.m[weak.Make(elem)].Value() != nil {
			return false
		}
		for _, v := range replays.events.m {
			if v.Value() != nil {
				return false
			}
		}
		return true
	})
}

// TestSharerForgetsCollectedEntries: a sharer returns one value per key while it is held, makes a new
// one once it was collected, and the sweep its map's growth triggers drops every entry whose key or
// value was collected.
func TestSharerForgetsCollectedEntries(t *testing.T) {
	var s sharer[int, string]
	k := new(int)
	made := 0
	newValue := func() *string { made++; v := "v"; return &v }
	v1 := s.get(k, newValue)
	if v2 := s.get(k, newValue); v2 != v1 || made != 1 {
		t.Fatalf("a held value was made again: %d makes", made)
	}
	goruntime.KeepAlive(v1)
	v1 = nil
	e := newEnv(t)
	e.eventually("the value collected", func() bool {
		goruntime.GC()
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.m[weak.Make(k)].Value() == nil
	})
	if s.get(k, newValue); made != 2 {
		t.Fatalf("a collected value was not made anew: %d makes", made)
	}
	for range 10 * minSweep {
		s.get(new(int), newValue) // neither key nor value is kept
	}
	// Up to just below the next sweep, then collect, then the get that sweeps.
	s.mu.Lock()
	sweepAt := max(s.sweepAt, minSweep)
	s.mu.Unlock()
	for s.len() < sweepAt-1 {
		s.get(new(int), newValue)
	}
	goruntime.GC()
	s.get(new(int), newValue)
	if n := s.len(); n > 1 {
		t.Fatalf("the sharer holds %d entries after a sweep, want only the newest", n)
	}
	goruntime.KeepAlive(k)
}
