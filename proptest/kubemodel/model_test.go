package kubemodel

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pod is a state of the pod at /pods/<ns>/<name> written at rev, with label l and node.
func pod(ns, name string, rev int64, l, node string) *Object {
	key := "/pods/" + ns + "/" + name
	o := &Object{Key: key, Rev: rev, Labels: labels.Set{}, Fields: fields.Set{
		"metadata.namespace": ns, "metadata.name": name, "spec.nodeName": node}}
	if l != "" {
		o.Labels["l"] = l
	}
	o.Render = func(rv int64) string { return fmt.Sprintf("%s l=%s node=%s written=%d rv=%d", key, l, node, rev, rv) }
	return o
}

func at(typ watch.EventType, o *Object, rv int64) Event {
	return Event{Type: typ, RV: rv, Object: o.Render(rv)}
}

func bookmark(rv int64, end bool) Event {
	return Event{Type: watch.Bookmark, RV: rv, InitialEventsEnd: end}
}

func errorEvent(err error) Event {
	st := err.(apierrors.APIStatus).Status()
	return Event{Type: watch.Error, Status: &st}
}

func sel(t *testing.T, key string, recursive bool, label string) Selection {
	t.Helper()
	ls, err := labels.Parse(label)
	if err != nil {
		t.Fatal(err)
	}
	return Selection{Key: key, Recursive: recursive, Predicate: storage.Predicate{Label: ls, Field: fields.Everything()}}
}

func ptr[T any](v T) *T { return &v }

// scenario is one history: at 3 the snapshot holds a/x and a/y (l=1) and b/z (l=2); then a/x
// leaves l=1 (4), a/y changes within it (5), b/z enters it (6), a/y is deleted (7).
type scenario struct {
	h                       *History
	ax, ay, bz              *Object // at 1, 2, 3
	ax4, ay5, bz6           *Object
	live                    []Event // what a watch of l=1 from 3 gets
	snapshot                int64
	l1, everything, onlyAY5 Selection
}

func newScenario(t *testing.T) *scenario {
	s := &scenario{h: NewHistory(0), snapshot: 3}
	s.ax, s.ay, s.bz = pod("a", "x", 1, "1", ""), pod("a", "y", 2, "1", ""), pod("b", "z", 3, "2", "")
	s.ax4, s.ay5, s.bz6 = pod("a", "x", 4, "2", ""), pod("a", "y", 5, "1", "n1"), pod("b", "z", 6, "1", "")
	for _, w := range []struct {
		rev int64
		key string
		o   *Object
	}{{1, s.ax.Key, s.ax}, {2, s.ay.Key, s.ay}, {3, s.bz.Key, s.bz}, {4, s.ax.Key, s.ax4}, {5, s.ay.Key, s.ay5}, {6, s.bz.Key, s.bz6}, {7, s.ay.Key, nil}} {
		if err := s.h.Apply(w.rev, w.key, w.o); err != nil {
			t.Fatal(err)
		}
	}
	s.l1 = sel(t, "/pods/", true, "l=1")
	s.everything = sel(t, "/pods/", true, "")
	s.onlyAY5 = sel(t, "/pods/a/y", false, "")
	s.live = []Event{at(watch.Deleted, s.ax, 4), at(watch.Modified, s.ay5, 5), at(watch.Added, s.bz6, 6), at(watch.Deleted, s.ay5, 7)}
	return s
}

// fixed is an expectation of a watch of sel started at s.
func fixed(sel Selection, req Request, s int64, bookmarkAtStart bool) Expectation {
	return Expectation{Request: req, Selection: sel, Replay: req.Replays(), EndBookmark: req.EndBookmark(),
		Bookmarks: req.AllowWatchBookmarks, BookmarkAtStart: bookmarkAtStart, Lo: s, Hi: s}
}

// TestHistoryApply: the history takes writes in revision order only, several keys at one revision
// each once, no deletion of an absent object, and states that belong to their key and revision.
func TestHistoryApply(t *testing.T) {
	h := NewHistory(5)
	if err := h.Apply(5, "/pods/a/x", pod("a", "x", 5, "", "")); !errors.Is(err, ErrHistory) {
		t.Errorf("a write at the current revision: %v", err)
	}
	if err := h.Apply(6, "/pods/a/x", nil); !errors.Is(err, ErrHistory) {
		t.Errorf("a deletion of an absent object: %v", err)
	}
	if err := h.Apply(6, "/pods/a/x", pod("a", "x", 7, "", "")); !errors.Is(err, ErrHistory) {
		t.Errorf("a state of another revision: %v", err)
	}
	if err := h.Apply(6, "/pods/a/y", pod("a", "x", 6, "", "")); !errors.Is(err, ErrHistory) {
		t.Errorf("a state of another key: %v", err)
	}
	for _, k := range []string{"b/z", "a/x", "a/y"} {
		ns, name, _ := strings.Cut(k, "/")
		if err := h.Apply(6, "/pods/"+k, pod(ns, name, 6, "", "")); err != nil {
			t.Fatalf("three keys at one revision: %v", err)
		}
	}
	if err := h.Apply(6, "/pods/a/x", nil); !errors.Is(err, ErrHistory) {
		t.Errorf("a key written twice at one revision: %v", err)
	}
	if err := h.Advance(9); err != nil {
		t.Fatal(err)
	}
	if err := h.Apply(8, "/pods/a/x", nil); !errors.Is(err, ErrHistory) {
		t.Errorf("a write before the store's revision: %v", err)
	}
	if err := h.Advance(8); !errors.Is(err, ErrHistory) {
		t.Errorf("the store going back: %v", err)
	}
	if err := h.Apply(10, "/pods/a/x", nil); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range h.StateAt(9) {
		keys = append(keys, o.Key)
	}
	if got := strings.Join(keys, " "); got != "/pods/a/x /pods/a/y /pods/b/z" {
		t.Errorf("state at 9 in key order: %s", got)
	}
	if h.State("/pods/a/x") != nil || len(h.StateAt(10)) != 2 || h.LastRev() != 10 || h.Rev != 10 {
		t.Errorf("after the deletion: %v %d %d %d", h.State("/pods/a/x"), len(h.StateAt(10)), h.LastRev(), h.Rev)
	}
}

// TestChangesByTransition: an object entering the selection is ADDED, staying in it MODIFIED,
// leaving it DELETED with its previous state at the new revision; a creation is ADDED and a
// deletion DELETED; writes outside the key range or the selection give nothing.
func TestChangesByTransition(t *testing.T) {
	s := newScenario(t)
	var got []string
	for _, x := range s.h.Changes(s.l1, s.snapshot) {
		got = append(got, fmt.Sprintf("%s %s@%d", x, x.Object.Key, x.Object.Rev))
	}
	want := []string{
		"DELETED /pods/a/x at 4 /pods/a/x@1",
		"MODIFIED /pods/a/y at 5 /pods/a/y@5",
		"ADDED /pods/b/z at 6 /pods/b/z@6",
		"DELETED /pods/a/y at 7 /pods/a/y@5",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("changes of l=1 after 3:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var all []string
	for _, x := range s.h.Changes(s.everything, 0) {
		all = append(all, string(x.Type))
	}
	if got := strings.Join(all, " "); got != "ADDED ADDED ADDED MODIFIED MODIFIED MODIFIED DELETED" {
		t.Errorf("changes of everything: %s", got)
	}
	if got := s.h.Changes(sel(t, "/pods/a", true, "l=2"), 0); len(got) != 1 || got[0].Type != watch.Added || got[0].Rev != 4 {
		t.Errorf("changes of l=2 in a: %v", got)
	}
	if got := s.h.Changes(sel(t, "/pods/c", true, ""), 0); len(got) != 0 {
		t.Errorf("changes outside the key range: %v", got)
	}
	if got := s.h.Initial(s.l1, s.snapshot); len(got) != 2 || got[0].Object != s.ax || got[1].Object != s.ay || got[0].Rev != 1 {
		t.Errorf("initial replay of l=1 at 3: %v", got)
	}
}

// TestCheckAcceptsCorrectStreams: what a correct watch delivers, and every prefix of it, is
// accepted; only the whole is complete (a last bookmark is not owed), and the verdict says where a
// client resumes.
func TestCheckAcceptsCorrectStreams(t *testing.T) {
	s := newScenario(t)
	list := fixed(s.l1, Request{ResourceVersion: "3", SendInitialEvents: ptr(true), AllowWatchBookmarks: true}, s.snapshot, false)
	good := []Event{at(watch.Added, s.ax, 1), at(watch.Added, s.ay, 2), bookmark(3, true),
		s.live[0], bookmark(4, false), s.live[1], s.live[2], bookmark(6, false), s.live[3], bookmark(7, false)}
	v, err := s.h.Check(list, good)
	if err != nil || !v.Complete || v.ResumeRV != 7 || v.Events != 6 || v.Bookmarks != 4 || v.Start != 3 {
		t.Fatalf("a correct watch-list: %+v %v", v, err)
	}
	for n := range good {
		v, err := s.h.Check(list, good[:n])
		if err != nil || v.Complete != (n == len(good)-1) {
			t.Errorf("prefix of %d events: complete=%t %v", n, v.Complete, err)
		}
	}
	from := fixed(s.l1, Request{ResourceVersion: "3"}, 3, false)
	if v, err := s.h.Check(from, s.live); err != nil || !v.Complete || v.ResumeRV != 7 || v.Error {
		t.Fatalf("a correct watch from 3: %+v %v", v, err)
	}
	if v, err := s.h.Check(from, nil); err != nil || v.Complete || !v.HasResumeRV || v.ResumeRV != 3 {
		t.Fatalf("nothing yet: %+v %v", v, err)
	}
	// The legacy watch from "" replays without an end bookmark; y is deleted by 7.
	legacy := fixed(s.everything, Request{}, 7, false)
	if v, err := s.h.Check(legacy, []Event{at(watch.Added, s.ax4, 4), at(watch.Added, s.bz6, 6)}); err != nil || !v.Complete || v.HasResumeRV {
		t.Fatalf("a legacy watch: %+v %v", v, err)
	}
}

// TestCheckRejectsWrongStreams: a missing, duplicated, reordered or extra event, a wrong
// transition type, a wrong object, a bookmark ahead of a pending event (or back, or below a
// delivered one, or unasked), and every break of the initial replay's rules are each refused.
func TestCheckRejectsWrongStreams(t *testing.T) {
	s := newScenario(t)
	bookmarks := Request{ResourceVersion: "3", AllowWatchBookmarks: true}
	from := fixed(s.l1, bookmarks, 3, false)
	noBookmarks := fixed(s.l1, Request{ResourceVersion: "3"}, 3, false)
	list := fixed(s.l1, Request{ResourceVersion: "3", SendInitialEvents: ptr(true), AllowWatchBookmarks: true}, 3, false)
	entering := fixed(sel(t, "/pods/", true, "l=2"), Request{ResourceVersion: "3"}, 3, false)
	live := s.live
	bad := []struct {
		name   string
		exp    Expectation
		events []Event
		want   string
	}{
		{"a missing event", from, []Event{live[0], live[2], live[3]}, "want MODIFIED /pods/a/y at 5"},
		{"a duplicate", from, []Event{live[0], live[0]}, "want MODIFIED /pods/a/y at 5"},
		{"a reordered pair", from, []Event{live[0], live[2], live[1], live[3]}, "want MODIFIED /pods/a/y at 5"},
		{"an extra event", from, append(append([]Event{}, live...), live[3]), "no further event is due"},
		{"MODIFIED for leaving", from, []Event{at(watch.Modified, s.ax4, 4)}, "want DELETED /pods/a/x at 4"},
		{"MODIFIED for entering", entering, []Event{at(watch.Modified, s.ax4, 4)}, "want ADDED /pods/a/x at 4"},
		{"ADDED for staying", from, []Event{live[0], at(watch.Added, s.ay5, 5)}, "want MODIFIED /pods/a/y at 5"},
		{"the new object on leaving", from, []Event{at(watch.Deleted, s.ax4, 4)}, "with other content"},
		{"the previous object at its own revision", from, []Event{at(watch.Deleted, s.ax, 1)}, "want DELETED /pods/a/x at 4"},
		{"a bookmark ahead of a pending event", from, []Event{live[0], bookmark(5, false)}, "passes the pending MODIFIED /pods/a/y at 5"},
		{"a bookmark going back", from, []Event{live[0], live[1], bookmark(5, false), bookmark(4, false)}, "after a BOOKMARK at 5"},
		{"a bookmark below a delivered event", from, []Event{live[0], live[1], bookmark(4, false)}, "below the delivered MODIFIED"},
		{"a bookmark at the start of a cache watch", from, []Event{bookmark(3, false)}, "not after the start 3"},
		{"a bookmark before the start", fixed(s.l1, bookmarks, 3, true), []Event{bookmark(2, false)}, "not after the start 3"},
		{"a bookmark unasked", noBookmarks, []Event{live[0], bookmark(4, false)}, "gets no bookmarks"},
		{"an annotated bookmark later", from, []Event{live[0], bookmark(4, true)}, "where no initial events end"},
		{"initial events out of key order", list, []Event{at(watch.Added, s.ay, 2), at(watch.Added, s.ax, 1)}, "want ADDED /pods/a/x at 1"},
		{"an initial event at the snapshot revision", list, []Event{at(watch.Added, s.ax, 3)}, "want ADDED /pods/a/x at 1"},
		{"an initial event of another state", list, []Event{{Type: watch.Added, RV: 1, Object: "other"}}, "with other content"},
		{"no end bookmark", list, []Event{at(watch.Added, s.ax, 1), at(watch.Added, s.ay, 2), live[0]}, "want the initial-events-end BOOKMARK at 3"},
		{"an end bookmark not annotated", list, []Event{at(watch.Added, s.ax, 1), at(watch.Added, s.ay, 2), bookmark(3, false)}, "want the initial-events-end BOOKMARK at 3"},
		{"an end bookmark at another revision", list, []Event{at(watch.Added, s.ax, 1), at(watch.Added, s.ay, 2), bookmark(4, true)}, "want the initial-events-end BOOKMARK at 3"},
		{"an unexpected ERROR", from, []Event{live[0], errorEvent(apierrors.NewResourceExpired("too old"))}, "unexpected ERROR 410"},
		{"an unknown type", from, []Event{{Type: "SOMETHING"}}, "unexpected SOMETHING"},
	}
	for _, c := range bad {
		_, err := s.h.Check(c.exp, c.events)
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// What the cache refuses, the storage allows: a progress bookmark at the start.
	if _, err := s.h.Check(fixed(s.l1, bookmarks, 3, true), []Event{bookmark(3, false), live[0]}); err != nil {
		t.Errorf("a storage bookmark at the start: %v", err)
	}
}

// TestCheckStartRange: any start in the range that explains the events is taken, a complete
// explanation first; a floating range reaches the history's current revision; an empty range
// explains nothing.
func TestCheckStartRange(t *testing.T) {
	s := newScenario(t)
	e := fixed(s.everything, Request{ResourceVersion: "0", SendInitialEvents: ptr(false)}, 0, false)
	e.Lo, e.Hi = 3, 5
	// From 4: x's change at 4 is not delivered.
	v, err := s.h.Check(e, []Event{at(watch.Modified, s.ay5, 5), at(watch.Modified, s.bz6, 6), at(watch.Deleted, s.ay5, 7)})
	if err != nil || v.Start != 4 || !v.Complete {
		t.Fatalf("a watch from 4 in [3,5]: %+v %v", v, err)
	}
	// Nothing yet: 5 owes least but 3 explains it first; only a complete explanation could beat it.
	if v, err := s.h.Check(e, nil); err != nil || v.Start != 3 || v.Complete {
		t.Fatalf("nothing yet: %+v %v", v, err)
	}
	if _, err := s.h.Check(e, []Event{at(watch.Modified, s.ay5, 5), at(watch.Deleted, s.ay5, 7)}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("a gap no start explains: %v", err)
	}
	// A snapshot at 7 (the history's revision) explains a floating start from 5 only.
	list := fixed(s.everything, Request{SendInitialEvents: ptr(true)}, 0, false)
	list.Lo, list.Hi = 5, 5
	at7 := []Event{at(watch.Added, s.ax4, 4), at(watch.Added, s.bz6, 6)}
	if _, err := s.h.Check(list, at7); !errors.Is(err, ErrMismatch) {
		t.Fatalf("a snapshot at 7 explained a start at 5: %v", err)
	}
	list.Floating = true
	if v, err := s.h.Check(list, at7); err != nil || v.Start != 7 || !v.Complete {
		t.Fatalf("a floating snapshot at 7: %+v %v", v, err)
	}
	empty := fixed(s.everything, Request{}, 0, false)
	empty.Lo, empty.Hi = 6, 5
	if _, err := s.h.Check(empty, nil); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "no start revision in [6,5]") {
		t.Fatalf("an empty range: %v", err)
	}
}

// TestExpectStartRevisions: the starts and refusals of every kind of request, for the etcd3
// storage and the watch cache, and the apiserver's defaulting of sendInitialEvents.
func TestExpectStartRevisions(t *testing.T) {
	s := newScenario(t) // writes at 1..7; the store is at 7
	type want struct {
		replay, end, floating bool
		lo, hi                int64
		refusal               string
	}
	st := Storage{Rev: 7}
	ca := Cache{Lo: 5, Hi: 6, EtcdRev: 7, ListRV: 4}
	for _, c := range []struct {
		rv           string
		sie          *bool
		storage, cac want
	}{
		{"", nil, want{replay: true, floating: true, lo: 7, hi: 7}, want{replay: true, lo: 5, hi: 6}},
		{"0", nil, want{replay: true, floating: true, lo: 7, hi: 7}, want{replay: true, lo: 5, hi: 6}},
		{"3", nil, want{lo: 3, hi: 3}, want{refusal: "ERROR 410 Expired \"too old resource version: 3 (4)\""}},
		{"4", nil, want{lo: 4, hi: 4}, want{lo: 4, hi: 4}},
		{"9", nil, want{lo: 9, hi: 9}, want{lo: 9, hi: 9}},
		{"", ptr(true), want{replay: true, end: true, floating: true, lo: 7, hi: 7}, want{replay: true, end: true, lo: 7, hi: 6}},
		{"0", ptr(true), want{replay: true, end: true, floating: true, lo: 7, hi: 7}, want{replay: true, end: true, lo: 5, hi: 6}},
		{"6", ptr(true), want{replay: true, end: true, floating: true, lo: 7, hi: 7}, want{replay: true, end: true, lo: 6, hi: 6}},
		{"9", ptr(true), want{refusal: "ERROR 504 Timeout \"Timeout: Too large resource version: 9, current: \"..."}, want{refusal: "ERROR 504 Timeout \"Timeout: Too large resource version: 9, current: \"..."}},
		{"", ptr(false), want{lo: 7, hi: 7}, want{lo: 7, hi: 7}},
		{"0", ptr(false), want{lo: 7, hi: 7}, want{lo: 5, hi: 6}},
		{"4", ptr(false), want{lo: 4, hi: 4}, want{lo: 4, hi: 4}},
	} {
		req := Request{ResourceVersion: c.rv, SendInitialEvents: c.sie, AllowWatchBookmarks: true}
		se, err := s.h.ExpectStorage(req, s.everything, st)
		if err != nil {
			t.Fatal(err)
		}
		ce, err := s.h.ExpectCache(req, s.everything, ca)
		if err != nil {
			t.Fatal(err)
		}
		for layer, got := range map[string]Expectation{"storage": se, "cache": ce} {
			w := c.storage
			if layer == "cache" {
				w = c.cac
			}
			refusal := ""
			if got.Refusal != nil {
				refusal = got.Refusal.String()
			}
			g := want{got.Replay, got.EndBookmark, got.Floating, got.Lo, got.Hi, refusal}
			if refusal != "" {
				g = want{refusal: refusal}
			}
			if g != w {
				t.Errorf("%s: %s: got %+v, want %+v", layer, req, g, w)
			}
			if got.BookmarkAtStart != (layer == "storage") {
				t.Errorf("%s: %s: bookmark at start %t", layer, req, got.BookmarkAtStart)
			}
		}
	}
	// The cache's wait for freshness may run out where it waits at all.
	for rv, want := range map[string]string{"": "Timeout: Too large resource version: 7, current: ", "0": "", "6": "Timeout: Too large resource version: 6, current: "} {
		e, err := s.h.ExpectCache(Request{ResourceVersion: rv, SendInitialEvents: ptr(true)}, s.everything, Cache{Lo: 5, Hi: 7, EtcdRev: 7, MayTimeOut: true})
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if e.MayRefuse != nil {
			got = e.MayRefuse.Message
		}
		if got != want {
			t.Errorf("cache watch-list from %q may refuse with %q, want %q", rv, got, want)
		}
	}
	if _, err := s.h.ExpectStorage(Request{ResourceVersion: "x"}, s.everything, st); !errors.Is(err, ErrRequest) {
		t.Errorf("a bad resourceVersion: %v", err)
	}
	for _, c := range []struct {
		in   Request
		want string
	}{
		{Request{}, "true"}, {Request{ResourceVersion: "0"}, "true"}, {Request{ResourceVersion: "5"}, "unset"},
		{Request{SendInitialEvents: ptr(false)}, "false"},
	} {
		got := "unset"
		if d := c.in.WithWatchListDefaults(); d.SendInitialEvents != nil {
			got = fmt.Sprint(*d.SendInitialEvents)
		}
		if got != c.want {
			t.Errorf("defaulted %s: sendInitialEvents %s, want %s", c.in, got, c.want)
		}
	}
}

// TestCheckRefusals: a refusal is exactly one ERROR with its code, reason and message (a prefix
// where the model does not know the rest); a possible refusal allows either it or the events.
func TestCheckRefusals(t *testing.T) {
	s := newScenario(t)
	old, err := s.h.ExpectCache(Request{ResourceVersion: "3"}, s.everything, Cache{Lo: 7, Hi: 7, EtcdRev: 7, ListRV: 4})
	if err != nil {
		t.Fatal(err)
	}
	expired := errorEvent(apierrors.NewResourceExpired("too old resource version: 3 (4)"))
	if v, err := s.h.Check(old, []Event{expired}); err != nil || !v.Complete || !v.Error {
		t.Errorf("the expected 410: %+v %v", v, err)
	}
	if v, err := s.h.Check(old, nil); err != nil || v.Complete {
		t.Errorf("no ERROR yet: %+v %v", v, err)
	}
	other := expired
	other.Status = &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonGone, Message: expired.Status.Message}
	for name, events := range map[string][]Event{
		"another message": {errorEvent(apierrors.NewResourceExpired("too old resource version: 3 (5)"))},
		"another reason":  {other},
		"events instead":  {at(watch.Modified, s.ax4, 4)},
		"events after":    {expired, bookmark(5, false)},
	} {
		if _, err := s.h.Check(old, events); !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: %v", name, err)
		}
	}
	future, err := s.h.ExpectStorage(Request{ResourceVersion: "9", SendInitialEvents: ptr(true)}, s.everything, Storage{Rev: 7})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.h.Check(future, []Event{errorEvent(storage.NewTooLargeResourceVersionError(9, 7, 1))}); err != nil {
		t.Error(err)
	}
	if _, err := s.h.Check(future, []Event{errorEvent(storage.NewTooLargeResourceVersionError(8, 7, 1))}); !errors.Is(err, ErrMismatch) {
		t.Errorf("a 504 for another resourceVersion: %v", err)
	}
	may, err := s.h.ExpectCache(Request{ResourceVersion: "6", SendInitialEvents: ptr(true)}, s.everything, Cache{Lo: 6, Hi: 6, EtcdRev: 7, MayTimeOut: true})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.h.Check(may, []Event{errorEvent(storage.NewTooLargeResourceVersionError(6, 5, 1))}); err != nil || !v.Error {
		t.Errorf("the 504 a cache watch-list may give: %+v %v", v, err)
	}
	if _, err := s.h.Check(may, []Event{at(watch.Added, s.ax4, 4)}); err != nil {
		t.Errorf("the events a cache watch-list may give instead: %v", err)
	}
	if _, err := s.h.Check(may, []Event{errorEvent(storage.NewTooLargeResourceVersionError(7, 5, 1))}); !errors.Is(err, ErrMismatch) {
		t.Errorf("a 504 for another wait: %v", err)
	}
}

// TestCompaction: an etcd3 storage watch from a compacted revision is refused with 410, one from
// the revision just before a compacted change in its range with the 500 of a change without its
// previous value; a compaction landing while a watch catches up may end it with either, only if
// what it delivered stops short of the compaction.
func TestCompaction(t *testing.T) {
	s := newScenario(t)
	for _, c := range []struct {
		rv      string
		key     string
		compact int64
		want    string
	}{
		{"3", "/pods/", 5, "ERROR 410 Expired \"The resourceVersion for the provided watch is too old.\""},
		{"4", "/pods/", 5, `ERROR 500 InternalError "Internal error occurred: etcd event received with PrevKv=nil (key=\"/pods/a/y\", modRevision=5, type=PUT)"`},
		{"6", "/pods/", 7, `ERROR 500 InternalError "Internal error occurred: etcd event received with PrevKv=nil (key=\"/pods/a/y\", modRevision=7, type=DELETE)"`},
		{"4", "/pods/b", 5, ""}, // the change at 5 is outside the range
		{"5", "/pods/", 5, ""},
	} {
		e, err := s.h.ExpectStorage(Request{ResourceVersion: c.rv}, sel(t, c.key, true, "l=2"), Storage{Rev: 7, CompactRev: c.compact})
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if e.Refusal != nil {
			got = e.Refusal.String()
		}
		if got != c.want {
			t.Errorf("watch of %s from %s after a compaction at %d: %s, want %s", c.key, c.rv, c.compact, got, c.want)
		}
	}
	catchUp := fixed(s.everything, Request{ResourceVersion: "1"}, 1, true)
	catchUp.MayCompactAt = 5
	expired := errorEvent(apierrors.NewResourceExpired("The resourceVersion for the provided watch is too old."))
	st := apierrors.NewInternalError(errors.New(`etcd event received with PrevKv=nil (key="/pods/a/y", modRevision=5, type=PUT)`)).ErrStatus
	prevlessErr := Event{Type: watch.Error, Status: &st}
	ay2 := at(watch.Added, s.ay, 2)
	for _, c := range []struct {
		name   string
		events []Event
		ok     bool
	}{
		{"410 before the compaction", []Event{ay2, expired}, true},
		{"410 at the revision before it", []Event{ay2, at(watch.Added, s.bz, 3), at(watch.Modified, s.ax4, 4), expired}, false},
		{"500 with nothing in between", []Event{ay2, at(watch.Added, s.bz, 3), at(watch.Modified, s.ax4, 4), prevlessErr}, true},
		{"500 skipping changes", []Event{ay2, prevlessErr}, false},
		{"410 not last", []Event{expired, ay2}, false},
	} {
		v, err := s.h.Check(catchUp, c.events)
		if ok := err == nil && v.Error && v.Complete; ok != c.ok {
			t.Errorf("%s: %+v %v, want accepted=%t", c.name, v, err, c.ok)
		}
	}
	if _, err := s.h.Check(fixed(s.everything, Request{ResourceVersion: "1"}, 1, true), []Event{ay2, expired}); !errors.Is(err, ErrMismatch) {
		t.Errorf("a 410 without a compaction: %v", err)
	}
}

// TestOwed: the fewest events owed over the allowed starts, initial replay included; none for a
// refusal.
func TestOwed(t *testing.T) {
	s := newScenario(t)
	e := fixed(s.l1, Request{ResourceVersion: "0", SendInitialEvents: ptr(true)}, 0, false)
	e.Lo, e.Hi = 3, 6
	// At 3: 2 initial + 4 changes; at 6: a/y and b/z + 1 change.
	if got := s.h.Owed(e); got != 3 {
		t.Errorf("owed: %d, want 3", got)
	}
	e.Refusal = tooLarge(9)
	if got := s.h.Owed(e); got != 0 {
		t.Errorf("owed by a refusal: %d", got)
	}
}

// TestEventOf: delivered watch.Events read as the model renders objects (FromUnstructured), ERRORs
// by their Status, BOOKMARKs by resourceVersion and annotation; a bookmark carrying an object or
// another annotation is unreadable.
func TestEventOf(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "x", "namespace": "a", "resourceVersion": "4", "labels": map[string]any{"l": "1"}}}}
	o, err := FromUnstructured("/pods/a/x", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.Rev != 4 || o.Labels["l"] != "1" || o.Fields["metadata.namespace"] != "a" {
		t.Fatalf("object: %s", o)
	}
	deleted := u.DeepCopy()
	deleted.SetResourceVersion("9")
	ev, err := EventOf(watch.Event{Type: watch.Deleted, Object: deleted})
	if err != nil || ev.RV != 9 || ev.Object != o.Render(9) || ev.Object == o.Render(4) || ev.Summary != "a/x rv=9 labels=l=1" {
		t.Fatalf("a DELETED event: %+v %v", ev, err)
	}
	if ev, err := EventOf(watch.Event{Type: watch.Error, Object: &apierrors.NewResourceExpired("gone").ErrStatus}); err != nil || ev.Status.Code != 410 {
		t.Fatalf("an ERROR: %+v %v", ev, err)
	}
	mark := func(mods ...func(*unstructured.Unstructured)) watch.Event {
		b := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod"}}
		b.SetResourceVersion("7")
		for _, m := range mods {
			m(b)
		}
		return watch.Event{Type: watch.Bookmark, Object: b}
	}
	if ev, err := EventOf(mark()); err != nil || ev.RV != 7 || ev.InitialEventsEnd {
		t.Fatalf("a bookmark: %+v %v", ev, err)
	}
	end := func(b *unstructured.Unstructured) {
		b.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
	}
	if ev, err := EventOf(mark(end)); err != nil || !ev.InitialEventsEnd {
		t.Fatalf("an end bookmark: %+v %v", ev, err)
	}
	for name, mod := range map[string]func(*unstructured.Unstructured){
		"named":     func(b *unstructured.Unstructured) { b.SetName("x") },
		"annotated": func(b *unstructured.Unstructured) { b.SetAnnotations(map[string]string{"a": "b"}) },
		"no rv":     func(b *unstructured.Unstructured) { b.SetResourceVersion("") },
	} {
		if _, err := EventOf(mark(mod)); !errors.Is(err, ErrEvent) {
			t.Errorf("a bookmark %s: %v", name, err)
		}
	}
	if _, err := EventOf(watch.Event{Type: watch.Error, Object: u}); !errors.Is(err, ErrEvent) {
		t.Errorf("an ERROR without a Status: %v", err)
	}
	if got, err := Canonical([]byte(` {"b": 1, "a": [true, null]} `)); err != nil || got != `{"a":[true,null],"b":1}` {
		t.Errorf("canonical: %s %v", got, err)
	}
}

// TestDispatchOffers: where a watcher is indexed (the request's namespace and name first, the field
// selector's where the request has none, the trigger only when the predicate names it in IndexFields
// and pins it) and which writes are then offered to it: those of its scope, or those whose object
// has or had its trigger value.
func TestDispatchOffers(t *testing.T) {
	h := NewHistory(0)
	writes := []struct {
		rev int64
		o   *Object
		del string
	}{
		{1, pod("a", "x", 1, "", "n1"), ""},
		{2, pod("b", "x", 2, "", "n2"), ""},
		{3, pod("a", "y", 3, "", ""), ""},
		{4, pod("a", "x", 4, "", "n2"), ""}, // leaves n1 for n2
		{5, nil, "/pods/b/x"},               // deletion on n2
	}
	for _, w := range writes {
		key := w.del
		if w.o != nil {
			key = w.o.Key
		}
		if err := h.Apply(w.rev, key, w.o); err != nil {
			t.Fatal(err)
		}
	}
	sel := func(s string) fields.Selector {
		f, err := fields.ParseSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	node := []string{"spec.nodeName"}
	for _, tc := range []struct {
		name    string
		d       Dispatch
		want    Dispatch
		after   int64
		offered int
	}{
		{"cluster-wide", DispatchOf("", "", nil, nil, ""), Dispatch{}, 0, 5},
		{"request namespace", DispatchOf("a", "", sel(""), nil, ""), Dispatch{Namespace: "a"}, 0, 3},
		{"request namespace over the selector's", DispatchOf("a", "", sel("metadata.namespace=b"), nil, ""), Dispatch{Namespace: "a"}, 0, 3},
		{"selector namespace", DispatchOf("", "", sel("metadata.namespace=b"), nil, ""), Dispatch{Namespace: "b"}, 0, 2},
		{"namespace and name", DispatchOf("a", "", sel("metadata.name=x"), nil, ""), Dispatch{Namespace: "a", Name: "x"}, 0, 2},
		{"name across namespaces", DispatchOf("", "x", nil, nil, ""), Dispatch{Name: "x"}, 0, 4},
		{"trigger, now or before", DispatchOf("a", "", sel("spec.nodeName=n1"), node, "spec.nodeName"), Dispatch{Namespace: "a", Trigger: "spec.nodeName", Value: "n1"}, 0, 2},
		{"trigger n2 after 1", DispatchOf("", "", sel("spec.nodeName=n2"), node, "spec.nodeName"), Dispatch{Trigger: "spec.nodeName", Value: "n2"}, 1, 3},
		{"trigger without IndexFields", DispatchOf("", "", sel("spec.nodeName=n1"), nil, "spec.nodeName"), Dispatch{}, 0, 5},
		{"trigger not pinned", DispatchOf("", "", sel("spec.nodeName!=n1"), node, "spec.nodeName"), Dispatch{}, 0, 5},
		{"no trigger configured", DispatchOf("", "", sel("spec.nodeName=n1"), node, ""), Dispatch{}, 0, 5},
	} {
		if tc.d != tc.want {
			t.Errorf("%s: DispatchOf = %+v, want %+v", tc.name, tc.d, tc.want)
		}
		if got := h.Offered(tc.d, tc.after); got != tc.offered {
			t.Errorf("%s: %d writes after %d offered, want %d", tc.name, got, tc.after, tc.offered)
		}
	}
}
