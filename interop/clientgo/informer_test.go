package clientgo

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/httpwatch/watchclient"
)

// modes are the two ways a reflector fills its store.
var modes = []struct {
	name      string
	watchList bool
}{
	{"list-then-watch", false},
	{"watch-list", true},
}

func isWatchList(r *request) bool {
	return r.isWatch() && r.query.Get("sendInitialEvents") == "true"
}

func isPlainWatch(r *request) bool { return r.isWatch() && !isWatchList(r) }

func isPlainList(r *request) bool { return r.isList() }

// isRelist matches the requests a reflector fills its store with: a plain list or a watch-list.
func isRelist(r *request) bool { return isPlainList(r) || isWatchList(r) }

// TestDynamicInformer: a dynamic informer over all namespaces fills its store (by list-then-watch,
// or by a watch-list stream), follows creates, updates and deletes, and after its watch ends
// cleanly resumes from its last resourceVersion without relisting.
func TestDynamicInformer(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			setWatchListClient(t, mode.watchList)
			e := newEnv(t, envOptions{})
			var lastWidgetRV string
			for _, ns := range []string{"ns1", "ns2"} {
				for _, n := range []string{"a", "b", "c"} {
					lastWidgetRV = e.create(widgetsGVR, ns, n).GetResourceVersion()
				}
			}
			// Another resource's write: etcd's revision is now past every widget's.
			etcdRV := e.create(configMapsGVR, "ns1", "other").GetResourceVersion()

			inf := e.startInformer(widgetsGVR, "")
			e.waitConverged(inf)
			syncedRV := inf.inf.LastSyncResourceVersion()
			reqs := e.log.requests(informerAgent, nil)
			if mode.watchList {
				first := checkWatchListStart(t, reqs, "/apis/example.com/v1/widgets")
				// The consistent stream waits until the cache has seen etcd's current revision, and
				// its closing bookmark carries the cache's resourceVersion, not the newest widget's.
				checkInitialEvents(t, first, []string{"ns1/a", "ns1/b", "ns1/c", "ns2/a", "ns2/b", "ns2/c"}, etcdRV)
				if syncedRV != etcdRV {
					t.Errorf("informer synced at rv %s, want the bookmark's %s", syncedRV, etcdRV)
				}
			} else {
				listRV := checkListThenWatch(t, reqs, "/apis/example.com/v1/widgets")
				// RV 0 lists from the cache as it is (it may not have applied the last writes yet);
				// the watch from there brings the rest. The cache's resourceVersion is the last widget
				// event it applied: no progress notification told it about the ConfigMap.
				if rvNumber(t, listRV) > rvNumber(t, lastWidgetRV) || syncedRV != lastWidgetRV {
					t.Errorf("list rv %s, informer synced at %s; want at most and exactly %s", listRV, syncedRV, lastWidgetRV)
				}
			}

			mark := e.log.mark()
			d := e.create(widgetsGVR, "ns1", "d")
			a := e.touch(widgetsGVR, "ns2", "a", "1")
			e.remove(widgetsGVR, "ns1", "b")
			e.waitConverged(inf)
			// The handler hears of a change after the store has it.
			inf.waitNotified(e, "ADD ns1/d "+d.GetResourceVersion(), "UPDATE ns2/a "+a.GetResourceVersion(), "DELETE ns1/b ")
			if relists := e.log.since(mark, informerAgent, isRelist); len(relists) > 0 {
				t.Errorf("the informer relisted while following events:%s", describe(relists))
			}

			// A clean end of the watch (as at its timeout) is resumed from the last resourceVersion:
			// the delete's, the newest revision.
			resumeRV := fmt.Sprint(e.st.Rev())
			inf.waitResourceVersion(e, resumeRV)
			mark = e.log.mark()
			if n, err := e.gate.cut(e.ctx()); err != nil || n != 1 {
				t.Fatalf("ending the informer's watch: ended %d (%v), want 1", n, err)
			}
			var resumed *request
			e.waitFor("the informer to watch again", func() bool {
				w := e.log.since(mark, informerAgent, isPlainWatch)
				if len(w) > 0 {
					resumed = w[0]
				}
				return resumed != nil
			})
			if got := resumed.query.Get("resourceVersion"); got != resumeRV {
				t.Errorf("resumed watch from rv %q, want the last synced %s: %s", got, resumeRV, resumed)
			}
			if resumed.query.Get("allowWatchBookmarks") != "true" {
				t.Errorf("resumed watch without bookmarks: %s", resumed)
			}
			e.touch(widgetsGVR, "ns1", "a", "2")
			e.waitConverged(inf)
			if relists := e.log.since(mark, informerAgent, isRelist); len(relists) > 0 {
				t.Errorf("the informer relisted after a clean watch end:%s", describe(relists))
			}
		})
	}
}

// TestFilteredInformer: an informer with a label selector sees an object that stops matching as
// deleted and one that starts matching as added, and its requests carry the selector.
func TestFilteredInformer(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			setWatchListClient(t, mode.watchList)
			e := newEnv(t, envOptions{})
			keep, drop := map[string]string{"app": "keep"}, map[string]string{"app": "drop"}
			e.createLabeled(configMapsGVR, "sel", "keep1", keep)
			e.createLabeled(configMapsGVR, "sel", "keep2", keep)
			e.createLabeled(configMapsGVR, "sel", "drop1", drop)
			inf := e.startFilteredInformer(configMapsGVR, "sel", "app=keep")
			e.waitConverged(inf)
			if got := inf.state().sortedKeys(); len(got) != 2 || got[0] != "sel/keep1" || got[1] != "sel/keep2" {
				t.Errorf("informer holds %v, want [sel/keep1 sel/keep2]", got)
			}

			e.setLabel(configMapsGVR, "sel", "keep1", "app", "drop")
			joined := e.setLabel(configMapsGVR, "sel", "drop1", "app", "keep")
			e.waitConverged(inf)
			// Leaving the selector is a delete, entering it an add.
			inf.waitNotified(e, "DELETE sel/keep1 ", "ADD sel/drop1 "+joined.GetResourceVersion())
			for _, r := range e.log.requests(informerAgent, nil) {
				if got := r.query.Get("labelSelector"); got != "app=keep" {
					t.Errorf("informer request without its selector: %s", r)
				}
			}
		})
	}
}

// checkWatchListStart checks that the informer filled its store with one watch-list request of
// path and sent no plain list, and returns that request.
func checkWatchListStart(t *testing.T, reqs []*request, path string) *request {
	t.Helper()
	if lists := filter(reqs, isPlainList); len(lists) > 0 {
		t.Errorf("the informer sent plain lists with WatchListClient on:%s", describe(lists))
	}
	if len(reqs) == 0 {
		t.Fatal("the informer sent no request")
	}
	first := reqs[0]
	want := map[string]string{
		"watch":                "true",
		"sendInitialEvents":    "true",
		"resourceVersionMatch": "NotOlderThan",
		"allowWatchBookmarks":  "true",
		"resourceVersion":      "",
	}
	for k, v := range want {
		if got := first.query.Get(k); got != v {
			t.Errorf("watch-list request has %s=%q, want %q: %s", k, got, v, first)
		}
	}
	if first.path != path || first.status() != http.StatusOK {
		t.Errorf("watch-list request %s, want GET %s -> 200", first, path)
	}
	// Go's transport asks for gzip, and the apiserver compresses watch-list streams.
	if enc := first.encoding(); enc != "gzip" {
		t.Errorf("watch-list response Content-Encoding %q, want gzip", enc)
	}
	return first
}

// checkInitialEvents checks a watch-list stream: ADDED for each object in key order, then the
// BOOKMARK that ends the initial events, at bookmarkRV.
func checkInitialEvents(t *testing.T, r *request, keys []string, bookmarkRV string) {
	t.Helper()
	frames, err := r.frames()
	if err != nil {
		t.Fatalf("watch-list frames: %v", err)
	}
	if len(frames) < len(keys)+1 {
		t.Fatalf("watch-list stream has %d frames, want at least %d: %s", len(frames), len(keys)+1, frameSummary(t, frames))
	}
	for i, k := range keys {
		_, m := frameMeta(t, frames[i])
		if frames[i].Type != watch.Added || m.Namespace+"/"+m.Name != k {
			t.Errorf("initial event %d is %s %s/%s, want ADDED %s", i, frames[i].Type, m.Namespace, m.Name, k)
		}
	}
	b := frames[len(keys)]
	tm, m := frameMeta(t, b)
	if b.Type != watch.Bookmark || m.Annotations[metav1.InitialEventsAnnotationKey] != "true" || m.ResourceVersion != bookmarkRV {
		t.Errorf("frame after the initial events: %s %s, want the initial-events-end BOOKMARK at rv %s", b.Type, b.Object, bookmarkRV)
	}
	if tm.Kind == "" || tm.APIVersion == "" {
		t.Errorf("bookmark object without kind or apiVersion: %s", b.Object)
	}
}

// checkListThenWatch checks that the informer listed path with resourceVersion=0 and then watched
// from the list's resourceVersion with bookmarks; it returns that resourceVersion.
func checkListThenWatch(t *testing.T, reqs []*request, path string) string {
	t.Helper()
	if len(reqs) < 2 {
		t.Fatalf("the informer sent %d requests, want a list and a watch:%s", len(reqs), describe(reqs))
	}
	list, w := reqs[0], reqs[1]
	if !list.isList() || list.path != path || list.query.Get("resourceVersion") != "0" || list.status() != http.StatusOK {
		t.Errorf("first informer request %s, want a list of %s with resourceVersion=0", list, path)
	}
	if wl := filter(reqs, isWatchList); len(wl) > 0 {
		t.Errorf("watch-list requests with WatchListClient off:%s", describe(wl))
	}
	listRV := list.listResourceVersion(t)
	if !isPlainWatch(w) || w.path != path || w.query.Get("resourceVersion") != listRV || w.query.Get("allowWatchBookmarks") != "true" ||
		w.query.Get("timeoutSeconds") == "" {
		t.Errorf("second informer request %s, want a watch of %s from the list's rv %s with bookmarks and a timeout", w, path, listRV)
	}
	return listRV
}

// TestInformerBookmarks: periodic bookmarks reach the reflector. Writes to another resource move
// etcd's revision; progress notifications carry it to the watch cache; the next bookmark moves the
// informer's resourceVersion there although none of its objects changed, and a watch that then
// ends is resumed from the bookmark's resourceVersion.
func TestInformerBookmarks(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			setWatchListClient(t, mode.watchList)
			e := newEnv(t, envOptions{fakeCacheClock: true, progressNotify: 100 * time.Millisecond})
			for _, n := range []string{"a", "b", "c"} {
				e.create(configMapsGVR, "bm", n)
			}
			inf := e.startInformer(configMapsGVR, "bm")
			e.waitConverged(inf)
			inf.waitNotified(e, "ADD bm/a ", "ADD bm/b ", "ADD bm/c ")
			events := len(inf.handler.snapshot())

			var etcdRV string
			for _, n := range []string{"p1", "p2", "p3"} {
				etcdRV = e.create(podsGVR, "bm", n).GetResourceVersion()
			}
			// A list not older than etcd's revision returns once the ConfigMap cache got there.
			l, err := e.direct.Resource(configMapsGVR).Namespace("bm").List(e.ctx(),
				metav1.ListOptions{ResourceVersion: etcdRV, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
			if err != nil {
				t.Fatalf("list not older than %s: %v", etcdRV, err)
			}
			if l.GetResourceVersion() != etcdRV {
				t.Fatalf("cache at rv %s, want %s", l.GetResourceVersion(), etcdRV)
			}
			watches := e.log.requests(informerAgent, func(r *request) bool { return r.isWatch() && !r.finished() })
			if len(watches) != 1 {
				t.Fatalf("the informer has %d open watches, want 1:%s", len(watches), describe(watches))
			}

			// Bookmarks are due a minute after the last one.
			e.cacheClock.Step(time.Minute + bookmarkTick)
			inf.waitResourceVersion(e, etcdRV)
			frames, err := watches[0].frames()
			if err != nil {
				t.Fatal(err)
			}
			var bookmark *watchclient.Frame
			for i := range frames {
				if _, m := frameMeta(t, frames[i]); m.ResourceVersion == etcdRV {
					bookmark = &frames[i]
					break
				}
			}
			if bookmark == nil || bookmark.Type != watch.Bookmark {
				t.Fatalf("no BOOKMARK at rv %s in the informer's watch: %s", etcdRV, frameSummary(t, frames))
			}
			if tm, m := frameMeta(t, *bookmark); tm.APIVersion != "v1" || tm.Kind != "ConfigMap" || m.Name != "" {
				t.Errorf("bookmark object %s, want an empty v1 ConfigMap", bookmark.Object)
			}
			if got := inf.handler.snapshot(); len(got) != events {
				t.Errorf("the bookmark reached the event handler: %v", got[events:])
			}

			mark := e.log.mark()
			if n, err := e.gate.cut(e.ctx()); err != nil || n != 1 {
				t.Fatalf("ending the informer's watch: ended %d (%v), want 1", n, err)
			}
			var resumed *request
			e.waitFor("the informer to watch again", func() bool {
				if w := e.log.since(mark, informerAgent, isPlainWatch); len(w) > 0 {
					resumed = w[0]
				}
				return resumed != nil
			})
			if got := resumed.query.Get("resourceVersion"); got != etcdRV {
				t.Errorf("resumed from rv %q, want the bookmark's %s", got, etcdRV)
			}
			if relists := e.log.since(mark, informerAgent, isRelist); len(relists) > 0 {
				t.Errorf("the informer relisted:%s", describe(relists))
			}
		})
	}
}

// TestInformerRelistsAfterExpiredWatch forces a 410: the informer's watch is ended and its resume
// held at the gate while the server moves on, until the resume's resourceVersion is one the server
// no longer has (the watch cache's history window passed it, or, without a watch cache, etcd
// compacted it). The resumed watch then gets ERROR 410 Expired, the reflector relists, and its
// store converges to the server's state.
func TestInformerRelistsAfterExpiredWatch(t *testing.T) {
	// More than the history's smallest capacity (100): enough to evict everything written before.
	const bulk = 150
	for _, backend := range []struct {
		name string
		opts envOptions
	}{
		{"watch cache history", envOptions{fakeCacheClock: true}},
		{"etcd compaction", envOptions{uncached: true}},
	} {
		for _, mode := range modes {
			t.Run(backend.name+"/"+mode.name, func(t *testing.T) {
				setWatchListClient(t, mode.watchList)
				e := newEnv(t, backend.opts)
				for i := range 5 {
					e.create(configMapsGVR, "relist", fmt.Sprintf("c%d", i))
				}
				inf := e.startInformer(configMapsGVR, "relist")
				e.waitConverged(inf)
				// An event on the watch, so that its end is not taken for a broken watch.
				resumeRV := e.touch(configMapsGVR, "relist", "c0", "1").GetResourceVersion()
				e.waitConverged(inf)
				inf.waitResourceVersion(e, resumeRV)

				e.gate.hold()
				if n, err := e.gate.cut(e.ctx()); err != nil || n != 1 {
					t.Fatalf("ending the informer's watch: ended %d (%v), want 1", n, err)
				}
				var parked []string
				e.waitFor("the informer's resumed watch at the gate", func() bool {
					parked = parked[:0]
					for _, q := range e.gate.parkedQueries() {
						parked = append(parked, q.Encode())
					}
					return len(parked) > 0
				})
				if len(parked) != 1 || !strings.Contains(parked[0], "resourceVersion="+resumeRV+"&") {
					t.Fatalf("held watches %v, want one resuming from rv %s", parked, resumeRV)
				}

				mark := e.log.mark()
				// Events the held watch needs, then, once they are older than the cache's history
				// window, enough newer ones to push them out of the buffer (the buffer only evicts
				// an event that is older than the window, else it grows).
				for i := range 20 {
					e.create(configMapsGVR, "relist", fmt.Sprintf("missed-%02d", i))
				}
				if e.cacheClock != nil {
					e.cacheClock.Step(2 * cache.DefaultEventFreshDuration)
				}
				for i := range bulk {
					e.create(configMapsGVR, "relist", fmt.Sprintf("bulk-%03d", i))
				}
				e.remove(configMapsGVR, "relist", "c1")
				rev := e.st.Rev()
				if err := e.storage("configmaps").Compact(e.ctx(), rev); err != nil {
					t.Fatalf("compacting at %d: %v", rev, err)
				}
				e.gate.release()

				e.waitConverged(inf)
				// The held watch is in the log from before the mark: it arrived, then waited.
				resumed := e.log.requests(informerAgent, func(r *request) bool {
					return isPlainWatch(r) && r.query.Get("resourceVersion") == resumeRV
				})
				if len(resumed) != 1 {
					t.Fatalf("%d watches from rv %s, want 1:%s", len(resumed), resumeRV, describe(resumed))
				}
				expired := resumed[0]
				e.waitFor("the resumed watch to end", expired.finished)
				frames, err := expired.frames()
				if err != nil {
					t.Fatal(err)
				}
				if len(frames) != 1 || frames[0].Type != watch.Error {
					t.Fatalf("resumed watch from rv %s got %s, want one ERROR", resumeRV, frameSummary(t, frames))
				}
				st, err := frames[0].Status()
				if err != nil {
					t.Fatal(err)
				}
				if st.Code != http.StatusGone || st.Reason != metav1.StatusReasonExpired {
					t.Errorf("resumed watch ended with %d %s %q, want 410 Expired", st.Code, st.Reason, st.Message)
				}
				t.Logf("resumed watch from rv %s: ERROR %d %s %q", resumeRV, st.Code, st.Reason, st.Message)

				later := e.log.since(mark, informerAgent, nil)
				t.Logf("informer requests after the release:%s", describe(later))
				if mode.watchList {
					if lists := filter(later, isPlainList); len(lists) > 0 {
						t.Errorf("plain lists with WatchListClient on:%s", describe(lists))
					}
					if len(filter(later, isWatchList)) == 0 {
						t.Errorf("no watch-list relist after the 410:%s", describe(later))
					}
				} else if len(filter(later, isPlainList)) == 0 {
					t.Errorf("no relist after the 410:%s", describe(later))
				}
				if got := rvNumber(t, inf.inf.LastSyncResourceVersion()); got < rev {
					t.Errorf("informer at rv %d after the relist, want at least %d", got, rev)
				}
			})
		}
	}
}

func filter(reqs []*request, keep func(*request) bool) []*request {
	var out []*request
	for _, r := range reqs {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

func frameMeta(t *testing.T, f watchclient.Frame) (metav1.TypeMeta, metav1.ObjectMeta) {
	t.Helper()
	tm, m, err := f.Meta()
	if err != nil {
		t.Fatal(err)
	}
	return tm, m
}

// frameSummary is "TYPE ns/name rv" for each frame.
func frameSummary(t *testing.T, frames []watchclient.Frame) string {
	t.Helper()
	var b strings.Builder
	for _, f := range frames {
		_, m := frameMeta(t, f)
		fmt.Fprintf(&b, "\n  %s %s/%s %s", f.Type, m.Namespace, m.Name, m.ResourceVersion)
		if f.Type == watch.Error {
			fmt.Fprintf(&b, " %s", f.Object)
		}
	}
	return b.String()
}
