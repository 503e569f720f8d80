package storagetest

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
)

// The cases of this file port the upstream tests of how a watch delivers under load and over time:
// what is still delivered after Stop, readers not held back by watchers that never read, and the
// watch cache's own bookmarks. Upstream waits real time in the last two (a 3 s watch deadline), and
// so do they (Slow).

// bookmarkTimeout is the deadline upstream gives the watches of its bookmark tests.
const bookmarkTimeout = 3 * time.Second

// bookmarkGrace is how long after the deadline the bookmark cases keep reading: the watch cache
// sends its bookmark up to 1.25 s after it is due (2 s before the deadline), later on a loaded machine.
const bookmarkGrace = time.Second

// deadlineCtx reports a deadline without expiring at it: the case stops its watch itself at the
// deadline, so that the end of the watch is a Stop, the same for every storage, not a deadline error.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// waitFor polls cond until it holds, failing the case after the env's timeout.
func (h *H) waitFor(what string, cond func() bool) {
	deadline := time.Now().Add(h.env.Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			h.Fail("timed out after %v waiting until %s", h.env.Timeout, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// nextBefore returns the next event, or timedOut once deadline passes with none ready.
func (w *W) nextBefore(deadline time.Time) (ev apiwatch.Event, ok, timedOut bool) {
	select {
	case ev, ok = <-w.w.ResultChan():
		return ev, ok, false
	default:
	}
	wait := time.Until(deadline)
	if wait <= 0 {
		return apiwatch.Event{}, false, true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case ev, ok = <-w.w.ResultChan():
		return ev, ok, false
	case <-t.C:
		return apiwatch.Event{}, false, true
	case <-w.h.ctx.Done():
		w.h.Fail("%s: %v", w.name, w.h.ctx.Err())
	}
	return apiwatch.Event{}, false, false
}

// delayedWatchDeliveryCase ports RunTestDelayedWatchDelivery: with 21 events for a watch that read one,
// Stop still lets what the watch buffered be read, in order and without gaps; upstream expects at
// least the watch cache's result buffer (10) after the first event. Upstream pauses a second before
// Stop; the case waits until the watch holds every remaining event or a full result channel.
func delayedWatchDeliveryCase() Case {
	const total = 21
	const atLeast = 11
	want := []string{"create test-ns/foo rv=+1"}
	for i := range total {
		want = append(want, fmt.Sprintf("put test-ns/foo-%d rv=+%d", i, i+2))
	}
	want = append(want, "w ADDED test-ns/foo-0 rv=+2",
		fmt.Sprintf("w delivered at least %d events, in order and without gaps", atLeast))
	return Case{
		Name:     "DelayedWatchDelivery",
		Upstream: "RunTestDelayedWatchDelivery",
		Run: func(h *H) {
			out := h.Create(Pod("test-ns", "foo"))
			w := h.Watch("w", "/pods/test-ns", storage.ListOptions{ResourceVersion: out.GetResourceVersion(), Predicate: storage.Everything, Recursive: true})
			for i := range total {
				h.Put(Pod("test-ns", fmt.Sprintf("foo-%d", i)))
			}
			w.Next(1)
			results := w.w.ResultChan()
			h.waitFor("the watch buffers its events", func() bool { n := len(results); return n >= total-1 || n == cap(results) })
			w.w.Stop()
			watched := 1
			for {
				ev, ok := w.next()
				if !ok {
					break
				}
				u, isPod := plain(ev.Object).(*unstructured.Unstructured)
				if want := fmt.Sprintf("foo-%d", watched); ev.Type != apiwatch.Added || !isPod || u.GetName() != want {
					h.Logf("w event %d after Stop: got %s %s, want ADDED test-ns/%s", watched, ev.Type, h.describe(ev.Object), want)
					w.Stop()
					return
				}
				watched++
			}
			if watched < atLeast {
				h.Logf("w delivered %d events, fewer than %d", watched, atLeast)
				return
			}
			h.Logf("w delivered at least %d events, in order and without gaps", atLeast)
		},
		Want: want,
	}
}

// watcherTimeoutCase ports RunTestWatcherTimeout: 50 watches that never read must not hold back one
// that does (upstream also bounds the time it takes). When stopped, each idle watch has delivered a
// gap-free prefix of the creations: all of them (etcd) or those before a watch cache closed it for
// slowness.
func watcherTimeoutCase() Case {
	const idle, total = 50, 22
	want := []string{"l list rv=+0 items=[]"}
	for i := range total {
		want = append(want, fmt.Sprintf("create test-ns/foo-%d rv=+%d", i, i+1), fmt.Sprintf("reader ADDED test-ns/foo-%d rv=+%d", i, i+1))
	}
	want = append(want, fmt.Sprintf("%d idle watches delivered gap-free prefixes of the creations", idle))
	return Case{
		Name:     "WatcherTimeout",
		Upstream: "RunTestWatcherTimeout",
		Run: func(h *H) {
			l := h.List("l", "/pods/", storage.ListOptions{Predicate: storage.Everything, Recursive: true})
			opts := storage.ListOptions{ResourceVersion: l.GetResourceVersion(), Predicate: storage.Everything, Recursive: true}
			var idlers []*W
			for i := range idle {
				idlers = append(idlers, h.Watch(fmt.Sprintf("idle%02d", i), "/pods/test-ns", opts))
			}
			reader := h.Watch("reader", "/pods/test-ns", opts)
			var created []string
			for i := range total {
				created = append(created, At(h.Create(Pod("test-ns", fmt.Sprintf("foo-%d", i))), i+1))
				reader.Next(1)
			}
			for _, w := range idlers {
				w.w.Stop()
				i := 0
				for {
					ev, ok := w.next()
					if !ok {
						break
					}
					got := fmt.Sprintf("%s %s", ev.Type, h.describe(ev.Object))
					if i >= len(created) || got != "ADDED "+created[i] {
						h.Logf("%s event %d: got %s", w.name, i, got)
						return
					}
					i++
				}
			}
			h.Logf("%d idle watches delivered gap-free prefixes of the creations", idle)
		},
		Want: want,
	}
}

// dispatchBookmarkEventsCase ports RunTestWatchDispatchBookmarkEvents: a watch with a 3 s deadline and
// AllowWatchBookmarks, on a key nothing writes to, gets a BOOKMARK (2 s before the deadline) from the
// watch cache and none from etcd (upstream's expectedWatchBookmarks); one without AllowWatchBookmarks
// never does. A bookmark's revision depends on what the cache had processed when it was sent, so it
// is recorded without it when it lies between the watch's start and the last write.
func dispatchBookmarkEventsCase() Case {
	return Case{
		Name:     "WatchDispatchBookmarkEvents",
		Upstream: "RunTestWatchDispatchBookmarkEvents",
		Slow:     true,
		Run: func(h *H) {
			out := h.Create(Pod("test-ns", "foo"))
			deadline := time.Now().Add(bookmarkTimeout)
			var ws []*W
			for _, allow := range []bool{false, true} {
				p := storage.Everything
				p.AllowWatchBookmarks = allow
				ws = append(ws, h.watchCtx(deadlineCtx{Context: h.ctx, deadline: deadline}, h.storage,
					fmt.Sprintf("allowWatchBookmarks=%t", allow), Key("test-ns", "foo"),
					storage.ListOptions{ResourceVersion: out.GetResourceVersion(), Predicate: p}))
			}
			var last *unstructured.Unstructured
			for i := range ws {
				last = h.Create(Pod(fmt.Sprintf("other-ns-%d", i), "foo"))
			}
			// As upstream, only the first event counts: the cache may send a second bookmark when the
			// first came early in its one-second bucket.
			for _, w := range ws {
				w.bookmarksWithin = [2]int64{objectRV(out), objectRV(last)}
				ev, ok, timedOut := w.nextBefore(deadline.Add(bookmarkGrace))
				switch {
				case timedOut:
					w.h.Logf("%s no event", w.name)
				case !ok:
					w.logClosed()
				default:
					w.record(ev)
				}
				w.w.Stop()
				for ev, ok := w.next(); ok; ev, ok = w.next() {
					if ev.Type != apiwatch.Bookmark {
						w.record(ev)
					}
				}
				w.logClosed()
			}
		},
		Want: []string{
			"create test-ns/foo rv=+1",
			"create other-ns-0/foo rv=+2",
			"create other-ns-1/foo rv=+3",
			"allowWatchBookmarks=false no event",
			"allowWatchBookmarks=false closed",
			"allowWatchBookmarks=true no event",
			"allowWatchBookmarks=true closed",
		},
	}
}

// bookmarksWithCorrectResourceVersionCase ports RunTestOptionalWatchBookmarksWithCorrectResourceVersion:
// while 100 pods are created, a watch with AllowWatchBookmarks and a 3 s deadline delivers events with
// increasing revisions and bookmarks whose revisions never decrease; the watch cache sends at least
// one bookmark, etcd none (upstream runs the test against the cache only).
func bookmarksWithCorrectResourceVersionCase() Case {
	const total = 100
	return Case{
		Name:     "WatchBookmarksWithCorrectResourceVersion",
		Upstream: "RunTestOptionalWatchBookmarksWithCorrectResourceVersion",
		Slow:     true,
		Run: func(h *H) {
			l := h.List("l", "/pods/", storage.ListOptions{Predicate: storage.Everything, Recursive: true})
			deadline := time.Now().Add(bookmarkTimeout)
			p := storage.Everything
			p.AllowWatchBookmarks = true
			w := h.watchCtx(deadlineCtx{Context: h.ctx, deadline: deadline}, h.storage, "w", "/pods/test-ns",
				storage.ListOptions{ResourceVersion: l.GetResourceVersion(), Predicate: p, Recursive: true})
			var last int64
			events, bookmarks := 0, 0
			observe := func(ev apiwatch.Event) {
				rv := objectRV(ev.Object)
				switch {
				case ev.Type == apiwatch.Bookmark:
					bookmarks++
					if rv < last {
						h.Logf("w BOOKMARK at %s below %s", h.Rel(rv), h.Rel(last))
					}
				case ev.Type != apiwatch.Added:
					h.Logf("w unexpected %s %s", ev.Type, h.describe(ev.Object))
				default:
					events++
					if rv <= last {
						h.Logf("w ADDED at %s not above %s", h.Rel(rv), h.Rel(last))
					}
				}
				last = rv
			}
			for i := range total {
				out := &unstructured.Unstructured{}
				h.check(h.storage.Create(h.ctx, Key("test-ns", fmt.Sprintf("foo-%d", i)), Pod("test-ns", fmt.Sprintf("foo-%d", i)), out, 0), "create")
				for {
					ev, ok := w.next()
					if !ok {
						h.Fail("w closed before the creation of foo-%d", i)
					}
					observe(ev)
					if ev.Type == apiwatch.Added && objectRV(ev.Object) == objectRV(out) {
						break
					}
				}
			}
			h.Logf("created %d pods", total)
			for {
				ev, ok, timedOut := w.nextBefore(deadline.Add(bookmarkGrace))
				if timedOut {
					w.w.Stop()
					for ev, ok := w.next(); ok; ev, ok = w.next() {
						observe(ev)
					}
					break
				}
				if !ok {
					break
				}
				observe(ev)
			}
			h.Logf("w delivered %d ADDED events", events)
			if bookmarks == 0 {
				h.Logf("w sent no BOOKMARK")
			} else {
				h.Logf("w sent a BOOKMARK")
			}
		},
		Want: []string{
			"l list rv=+0 items=[]",
			fmt.Sprintf("created %d pods", total),
			fmt.Sprintf("w delivered %d ADDED events", total),
			"w sent no BOOKMARK",
		},
	}
}
