package chaintest

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/httpwatch/watchclient"
	"github.com/listwatch/listwatch/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// history writes pods straight into a store and records them in a model; no chain is needed to
// judge frames.
type history struct {
	t  *testing.T
	st *store.Store
	m  *Model
}

func newHistory(t *testing.T) *history {
	st := store.New(store.Options{ManualTick: true})
	t.Cleanup(func() { st.Close() })
	return &history{t: t, st: st, m: &Model{Cached: true, Rev: st.Rev(), ListRV: st.Rev(), state: map[string]*Object{}}}
}

func (h *history) put(p Pod) {
	h.t.Helper()
	if _, err := h.st.Put(&store.PutRequest{Key: []byte(p.EtcdKey()), Value: p.JSON("")}); err != nil {
		h.t.Fatal(err)
	}
	if err := h.m.Observe(h.st, p.EtcdKey()); err != nil {
		h.t.Fatal(err)
	}
}

func (h *history) del(p Pod) {
	h.t.Helper()
	if _, err := h.st.DeleteRange(&store.DeleteRangeRequest{Key: []byte(p.EtcdKey())}); err != nil {
		h.t.Fatal(err)
	}
	if err := h.m.Observe(h.st, p.EtcdKey()); err != nil {
		h.t.Fatal(err)
	}
}

func frame(typ string, o *Object, rev int64) watchclient.Frame {
	return watchclient.Frame{Type: watch.EventType(typ), Object: json.RawMessage(o.at(rev))}
}

func bookmark(rev int64, end bool) watchclient.Frame {
	meta := map[string]any{"resourceVersion": strconv.FormatInt(rev, 10)}
	if end {
		meta["annotations"] = map[string]any{"k8s.io/initial-events-end": "true"}
	}
	data, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta})
	return watchclient.Frame{Type: "BOOKMARK", Object: data}
}

func errorFrame(code int, reason, message string) watchclient.Frame {
	data, _ := json.Marshal(map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{},
		"status": "Failure", "message": message, "reason": reason, "code": code})
	return watchclient.Frame{Type: "ERROR", Object: data}
}

// TestCheckJudgesFrames builds one history and checks that Check accepts what a correct watch
// delivers, prefixes included, and rejects every kind of wrong stream.
func TestCheckJudgesFrames(t *testing.T) {
	h := newHistory(t)
	ax := Pod{Namespace: "a", Name: "x", Labels: map[string]string{"l": "1"}}
	ay := Pod{Namespace: "a", Name: "y", Labels: map[string]string{"l": "1"}}
	h.put(ax) // 2
	h.put(ay) // 3
	snapshot := h.m.Rev
	ax2 := ax
	ax2.Labels = map[string]string{"l": "2"}
	h.put(ax2) // 4: leaves l=1
	ay2 := ay
	ay2.NodeName = "n1"
	h.put(ay2) // 5: stays
	h.del(ay2) // 6
	objAX := h.m.Writes[0].Cur
	objAY := h.m.Writes[1].Cur
	objAX2 := h.m.Writes[2].Cur
	objAY2 := h.m.Writes[3].Cur

	tr := true
	list := WatchSpec{Label: "l=1", ResourceVersion: strconv.FormatInt(snapshot, 10), SendInitialEvents: &tr, Bookmarks: true}
	fromRV := WatchSpec{Label: "l=1", ResourceVersion: strconv.FormatInt(snapshot, 10), Bookmarks: true}
	noBookmarks := fromRV
	noBookmarks.Bookmarks = false

	// The expectations are taken after the writes: a watch-list opened at 6 snapshots at 6, so
	// pin the snapshot for these cases by setting the bounds by hand.
	expect := func(spec WatchSpec) Expectation {
		e, err := h.m.Expect(spec)
		if err != nil {
			t.Fatal(err)
		}
		if e.Replay {
			e.Lo, e.Hi = snapshot, snapshot
		}
		return e
	}
	good := []watchclient.Frame{
		frame("ADDED", objAX, objAX.Rev), frame("ADDED", objAY, objAY.Rev), bookmark(snapshot, true),
		frame("DELETED", objAX, 4), bookmark(4, false), frame("MODIFIED", objAY2, 5), frame("DELETED", objAY2, 6), bookmark(6, false),
	}
	v, err := h.m.Check(expect(list), good)
	if err != nil || !v.Complete || v.ResumeRV != 6 || v.Events != 5 || v.Bookmarks != 3 {
		t.Fatalf("a correct watch-list: %+v %v", v, err)
	}
	for n := range good {
		// Only the last bookmark is not owed.
		v, err := h.m.Check(expect(list), good[:n])
		if err != nil || v.Complete != (n == len(good)-1) {
			t.Errorf("prefix of %d frames: complete=%t %v", n, v.Complete, err)
		}
	}
	live := []watchclient.Frame{frame("DELETED", objAX, 4), frame("MODIFIED", objAY2, 5), frame("DELETED", objAY2, 6)}
	if v, err := h.m.Check(expect(fromRV), live); err != nil || !v.Complete || v.ResumeRV != 6 {
		t.Fatalf("a correct watch from %d: %+v %v", snapshot, v, err)
	}
	if v, err := h.m.Check(expect(fromRV), nil); err != nil || v.Complete || !v.HasResumeRV || v.ResumeRV != snapshot {
		t.Fatalf("nothing yet: %+v %v", v, err)
	}

	bad := []struct {
		name   string
		spec   WatchSpec
		frames []watchclient.Frame
		want   string
	}{
		{"a gap", fromRV, []watchclient.Frame{live[0], live[2]}, "want MODIFIED at 5"},
		{"a duplicate", fromRV, []watchclient.Frame{live[0], live[0]}, "want MODIFIED at 5"},
		{"an extra event", fromRV, append(append([]watchclient.Frame{}, live...), live[2]), "no further event is due"},
		{"the wrong type", fromRV, []watchclient.Frame{frame("MODIFIED", objAX, 4)}, "want DELETED at 4"},
		{"the new object on leaving", fromRV, []watchclient.Frame{frame("DELETED", objAX2, 4)}, "want DELETED at 4"},
		{"the previous object at its own revision", fromRV, []watchclient.Frame{frame("DELETED", objAX, objAX.Rev)}, "want DELETED at 4"},
		{"a bookmark passing an event", fromRV, []watchclient.Frame{bookmark(4, false)}, "passes the undelivered DELETED at 4"},
		{"a decreasing bookmark", fromRV, []watchclient.Frame{live[0], live[1], bookmark(5, false), live[2], bookmark(6, false), bookmark(5, false)}, "bookmark at 5 after one at 6"},
		{"a bookmark without allowWatchBookmarks", noBookmarks, []watchclient.Frame{live[0], bookmark(4, false)}, "without allowWatchBookmarks"},
		{"a bookmark at the start", fromRV, []watchclient.Frame{bookmark(snapshot, false)}, "not after the start"},
		{"an annotated bookmark later", fromRV, []watchclient.Frame{live[0], bookmark(4, true)}, "initial-events-end bookmark at 4 after"},
		{"initial events out of key order", list, []watchclient.Frame{frame("ADDED", objAY, objAY.Rev), frame("ADDED", objAX, objAX.Rev)}, "want initial ADDED a/x"},
		{"an initial event at the snapshot revision", list, []watchclient.Frame{frame("ADDED", objAX, snapshot)}, "want initial ADDED a/x"},
		{"no end bookmark", list, []watchclient.Frame{good[0], good[1], good[3]}, "want the initial-events-end bookmark"},
		{"an end bookmark not annotated", list, []watchclient.Frame{good[0], good[1], bookmark(snapshot, false)}, "annotated=false"},
		{"an end bookmark at another revision", list, []watchclient.Frame{good[0], good[1], bookmark(snapshot+1, true)}, "want the initial-events-end bookmark at 3"},
		{"an unexpected ERROR", fromRV, []watchclient.Frame{errorFrame(410, "Expired", "too old resource version: 3 (3)")}, "unexpected ERROR"},
	}
	for _, c := range bad {
		_, err := h.m.Check(expect(c.spec), c.frames)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}

	// Label filtering on the previous state: a watch for l=2 sees x enter as ADDED.
	l2 := WatchSpec{Label: "l=2", ResourceVersion: strconv.FormatInt(snapshot, 10)}
	if v, err := h.m.Check(expect(l2), []watchclient.Frame{frame("ADDED", objAX2, 4)}); err != nil || !v.Complete {
		t.Errorf("entering the selection: %+v %v", v, err)
	}
	if _, err := h.m.Check(expect(l2), []watchclient.Frame{frame("MODIFIED", objAX2, 4)}); err == nil {
		t.Error("entering the selection as MODIFIED was accepted")
	}
}

// TestCheckErrors checks the 410 and 504 answers the model predicts.
func TestCheckErrors(t *testing.T) {
	h := newHistory(t)
	for i := range 4 {
		h.put(Pod{Namespace: "a", Name: "x", Payload: i}) // 2..5
	}
	h.m.ListRV = 4
	old, err := h.m.Expect(WatchSpec{ResourceVersion: "3"})
	if err != nil {
		t.Fatal(err)
	}
	if old.ErrorCode != 410 || old.ErrorMessage != "too old resource version: 3 (4)" {
		t.Fatalf("watch from before the relist: %s", old)
	}
	if v, err := h.m.Check(old, []watchclient.Frame{errorFrame(410, "Expired", "too old resource version: 3 (4)")}); err != nil || !v.Complete || !v.Error {
		t.Errorf("the expected 410: %+v %v", v, err)
	}
	for name, frames := range map[string][]watchclient.Frame{
		"another message": {errorFrame(410, "Expired", "too old resource version: 3 (5)")},
		"another code":    {errorFrame(500, "InternalError", "too old resource version: 3 (4)")},
		"events instead":  {frame("MODIFIED", h.m.Writes[2].Cur, 4)},
		"events after":    {errorFrame(410, "Expired", "too old resource version: 3 (4)"), bookmark(5, false)},
	} {
		if _, err := h.m.Check(old, frames); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	atList, err := h.m.Expect(WatchSpec{ResourceVersion: "4"})
	if err != nil || atList.ErrorCode != 0 {
		t.Fatalf("watch from the relist revision: %s %v", atList, err)
	}
	tr := true
	future, err := h.m.Expect(WatchSpec{ResourceVersion: "9", SendInitialEvents: &tr})
	if err != nil || future.ErrorCode != 504 {
		t.Fatalf("watch-list from the future: %s %v", future, err)
	}
	if _, err := h.m.Check(future, []watchclient.Frame{errorFrame(504, "Timeout", "Timeout: Too large resource version: 9, current: 5")}); err != nil {
		t.Error(err)
	}
	if _, err := h.m.Check(future, []watchclient.Frame{errorFrame(504, "Timeout", "Timeout: Too large resource version: 8, current: 5")}); err == nil {
		t.Error("a 504 for another resourceVersion was accepted")
	}
}
