package kubemodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// ErrMismatch is the error of delivered events that no start revision the expectation allows
// explains.
var ErrMismatch = errors.New("kubemodel: the watch delivered what the model does not allow")

// ErrEvent is the error of a delivered event the model cannot read.
var ErrEvent = errors.New("kubemodel: unreadable watch event")

// Event is one delivered watch event, as Check reads it.
type Event struct {
	Type watch.EventType
	// RV is the resourceVersion the object carries (a BOOKMARK's too).
	RV int64
	// Object is the object in the form Object.Render gives; empty for BOOKMARK and ERROR.
	Object string
	// InitialEventsEnd says a BOOKMARK is annotated k8s.io/initial-events-end=true.
	InitialEventsEnd bool
	// Status is an ERROR's.
	Status *metav1.Status
	// Summary, when not empty, stands for Object in failure messages.
	Summary string
}

func (e Event) String() string {
	switch e.Type {
	case watch.Error:
		if e.Status == nil {
			return "ERROR without a Status"
		}
		return fmt.Sprintf("ERROR %d %s %q", e.Status.Code, e.Status.Reason, e.Status.Message)
	case watch.Bookmark:
		if e.InitialEventsEnd {
			return fmt.Sprintf("BOOKMARK rv=%d (initial-events-end)", e.RV)
		}
		return fmt.Sprintf("BOOKMARK rv=%d", e.RV)
	}
	if e.Summary != "" {
		return fmt.Sprintf("%s %s", e.Type, e.Summary)
	}
	return fmt.Sprintf("%s rv=%d %s", e.Type, e.RV, e.Object)
}

// Canonical is JSON data re-encoded with sorted keys and no insignificant space, so that two
// encodings of one object compare equal.
func Canonical(data []byte) (string, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return "", err
	}
	out, err := json.Marshal(v)
	return string(out), err
}

// EventOf reads a watch.Event of the storage.Interface: an ERROR's Status; a BOOKMARK's
// resourceVersion and annotation (BookmarkEvent); an object's resourceVersion and canonical JSON
// (the object inside a CachingObject), as FromUnstructured renders it.
func EventOf(ev watch.Event) (Event, error) {
	if ev.Type == watch.Error {
		st, ok := ev.Object.(*metav1.Status)
		if !ok {
			return Event{}, fmt.Errorf("%w: an ERROR carrying %T", ErrEvent, ev.Object)
		}
		return Event{Type: ev.Type, Status: st}, nil
	}
	obj := ev.Object
	if co, ok := obj.(runtime.CacheableObject); ok {
		obj = co.GetObject()
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return Event{}, fmt.Errorf("%w: a %s carrying %T: %v", ErrEvent, ev.Type, ev.Object, err)
	}
	if ev.Type == watch.Bookmark {
		return BookmarkEvent(m)
	}
	rv, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	if err != nil {
		return Event{}, fmt.Errorf("%w: a %s with resourceVersion %q", ErrEvent, ev.Type, m.GetResourceVersion())
	}
	var data []byte
	if u, ok := obj.(*unstructured.Unstructured); ok {
		data, err = json.Marshal(u.Object)
	} else {
		data, err = json.Marshal(obj)
	}
	if err != nil {
		return Event{}, fmt.Errorf("%w: a %s that does not encode: %v", ErrEvent, ev.Type, err)
	}
	return Event{Type: ev.Type, RV: rv, Object: string(data), Summary: Summary(m)}, nil
}

// BookmarkEvent reads a BOOKMARK's object: only a resourceVersion, and at most the
// initial-events-end annotation, as the storage and the cache make them.
//
// Mirrors what pkg/storage/etcd3/watcher.go transform and pkg/storage/cacher/cacher.go
// dispatchEvents put in a bookmark.
func BookmarkEvent(m metav1.Object) (Event, error) {
	if m.GetName() != "" || m.GetNamespace() != "" || len(m.GetLabels()) > 0 || m.GetUID() != "" {
		return Event{}, fmt.Errorf("%w: a BOOKMARK of the object %s/%s (labels %v, uid %q)", ErrEvent,
			m.GetNamespace(), m.GetName(), m.GetLabels(), m.GetUID())
	}
	rv, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	if err != nil {
		return Event{}, fmt.Errorf("%w: a BOOKMARK with resourceVersion %q", ErrEvent, m.GetResourceVersion())
	}
	e := Event{Type: watch.Bookmark, RV: rv}
	for k, v := range m.GetAnnotations() {
		if k != metav1.InitialEventsAnnotationKey || v != "true" {
			return Event{}, fmt.Errorf("%w: a BOOKMARK annotated %s=%q", ErrEvent, k, v)
		}
		e.InitialEventsEnd = true
	}
	return e, nil
}

// Summary is a short description of an object for failure messages: namespace/name, resourceVersion
// and labels.
func Summary(m metav1.Object) string {
	var b strings.Builder
	if ns := m.GetNamespace(); ns != "" {
		b.WriteString(ns + "/")
	}
	fmt.Fprintf(&b, "%s rv=%s", m.GetName(), m.GetResourceVersion())
	if l := m.GetLabels(); len(l) > 0 {
		b.WriteString(" labels=" + labels.Set(l).String())
	}
	return b.String()
}

// Verdict is what Check concluded about a watch's events.
type Verdict struct {
	// Start is the start revision that explains the events.
	Start int64
	// Complete says every event the watch owes by now (the initial-events-end BOOKMARK included)
	// was delivered, or the ERROR it owes.
	Complete bool
	// Error says the events end with an ERROR the expectation allows.
	Error bool
	// ResumeRV is the resourceVersion a client resumes from: the last event's after the initial
	// ones, the last BOOKMARK's, else the one the watch was asked from. HasResumeRV is false when
	// there is none.
	ResumeRV    int64
	HasResumeRV bool
	// Events counts ADDED, MODIFIED and DELETED events; Bookmarks BOOKMARKs.
	Events, Bookmarks int
}

// hi is the latest start the expectation allows by now.
func (h *History) hi(e Expectation) int64 {
	if e.Floating {
		return max(e.Hi, h.Rev)
	}
	return e.Hi
}

// Check judges a watch's events, all of them so far: for one start revision the expectation allows
// they must be a prefix of what the watch owes — the initial replay at the start (Initial), the
// initial-events-end BOOKMARK at the start, then every change after it (Changes) — with BOOKMARKs
// where allowed, never going back, never below the last delivered event and never at or past a
// pending one; or exactly the one ERROR the expectation allows. A start that explains everything
// owed wins over one that explains a prefix. Whether a watch may stop short is for the caller to
// judge from Verdict.Complete.
func (h *History) Check(e Expectation, got []Event) (Verdict, error) {
	if e.Refusal != nil {
		return h.checkRefusal(e, *e.Refusal, got)
	}
	if e.MayRefuse != nil && len(got) > 0 && got[0].Type == watch.Error && e.MayRefuse.Matches(got[0].Status) {
		return h.checkRefusal(e, *e.MayRefuse, got)
	}
	hi := h.hi(e)
	var reasons []string
	var found *Verdict
	for s := e.Lo; s <= hi; s++ {
		v, err := h.explain(e, got, s)
		if err == nil {
			if v.Complete {
				return v, nil
			}
			if found == nil {
				found = &v
			}
			continue
		}
		if s == e.Lo || s == hi || len(reasons) < 3 {
			reasons = append(reasons, fmt.Sprintf("from %d: %v", s, err))
		}
	}
	if found != nil {
		return *found, nil
	}
	if e.Lo > hi {
		reasons = append(reasons, fmt.Sprintf("no start revision in [%d,%d]", e.Lo, hi))
	}
	return Verdict{}, fmt.Errorf("%w: %s: no start revision explains the events:\n  %s\nevents:\n%swrites:\n%s",
		ErrMismatch, e, strings.Join(reasons, "\n  "), describeEvents(got), h)
}

func describeEvents(got []Event) string {
	var b strings.Builder
	for i, ev := range got {
		fmt.Fprintf(&b, "  %d: %s\n", i, ev)
	}
	return b.String()
}

func (h *History) checkRefusal(e Expectation, r Refusal, got []Event) (Verdict, error) {
	v := Verdict{Error: true}
	if len(got) == 0 {
		return v, nil
	}
	if len(got) != 1 || got[0].Type != watch.Error || !r.Matches(got[0].Status) {
		return v, fmt.Errorf("%w: %s: want exactly one %s, got\n%s", ErrMismatch, e, r, describeEvents(got))
	}
	v.Complete = true
	return v, nil
}

// same compares a delivered event with the expected one.
func same(got Event, want Expected) error {
	if got.Type != want.Type || got.RV != want.Rev {
		return fmt.Errorf("%s, want %s (%s)", got, want, want.Object.attributes())
	}
	if w := want.Object.Render(want.Rev); got.Object != w {
		return fmt.Errorf("%s, want %s with other content:\n    got  %s\n    want %s", got, want, got.Object, w)
	}
	return nil
}

// explain judges the events as those of a watch that started at s.
func (h *History) explain(e Expectation, got []Event, s int64) (Verdict, error) {
	v := Verdict{Start: s}
	i := 0
	if e.Replay {
		for _, x := range h.Initial(e.Selection, s) {
			if i == len(got) {
				return v, nil
			}
			if err := same(got[i], x); err != nil {
				return v, fmt.Errorf("event %d (initial): %v", i, err)
			}
			i++
			v.Events++
		}
	}
	if e.EndBookmark {
		if i == len(got) {
			return v, nil
		}
		if g := got[i]; g.Type != watch.Bookmark || !g.InitialEventsEnd || g.RV != s {
			return v, fmt.Errorf("event %d: %s, want the initial-events-end BOOKMARK at %d", i, g, s)
		}
		v.ResumeRV, v.HasResumeRV = s, true
		v.Bookmarks++
		i++
	} else if !e.Replay {
		if n, err := e.Request.revision(); err == nil && n > 0 {
			v.ResumeRV, v.HasResumeRV = n, true
		}
	}
	live := h.Changes(e.Selection, s)
	lastBookmark := int64(-1)
	delivered := 0
	for ; i < len(got); i++ {
		g := got[i]
		switch g.Type {
		case watch.Bookmark:
			b := g.RV
			switch {
			case !e.Bookmarks:
				return v, fmt.Errorf("event %d: %s on a watch that gets no bookmarks", i, g)
			case g.InitialEventsEnd:
				return v, fmt.Errorf("event %d: %s where no initial events end", i, g)
			case b < s || (b == s && !e.BookmarkAtStart):
				return v, fmt.Errorf("event %d: %s, not after the start %d", i, g, s)
			case b < lastBookmark:
				return v, fmt.Errorf("event %d: %s after a BOOKMARK at %d", i, g, lastBookmark)
			case delivered > 0 && b < live[delivered-1].Rev:
				return v, fmt.Errorf("event %d: %s below the delivered %s", i, g, live[delivered-1])
			case delivered < len(live) && b >= live[delivered].Rev:
				return v, fmt.Errorf("event %d: %s passes the pending %s", i, g, live[delivered])
			}
			lastBookmark = b
			v.ResumeRV, v.HasResumeRV = b, true
			v.Bookmarks++
		case watch.Added, watch.Modified, watch.Deleted:
			if delivered == len(live) {
				return v, fmt.Errorf("event %d: %s, where no further event is due", i, g)
			}
			x := live[delivered]
			if err := same(g, x); err != nil {
				return v, fmt.Errorf("event %d: %v", i, err)
			}
			delivered++
			v.Events++
			v.ResumeRV, v.HasResumeRV = x.Rev, true
		case watch.Error:
			last := s
			if v.HasResumeRV {
				last = v.ResumeRV
			}
			if i != len(got)-1 || !h.mayEndCompacted(e, last, g.Status) {
				return v, fmt.Errorf("event %d: unexpected %s after revision %d", i, g, last)
			}
			v.Error, v.Complete = true, true
			return v, nil
		default:
			return v, fmt.Errorf("event %d: unexpected %s", i, g)
		}
	}
	v.Complete = delivered == len(live)
	return v, nil
}

// mayEndCompacted says whether an etcd3 storage watch that delivered up to last may end with st
// because of the compaction at e.MayCompactAt: the 410 of an etcd watch whose next revision was
// compacted, or the 500 of a change at the compaction revision that lost its previous value, when
// nothing in the watch's key range came in between.
//
// Mirrors pkg/storage/etcd3/watcher.go startWatching (the etcd watch's error) and event.go
// parseEvent.
func (h *History) mayEndCompacted(e Expectation, last int64, st *metav1.Status) bool {
	c := e.MayCompactAt
	switch {
	case c == 0 || st == nil:
		return false
	case st.Code == 410:
		return compacted.Matches(st) && last+1 < c
	case st.Code == 500:
		w, ok := h.prevlessAt(e.Selection, c)
		if !ok || !prevless(w).Matches(st) || last >= c {
			return false
		}
		for _, x := range h.Writes {
			if x.Rev > last && x.Rev < c && e.Selection.Covers(x.Key) {
				return false
			}
		}
		return true
	}
	return false
}

// Owed is the fewest ADDED, MODIFIED and DELETED events the watch owes by now, over the starts the
// expectation allows (0 for a refusal): a watch that delivered fewer is not complete. It renders no
// object, for waits that poll.
func (h *History) Owed(e Expectation) int {
	if e.Refusal != nil {
		return 0
	}
	owed := -1
	for s := e.Lo; s <= h.hi(e); s++ {
		n := 0
		if e.Replay {
			for _, o := range h.StateAt(s) {
				if e.Selection.Selects(o) {
					n++
				}
			}
		}
		for _, w := range h.Writes {
			if w.Rev > s && (e.Selection.Selects(w.Cur) || e.Selection.Selects(w.Prev)) {
				n++
			}
		}
		if owed < 0 || n < owed {
			owed = n
		}
	}
	return max(owed, 0)
}
