package interop

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// What of a watch is contractual, and so compared between the sides:
//
//   - the created notification (when the watch asked for it): its header revision is the store
//     revision at creation, fixed by the sequential workload;
//   - every event, flattened across responses, in order, each in full (type, kv, prev_kv): that
//     is the history the watch owes, revision by revision, in each revision's op order;
//   - how the watch ended: the compaction answer (compact_revision, header) or the failed-create
//     error, or a plain close after the workload cancelled it.
//
// What is not compared, because it depends on timing even between two identical etcds: how events
// are batched into responses (a catch-up batch holds many revisions, a synced watcher gets one
// response per revision), the header revision of event responses (the current revision when a
// catch-up batch was read), and how many progress notifications arrived (RequestProgress is
// answered only when every watcher of the stream is synced, so the workload retries it). Those are
// instead checked on each side for the promises etcd keeps whatever the timing (checkWatch).
type watchOutcome struct {
	Created *pb.WatchResponse
	Events  []*mvccpb.Event
	End     *pb.WatchResponse
	EndErr  string
	Closed  bool
}

func watchPB(wr *clientv3.WatchResponse) *pb.WatchResponse {
	return &pb.WatchResponse{
		Header:          wr.Header,
		Created:         wr.Created,
		Canceled:        wr.Canceled,
		CompactRevision: wr.CompactRevision,
		CancelReason:    wr.CancelReason,
	}
}

// outcome summarizes a stopped watch.
func (s *side) watchOutcome(w *watchRec) watchOutcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out watchOutcome
	out.Closed = w.closed
	for i := range w.resps {
		wr := &w.resps[i]
		switch {
		case wr.Created:
			out.Created = s.normProto(watchPB(wr)).(*pb.WatchResponse)
		case wr.Canceled || wr.CompactRevision != 0 || wr.Err() != nil:
			out.End = s.normProto(watchPB(wr)).(*pb.WatchResponse)
			if err := wr.Err(); err != nil {
				out.EndErr = err.Error()
			}
		}
		out.Events = append(out.Events, s.normEvents(wr.Events)...)
	}
	return out
}

// checkWatch verifies, on one side alone, the watch promises that hold whatever the timing
// (tests/robustness/validate/watch.go): event revisions never decrease and a (revision, key, type)
// never repeats for one event type (ordered, unique); no revision is split across responses (atomic); a progress
// notification at P comes after every event at or below P and before every event above it
// (bookmarkable); an event response's header is at or above its last event; no event is below the
// requested start revision; nothing follows the final response; the created notification comes first.
func (s *side) checkWatch(w *watchRec) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var problems []string
	bad := func(i int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("response %d: %s", i, fmt.Sprintf(format, args...)))
	}
	var lastRev, progress int64
	seen := map[string]bool{}
	ended := false
	for i := range w.resps {
		wr := &w.resps[i]
		if ended {
			bad(i, "response after the final one: %+v", wr)
		}
		if wr.Created && i != 0 {
			bad(i, "created notification is not the first response")
		}
		if wr.Canceled || wr.CompactRevision != 0 {
			ended = true
		}
		if wr.IsProgressNotify() {
			if wr.Header.Revision < lastRev {
				bad(i, "progress at %d after an event at %d", wr.Header.Revision, lastRev)
			}
			if wr.Header.Revision > progress {
				progress = wr.Header.Revision
			}
			continue
		}
		for j, ev := range wr.Events {
			rev := ev.Kv.ModRevision
			if j == 0 && rev == lastRev && lastRev != 0 {
				bad(i, "revision %d split across responses", rev)
			}
			if rev < lastRev {
				bad(i, "event at %d after one at %d", rev, lastRev)
			}
			if rev <= progress {
				bad(i, "event at %d after progress at %d", rev, progress)
			}
			if w.spec.Rev > 0 && rev < w.spec.Rev {
				bad(i, "event at %d below the start revision %d", rev, w.spec.Rev)
			}
			// A txn may put a key and then delete it, so a key can have two events in one revision,
			// but never two of the same type.
			id := fmt.Sprintf("%d/%q/%v", rev, ev.Kv.Key, ev.Type)
			if seen[id] {
				bad(i, "event %s twice", id)
			}
			seen[id] = true
			lastRev = rev
		}
		if len(wr.Events) > 0 && wr.Header.Revision < lastRev {
			bad(i, "header revision %d below its last event %d", wr.Header.Revision, lastRev)
		}
	}
	return problems
}

// diffWatch compares two watch outcomes: the created and final answers in full, the events with
// diffEvents.
func diffWatch(a, b watchOutcome) string {
	ea, eb := a.Events, b.Events
	a.Events, b.Events = nil, nil
	var out string
	if !proto.Equal(a.Created, b.Created) || !proto.Equal(a.End, b.End) || a.EndErr != b.EndErr || a.Closed != b.Closed {
		out = cmp.Diff(a, b, cmpOptions)
	}
	if d := diffEvents(ea, eb); d != "" {
		out += d
	}
	return out
}

func diffRawWatch(a, b *rawWatch) string {
	ca, cb := *a, *b
	ca.Events, cb.Events = nil, nil
	var out string
	if !cmp.Equal(ca, cb, cmpOptions) { // no events, so no large values: cmp is fast enough here
		out = cmp.Diff(ca, cb, cmpOptions)
	}
	if d := diffEvents(a.Events, b.Events); d != "" {
		out += d
	}
	return out
}

// TestCheckWatchCatchesBrokenPromises: checkWatch passes a stream that keeps etcd's watch promises
// and names each broken one, so that the per-side checks of the differential run can fail.
func TestCheckWatchCatchesBrokenPromises(t *testing.T) {
	hdr := func(rev int64) *pb.ResponseHeader { return &pb.ResponseHeader{Revision: rev} }
	put := func(key string, rev int64) *clientv3.Event {
		return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
	}
	events := func(rev int64, evs ...*clientv3.Event) clientv3.WatchResponse {
		return clientv3.WatchResponse{Header: hdr(rev), Events: evs}
	}
	good := func() []clientv3.WatchResponse {
		return []clientv3.WatchResponse{
			{Header: hdr(4), Created: true},
			events(5, put("a", 5), put("b", 5)),
			events(7, put("a", 6), put("a", 7)),
			{Header: hdr(8)}, // progress notification
			events(9, put("b", 9)),
			{Header: hdr(9), CompactRevision: 9, Canceled: true},
		}
	}
	spec := watchSpec{Sel: keySel{Key: "a", End: "c", Mode: selRange}, Rev: 5}
	check := func(resps []clientv3.WatchResponse) []string {
		return (&side{}).checkWatch(&watchRec{spec: spec, resps: resps})
	}
	if p := check(good()); len(p) != 0 {
		t.Fatalf("a stream that keeps every promise: %q", p)
	}
	for _, c := range []struct {
		name, want string
		mutate     func(r []clientv3.WatchResponse) []clientv3.WatchResponse
	}{
		{"created later", "created notification is not the first", func(r []clientv3.WatchResponse) []clientv3.WatchResponse {
			return append(r[1:2:2], append([]clientv3.WatchResponse{r[0]}, r[2:]...)...)
		}},
		{"response after the final one", "after the final one", func(r []clientv3.WatchResponse) []clientv3.WatchResponse {
			return append(r, events(10, put("a", 10)))
		}},
		{"revision split", "split across responses", func(r []clientv3.WatchResponse) []clientv3.WatchResponse {
			r[2].Events = append([]*clientv3.Event{put("c", 5)}, r[2].Events...)
			return r
		}},
		{"going back", "after one at", func(r []clientv3.WatchResponse) []clientv3.WatchResponse {
			r[2].Events = []*clientv3.Event{put("a", 7), put("a", 6)}
			return r
		}},
		{"progress behind an event", "progress at 6 after an event at 7", func(r []clientv3.WatchResponse) []clientv3.WatchResponse {
			r[3].Header = hdr(6)
			return r
		}},
		{"event at a revision a progress notification passed", "after progress at 8", func(r []clientv3.WatchResponse) []clientv3.WatchResponse {
			r[4] = events(9, put("b", 8))
			return r
		}},
		{"below the start revision", "below the start revision 5", func(r []clientv3.WatchResponse) []clientv3.WatchResponse {
			r[1].Events = []*clientv3.Event{put("a", 4), put("b", 5)}
			return r
		}},
		{"event twice", "twice", func(r []clientv3.WatchResponse) []clientv3.WatchResponse {
			r[1].Events = append(r[1].Events, put("a", 5))
			return r
		}},
		{"header below its events", "header revision 8 below its last event 9", func(r []clientv3.WatchResponse) []clientv3.WatchResponse {
			r[4].Header = hdr(8)
			return r
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := check(c.mutate(good()))
			if len(p) == 0 || !strings.Contains(strings.Join(p, "\n"), c.want) {
				t.Errorf("problems %q, want one saying %q", p, c.want)
			}
		})
	}
}
