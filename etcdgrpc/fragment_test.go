package etcdgrpc

import (
	"errors"
	"math/rand/v2"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// upstreamFragments is the splitting rule of v3rpc's sendFragments, re-encoding every candidate
// fragment; sendFragments must cut exactly where it does.
func upstreamFragments(wr *pb.WatchResponse, limit int) [][]*mvccpb.Event {
	if proto.Size(wr) < limit || len(wr.Events) < 2 {
		return [][]*mvccpb.Event{wr.Events}
	}
	var out [][]*mvccpb.Event
	idx := 0
	for idx < len(wr.Events) {
		cur := &pb.WatchResponse{Header: wr.Header, WatchId: wr.WatchId, Fragment: true}
		for _, ev := range wr.Events[idx:] {
			cur.Events = append(cur.Events, ev)
			if len(cur.Events) > 1 && proto.Size(cur) >= limit {
				cur.Events = cur.Events[:len(cur.Events)-1]
				break
			}
			idx++
		}
		out = append(out, cur.Events)
	}
	return out
}

func TestSendFragmentsMatchesUpstreamCuts(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		n := rnd.IntN(40)
		wr := &pb.WatchResponse{Header: &pb.ResponseHeader{ClusterId: 1, MemberId: 2, Revision: rnd.Int64N(1 << 40), RaftTerm: 2}, WatchId: rnd.Int64N(1000)}
		for i := range n {
			size := rnd.IntN(300)
			if rnd.IntN(10) == 0 {
				size = rnd.IntN(5000) // now and then an event bigger than the limit
			}
			ev := &mvccpb.Event{Kv: &mvccpb.KeyValue{Key: []byte{byte(i)}, Value: make([]byte, size), ModRevision: int64(i + 1)}}
			if rnd.IntN(3) == 0 {
				ev.PrevKv = &mvccpb.KeyValue{Key: []byte{byte(i)}, Value: make([]byte, rnd.IntN(200))}
			}
			wr.Events = append(wr.Events, ev)
		}
		limit := 200 + rnd.IntN(3000)
		var got []*pb.WatchResponse
		if err := sendFragments(wr, limit, func(r *pb.WatchResponse) error { got = append(got, r); return nil }); err != nil {
			t.Fatal(err)
		}
		want := upstreamFragments(wr, limit)
		if len(got) != len(want) {
			t.Fatalf("case %d (%d events, limit %d): %d fragments, upstream cuts %d", iter, n, limit, len(got), len(want))
		}
		for i := range got {
			if len(got[i].Events) != len(want[i]) {
				t.Fatalf("case %d fragment %d: %d events, upstream %d", iter, i, len(got[i].Events), len(want[i]))
			}
			for j := range want[i] {
				if got[i].Events[j] != want[i][j] {
					t.Fatalf("case %d fragment %d event %d differs", iter, i, j)
				}
			}
			if last := i == len(got)-1; got[i].Fragment == last && len(got) > 1 {
				t.Errorf("case %d fragment %d of %d: fragment=%v", iter, i, len(got), got[i].Fragment)
			}
			if got[i].Header != wr.Header || got[i].WatchId != wr.WatchId {
				t.Errorf("case %d fragment %d lost the header or watch ID", iter, i)
			}
		}
		if len(got) == 1 && got[0] != wr {
			t.Errorf("case %d: an unsplit response must go as it is", iter)
		}
	}
}

func TestSendFragmentsStopsAtSendError(t *testing.T) {
	wr := &pb.WatchResponse{Header: &pb.ResponseHeader{}}
	for i := range 10 {
		wr.Events = append(wr.Events, &mvccpb.Event{Kv: &mvccpb.KeyValue{Key: []byte{byte(i)}, Value: make([]byte, 100)}})
	}
	boom := errors.New("boom")
	calls := 0
	err := sendFragments(wr, 300, func(*pb.WatchResponse) error { calls++; return boom })
	if !errors.Is(err, boom) || calls != 1 {
		t.Errorf("err %v after %d sends, want boom after 1", err, calls)
	}
}

func TestToGRPCErrorFallbacks(t *testing.T) {
	if err := toGRPCError(errors.New("strange")); err.Error() != "rpc error: code = Unknown desc = strange" {
		t.Errorf("unknown error -> %v", err)
	}
}

func TestDefaultIDsAreEtcds(t *testing.T) {
	o := Options{}.WithDefaults()
	// The IDs etcd prints for a member started with no flags.
	if o.MemberID != 0x8e9e05c52164694d || o.ClusterID != 0xcdf818194e3a8c32 {
		t.Errorf("member %x cluster %x, want 8e9e05c52164694d cdf818194e3a8c32", o.MemberID, o.ClusterID)
	}
	// Peer URL order does not matter, the token does.
	a := Options{PeerURLs: []string{"http://b:2380", "http://a:2380"}}.WithDefaults()
	b := Options{PeerURLs: []string{"http://a:2380", "http://b:2380"}}.WithDefaults()
	c := Options{PeerURLs: []string{"http://a:2380", "http://b:2380"}, ClusterToken: "other"}.WithDefaults()
	if a.MemberID != b.MemberID || b.MemberID == c.MemberID {
		t.Errorf("member IDs %x %x %x", a.MemberID, b.MemberID, c.MemberID)
	}
}
