package cache

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
)

// TestWatchInitialEventsInKeyOrder: the legacy watch (RV "" or "0" without SendInitialEvents)
// replays the state in key order, each object with its own RV, then live events (watch_cache.go
// getAllEventsSinceLocked, from a store snapshot sorted by key). Failure mode: replay in RV order
// would put ns/c first.
func TestWatchInitialEventsInKeyOrder(t *testing.T) {
	e := newEnv(t)
	for i, rv := range []string{"", "0"} {
		ns := fmt.Sprintf("ns%d", i)
		c := e.create(storagetest.Pod(ns, "c"))
		e.create(storagetest.Pod(ns, "a"))
		b := e.create(storagetest.Pod(ns, "b"))
		a := e.put(storagetest.Pod(ns, "a", storagetest.Labels("v=2")))
		e.create(storagetest.Pod(ns+"x", "a")) // outside the watched prefix
		e.syncCache()
		w := e.watch("/pods/"+ns, storage.ListOptions{ResourceVersion: rv, Predicate: storage.Everything, Recursive: true})
		w.expect(ev(watch.Added, a), ev(watch.Added, b), ev(watch.Added, c))
		d := e.create(storagetest.Pod(ns, "d"))
		w.expect(ev(watch.Added, d))
		w.stop()
	}
}

// TestWatchResourceVersionZeroWithoutInitialEvents: RV "0" with SendInitialEvents=false starts from
// the cache's RV: nothing is replayed.
func TestWatchResourceVersionZeroWithoutInitialEvents(t *testing.T) {
	e := newEnv(t)
	e.create(storagetest.Pod("ns", "a"))
	e.syncCache()
	w := e.watch("/pods/ns", storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything, Recursive: true, SendInitialEvents: ptrTo(false)})
	b := e.create(storagetest.Pod("ns", "b"))
	w.expect(ev(watch.Added, b))
}

// TestWatchKeyPrefixBoundary: a watch of /pods/ns sees nothing of /pods/ns2, a watch of /pods/ns/a
// nothing of /pods/ns/ab, in replay and live.
func TestWatchKeyPrefixBoundary(t *testing.T) {
	e := newEnv(t)
	e.create(storagetest.Pod("ns2", "x"))
	a := e.create(storagetest.Pod("ns", "a"))
	e.create(storagetest.Pod("ns", "ab"))
	e.syncCache()
	dir := e.watch("/pods/ns", storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything, Recursive: true})
	dir.expect(ev(watch.Added, a), ev(watch.Added, e.put(storagetest.Pod("ns", "ab"))))
	one := e.watch("/pods/ns/a", storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything})
	one.expect(ev(watch.Added, a))
	e.put(storagetest.Pod("ns2", "y"))
	e.put(storagetest.Pod("ns", "ab", storagetest.Labels("v=3")))
	a2 := e.put(storagetest.Pod("ns", "a", storagetest.Labels("v=2")))
	one.expect(ev(watch.Modified, a2))
	dir.fence()
	dir.expectNothing()
}

// TestNothingDeliveredAfterStop: once Stop returns, the watcher is out of the dispatcher, so a
// later write is never delivered, even one the watch selects (upstream's RunTestWatch checks the
// close after Stop; the etcd3 watch, which only cancels, gives no such promise). Failure mode: the
// ADDED of the write after Stop arrives before the close.
func TestNothingDeliveredAfterStop(t *testing.T) {
	e := newEnv(t)
	w := e.watch("/pods/ns", storage.ListOptions{ResourceVersion: strconv.FormatUint(e.syncCache(), 10), Predicate: storage.Everything, Recursive: true})
	w.expect(ev(watch.Added, e.create(storagetest.Pod("ns", "a"))))
	w.w.Stop()
	e.create(storagetest.Pod("ns", "b"))
	e.waitProcessed(e.lastRV)
	w.expectClosed()
}

// TestWatchArgumentErrors: key and resourceVersion errors are returned, not sent as events.
func TestWatchArgumentErrors(t *testing.T) {
	e := newEnv(t)
	if _, err := e.cacher.Watch(e.ctx, "", storage.ListOptions{}); !errors.Is(err, storage.ErrEmptyKey) {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := e.cacher.Watch(e.ctx, "/pods/../x", storage.ListOptions{}); !errors.Is(err, storage.ErrInvalidKey) {
		t.Fatalf("invalid key: %v", err)
	}
	if _, err := e.cacher.Watch(e.ctx, "/pods/ns", storage.ListOptions{ResourceVersion: "abc"}); !storage.IsInvalidError(err) {
		t.Fatalf("bad resourceVersion: %v", err)
	}
}

// TestWatchErrorsAfterParsingAreEvents: a failure after the resourceVersion was parsed (here
// reading etcd's revision for a consistent watch) is one ERROR event (500 InternalError) on a
// closed watch.
func TestWatchErrorsAfterParsingAreEvents(t *testing.T) {
	e := newEnv(t)
	e.storage.failCurrentRV.Store(true)
	w := e.watch("/pods/", storage.ListOptions{Predicate: storage.Everything, Recursive: true, SendInitialEvents: ptrTo(true)})
	w.expect(fmt.Sprintf("ERROR %d %s: injected current revision failure", http.StatusInternalServerError, metav1.StatusReasonInternalError))
	w.expectClosed()
}

// TestWatchFutureResourceVersion: without SendInitialEvents=true a future RV opens a watch that
// waits: events up to that RV are not delivered, the first one after it is (watch_cache.go
// getAllEventsSinceLocked: an empty interval for a future RV).
func TestWatchFutureResourceVersion(t *testing.T) {
	for _, sie := range []*bool{nil, ptrTo(false)} {
		t.Run(fmt.Sprint("sendInitialEvents=", sie != nil), func(t *testing.T) {
			e := newEnv(t)
			future := e.syncCache() + 3
			w := e.watch("/pods/", storage.ListOptions{ResourceVersion: strconv.FormatUint(future, 10), Predicate: storage.Everything,
				Recursive: true, SendInitialEvents: sie})
			for i := range 3 {
				e.create(storagetest.Pod("ns", fmt.Sprintf("p%d", i)))
			}
			w.expectNothing()
			next := e.create(storagetest.Pod("ns", "next"))
			w.expect(ev(watch.Added, next))
		})
	}
}

// TestWatchListWaitsForFreshness: SendInitialEvents=true waits for the cache to reach the required
// RV (etcd's current one for RV ""), requesting progress meanwhile; after 3 s the watch is one
// ERROR 504 with Retry-After 1 (cacher.go waitUntilWatchCacheFreshAndForceAllEvents). Once the
// cache catches up in time, the initial events come.
func TestWatchListWaitsForFreshness(t *testing.T) {
	type result struct {
		w   watch.Interface
		err error
	}
	for _, rv := range []string{"", "future"} {
		for _, catchUp := range []bool{false, true} {
			t.Run(fmt.Sprintf("rv=%q catchUp=%t", rv, catchUp), func(t *testing.T) {
				e := newEnv(t, withFakeClock)
				e.storage.gate.pause()
				x := e.create(storagetest.Pod("ns", "x"))
				opts := storage.ListOptions{Predicate: storage.Everything, Recursive: true, SendInitialEvents: ptrTo(true)}
				opts.Predicate.AllowWatchBookmarks = true
				required := rvOf(t, x)
				if rv == "future" {
					opts.ResourceVersion = strconv.FormatUint(rvOf(t, x), 10)
				}
				before := e.storage.progressRequests.Load()
				done := make(chan result, 1)
				go func() {
					w, err := e.cacher.Watch(e.ctx, "/pods/", opts)
					done <- result{w, err}
				}()
				e.waitForProgressWaiter(before)
				var res result
				if catchUp {
					e.storage.gate.resume()
					res = <-done
				} else {
					e.clock.Step(blockTimeout)
					res = <-done
				}
				if res.err != nil {
					t.Fatal(res.err)
				}
				r := &recorder{t: t, w: res.w, env: e}
				t.Cleanup(r.stop)
				if catchUp {
					got, _ := r.next()
					if describe(got) != ev(watch.Added, x) {
						t.Fatalf("got %s, want %s", describe(got), ev(watch.Added, x))
					}
					got, _ = r.next()
					if describe(got) != bookmark(rvOf(t, got.Object), true) || rvOf(t, got.Object) < required {
						t.Fatalf("got %s, want an end bookmark at or after %d", describe(got), required)
					}
					return
				}
				got, _ := r.next()
				st, ok := got.Object.(*metav1.Status)
				if got.Type != watch.Error || !ok {
					t.Fatalf("got %s", describe(got))
				}
				err := &apierrors.StatusError{ErrStatus: *st}
				if !storage.IsTooLargeResourceVersion(err) || st.Details.RetryAfterSeconds != 1 ||
					st.Message != fmt.Sprintf("Timeout: Too large resource version: %d, current: %d", required, required-1) {
					t.Fatalf("got %+v", st)
				}
				r.expectClosed()
			})
		}
	}
}

// TestWatchListFreshnessWaitOutlivesRequest: the freshness wait of a watch with SendInitialEvents runs
// its full 3 s whatever becomes of the request's context, and ends with ERROR 504 "Too large resource
// version" (Retry-After 1, cause ResourceVersionTooLarge), as upstream's waitUntilFreshLocked, which
// never looks at the context. Failure mode: the wait ends with the request's deadline (or
// cancellation) and the watch is an ERROR 500 "context deadline exceeded", which clients treat as a
// failure of the server rather than as a resourceVersion to retry.
func TestWatchListFreshnessWaitOutlivesRequest(t *testing.T) {
	type result struct {
		w   watch.Interface
		err error
	}
	for _, ctxEnd := range []string{"deadline", "cancel"} {
		t.Run(ctxEnd, func(t *testing.T) {
			e := newEnv(t, withFakeClock)
			future := e.syncCache() + 1
			var ctx context.Context
			var cancel context.CancelFunc
			if ctxEnd == "deadline" {
				ctx, cancel = context.WithDeadline(e.ctx, time.Now().Add(-time.Second))
			} else {
				ctx, cancel = context.WithCancel(e.ctx)
				cancel()
			}
			defer cancel()
			opts := storage.ListOptions{Predicate: storage.Everything, Recursive: true, SendInitialEvents: ptrTo(true),
				ResourceVersion: strconv.FormatUint(future, 10)}
			opts.Predicate.AllowWatchBookmarks = true
			done := make(chan result, 1)
			go func() {
				w, err := e.cacher.Watch(ctx, "/pods/", opts)
				done <- result{w, err}
			}()
			waiting := func() bool {
				e.cacher.progress.mu.Lock()
				defer e.cacher.progress.mu.Unlock()
				return e.cacher.progress.waiting > 0
			}
			var res result
			early := false
			e.waitFor("the freshness wait to begin or the watch to end", func() bool {
				select {
				case res = <-done:
					early = true
					return true
				default:
					return waiting()
				}
			})
			if !early {
				e.clock.Step(blockTimeout - time.Millisecond)
				select {
				case res = <-done:
					early = true
				default:
				}
			}
			if !early {
				e.clock.Step(time.Millisecond)
				res = <-done
			}
			if res.err != nil {
				t.Fatal(res.err)
			}
			r := &recorder{t: t, w: res.w, env: e}
			t.Cleanup(r.stop)
			got, _ := r.next()
			st, ok := got.Object.(*metav1.Status)
			if got.Type != watch.Error || !ok {
				t.Fatalf("got %s", describe(got))
			}
			err := &apierrors.StatusError{ErrStatus: *st}
			if early || !storage.IsTooLargeResourceVersion(err) || st.Code != 504 || st.Details == nil || st.Details.RetryAfterSeconds != 1 ||
				st.Message != fmt.Sprintf("Timeout: Too large resource version: %d, current: %d", future, future-1) {
				t.Fatalf("the watch ended (before the 3 s: %t) with %s; want ERROR 504 Too large resource version after 3 s", early, describe(got))
			}
			r.expectClosed()
		})
	}
}

// TestWatchRegistrationChecksGeneration: a watch whose setup spans a re-initialization of the cache
// (here the freshness wait) is closed at once, without events, instead of serving a stale interval.
func TestWatchRegistrationChecksGeneration(t *testing.T) {
	e := newEnv(t, withFakeClock)
	e.storage.gate.pause()
	e.create(storagetest.Pod("ns", "x"))
	done := make(chan watch.Interface, 1)
	go func() {
		w, err := e.cacher.Watch(e.ctx, "/pods/", storage.ListOptions{Predicate: storage.Everything, Recursive: true, SendInitialEvents: ptrTo(true)})
		if err != nil {
			t.Error(err)
		}
		done <- w
	}()
	e.waitForProgressWaiter(e.storage.progressRequests.Load())
	gen := e.generation()
	e.cacher.ready.setError(nil)
	e.cacher.ready.setReady()
	if e.generation() != gen+1 {
		t.Fatal("generation did not move")
	}
	e.storage.gate.resume()
	w := <-done
	if _, ok := <-w.ResultChan(); ok {
		t.Fatal("a watch set up across generations delivered an event")
	}
	if _, ok := w.(*cacheWatcher); ok {
		t.Fatal("the watch was registered")
	}
}

// TestNotReady: before the first list succeeds, Watch and cache-served lists answer 429 with the
// reason and a Retry-After growing with the downtime; Get and unfiltered paginated lists read etcd.
func TestNotReady(t *testing.T) {
	e := newEnv(t, withFakeClock, withListErrors(1_000_000), withoutWaitingForReady)
	e.waitFor("the first list fails", func() bool { return e.storage.listCalls.Load() >= 1 })
	_, err := e.cacher.Watch(e.ctx, "/pods/", storage.ListOptions{Predicate: storage.Everything, Recursive: true})
	var se *apierrors.StatusError
	if !errors.As(err, &se) || !apierrors.IsTooManyRequests(err) {
		t.Fatalf("watch: %v", err)
	}
	e.waitFor("the failure is recorded", func() bool {
		_, _, err := e.cacher.ready.check()
		return err.Error() != "storage is (re)initializing"
	})
	_, err = e.cacher.Watch(e.ctx, "/pods/", storage.ListOptions{Predicate: storage.Everything, Recursive: true})
	if !errors.As(err, &se) || se.ErrStatus.Message != "storage is (re)initializing: failed to list /pods/: injected list error" {
		t.Fatalf("watch: %v", err)
	}
	if d := se.ErrStatus.Details; d == nil || d.RetryAfterSeconds != 1 {
		t.Fatalf("Retry-After at first: %+v", se.ErrStatus.Details)
	}
	e.clock.Step(time.Minute)
	_, err = e.cacher.Watch(e.ctx, "/pods/", storage.ListOptions{Predicate: storage.Everything, Recursive: true})
	if !errors.As(err, &se) || se.ErrStatus.Details.RetryAfterSeconds != 30 {
		t.Fatalf("Retry-After after a minute: %v %+v", err, se.ErrStatus.Details)
	}

	x := e.create(storagetest.Pod("ns", "x"))
	list := &unstructured.UnstructuredList{}
	err = e.cacher.GetList(e.ctx, "/pods/", storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything, Recursive: true}, list)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("list from the cache: %v", err)
	}
	paged := storage.Everything
	paged.Limit = 10
	calls := e.storage.delegatedLists.Load()
	if err := e.cacher.GetList(e.ctx, "/pods/", storage.ListOptions{Predicate: paged, Recursive: true}, list); err != nil || len(list.Items) != 1 {
		t.Fatalf("paginated list: %v %d items", err, len(list.Items))
	}
	if e.storage.delegatedLists.Load() == calls {
		t.Fatal("the paginated list was not read from the storage")
	}
	got := &unstructured.Unstructured{}
	if err := e.cacher.Get(e.ctx, keyOf(x), storage.GetOptions{ResourceVersion: "1"}, got); err != nil || got.GetName() != "x" {
		t.Fatalf("get: %v", err)
	}
}

// TestRelist: when the reflector's watch ends with 410, the cache goes pending, terminates its
// watchers without an ERROR, relists and becomes ready in a new generation with an emptied history:
// an RV before the relist is too old, the relist's RV itself is fine (watch_cache.go
// getAllEventsSinceLocked, Replace).
func TestRelist(t *testing.T) {
	e := newEnv(t, withFakeClock)
	a := e.create(storagetest.Pod("ns", "a"))
	old := e.watch("/pods/", storage.ListOptions{ResourceVersion: a.GetResourceVersion(), Predicate: storage.Everything, Recursive: true})
	b := e.create(storagetest.Pod("ns", "b"))
	old.expect(ev(watch.Added, b))
	gen := e.generation()
	lists := e.storage.lists.Load()
	e.storage.breakWatch(t, &apierrors.NewResourceExpired("The resourceVersion for the provided watch is too old.").ErrStatus)
	e.eventually("the cache relists", func() bool { return e.generation() == gen+1 && e.storage.lists.Load() > lists })
	old.expectClosed()

	listRV := e.cacher.watchCache.listResourceVersion
	if listRV < rvOf(t, b) {
		t.Fatalf("list RV %d below %s", listRV, b.GetResourceVersion())
	}
	tooOld := e.watch("/pods/", storage.ListOptions{ResourceVersion: a.GetResourceVersion(), Predicate: storage.Everything, Recursive: true})
	tooOld.expect(fmt.Sprintf("ERROR 410 Expired: too old resource version: %s (%d)", a.GetResourceVersion(), listRV))
	w := e.watch("/pods/", storage.ListOptions{ResourceVersion: strconv.FormatUint(listRV, 10), Predicate: storage.Everything, Recursive: true})
	c := e.create(storagetest.Pod("ns", "c"))
	w.expect(ev(watch.Added, c))
}

// TestReflectorRewatchesWithoutRelist: a 500 or a 429 on the reflector's watch re-watches from the
// last RV (the latter after a backoff) without a relist: watchers stay open and miss nothing.
func TestReflectorRewatchesWithoutRelist(t *testing.T) {
	for _, st := range []*metav1.Status{&apierrors.NewInternalError(errors.New("no leader")).ErrStatus, &apierrors.NewTooManyRequests("slow down", 1).ErrStatus} {
		t.Run(string(st.Reason), func(t *testing.T) {
			e := newEnv(t, withFakeClock)
			a := e.create(storagetest.Pod("ns", "a"))
			w := e.watch("/pods/", storage.ListOptions{ResourceVersion: a.GetResourceVersion(), Predicate: storage.Everything, Recursive: true})
			gen, lists := e.generation(), e.storage.lists.Load()
			// Counted when the broken watch is known to be open: the cache is ready before its first
			// watch is.
			watches := e.storage.breakWatch(t, st)
			e.eventually("the reflector re-watches", func() bool {
				e.storage.mu.Lock()
				defer e.storage.mu.Unlock()
				return len(e.storage.watches) > watches
			})
			b := e.create(storagetest.Pod("ns", "b"))
			w.expect(ev(watch.Added, b))
			if e.generation() != gen || e.storage.lists.Load() != lists {
				t.Fatal("relisted")
			}
		})
	}
}

// TestInitialEventsNotDuplicatedByLaggingDispatcher: an interval taken while the dispatcher lags
// holds events the dispatcher will later also offer to the new watcher; they are delivered once
// (cache_watcher.go process: only events above the RV sent).
func TestInitialEventsNotDuplicatedByLaggingDispatcher(t *testing.T) {
	e := newEnv(t, withFakeClock)
	e.clock.Step(10 * time.Second) // a full budget: the dispatcher will wait 100 ms on a slow watcher
	start := e.syncCache()
	slow := e.watch("/pods/", storage.ListOptions{ResourceVersion: strconv.FormatUint(start, 10), Predicate: storage.Everything, Recursive: true})
	cw := slow.w.(*cacheWatcher)
	var last *unstructured.Unstructured
	for i := range 21 {
		last = e.create(storagetest.Pod("ns", fmt.Sprintf("p%02d", i)))
	}
	e.waitProcessed(rvOf(t, last))
	e.waitFor("the slow watcher is full", func() bool { return len(cw.input) == cap(cw.input) && len(cw.result) == cap(cw.result) })
	waiters := e.clock.Waiters()
	e22 := e.create(storagetest.Pod("ns", "p21"))
	e.waitFor("the dispatcher blocks on the slow watcher", func() bool { return e.clock.Waiters() > waiters })
	e23 := e.create(storagetest.Pod("ns", "p22"))
	e24 := e.create(storagetest.Pod("ns", "p23"))
	e.waitForCache(rvOf(t, e24))

	w := e.watch("/pods/", storage.ListOptions{ResourceVersion: last.GetResourceVersion(), Predicate: storage.Everything, Recursive: true})
	// The clock moves until the dispatcher's budget is spent (however late the dispatcher reached its
	// wait) and it has offered e22..e24 to w as well.
	e.eventually("the dispatcher catches up", func() bool { return e.cacher.lastProcessedRV.Load() >= rvOf(t, e24) })
	w.expect(ev(watch.Added, e22), ev(watch.Added, e23), ev(watch.Added, e24))
	e25 := e.create(storagetest.Pod("ns", "p24"))
	w.expect(ev(watch.Added, e25))
	w.expectNothing()
}
