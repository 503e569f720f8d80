package cache

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
)

// queueBatch writes pods while the dispatcher is held up on the registry lock, so that it takes the
// events queued meanwhile together: of the n events, one batch holds at least half. Either the
// dispatcher took the first events before the rest arrived and waits with them for the lock (the
// rest queue in incoming and make the next batch), or it woke only once all had arrived and holds
// them all; which of the two depends on the scheduler, and both make a batch of at least n/2.
func queueBatch(e *env, pods []*unstructured.Unstructured) []*unstructured.Unstructured {
	e.t.Helper()
	if len(pods) > incomingBufferSize {
		e.t.Fatalf("%d pods: incoming holds %d", len(pods), incomingBufferSize)
	}
	e.cacher.mu.Lock()
	created := make([]*unstructured.Unstructured, 0, len(pods))
	for _, p := range pods {
		created = append(created, e.create(p))
	}
	e.waitForCache(e.lastRV)
	e.cacher.mu.Unlock()
	return created
}

// readInBackground reads n events from w in its own goroutine (readers that run while the dispatcher works, as
// clients do); the returned function waits for them.
func readInBackground(t *testing.T, w watch.Interface, n int) func() []string {
	var got []string
	done := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(done)
		for len(got) < n {
			ev, ok := <-w.ResultChan()
			if !ok {
				got = append(got, "closed")
				return
			}
			got = append(got, describe(ev))
		}
	}()
	return func() []string {
		once.Do(func() {
			select {
			case <-done:
			case <-time.After(testutil.WaitTimeout):
				t.Fatalf("still waiting for %d events after %v", n, testutil.WaitTimeout)
			}
		})
		return got
	}
}

// TestBatchDeliversEachWatcherItsEvents: events taken from incoming together (a batch, dispatched
// watcher by watcher) reach every watcher its scope or trigger value selects, each exactly its events
// in resourceVersion order, including watchers whose input (10 events) is smaller than the batch and
// fills up part way: with budget available the dispatcher waits for them and nobody is closed.
// Failure mode: a watcher that never reads is still closed (TestBatchClosesSlowWatcherAfterPrefix).
func TestBatchDeliversEachWatcherItsEvents(t *testing.T) {
	e := newEnv(t, withFakeClock, withNodeNameTrigger)
	e.clock.Step(10 * time.Second)
	rv := strconv.FormatUint(e.syncCache(), 10)
	open := func(field string) watch.Interface {
		w, err := e.cacher.Watch(e.ctx, "/pods/", storage.ListOptions{ResourceVersion: rv, Predicate: storagetest.PodPredicate("", field), Recursive: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		return w
	}
	var pods []*unstructured.Unstructured
	for i := range 30 {
		ns, node := []string{"a", "b"}[i%2], []string{"n1", "n2", "n3"}[i%3]
		pods = append(pods, storagetest.Pod(ns, fmt.Sprintf("p%02d", i), storagetest.Node(node)))
	}
	type watcherCase struct {
		field string
		wants func(p *unstructured.Unstructured) bool
	}
	cases := []watcherCase{
		{"", func(*unstructured.Unstructured) bool { return true }},
		{"metadata.namespace=a", func(p *unstructured.Unstructured) bool { return p.GetNamespace() == "a" }},
		{"metadata.namespace=b,metadata.name=p07", func(p *unstructured.Unstructured) bool { return p.GetName() == "p07" }},
		{"spec.nodeName=n1", func(p *unstructured.Unstructured) bool { return nodeNameOf(p) == "n1" }},
		{"spec.nodeName=n2", func(p *unstructured.Unstructured) bool { return nodeNameOf(p) == "n2" }},
	}
	var waits []func() []string
	for _, c := range cases {
		n := 0
		for _, p := range pods {
			if c.wants(p) {
				n++
			}
		}
		waits = append(waits, readInBackground(t, open(c.field), n))
	}
	created := queueBatch(e, pods)
	for i, c := range cases {
		var want []string
		for _, p := range created {
			if c.wants(p) {
				want = append(want, ev(watch.Added, p))
			}
		}
		if got := waits[i](); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("watcher %q:\n got: %s\nwant: %s", c.field, strings.Join(got, "\n      "), strings.Join(want, "\n      "))
		}
	}
}

// TestBatchClosesSlowWatcherAfterPrefix: a watcher that never reads, offered a batch larger than it
// can hold, is closed once the budget is spent, without an ERROR after a gap-free prefix of the batch;
// a re-watch from the last resourceVersion it delivered gets exactly the rest.
func TestBatchClosesSlowWatcherAfterPrefix(t *testing.T) {
	e := newEnv(t, withFakeClock)
	rv := strconv.FormatUint(e.syncCache(), 10)
	slow := e.watch("/pods/", storage.ListOptions{ResourceVersion: rv, Predicate: storage.Everything, Recursive: true})
	var pods []*unstructured.Unstructured
	for i := range 40 {
		pods = append(pods, storagetest.Pod("ns", fmt.Sprintf("p%02d", i)))
	}
	created := queueBatch(e, pods)
	// The clock moves until the budget the dispatcher waits with is spent.
	e.eventually("the dispatcher gives up on the slow watcher", func() bool { return e.cacher.lastProcessedRV.Load() >= e.lastRV })
	expectClosedPrefixThenResume(t, e, slow.next, rv, created)
}

// TestBacklogCountsQueuedEvents: Backlog is how many events wait in a watcher's input, not yet in
// its result channel: a consumer that never reads has a full input; one that read everything none.
func TestBacklogCountsQueuedEvents(t *testing.T) {
	e := newEnv(t, withFakeClock)
	slow, created := fillSlowWatcher(t, e, storage.ListOptions{Predicate: storage.Everything})
	cw := slow.w.(*cacheWatcher)
	if got := cw.Backlog(); got != cap(cw.input) {
		t.Fatalf("a full watcher's backlog %d, want %d", got, cap(cw.input))
	}
	var want []string
	for _, c := range created {
		want = append(want, ev(watch.Added, c))
	}
	slow.expect(want...)
	e.waitFor("the input drained", func() bool { return cw.Backlog() == 0 })
}
