package chaintest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/httpwatch/watchclient"
	"github.com/listwatch/listwatch/proptest/kubemodel"
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
	return &history{t: t, st: st, m: &Model{History: kubemodel.NewHistory(st.Rev()), Cached: true, ListRV: st.Rev()}}
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

func frame(typ string, o *kubemodel.Object, rev int64) watchclient.Frame {
	return watchclient.Frame{Type: watch.EventType(typ), Object: json.RawMessage(o.Render(rev))}
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

// TestCheckJudgesFrames builds one history and checks that Check reads frames as kubemodel judges
// them: exact objects (payload filler included), the end bookmark of a defaulted watch-list, and
// what only the HTTP API adds (a bookmark is an empty v1 Pod, an ERROR a v1 Status); the model's
// refusals come through. kubemodel's own tests cover the rest of the rules.
func TestCheckJudgesFrames(t *testing.T) {
	h := newHistory(t)
	ax := Pod{Namespace: "a", Name: "x", Labels: map[string]string{"l": "1"}, Payload: 300}
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
	objAY2 := h.m.Writes[3].Cur

	// Unset with bookmarks: the API defaults it to a watch-list, which ends its replay with the
	// annotated bookmark.
	list := WatchSpec{Label: "l=1", Unset: true, Bookmarks: true}
	fromRV := WatchSpec{Label: "l=1", ResourceVersion: strconv.FormatInt(snapshot, 10), Bookmarks: true}

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
	// Any encoding of the same object is the same object.
	var obj map[string]any
	if err := json.Unmarshal(good[0].Object, &obj); err != nil {
		t.Fatal(err)
	}
	indented, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	reencoded := append([]watchclient.Frame{{Type: "ADDED", Object: indented}}, good[1:]...)
	if _, err := h.m.Check(expect(list), reencoded); err != nil {
		t.Fatalf("a re-encoded object: %v", err)
	}
	live := []watchclient.Frame{frame("DELETED", objAX, 4), frame("MODIFIED", objAY2, 5), frame("DELETED", objAY2, 6)}
	if v, err := h.m.Check(expect(fromRV), live); err != nil || !v.Complete || v.ResumeRV != 6 {
		t.Fatalf("a correct watch from %d: %+v %v", snapshot, v, err)
	}
	otherPayload := ax
	otherPayload.Payload = 301
	withMeta := func(meta map[string]any) watchclient.Frame {
		data, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta})
		return watchclient.Frame{Type: "BOOKMARK", Object: data}
	}
	status := func(apiVersion string) watchclient.Frame {
		data, _ := json.Marshal(map[string]any{"kind": "Status", "apiVersion": apiVersion, "metadata": map[string]any{},
			"status": "Failure", "message": "too old resource version: 3 (3)", "reason": "Expired", "code": 410})
		return watchclient.Frame{Type: "ERROR", Object: data}
	}
	bad := []struct {
		name   string
		spec   WatchSpec
		frames []watchclient.Frame
		want   string
	}{
		{"a gap", fromRV, []watchclient.Frame{live[0], live[2]}, "want MODIFIED /registry/pods/a/y at 5"},
		{"another payload", list, []watchclient.Frame{{Type: "ADDED", Object: otherPayload.JSON("2")}}, "with other content"},
		{"a bookmark passing an event", fromRV, []watchclient.Frame{bookmark(4, false)}, "passes the pending DELETED /registry/pods/a/x at 4"},
		{"a bookmark of another kind", fromRV, []watchclient.Frame{{Type: "BOOKMARK", Object: []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"resourceVersion":"4"}}`)}}, `bookmark of kind "Node"`},
		{"a bookmark with object metadata", fromRV, []watchclient.Frame{withMeta(map[string]any{"name": "x", "resourceVersion": "4"})}, "a BOOKMARK of the object"},
		{"a bookmark with another annotation", fromRV, []watchclient.Frame{withMeta(map[string]any{"resourceVersion": "4", "annotations": map[string]any{"a": "b"}})}, `a BOOKMARK annotated a="b"`},
		{"no end bookmark", list, []watchclient.Frame{good[0], good[1], good[3]}, "want the initial-events-end BOOKMARK at 3"},
		{"an ERROR Status of another apiVersion", fromRV, []watchclient.Frame{status("v2")}, `ERROR Status of apiVersion "v2"`},
		{"an unexpected ERROR", fromRV, []watchclient.Frame{status("v1")}, "unexpected ERROR 410"},
	}
	for _, c := range bad {
		_, err := h.m.Check(expect(c.spec), c.frames)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestCheckErrors checks the 410 and 504 answers the model predicts for a cached chain, and the
// 410 and 500 of an uncached one after a compaction.
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
	if old.ErrorCode() != 410 || old.Refusal.Message != "too old resource version: 3 (4)" {
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
	if err != nil || atList.ErrorCode() != 0 {
		t.Fatalf("watch from the relist revision: %s %v", atList, err)
	}
	tr := true
	future, err := h.m.Expect(WatchSpec{ResourceVersion: "9", SendInitialEvents: &tr})
	if err != nil || future.ErrorCode() != 504 {
		t.Fatalf("watch-list from the future: %s %v", future, err)
	}
	if _, err := h.m.Check(future, []watchclient.Frame{errorFrame(504, "Timeout", "Timeout: Too large resource version: 9, current: 5")}); err != nil {
		t.Error(err)
	}
	if _, err := h.m.Check(future, []watchclient.Frame{errorFrame(504, "Timeout", "Timeout: Too large resource version: 8, current: 5")}); err == nil {
		t.Error("a 504 for another resourceVersion was accepted")
	}

	// Without a cache, after a compaction at 5: from 3, 410; from 4, the update at 5 lost its
	// previous value.
	h.m.Cached, h.m.CompactRev = false, 5
	for rv, want := range map[string]string{
		"3": "410 The resourceVersion for the provided watch is too old.",
		"4": `500 Internal error occurred: etcd event received with PrevKv=nil (key="/registry/pods/a/x", modRevision=5, type=PUT)`,
		"5": "0 ",
	} {
		e, err := h.m.Expect(WatchSpec{ResourceVersion: rv})
		if err != nil {
			t.Fatal(err)
		}
		msg := ""
		if e.Refusal != nil {
			msg = e.Refusal.Message
		}
		if got := fmt.Sprintf("%d %s", e.ErrorCode(), msg); got != want {
			t.Errorf("uncached watch from %s: %s, want %s", rv, got, want)
		}
	}
}
