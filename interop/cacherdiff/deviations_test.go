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

// TestIssue13Deviations plays, for each deviation issue 13 found (a namespace watch offered every
// namespace's events, exact lists sent to etcd, a freshness wait cut short), the requests that show
// it against both caches, judged and compared as in TestCacherDifferential; each failed before the
// fix in cache/.
func TestIssue13Deviations(t *testing.T) {
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
			r.Finish(p)
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
			r.Pause(p, r.stats.writes+27)
			for i := range 12 {
				r.writePod(r.caches[i%2], "b", podNames[i%len(podNames)], false)
				r.stats.writes++
			}
			for i := range 15 {
				r.writePod(r.caches[i%2], "a", podNames[i%len(podNames)], false)
				r.stats.writes++
			}
			r.SyncPair(all)
			r.UnpauseDue(r.stats.writes)
			r.Finish(p)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRunner(t, 1)
			r.Sync()
			c.play(r)
			r.FinishAll()
		})
	}
}

// everything is the predicate that selects every pod, with the pods' attributes.
func everything(bookmarks bool) k8sstorage.SelectionPredicate {
	return k8sstorage.SelectionPredicate{Label: labels.Everything(), Field: fields.Everything(), GetAttrs: cachepair.PodAttrs, AllowWatchBookmarks: bookmarks}
}
