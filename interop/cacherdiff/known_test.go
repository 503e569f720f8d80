package cacherdiff

import (
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	k8sstorage "k8s.io/apiserver/pkg/storage"

	"github.com/listwatch/listwatch/interop/internal/cachepair"
)

// knownDeviations are the deviations of listwatch's cache from upstream's that are being fixed in
// cache/ (issue 13). While one is listed, the random requests steer clear of it, and its dedicated
// case in TestKnownDeviations is skipped with the reason; an entry goes when main has the fix.
var knownDeviations = map[string]string{
	// pkg/storage/cacher/delegator.go GetList with ListFromCacheSnapshot (beta, on in v0.37) answers
	// an exact list, and a legacy exact one (a resourceVersion and a limit), from the cache: for a
	// revision the cache has not reached it waits (watch_cache.go waitUntilFreshAndBlock) and answers
	// 504 with Retry-After 1; listwatch's sends them to etcd, whose etcd3 storage answers 504 at once
	// without Retry-After.
	"snapshot-lists": "issue 13 item 2: an exact or legacy exact list for a future resourceVersion is answered by etcd (504 without Retry-After) instead of the cache (a wait, then 504 with Retry-After 1)",
	// pkg/storage/cacher/cacher.go Watch registers a watcher under the namespace and name of the
	// request's context (request.NamespaceFrom, RequestInfo.Name) and startDispatching offers it
	// only that scope's events; listwatch's cache scopes only by the field selector, so a paused
	// namespace watch's input fills with other namespaces' events and the watch is closed.
	"dispatch-scope": "issue 13 item 1: a namespace or single-object watch is offered every namespace's events, so a paused reader is closed where upstream keeps it",
	// pkg/storage/cacher/watch_cache.go waitUntilFreshAndBlock waits its 3 s blockTimeout whatever
	// the request's deadline and ends a watch-list for a future revision with ERROR 504
	// TooLargeResourceVersion; listwatch's ends at the deadline with ERROR 500.
	"freshness-wait": "issue 13 item 3: a watch-list for a future resourceVersion ends at the request's deadline with ERROR 500 instead of waiting 3 s for ERROR 504",
}

func known(name string) bool {
	_, ok := knownDeviations[name]
	return ok
}

// TestKnownDeviations plays, for each known deviation, the requests that show it, against both
// caches, judged and compared as in TestCacherDifferential. While the deviation is listed in
// knownDeviations the case is skipped with its name; it must pass once the fix is in main.
func TestKnownDeviations(t *testing.T) {
	cases := []struct {
		name string
		play func(r *runner)
	}{
		// A watch-list for a revision 5 ahead, with a 1 s deadline: upstream waits its 3 s and
		// ends the watch with ERROR 504 TooLargeResourceVersion.
		{"freshness-wait", func(r *runner) {
			t := true
			p := r.startPair(cachepair.ResourcePrefix, true, everything(true), "everything",
				strconv.FormatInt(r.h.Rev+5, 10), &t, time.Second)
			r.finish(p)
		}},
		// Exact and legacy exact lists for the next revision: upstream waits for the cache and
		// answers 504 with Retry-After 1.
		{"snapshot-lists", func(r *runner) {
			next := strconv.FormatInt(r.h.Rev+1, 10)
			r.compareList("exact list of the next revision", cachepair.ResourcePrefix, k8sstorage.ListOptions{
				ResourceVersion: next, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Recursive: true, Predicate: everything(false)}, 0)
			limited := everything(false)
			limited.Limit = 1
			r.compareList("legacy exact list of the next revision", cachepair.ResourcePrefix, k8sstorage.ListOptions{
				ResourceVersion: next, Recursive: true, Predicate: limited}, 0)
		}},
		// A paused watch of namespace b, offered 12 events of b (which fill its result buffer), then
		// 15 writes in namespace a: upstream offers it none of those and keeps it. An unpaused watch
		// of everything shows when the caches have dispatched every write.
		{"dispatch-scope", func(r *runner) {
			from := strconv.FormatInt(r.h.Rev, 10)
			p := r.startPair(cachepair.ResourcePrefix+"b/", true, everything(false), "everything", from, nil, 0)
			all := r.startPair(cachepair.ResourcePrefix, true, everything(false), "everything", from, nil, 0)
			r.pausePair(p, r.stats.writes+27)
			for i := range 12 {
				r.writePod(r.caches[i%2], "b", podNames[i%len(podNames)], false)
				r.stats.writes++
			}
			for i := range 15 {
				r.writePod(r.caches[i%2], "a", podNames[i%len(podNames)], false)
				r.stats.writes++
			}
			r.syncPair(all)
			r.unpauseDue()
			r.finish(p)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if reason, ok := knownDeviations[c.name]; ok {
				t.Skip("known deviation, being fixed in cache/: " + reason)
			}
			r := newRunner(t, 1)
			r.sync()
			c.play(r)
			r.finishAll()
		})
	}
}

// everything is the predicate that selects every pod, with the pods' attributes.
func everything(bookmarks bool) k8sstorage.SelectionPredicate {
	return k8sstorage.SelectionPredicate{Label: labels.Everything(), Field: fields.Everything(), GetAttrs: cachepair.PodAttrs, AllowWatchBookmarks: bookmarks}
}
