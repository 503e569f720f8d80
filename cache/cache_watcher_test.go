package cache

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
)

// sliceSource is an interval of given events.
type sliceSource struct {
	events []*watchCacheEvent
	i      int
}

func (s *sliceSource) next() (*watchCacheEvent, error) {
	if s.i >= len(s.events) {
		return nil, nil
	}
	s.i++
	return s.events[s.i-1], nil
}

func intervalFromEvents(events []*watchCacheEvent) *watchCacheInterval {
	return &watchCacheInterval{source: &sliceSource{events: events}}
}

func testPod(rv uint64) *unstructured.Unstructured {
	u := storagetest.Pod("ns", fmt.Sprintf("pod-%d", rv))
	u.SetResourceVersion(fmt.Sprint(rv))
	return u
}

func makeEvent(rv uint64) *watchCacheEvent {
	return &watchCacheEvent{Type: watch.Added, Object: testPod(rv), Key: fmt.Sprintf("/pods/ns/pod-%d", rv), ResourceVersion: rv}
}

var passAll = newWatchFilter("", storage.Everything)

// watcherUnderTest is a cacheWatcher whose forget stops it and counts the calls, as upstream's tests.
type watcherUnderTest struct {
	*cacheWatcher
	mu      sync.Mutex
	forgets int
	drains  []bool
}

func newWatcherUnderTest(chanSize int, filter watchFilter, allowBookmarks bool) *watcherUnderTest {
	w := &watcherUnderTest{cacheWatcher: newCacheWatcher(chanSize, filter, storage.APIObjectVersioner{}, time.Time{}, allowBookmarks, nil, testutil.DiscardLogger(), "test")}
	w.setBookmarkAfterResourceVersion(0)
	w.forget = func(drain bool) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.forgets++
		w.drains = append(w.drains, drain)
		w.drainInputBuffer = drain
		w.stopLocked()
	}
	return w
}

func (w *watcherUnderTest) forgetCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.forgets
}

// run starts the watcher's goroutine and registers waiting for it.
func (w *watcherUnderTest) run(t *testing.T, ctx context.Context, interval *watchCacheInterval, rv uint64) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.processInterval(ctx, interval, rv)
	}()
	t.Cleanup(func() {
		w.Stop()
		for range w.result {
		}
		<-done
	})
}

// TestCacheWatcherHandlesFiltering ports the upstream test: the filter runs on the current and the
// previous state, producing ADDED, MODIFIED and DELETED (of the previous object at the event's RV).
func TestCacheWatcherHandlesFiltering(t *testing.T) {
	onHost := newWatchFilter("", storagetest.PodPredicate("", "spec.nodeName=host"))
	mk := func(typ watch.EventType, rv uint64, node, prevNode string) *watchCacheEvent {
		e := &watchCacheEvent{Type: typ, Object: testPod(rv), ObjFields: fields.Set{"spec.nodeName": node}, ResourceVersion: rv}
		if typ == watch.Modified {
			e.PrevObject, e.PrevObjFields = testPod(rv-1), fields.Set{"spec.nodeName": prevNode}
		}
		return e
	}
	for i, tc := range []struct {
		events []*watchCacheEvent
		want   []string
	}{
		{
			events: []*watchCacheEvent{mk(watch.Added, 1, "host", ""), mk(watch.Modified, 2, "", "host"), mk(watch.Modified, 3, "host", "")},
			want:   []string{"ADDED ns/pod-1 rv=1", "DELETED ns/pod-1 rv=2", "ADDED ns/pod-3 rv=3"},
		},
		{
			events: []*watchCacheEvent{mk(watch.Added, 1, "", ""), mk(watch.Modified, 2, "", ""), mk(watch.Modified, 3, "host", ""),
				mk(watch.Modified, 4, "host", "host"), mk(watch.Modified, 5, "", "host"), mk(watch.Modified, 6, "", "")},
			want: []string{"ADDED ns/pod-3 rv=3", "MODIFIED ns/pod-4 rv=4", "DELETED ns/pod-4 rv=5"},
		},
	} {
		w := newWatcherUnderTest(0, onHost, false)
		w.run(t, context.Background(), intervalFromEvents(tc.events), 0)
		for j, want := range tc.want {
			got := describe(<-w.result)
			if got != want {
				t.Fatalf("case %d event %d: got %s, want %s", i, j, got, want)
			}
		}
		// The interval is exhausted; the watcher now waits on input. Stop closes the result.
		w.Stop()
		if ev, ok := <-w.result; ok {
			t.Fatalf("case %d: excess event %s", i, describe(ev))
		}
	}
}

// TestCacheWatcherCleanupNotBlockedByResult ports the upstream test: a watcher whose client never
// reads still exits on Stop, and its goroutine's own Stop is the second forget.
func TestCacheWatcherCleanupNotBlockedByResult(t *testing.T) {
	w := newWatcherUnderTest(0, passAll, false)
	w.run(t, context.Background(), intervalFromEvents([]*watchCacheEvent{makeEvent(1), makeEvent(2)}), 0)
	w.Stop()
	testutil.WaitFor(t, "forget is called twice", func() bool { return w.forgetCount() == 2 })
}

// TestCacheWatcherStopIsIdempotent: concurrent and repeated Stops close the result channel once.
func TestCacheWatcherStopIsIdempotent(t *testing.T) {
	w := newWatcherUnderTest(1, passAll, false)
	w.run(t, context.Background(), intervalFromEvents(nil), 0)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(w.Stop)
	}
	wg.Wait()
	w.Stop()
	if _, ok := <-w.result; ok {
		t.Fatal("event after Stop")
	}
}

// TestCacheWatcherDoneCheckKeepsPrefix: once done is closed, no further event is delivered even when
// the result channel has room. A plain select on result and done would pick at random and could
// deliver event N+1 after dropping event N.
func TestCacheWatcherDoneCheckKeepsPrefix(t *testing.T) {
	w := newCacheWatcher(1000, passAll, storage.APIObjectVersioner{}, time.Time{}, false, nil, testutil.DiscardLogger(), "")
	w.setBookmarkAfterResourceVersion(0)
	close(w.done)
	for rv := uint64(1); rv <= 500; rv++ {
		w.sendWatchCacheEvent(makeEvent(rv))
	}
	if n := len(w.result); n != 0 {
		t.Fatalf("%d events delivered after done was closed", n)
	}
}

// TestResourceVersionAfterInitEvents ports the upstream test: an event already replayed from the
// snapshot that also arrives on input is not delivered twice. (Upstream stops the watcher before
// reading, so its reads see a closed channel and the check is vacuous; here the duplicate sits in input
// ahead of a newer event, which must come next.)
func TestResourceVersionAfterInitEvents(t *testing.T) {
	const n = 10
	s := newObjectStore()
	for i := range n {
		s.put(&element{Key: fmt.Sprintf("/pods/ns/pod-%d", i), Object: testPod(uint64(i))})
	}
	interval := newSnapshotInterval(s.snapshot(), "", n-1)
	w := newWatcherUnderTest(n+1, passAll, true)
	if !w.add(makeEvent(n-1), nil, nil) || !w.add(makeEvent(n), nil, nil) {
		t.Fatal("add failed")
	}
	w.run(t, context.Background(), interval, n-1)
	for i := range n {
		got := describe(<-w.result)
		if want := fmt.Sprintf("ADDED ns/pod-%d rv=%d", i, i); got != want {
			t.Fatalf("init event %d: %s, want %s", i, got, want)
		}
	}
	if got, want := describe(<-w.result), fmt.Sprintf("ADDED ns/pod-%d rv=%d", n, n); got != want {
		t.Fatalf("after the init events: %s, want %s", got, want)
	}
}

// TestCacheWatcherDraining ports the upstream test: a graceful forget delivers what input holds.
func TestCacheWatcherDraining(t *testing.T) {
	w := newWatcherUnderTest(1, passAll, true)
	w.run(t, context.Background(), intervalFromEvents([]*watchCacheEvent{makeEvent(5), makeEvent(6)}), 1)
	if !w.add(makeEvent(7), time.After(testutil.WaitTimeout), nil) {
		t.Fatal("add failed")
	}
	w.forget(true)
	n := 0
	for range w.result {
		n++
	}
	if n != 3 {
		t.Fatalf("received %d events, want 3", n)
	}
	testutil.WaitFor(t, "processInterval's Stop forgets again", func() bool { return w.forgetCount() == 2 })
}

// TestCacheWatcherDrainingRequestedButNotDrained ports the upstream test: a client that stops reading
// a draining watcher still lets its goroutine exit.
func TestCacheWatcherDrainingRequestedButNotDrained(t *testing.T) {
	w := newWatcherUnderTest(1, passAll, true)
	w.run(t, context.Background(), intervalFromEvents([]*watchCacheEvent{makeEvent(5), makeEvent(6)}), 1)
	if !w.add(makeEvent(7), time.After(testutil.WaitTimeout), nil) {
		t.Fatal("add failed")
	}
	w.forget(true)
	w.Stop()
	testutil.WaitFor(t, "forget is called three times", func() bool { return w.forgetCount() == 3 })
}

// TestCacheWatcherNotDrainedBeforeBookmarkReceived ports ...DrainingNoBookmarkAfterResourceVersion-
// Received: a watch-list still waiting for its bookmark is closed, not drained, when it is too slow.
func TestCacheWatcherNotDrainedBeforeBookmarkReceived(t *testing.T) {
	w := newWatcherUnderTest(0, passAll, true)
	w.setBookmarkAfterResourceVersion(10)
	w.run(t, context.Background(), intervalFromEvents([]*watchCacheEvent{makeEvent(1), makeEvent(2)}), 0)
	<-w.result
	fired := make(chan time.Time)
	close(fired)
	if w.add(makeEvent(3), fired, nil) {
		t.Fatal("add to a full watcher succeeded")
	}
	testutil.WaitFor(t, "forget is called twice", func() bool { return w.forgetCount() == 2 })
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.drains[0] {
		t.Fatal("the slow watcher was drained")
	}
}

// TestCacheWatcherDrainedAfterBookmarkReceived ports ...DrainingNoBookmarkAfterResourceVersionSent: a
// watch-list that accepted its bookmark but has not sent it is drained so the client still gets it.
func TestCacheWatcherDrainedAfterBookmarkReceived(t *testing.T) {
	w := newWatcherUnderTest(2, passAll, true)
	w.setBookmarkAfterResourceVersion(10)
	w.run(t, context.Background(), intervalFromEvents([]*watchCacheEvent{makeEvent(1), makeEvent(2)}), 0)
	testutil.WaitFor(t, "the interval is replayed", func() bool { return len(w.result) == 2 })
	if !w.add(makeEvent(5), nil, nil) {
		t.Fatal("add 5")
	}
	bm := &unstructured.Unstructured{}
	bm.SetResourceVersion("10")
	if !w.nonblockingAdd(&watchCacheEvent{Type: watch.Bookmark, ResourceVersion: 10, Object: bm}) {
		t.Fatal("add bookmark")
	}
	if !w.add(makeEvent(15), nil, nil) {
		t.Fatal("add 15")
	}
	fired := make(chan time.Time)
	close(fired)
	if w.add(makeEvent(20), fired, nil) {
		t.Fatal("add 20 to a full watcher succeeded")
	}
	var got []string
	for ev := range w.result {
		got = append(got, describe(ev))
	}
	want := []string{"ADDED ns/pod-1 rv=1", "ADDED ns/pod-2 rv=2", "ADDED ns/pod-5 rv=5", "BOOKMARK rv=10 end", "ADDED ns/pod-15 rv=15"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.drains[0] {
		t.Fatal("the watcher was not drained")
	}
}

// TestBookmarkAfterResourceVersion: a watch-list refuses bookmarks below the RV it waits for, accepts
// the first one at or above it (annotated as the end of the initial events) and then gets ordinary
// ones; an ordinary watch never gets the annotation.
func TestBookmarkAfterResourceVersion(t *testing.T) {
	bookmarkAt := func(rv uint64) *watchCacheEvent {
		u := &unstructured.Unstructured{}
		u.SetResourceVersion(fmt.Sprint(rv))
		return &watchCacheEvent{Type: watch.Bookmark, ResourceVersion: rv, Object: u}
	}
	w := newWatcherUnderTest(10, passAll, true)
	w.setBookmarkAfterResourceVersion(10)
	if w.nonblockingAdd(bookmarkAt(9)) {
		t.Fatal("bookmark below the awaited RV accepted")
	}
	if w.wasBookmarkReceived() {
		t.Fatal("state moved on a refused bookmark")
	}
	w.run(t, context.Background(), intervalFromEvents(nil), 0)
	if !w.nonblockingAdd(bookmarkAt(10)) || !w.wasBookmarkReceived() {
		t.Fatal("awaited bookmark refused")
	}
	if got := describe(<-w.result); got != "BOOKMARK rv=10 end" {
		t.Fatalf("got %s", got)
	}
	testutil.WaitFor(t, "the bookmark is marked sent", w.wasBookmarkSent)
	w.nonblockingAdd(bookmarkAt(12))
	if got := describe(<-w.result); got != "BOOKMARK rv=12" {
		t.Fatalf("got %s", got)
	}

	plain := newWatcherUnderTest(10, passAll, true)
	plain.run(t, context.Background(), intervalFromEvents(nil), 3)
	plain.nonblockingAdd(bookmarkAt(3)) // at the watcher's RV and already "sent": dropped
	plain.nonblockingAdd(bookmarkAt(4))
	if got := describe(<-plain.result); got != "BOOKMARK rv=4" {
		t.Fatalf("ordinary watch: got %s", got)
	}
	if plain.Stop(); true {
		for ev := range plain.result {
			t.Fatalf("unexpected %s", describe(ev))
		}
	}
}

// TestCacheWatcherEndsOnContext: the watch context's end stops the watcher.
func TestCacheWatcherEndsOnContext(t *testing.T) {
	w := newWatcherUnderTest(1, passAll, false)
	ctx, cancel := context.WithCancel(context.Background())
	w.run(t, ctx, intervalFromEvents(nil), 0)
	cancel()
	if _, ok := <-w.result; ok {
		t.Fatal("event after cancel")
	}
	testutil.WaitFor(t, "forget", func() bool { return w.forgetCount() == 1 })
}

func TestAnnotateInitialEventsEnd(t *testing.T) {
	u := &unstructured.Unstructured{}
	if err := storage.AnnotateInitialEventsEndBookmark(u); err != nil || u.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("%v %v", err, u.GetAnnotations())
	}
}

// TestCacheWatcherProcessSeesCancellationUnderSteadyInput: a watcher whose input always holds events
// still notices that its context ended, before it delivers any more of them.
func TestCacheWatcherProcessSeesCancellationUnderSteadyInput(t *testing.T) {
	w := newWatcherUnderTest(10, passAll, false)
	for rv := uint64(1); rv <= 5; rv++ {
		w.input <- makeEvent(rv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.process(ctx, 0)
	}()
	select {
	case <-done:
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("process did not return after its context ended")
	}
	if n := len(w.result); n != 0 {
		t.Fatalf("%d events delivered after the context ended", n)
	}
}
