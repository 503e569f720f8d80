package kubemodel

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
)

// Selection is what a watch covers: the objects under a key (a prefix when Recursive, on a "/"
// boundary) that its predicate matches.
type Selection struct {
	Key       string
	Recursive bool
	Predicate storage.Predicate
}

// Covers reports whether the watch's key range holds key, whatever the predicate says: that is what
// the etcd watch under the storage sees.
func (s Selection) Covers(key string) bool {
	if !s.Recursive {
		return key == s.Key
	}
	prefix := s.Key
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return strings.HasPrefix(key, prefix)
}

// Selects reports whether the watch delivers the state o (nil: absent, never selected).
func (s Selection) Selects(o *Object) bool {
	return o != nil && s.Covers(o.Key) && s.Predicate.MatchesObjectAttributes(o.Labels, o.Fields)
}

func (s Selection) String() string {
	var b strings.Builder
	b.WriteString(s.Key)
	if s.Recursive {
		b.WriteString(" (recursive)")
	}
	if s.Predicate.Label != nil && !s.Predicate.Label.Empty() {
		fmt.Fprintf(&b, " labels=%q", s.Predicate.Label.String())
	}
	if s.Predicate.Field != nil && !s.Predicate.Field.Empty() {
		fmt.Fprintf(&b, " fields=%q", s.Predicate.Field.String())
	}
	return b.String()
}

// Expected is one event a watch must deliver: Object's state carrying resourceVersion Rev.
type Expected struct {
	Type   watch.EventType
	Rev    int64
	Object *Object
}

func (x Expected) String() string {
	return fmt.Sprintf("%s %s at %d", x.Type, x.Object.Key, x.Rev)
}

// Transition is what a watch of sel delivers for a change of one object from prev to cur (nil:
// absent): MODIFIED while it stays selected, ADDED when it enters the selection (a creation
// included), DELETED with the previous state when it leaves it (a deletion included); nothing
// (false) when it is selected neither before nor after.
//
// Mirrors pkg/storage/etcd3/watcher.go watchChan.transform and pkg/storage/cacher/cache_watcher.go
// cacheWatcher.convertToWatchEvent.
func Transition(sel Selection, prev, cur *Object) (watch.EventType, *Object, bool) {
	now, was := sel.Selects(cur), sel.Selects(prev)
	switch {
	case now && was:
		return watch.Modified, cur, true
	case now:
		return watch.Added, cur, true
	case was:
		return watch.Deleted, prev, true
	}
	return "", nil, false
}

// Initial is the initial replay of a watch of sel from a snapshot at rev: every selected object
// present at rev, in key order, as ADDED at its own revision.
func (h *History) Initial(sel Selection, rev int64) []Expected {
	var out []Expected
	for _, o := range h.StateAt(rev) {
		if sel.Selects(o) {
			out = append(out, Expected{Type: watch.Added, Rev: o.Rev, Object: o})
		}
	}
	return out
}

// Changes are the events a watch of sel delivers after revision after: one per write that changes
// what it selects, by Transition, at the write's revision, in revision (then write) order.
func (h *History) Changes(sel Selection, after int64) []Expected {
	var out []Expected
	for _, w := range h.Writes {
		if w.Rev <= after {
			continue
		}
		if typ, o, ok := Transition(sel, w.Prev, w.Cur); ok {
			out = append(out, Expected{Type: typ, Rev: w.Rev, Object: o})
		}
	}
	return out
}
