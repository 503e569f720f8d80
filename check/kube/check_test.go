package kube

import (
	"bytes"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/listwatch/listwatch/check"
)

// obj is an object state of the hand-written histories: name@rv with a bucket label and a write.
func obj(name, uid string, rv int, bucket, write string) *Object {
	return &Object{Name: name, UID: uid, ResourceVersion: strconv.Itoa(rv),
		Labels: map[string]string{bucketLabel: bucket}, Annotations: map[string]string{WriteAnnotation: write}}
}

func frame(t int64, typ string, o *Object) Frame { return Frame{Time: t, Type: typ, Object: o} }

func bookmark(t int64, rv int, end bool) Frame {
	return Frame{Time: t, Type: Bookmark, Object: &Object{ResourceVersion: strconv.Itoa(rv), InitialEventsEnd: end}}
}

func deleted(o *Object, rv int) *Object {
	d := *o
	d.ResourceVersion = strconv.Itoa(rv)
	return &d
}

// baseHistory is a small history every guarantee holds in: a and b created, a updated out of
// bucket x, b deleted; lists of each semantics; watches of each start, one with a selector.
func baseHistory() *History {
	a11 := obj("a", "ua", 11, "x", "c0-1")
	b12 := obj("b", "ub", 12, "y", "c0-2")
	a13 := obj("a", "ua", 13, "y", "c0-3")
	body := func(o *Object) *Object { return &Object{Name: o.Name, Labels: o.Labels, Annotations: o.Annotations} }
	upd := body(a13)
	upd.ResourceVersion, upd.UID = "11", "ua"
	yes := true
	return &History{
		Resource: Resource{Version: "v1", Resource: "configmaps", Kind: "ConfigMap", Namespace: "ns"},
		Initial:  &ListResult{ResourceVersion: "10"},
		Operations: []Operation{
			{Client: 0, Call: 10, Return: 11, Verb: Create, Name: "a", Object: body(a11), Status: 201, Result: a11},
			{Client: 0, Call: 20, Return: 21, Verb: Create, Name: "b", Object: body(b12), Status: 201, Result: b12},
			{Client: 0, Call: 30, Return: 31, Verb: Update, Name: "a", Object: upd, Status: 200, Result: a13},
			{Client: 0, Call: 40, Return: 41, Verb: Delete, Name: "b", Precondition: &Precondition{ResourceVersion: "12"}, Status: 200},
			{Client: 0, Call: 50, Return: 51, Verb: List, Options: &ListOptions{}, Status: 200,
				List: &ListResult{ResourceVersion: "14", Items: []Object{*a13}}},
			{Client: 1, Call: 60, Return: 61, Verb: List, Options: &ListOptions{ResourceVersion: "12", ResourceVersionMatch: MatchExact},
				Status: 200, List: &ListResult{ResourceVersion: "12", Items: []Object{*a11, *b12}}},
			{Client: 1, Call: 62, Return: 63, Verb: List, Options: &ListOptions{ResourceVersion: "12", ResourceVersionMatch: MatchExact, Limit: 1},
				Status: 200, List: &ListResult{ResourceVersion: "12", Continue: "tok", Items: []Object{*a11}}},
			{Client: 1, Call: 64, Return: 65, Verb: List, Options: &ListOptions{Continue: "tok", Limit: 1},
				Status: 200, List: &ListResult{ResourceVersion: "12", Items: []Object{*b12}}},
			{Client: 1, Call: 66, Return: 67, Verb: Get, Name: "a", Options: &ListOptions{}, Status: 200, Result: a13},
		},
		Watches: []Watch{
			{Client: 2, Call: 1, Options: ListOptions{ResourceVersion: "10", AllowWatchBookmarks: true}, Status: 200, End: 100, EndReason: EndClosed,
				Frames: []Frame{frame(12, Added, a11), frame(22, Added, b12), frame(32, Modified, a13),
					bookmark(35, 13, false), frame(42, Deleted, deleted(b12, 14)), bookmark(45, 14, false)}},
			{Client: 3, Call: 1, Options: ListOptions{ResourceVersion: "10", LabelSelector: bucketLabel + "=x"}, Status: 200, End: 100, EndReason: EndStopped,
				Frames: []Frame{frame(12, Added, a11), frame(32, Deleted, deleted(a11, 13))}},
			{Client: 4, Call: 52, Options: ListOptions{SendInitialEvents: &yes, ResourceVersionMatch: MatchNotOlderThan, AllowWatchBookmarks: true},
				Status: 200, End: 100, EndReason: EndClosed, Frames: []Frame{frame(53, Added, a13), bookmark(54, 14, true)}},
			{Client: 5, Call: 70, Options: ListOptions{ResourceVersion: "12"}, Status: 200, End: 100, EndReason: EndClosed,
				Frames: []Frame{frame(71, Modified, a13), frame(72, Deleted, deleted(b12, 14))}},
		},
	}
}

func mustCheck(t *testing.T, h *History) *Result {
	t.Helper()
	r, err := Check(h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCheckBaseHistory: the hand-written history passes, with its linearization and write log.
func TestCheckBaseHistory(t *testing.T) {
	r := mustCheck(t, baseHistory())
	if !r.OK() || r.Err() != nil {
		t.Fatalf("want a pass, got %s: %v", r.Verdict, r.Violations)
	}
	if len(r.Writes) != 4 || r.Writes[3].RV != 14 || r.Writes[3].After != nil {
		t.Errorf("write log %+v: want 4 writes, the delete at 14 (its watch-seen resourceVersion)", r.Writes)
	}
	if c := r.Coverage; c.EventsChecked != 8 || c.Bookmarks != 2 || c.InitialEventsEnd != 1 || c.Resumed != 0 {
		t.Errorf("coverage %+v", c)
	}
}

// TestCheckMutations: each guarantee's violation, made by one change to the base history, is
// caught and named.
func TestCheckMutations(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(h *History)
		want   Guarantee
		say    string
	}{
		{"dropped event", func(h *History) {
			w := &h.Watches[0]
			w.Frames = append(w.Frames[:1], w.Frames[2:]...)
		}, WatchReplay, "missing"},
		{"reordered events", func(h *History) {
			f := h.Watches[0].Frames
			f[0], f[1] = f[1], f[0]
			f[0].Time, f[1].Time = f[1].Time, f[0].Time
		}, WatchReplay, "missing"},
		{"duplicated event", func(h *History) {
			w := &h.Watches[0]
			w.Frames = append(w.Frames[:2], append([]Frame{frame(23, Added, w.Frames[1].Object)}, w.Frames[2:]...)...)
		}, WatchReplay, "out of order or delivered twice"},
		{"wrong event type on a selector transition", func(h *History) {
			h.Watches[1].Frames[1].Type = Modified
		}, WatchReplay, "wrong event type"},
		{"transition carrying the new object", func(h *History) {
			h.Watches[1].Frames[1].Object = h.Operations[2].Result
		}, WatchReplay, "wrong object"},
		{"event the selector does not admit", func(h *History) {
			w := &h.Watches[1]
			w.Frames = append(w.Frames, frame(23, Added, h.Operations[1].Result))
			w.Frames[1], w.Frames[2] = w.Frames[2], w.Frames[1]
			w.Frames[1].Time, w.Frames[2].Time = 23, 32
		}, WatchReplay, "other than the next owed"},
		{"bookmark ahead of a pending event", func(h *History) {
			w := &h.Watches[0]
			w.Frames[3] = bookmark(35, 14, false)
		}, BookmarkOrder, "ahead of a pending event"},
		{"bookmark below a delivered event", func(h *History) {
			w := &h.Watches[0]
			w.Frames[3] = bookmark(35, 12, false)
		}, BookmarkOrder, "below a resourceVersion already delivered"},
		{"bookmark not asked for", func(h *History) {
			w := &h.Watches[1]
			w.Frames = append(w.Frames, bookmark(40, 13, false))
		}, BookmarkOrder, "did not ask"},
		{"initial-events-end bookmark not where the initial state is", func(h *History) {
			h.Watches[2].Frames[1] = bookmark(54, 12, true)
		}, WatchStart, "older than the watch's resourceVersion semantics allow"},
		{"initial events not the state", func(h *History) {
			h.Watches[2].Frames[0].Object = h.Operations[0].Result
		}, WatchStart, "not the state"},
		{"initial-events-end bookmark twice", func(h *History) {
			w := &h.Watches[2]
			w.Frames = append(w.Frames, bookmark(55, 14, true))
		}, InitialEventsEnd, "second"},
		{"list not matching its resourceVersion", func(h *History) {
			h.Operations[5].List.Items = h.Operations[5].List.Items[:1]
		}, ReadContent, "does not hold the state"},
		{"exact list at another resourceVersion", func(h *History) {
			h.Operations[5].List.ResourceVersion = "13"
		}, ReadRV, "answered at resourceVersion 13"},
		{"continued page at another resourceVersion", func(h *History) {
			h.Operations[7].List.ResourceVersion = "14"
		}, ReadRV, "not the first page's"},
		{"continued pages that repeat an item", func(h *History) {
			h.Operations[7].List.Items = h.Operations[6].List.Items
		}, ReadContent, "twice"},
		{"lost write", func(h *History) {
			h.Operations[4].List.Items = nil
		}, Linearizable, "no linearization"},
		{"stale consistent get", func(h *History) {
			h.Operations[8].Result = h.Operations[0].Result
		}, Linearizable, "no linearization"},
		{"update that should have conflicted", func(h *History) {
			h.Operations = append(h.Operations, Operation{Client: 1, Call: 80, Return: 81, Verb: Update, Name: "a",
				Object: &Object{Name: "a", ResourceVersion: "11", Labels: map[string]string{bucketLabel: "z"}}, Status: 200,
				Result: obj("a", "ua", 15, "z", "")})
		}, Linearizable, "no linearization"},
		{"410 inside the window", func(h *History) {
			h.Watches = append(h.Watches, Watch{Client: 6, Call: 65, Options: ListOptions{ResourceVersion: "13"}, Status: 200, End: 66,
				EndReason: EndClosed, Frames: []Frame{{Time: 66, Type: Error, Status: &Status{Code: 410, Reason: "Expired", Message: "too old resource version: 13 (14)"}}}})
		}, Expired, "a window never moves back"},
		{"410 to a list that needs no history", func(h *History) {
			op := &h.Operations[4]
			op.Status, op.List, op.Error = 410, nil, &Status{Code: 410, Reason: "Expired"}
		}, Expired, "needs no history"},
		{"410 as an HTTP status", func(h *History) {
			h.Watches = append(h.Watches, Watch{Client: 6, Call: 90, Options: ListOptions{ResourceVersion: "1"}, Status: 410,
				Error: &Status{Code: 410, Reason: "Expired"}, End: 91, EndReason: EndClosed})
		}, Expired, "as an HTTP status"},
		{"refused options served", func(h *History) {
			h.Operations[4].Options = &ListOptions{ResourceVersionMatch: MatchExact}
		}, Validation, "resourceVersionMatch is forbidden unless resourceVersion is provided"},
		{"resourceVersion not a number", func(h *History) {
			h.Operations[5].List.ResourceVersion = "abc"
		}, ReadRV, "not a decimal number"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := baseHistory()
			tc.mutate(h)
			r := mustCheck(t, h)
			if r.OK() || !errors.Is(r.Err(), ErrViolation) {
				t.Fatalf("mutation not caught: verdict %s", r.Verdict)
			}
			for _, v := range r.Violations {
				if v.Guarantee == tc.want && strings.Contains(v.String(), tc.say) {
					return
				}
			}
			t.Errorf("no %s violation saying %q; got:\n%v", tc.want, tc.say, r.Violations)
		})
	}
}

// TestCheckUnknownOutcome: a write with no answer that a watch shows took effect is placed at its
// resourceVersion; one nothing shows may not have happened.
func TestCheckUnknownOutcome(t *testing.T) {
	h := baseHistory()
	c15 := obj("c", "uc", 15, "x", "c1-9")
	h.Operations = append(h.Operations,
		Operation{Client: 1, Call: 80, Return: 90, Verb: Create, Name: "c", Object: &Object{Name: "c", Labels: c15.Labels, Annotations: c15.Annotations}, Unknown: true},
		Operation{Client: 1, Call: 91, Return: 92, Verb: Create, Name: "d", Object: &Object{Name: "d"}, Unknown: true})
	w := &h.Watches[0]
	w.Frames = append(w.Frames, frame(85, Added, c15))
	r := mustCheck(t, h)
	if !r.OK() {
		t.Fatalf("want a pass: %v", r.Violations)
	}
	last := r.Writes[len(r.Writes)-1]
	if last.RV != 15 || last.Name != "c" {
		t.Errorf("last write %+v: want c at 15", last)
	}
	// had the watch not seen it, it must not show a different resourceVersion
	w.Frames[len(w.Frames)-1].Object = obj("c", "uc", 15, "x", "c1-other")
	if r := mustCheck(t, h); r.OK() {
		t.Error("an ADDED event of a write nobody made passed")
	}
}

// TestCheckJSONRoundTrip: a history survives WriteJSON and ReadJSON; malformed ones are refused.
func TestCheckJSONRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := baseHistory().WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	h, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if r := mustCheck(t, h); !r.OK() {
		t.Errorf("read back: %v", r.Violations)
	}
	for name, text := range map[string]string{
		"unknown field": `{"resource":{"version":"v1","resource":"x","kind":"X","namespace":"n"},"bogus":1}`,
		"no namespace":  `{"resource":{"version":"v1","resource":"x","kind":"X"}}`,
		"bad verb":      `{"resource":{"version":"v1","resource":"x","kind":"X","namespace":"n"},"operations":[{"verb":"patch","name":"a"}]}`,
		"time travel":   `{"resource":{"version":"v1","resource":"x","kind":"X","namespace":"n"},"operations":[{"verb":"get","name":"a","call":5,"return":4}]}`,
		"old schema":    `{"resource":{"version":"v1","resource":"x","kind":"X","namespace":"n"},"run":{"schema":1}}`,
	} {
		if _, err := ReadJSON(strings.NewReader(text)); !errors.Is(err, ErrInvalidHistory) {
			t.Errorf("%s: err %v, want ErrInvalidHistory", name, err)
		}
	}
	if _, err := ReadJSON(strings.NewReader(`{"resource":{"version":"v1","resource":"x","kind":"X","namespace":"n"},"run":{"schema":9}}`)); !errors.Is(err, check.ErrUnsupportedSchema) {
		t.Errorf("schema 9: err %v, want ErrUnsupportedSchema", err)
	}
	h = baseHistory()
	h.Run = &check.Run{Schema: check.SchemaVersion, Target: "http://127.0.0.1:8080", Store: "kube-apiserver", Workload: "kube", Seed: 1}
	buf.Reset()
	if err := h.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if back, err := ReadJSON(&buf); err != nil || back.Run == nil || !reflect.DeepEqual(back.Run, h.Run) {
		t.Errorf("the run does not survive the round trip: %v, %+v", err, back)
	}
}

// TestWriteReport: the report names the verdict, the run and each violation, which links to the
// watch frame and the watch it is about, items of the timeline; a frame's item holds the object's
// name as its key and the whole object in its full text.
func TestWriteReport(t *testing.T) {
	h := baseHistory()
	h.Watches[1].Frames[1].Type = Modified
	h.Run = &check.Run{Schema: check.SchemaVersion, Target: "http://127.0.0.1:8080", Store: "kube-apiserver", Version: "v1.37.2", Seed: 7}
	r := mustCheck(t, h)
	var buf bytes.Buffer
	if err := WriteReport(&buf, h, r, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<span class="word">FAIL</span>`, "watch_replay", "wrong event type", "kube-apiserver v1.37.2", "seed <b>7</b>", `href="#i-w1-f1"`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	rep := BuildReport(h, r, nil)
	ids := map[string]*check.ReportItem{}
	for i := range rep.Items {
		ids[rep.Items[i].ID] = &rep.Items[i]
	}
	for i, v := range rep.Violations {
		if len(v.Refs) == 0 {
			t.Errorf("violation %d links to nothing", i)
		}
		for _, ref := range v.Refs {
			if ids[ref.Item] == nil {
				t.Errorf("violation %d links to %s, no item", i, ref.Item)
			}
		}
	}
	f := ids["w1-f1"]
	if o := h.Watches[1].Frames[1].Object; f == nil || len(f.Keys) != 1 || f.Keys[0] != o.Name || !strings.Contains(f.Text, `"name": "`+o.Name+`"`) {
		t.Errorf("frame item %+v", f)
	}
	if err := WriteReport(&buf, nil, r, nil); err == nil {
		t.Error("WriteReport without a history succeeded")
	}
}

// TestViolationsCappedPerWatch: at most maxPerWatch violations of one guarantee are listed per
// watch; a note says more were left out.
func TestViolationsCappedPerWatch(t *testing.T) {
	h := baseHistory()
	w := &h.Watches[1] // asked for no bookmarks
	for i := range maxPerWatch + 3 {
		w.Frames = append(w.Frames, bookmark(int64(40+i), 13, false))
	}
	r := mustCheck(t, h)
	n := 0
	for _, v := range r.Violations {
		if v.Guarantee == BookmarkOrder && v.Watch == 1 {
			n++
		}
	}
	if n != maxPerWatch {
		t.Errorf("%d bookmark violations of watch 1 listed, want %d: %v", n, maxPerWatch, r.Violations)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "more "+string(BookmarkOrder)+" violations") {
		t.Errorf("notes %q do not say more were left out", r.Notes)
	}
}

// TestNoLinearizationChecksOnlyStructure: without a linearization there is no write log, so a
// watch's replay is not judged, but its structural bookmark rules still are, and a note says why.
func TestNoLinearizationChecksOnlyStructure(t *testing.T) {
	mk := func(lostWrite bool) *History {
		h := baseHistory()
		if lostWrite {
			h.Operations[4].List.Items = nil
		}
		w := &h.Watches[0]
		// a dropped event (watch_replay) and a bookmark not asked for (bookmark)
		w.Frames = append(w.Frames[:1], w.Frames[2:]...)
		h.Watches[1].Frames = append(h.Watches[1].Frames, bookmark(40, 13, false))
		return h
	}
	r := mustCheck(t, mk(true))
	got := map[Guarantee]bool{}
	for _, v := range r.Violations {
		got[v.Guarantee] = true
	}
	if !got[Linearizable] || !got[BookmarkOrder] || got[WatchReplay] {
		t.Errorf("without a linearization: %v; want linearizable and bookmark, no watch_replay", r.Violations)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "no linearization") {
		t.Errorf("notes %q do not say the write-log checks were skipped", r.Notes)
	}
	r = mustCheck(t, mk(false))
	for _, v := range r.Violations {
		if v.Guarantee == WatchReplay {
			return
		}
	}
	t.Errorf("with a linearization the dropped event was not reported: %v", r.Violations)
}

// TestCheckPhases: Options.Phase is told each part of a check as it begins, in order.
func TestCheckPhases(t *testing.T) {
	var got []string
	if _, err := Check(baseHistory(), Options{Phase: func(name string) { got = append(got, name) }}); err != nil {
		t.Fatal(err)
	}
	if want := []string{check.PhaseSearch, PhaseLists, check.PhaseWatches}; !reflect.DeepEqual(got, want) {
		t.Errorf("phases %q, want %q", got, want)
	}
}
