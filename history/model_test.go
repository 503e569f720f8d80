package history

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/listwatch/listwatch/store"
)

// TestModelMatchesStore drives the model and the reference store with the same random requests and
// demands the same answer, the same error and the same events from both.
func TestModelMatchesStore(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		st := newReferenceStore()
		defer st.Close()
		ws, err := st.NewWatchStream()
		if err != nil {
			rt.Fatal(err)
		}
		defer ws.Close()
		if _, err := ws.Watch(context.Background(), &store.WatchRequest{Key: []byte{0}, RangeEnd: []byte{0}, PrevKv: true}); err != nil {
			rt.Fatal(err)
		}
		<-ws.Chan()
		s := initialState()
		g := &reqGen{t: rt, rev: func() int64 { return s.rev }, wild: true}
		var shapes shapeChecker
		defer shapes.close()
		n := rapid.IntRange(1, 60).Draw(rt, "n")
		for i := range n {
			req := g.request(fmt.Sprintf("op%d", i), true)
			op := &kvOp{req: &req, shapeErr: shapes.check(&req)}
			var resp *Response
			var serr error
			if lg := req.LeaseGrant; lg != nil && lg.ID == 0 {
				// the store picks the ID; the model is told it, as a history's response tells it
				resp, serr = applyToStore(st, &req)
				if serr == nil {
					op.grantID = resp.LeaseGrant.ID
				}
			} else {
				if lg != nil {
					op.grantID = lg.ID
				}
				resp, serr = applyToStore(st, &req)
			}
			o := eval(s, op)
			if lg := req.LeaseGrant; lg != nil && lg.ID == 0 && serr != nil {
				continue
			}
			if err := agree(op, o, resp, serr); err != nil {
				rt.Fatalf("request %d %s: %v", i, DescribeRequest(&req), err)
			}
			if serr == nil && resp.Revision != o.state.rev {
				rt.Fatalf("request %d: store at %d, model at %d", i, resp.Revision, o.state.rev)
			}
			var got []change
			for len(ws.Chan()) > 0 {
				wr := <-ws.Chan()
				for _, ev := range wr.Events {
					e := fromStoreEvent(ev)
					got = append(got, change{typ: e.Type, kv: e.Kv})
				}
			}
			if diff := cmp.Diff(o.changes, got, cmp.AllowUnexported(change{}), diffOptions); diff != "" {
				rt.Fatalf("request %d %s: events differ (-model +store):\n%s", i, DescribeRequest(&req), diff)
			}
			if lg := req.LeaseGrant; lg != nil && serr == nil {
				g.leases = append(g.leases, resp.LeaseGrant.ID)
			}
			s = o.state
			if st.Rev() != s.rev || st.CompactRevision() != s.compactRev {
				rt.Fatalf("request %d: store at %d/%d, model at %d/%d", i, st.Rev(), st.CompactRevision(), s.rev, s.compactRev)
			}
		}
	})
}

// TestStateEquality: states reached by different paths are equal exactly when their current
// keyspace, leases, compaction and whole revision history are.
func TestStateEquality(t *testing.T) {
	apply := func(s *mstate, reqs ...Request) *mstate {
		for i := range reqs {
			op := &kvOp{req: &reqs[i]}
			if reqs[i].LeaseGrant != nil {
				op.grantID = reqs[i].LeaseGrant.ID
			}
			s = eval(s, op).state
		}
		return s
	}
	grant := func(id int64) Request { return Request{LeaseGrant: &LeaseGrantRequest{ID: id, TTL: 60}} }
	s0 := initialState()
	a := apply(s0, put("a", "1"), put("b", "1"), grant(1), grant(2))
	b := apply(s0, put("a", "1"), put("b", "1"), grant(2), grant(1))
	if !statesEqual(a, b) || a.hash != b.hash {
		t.Fatal("same writes with leases granted in another order: states differ")
	}
	c := apply(s0, put("a", "1"), put("b", "1"), del("b"))
	d := apply(s0, put("a", "1"), put("c", "1"), del("c"))
	if sizeOf(c.kv()) != sizeOf(d.kv()) || !treapEqual(c.kv(), d.kv()) {
		t.Fatal("expected the same live keyspace")
	}
	if statesEqual(c, d) {
		t.Fatal("states with different histories (b vs c at revision 3) compare equal")
	}
	e := apply(s0, put("a", "1"), put("b", "1"), del("b"))
	if !statesEqual(c, e) {
		t.Fatal("identical histories built twice compare unequal")
	}
	if statesEqual(apply(s0, put("a", "1")), apply(s0, put("a", "2"))) {
		t.Fatal("different values compare equal")
	}
}

// TestShapeChecksMatchStore: the request-shape errors the checker computes are the store's, at the
// limits the random requests do not reach.
func TestShapeChecksMatchStore(t *testing.T) {
	ops := func(n int) []RequestOp {
		var out []RequestOp
		for i := range n {
			out = append(out, RequestOp{Range: &RangeRequest{Key: Bytes(fmt.Sprint(i))}})
		}
		return out
	}
	big := func(n int) Bytes { return Bytes(make([]byte, n)) }
	reqs := map[string]Request{
		"128 ops":          {Txn: &TxnRequest{Success: ops(128)}},
		"129 ops":          {Txn: &TxnRequest{Failure: ops(129)}},
		"nested budget":    {Txn: &TxnRequest{Success: []RequestOp{{Txn: &TxnRequest{Success: ops(127)}}}}},
		"nested too many":  {Txn: &TxnRequest{Success: []RequestOp{{Txn: &TxnRequest{Success: ops(128)}}}}},
		"big value":        {Put: &PutRequest{Key: "a", Value: big(1536*1024 + 1)}},
		"value at limit":   {Put: &PutRequest{Key: "a", Value: big(1536*1024 - 40)}},
		"big txn":          {Txn: &TxnRequest{Success: []RequestOp{{Put: &PutRequest{Key: "a", Value: big(800 * 1024)}}, {Put: &PutRequest{Key: "b", Value: big(800 * 1024)}}}}},
		"big delete":       {DeleteRange: &DeleteRangeRequest{Key: big(1600 * 1024)}},
		"empty op":         {Txn: &TxnRequest{Success: []RequestOp{{}}}},
		"empty compare":    {Txn: &TxnRequest{Compare: []Compare{{}}}},
		"put in deleted":   {Txn: &TxnRequest{Success: []RequestOp{{DeleteRange: &DeleteRangeRequest{Key: "a", RangeEnd: "c"}}, {Put: &PutRequest{Key: "b"}}}}},
		"put after \\x00":  {Txn: &TxnRequest{Success: []RequestOp{{DeleteRange: &DeleteRangeRequest{Key: "a", RangeEnd: "\x00"}}, {Put: &PutRequest{Key: "b"}}}}},
		"then/else share":  {Txn: &TxnRequest{Success: []RequestOp{{Txn: &TxnRequest{Success: []RequestOp{{Put: &PutRequest{Key: "a"}}}, Failure: []RequestOp{{Put: &PutRequest{Key: "a"}}}}}}}},
		"nested duplicate": {Txn: &TxnRequest{Success: []RequestOp{{Put: &PutRequest{Key: "a"}}, {Txn: &TxnRequest{Failure: []RequestOp{{Put: &PutRequest{Key: "a"}}}}}}}},
		"ttl too large":    {LeaseGrant: &LeaseGrantRequest{ID: 1, TTL: store.MaxLeaseTTL + 1}},
	}
	var shapes shapeChecker
	defer shapes.close()
	for name, req := range reqs {
		st := newReferenceStore()
		_, serr := applyToStore(st, &req)
		st.Close()
		var want error
		if serr != nil && !errors.Is(serr, store.ErrLeaseNotFound) && !errors.Is(serr, store.ErrKeyNotFound) || errors.Is(serr, store.ErrKeyNotFound) && name == "empty op" {
			want = serr
		}
		if got := shapes.check(&req); !errors.Is(got, want) || (got == nil) != (want == nil) {
			t.Errorf("%s: checker %v, store %v", name, got, want)
		}
	}
}
