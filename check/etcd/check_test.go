package etcd

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/store"
)

// scenario records a sequential history against a store on which every mutation has somewhere to
// apply: watches from 0, from an old revision, over everything and compacted; txns with several
// puts, non-creating puts, a lease revoke, a compaction, linearizable and serializable reads.
func scenario(t testing.TB) *History {
	return scenarioOn(t, func(st *store.Store) (*Recorder, func()) { return newStoreRecorder(st), func() {} })
}

func scenarioOn(t testing.TB, recorder func(st *store.Store) (*Recorder, func())) *History {
	t.Helper()
	st := store.New(store.Options{SyncInterval: 5 * time.Millisecond})
	defer st.Close()
	rec, done := recorder(st)
	defer done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watches := newWatchTracker(ctx, rec)
	watch := func(req WatchRequest) { watches.waitCreated(t, watches.start(req)) }
	do := func(req Request) {
		if _, err := rec.Do(ctx, req); err != nil && !IsDefiniteError(rpctypes.ErrorDesc(err)) {
			t.Fatalf("%s: %v", DescribeRequest(&req), err)
		}
	}
	do(Request{LeaseGrant: &LeaseGrantRequest{ID: 7, TTL: 3600}})
	watch(WatchRequest{Key: "a", RangeEnd: "b", PrevKV: true})
	watch(WatchRequest{Key: "a1"})
	do(put("a1", "1"))
	do(put("a2", "1"))
	do(Request{Txn: &TxnRequest{Success: []RequestOp{{Put: &PutRequest{Key: "a1", Value: "2"}}, {Put: &PutRequest{Key: "a3", Value: "1"}}}}})
	do(Request{Put: &PutRequest{Key: "a1", Value: "3", Lease: 7}})
	do(del("a2"))
	do(prefix("a"))
	do(Request{Range: &RangeRequest{Key: "a1", Serializable: true}})
	do(Request{Compact: &CompactRequest{Revision: 4}})
	do(Request{Range: &RangeRequest{Key: "a1", Revision: 2}}) // compacted
	watch(WatchRequest{Key: "a", RangeEnd: "\x00", StartRevision: 2})
	watch(WatchRequest{Key: "\x00", RangeEnd: "\x00", StartRevision: 4, PrevKV: true})
	do(put("a1", "4"))
	do(Request{LeaseRevoke: &LeaseRevokeRequest{ID: 7}})
	do(put("b", "1"))
	do(Request{Txn: &TxnRequest{Success: []RequestOp{{Put: &PutRequest{Key: "a4", Value: "1"}}, {DeleteRange: &DeleteRangeRequest{Key: "a3"}}}}})
	do(prefix("a"))
	watches.waitUpToDate(t, st.Rev())
	cancel()
	watches.wait()
	return rec.History()
}

func TestScenarioPasses(t *testing.T) {
	t.Run("store", func(t *testing.T) { checkScenario(t, scenario(t)) })
	t.Run("clientv3", func(t *testing.T) { checkScenario(t, scenarioOn(t, clientRecorder(t))) })
}

func checkScenario(t *testing.T, h *History) {
	res := mustCheck(t, h)
	if !res.OK() {
		t.Fatalf("%v\nnotes %v", res.Err(), res.Notes)
	}
	if !h.Watches[2].Responses[len(h.Watches[2].Responses)-1].IsCompacted() {
		t.Fatalf("watch from a compacted revision was not canceled: %+v", h.Watches[2].Responses)
	}
	if len(res.Linearization) != len(h.Operations)-1 { // the serializable read is checked apart
		t.Fatalf("linearization has %d of %d operations", len(res.Linearization), len(h.Operations))
	}
}

// notInScenario names the mutations the hand-made scenario gives no place, and why;
// TestMutationsAtEveryPosition applies them to the recorded histories.
var notInScenario = map[string]string{
	"event of a filtered type":           "it has no watch with a filter",
	"lease expiry in the wrong revision": "its lease is revoked, never left to expire",
	"drop a put's prev_kv":               "it asks no put for its prev_kv",
	"corrupt a put's prev_kv":            "it asks no put for its prev_kv",
	"created revision behind":            "its watches from now see no event at their created revision",
	"past read answered compacted":       "its one past read is of a compacted revision",
}

// TestEachMutationBreaksExactlyItsGuarantee: every mutation, at its first and at its last place in
// the hand-made scenario, is reported with its guarantee (and none but those it may break besides),
// and the violation names where it is.
func TestEachMutationBreaksExactlyItsGuarantee(t *testing.T) {
	h := scenario(t)
	res := mustCheck(t, h)
	if !res.OK() {
		t.Fatal(res.Err())
	}
	for _, m := range mutations {
		if _, ok := notInScenario[m.name]; ok {
			if len(m.sites(h, res)) > 0 {
				t.Errorf("%q: the scenario gives it a place now: remove it from notInScenario", m.name)
			}
			continue
		}
		for _, at := range []string{"first", "last"} {
			t.Run(m.name+"/"+at, func(t *testing.T) {
				mh := cloneHistory(t, h)
				pick := func(n int) int { return 0 }
				if at == "last" {
					pick = func(n int) int { return n - 1 }
				}
				if !m.apply(mh, res, pick) {
					t.Fatal("the scenario gives the mutation nowhere to apply")
				}
				mres := mustCheck(t, mh)
				if err := m.judge(mres.Guarantees()); err != nil {
					t.Fatalf("%v:\n%v", err, mres.Err())
				}
				v := mres.Violations[0]
				if v.Message == "" || (v.Watch < 0 && v.Operation < 0) {
					t.Fatalf("violation does not say where: %+v", v)
				}
				if !errors.Is(mres.Err(), ErrViolation) {
					t.Fatalf("Err() = %v, want ErrViolation", mres.Err())
				}
			})
		}
	}
}

// builder makes histories by hand: each operation takes one tick unless given times.
type builder struct {
	h History
	t int64
}

func (b *builder) op(client int, req Request, resp *Response) int {
	b.t += 10
	b.h.Operations = append(b.h.Operations, Operation{Client: client, Call: b.t, Return: b.t + 5, Request: req, Response: resp})
	return len(b.h.Operations) - 1
}

func (b *builder) fail(client int, req Request, msg string, unknown bool) int {
	b.t += 10
	b.h.Operations = append(b.h.Operations, Operation{Client: client, Call: b.t, Return: b.t + 5, Request: req, Error: msg, Unknown: unknown})
	return len(b.h.Operations) - 1
}

func rev(r int64) *Response { return &Response{Revision: r} }

func kvs(r int64, kv ...KeyValue) *Response {
	return &Response{Revision: r, Range: &RangeResponse{Kvs: kv, Count: int64(len(kv))}}
}

func kv(k, v string, create, mod, version int64) KeyValue {
	return KeyValue{Key: Bytes(k), Value: Bytes(v), CreateRevision: create, ModRevision: mod, Version: version}
}

func wantOnly(t *testing.T, h *History, g Guarantee, op int) *Result {
	t.Helper()
	res := mustCheck(t, h)
	if got := res.Guarantees(); len(got) != 1 || got[0] != g {
		t.Fatalf("want exactly %s, got %v: %v", g, got, res.Err())
	}
	if op >= 0 && res.Violations[0].Operation != op {
		t.Fatalf("violation names operation %d, want %d: %v", res.Violations[0].Operation, op, res.Violations[0])
	}
	return res
}

func wantOK(t *testing.T, h *History) *Result {
	t.Helper()
	res := mustCheck(t, h)
	if !res.OK() {
		t.Fatalf("want OK: %v", res.Err())
	}
	return res
}

func TestLinearizability(t *testing.T) {
	t.Run("sequential", func(t *testing.T) {
		var b builder
		b.op(0, put("a", "1"), rev(2))
		b.op(0, get("a"), kvs(2, kv("a", "1", 2, 2, 1)))
		b.op(1, put("a", "2"), rev(3))
		b.op(1, get("a"), kvs(3, kv("a", "2", 2, 3, 2)))
		b.op(0, del("a"), &Response{Revision: 4, DeleteRange: &DeleteRangeResponse{Deleted: 1}})
		b.op(0, del("a"), &Response{Revision: 4, DeleteRange: &DeleteRangeResponse{}})
		b.op(0, get("a"), kvs(4))
		wantOK(t, &b.h)
	})
	t.Run("stale read", func(t *testing.T) {
		var b builder
		b.op(0, put("a", "1"), rev(2))
		b.op(0, put("a", "2"), rev(3))
		stale := b.op(1, get("a"), kvs(3, kv("a", "1", 2, 2, 1)))
		res := wantOnly(t, &b.h, Linearizable, stale)
		if d := res.Violations[0].Diff; !strings.Contains(d, `Value:          "2"`) || !strings.Contains(d, `Value:          "1"`) {
			t.Fatalf("diff does not show expected vs received value:\n%s", d)
		}
	})
	t.Run("header revision 0", func(t *testing.T) {
		// no revision the store was at, whatever the rest of the history
		var b builder
		b.op(0, put("a", "1"), rev(2))
		res := wantOnly(t, &b.h, Linearizable, b.op(1, get("b"), kvs(0)))
		if m := res.Violations[0].Message; !strings.Contains(m, "never was at") {
			t.Fatalf("violation: %s", m)
		}
	})
	t.Run("stale read with its old revision", func(t *testing.T) {
		// its revision orders it before the put of 3, which returned before it was called: the
		// violation names both
		var b builder
		b.op(0, put("a", "1"), rev(2))
		b.op(0, put("a", "2"), rev(3))
		res := wantOnly(t, &b.h, Linearizable, b.op(1, get("a"), kvs(2, kv("a", "1", 2, 2, 1))))
		if m := res.Violations[0].Message; !strings.Contains(m, "#2 range") || !strings.Contains(m, "#1 put") {
			t.Fatalf("the violation does not name both operations: %s", m)
		}
	})
	t.Run("lost write", func(t *testing.T) {
		var b builder
		b.op(0, put("a", "1"), rev(2))
		wantOnly(t, &b.h, Linearizable, b.op(1, get("a"), kvs(2)))
	})
	t.Run("concurrent read sees either", func(t *testing.T) {
		for _, seen := range []*Response{kvs(1), kvs(2, kv("a", "1", 2, 2, 1))} {
			h := History{Operations: []Operation{
				{Client: 0, Call: 10, Return: 30, Request: put("a", "1"), Response: rev(2)},
				{Client: 1, Call: 15, Return: 25, Request: get("a"), Response: seen},
			}}
			wantOK(t, &h)
		}
	})
	t.Run("wrong revision", func(t *testing.T) {
		var b builder
		b.op(0, put("a", "1"), rev(2))
		wantOnly(t, &b.h, Linearizable, b.op(0, put("b", "1"), rev(4)))
	})
	t.Run("definite errors must be right", func(t *testing.T) {
		var b builder
		b.op(0, put("a", "1"), rev(2))
		b.op(0, put("a", "2"), rev(3))
		b.fail(0, Request{Range: &RangeRequest{Key: "a", Revision: 9}}, store.ErrFutureRev.Error(), false)
		b.op(0, Request{Compact: &CompactRequest{Revision: 3}}, rev(3))
		b.fail(0, Request{Range: &RangeRequest{Key: "a", Revision: 2}}, store.ErrCompacted.Error(), false)
		wantOK(t, &b.h)
		wantOnly(t, &b.h, Linearizable, b.fail(0, Request{Range: &RangeRequest{Key: "a", Revision: 3}}, store.ErrCompacted.Error(), false))
	})
	t.Run("shape errors", func(t *testing.T) {
		var b builder
		b.fail(0, put("", "1"), store.ErrEmptyKey.Error(), false)
		b.fail(0, Request{Txn: &TxnRequest{Success: []RequestOp{{Put: &PutRequest{Key: "a"}}, {Put: &PutRequest{Key: "a"}}}}}, store.ErrDuplicateKey.Error(), false)
		wantOK(t, &b.h)
		wantOnly(t, &b.h, Linearizable, b.fail(0, put("a", "1"), store.ErrEmptyKey.Error(), false))
	})
	t.Run("unknown outcome", func(t *testing.T) {
		var b builder
		b.fail(0, put("a", "1"), "context deadline exceeded", true)
		b.op(1, get("a"), kvs(1))
		b.op(1, get("a"), kvs(2, kv("a", "1", 2, 2, 1)))
		wantOK(t, &b.h) // it happened, between the two reads
		var c builder
		c.fail(0, put("a", "1"), "context deadline exceeded", true)
		c.op(1, get("a"), kvs(1))
		c.op(1, put("b", "1"), rev(2))
		wantOK(t, &c.h) // it never happened, or after everything
		c.op(1, get("a"), kvs(3, kv("a", "1", 3, 3, 1)))
		c.op(1, get("a"), kvs(3))
		wantOnly(t, &c.h, Linearizable, 4) // seen, then gone
	})
	t.Run("unknown read is ignored", func(t *testing.T) {
		var b builder
		b.op(0, put("a", "1"), rev(2))
		b.fail(1, get("a"), "context deadline exceeded", true)
		wantOK(t, &b.h)
	})
	t.Run("leases", func(t *testing.T) {
		var b builder
		b.op(0, Request{LeaseGrant: &LeaseGrantRequest{TTL: 60}}, &Response{Revision: 1, LeaseGrant: &LeaseGrantResponse{ID: 42, TTL: 60}})
		b.op(0, Request{Put: &PutRequest{Key: "a", Value: "1", Lease: 42}}, rev(2))
		b.op(0, Request{Put: &PutRequest{Key: "b", Value: "1", Lease: 42}}, rev(3))
		b.op(0, Request{LeaseKeepAlive: &LeaseKeepAliveRequest{ID: 42}}, &Response{Revision: 9, LeaseKeepAlive: &LeaseKeepAliveResponse{ID: 42, TTL: 60}})
		b.op(0, Request{LeaseRevoke: &LeaseRevokeRequest{ID: 42}}, rev(4))
		b.op(0, Request{Range: &RangeRequest{Key: "\x00", RangeEnd: "\x00"}}, kvs(4))
		b.fail(0, Request{LeaseKeepAlive: &LeaseKeepAliveRequest{ID: 42}}, store.ErrLeaseNotFound.Error(), false)
		wantOK(t, &b.h)
		wantOnly(t, &b.h, Linearizable, b.op(0, Request{Put: &PutRequest{Key: "c", Lease: 42}}, rev(5)))
	})
}

func TestSerializableReadMayBeStale(t *testing.T) {
	var b builder
	b.op(0, put("a", "1"), rev(2))
	b.op(0, put("a", "2"), rev(3))
	ser := Request{Range: &RangeRequest{Key: "a", Serializable: true}}
	b.op(1, ser, kvs(2, kv("a", "1", 2, 2, 1)))
	wantOK(t, &b.h)
	wantOnly(t, &b.h, Serializable, b.op(1, ser, kvs(3, kv("a", "1", 2, 2, 1))))
}

// TestSerializableTxnMayBeStale: etcd serves a txn of serializable ranges only, and an empty txn,
// from local state like a serializable range (v3_server.go Txn, IsTxnSerializable).
func TestSerializableTxnMayBeStale(t *testing.T) {
	var b builder
	b.op(0, put("a", "1"), rev(2))
	b.op(0, put("a", "2"), rev(3))
	empty := Request{Txn: &TxnRequest{}}
	b.op(1, empty, &Response{Revision: 2, Txn: &TxnResponse{Succeeded: true}})
	ser := Request{Txn: &TxnRequest{Success: []RequestOp{{Range: &RangeRequest{Key: "a", Serializable: true}}}}}
	stale := func(v string, rv int64) *Response {
		return &Response{Revision: 2, Txn: &TxnResponse{Succeeded: true, Responses: []ResponseOp{
			{Range: &RangeResponse{Count: 1, Kvs: []KeyValue{kv("a", v, 2, rv, rv-1)}}}}}}
	}
	b.op(1, ser, stale("1", 2))
	wantOK(t, &b.h)
	wantOnly(t, &b.h, Serializable, b.op(1, ser, stale("2", 3)))
	// a txn mixing in a linearizable range is ordered in real time
	var l builder
	l.op(0, put("a", "1"), rev(2))
	l.op(0, put("a", "2"), rev(3))
	lin := Request{Txn: &TxnRequest{Success: []RequestOp{{Range: &RangeRequest{Key: "a"}}}}}
	wantOnly(t, &l.h, Linearizable, l.op(1, lin, stale("1", 2)))
}

// putThenDelete adds a txn that puts b and then deletes it, at revision 2.
func putThenDelete(b *builder) {
	b.op(0, Request{Txn: &TxnRequest{Success: []RequestOp{
		{Put: &PutRequest{Key: "b", Value: "1"}},
		{DeleteRange: &DeleteRangeRequest{Key: "a", RangeEnd: "\x00"}},
	}}}, &Response{Revision: 2, Txn: &TxnResponse{Succeeded: true, Responses: []ResponseOp{
		{Put: &PutResponse{}}, {DeleteRange: &DeleteRangeResponse{Deleted: 1}},
	}}})
}

// TestPutThenDeleteInOneTxn: etcd lets a txn put a key and then delete it with a range ending in
// "\x00" (checkIntervals sees that range as empty), so a watch gets two events of one key at one
// revision: that is not a duplicate.
func TestPutThenDeleteInOneTxn(t *testing.T) {
	var b builder
	putThenDelete(&b)
	b.h.Watches = []Watch{{Call: 1, Request: WatchRequest{Key: "a", RangeEnd: "c"}, Responses: []WatchResponse{
		{Time: 2, Revision: 1, Created: true},
		{Time: 20, Revision: 2, Events: []Event{{Type: Put, Kv: kv("b", "1", 2, 2, 1)}, {Type: Delete, Kv: KeyValue{Key: "b", ModRevision: 2}}}},
	}}}
	wantOK(t, &b.h)
	w := &b.h.Watches[0].Responses[1]
	w.Events = append(w.Events, w.Events[1])
	wantOnly(t, &b.h, Unique, -1)
}

// TestCompactionWithinRevision: a compaction at the revision of a txn that put a key and then
// deleted it keeps only the DELETE (etcd's key index keeps a key's newest revision at or below the
// compaction's), so a watch from that revision created after the compaction gets the DELETE alone;
// without the compaction the PUT is owed.
func TestCompactionWithinRevision(t *testing.T) {
	mk := func(compact bool) *History {
		var b builder
		putThenDelete(&b)
		if compact {
			b.op(0, Request{Compact: &CompactRequest{Revision: 2}}, rev(2))
		}
		b.h.Watches = []Watch{{Call: 50, Request: WatchRequest{Key: "a", RangeEnd: "c", StartRevision: 2}, Responses: []WatchResponse{
			{Time: 51, Revision: 2, Created: true},
			{Time: 52, Revision: 2, Events: []Event{{Type: Delete, Kv: KeyValue{Key: "b", ModRevision: 2}}}},
		}}}
		return &b.h
	}
	wantOK(t, mk(true))
	wantOnly(t, mk(false), Resumable, -1)
}

// TestLeaseExpiry: a revision no request created, seen by a watch as deletes of leased keys, is a
// lease expiring; a put nobody made is not.
func TestLeaseExpiry(t *testing.T) {
	var b builder
	b.op(0, Request{LeaseGrant: &LeaseGrantRequest{ID: 5, TTL: 2}}, &Response{Revision: 1, LeaseGrant: &LeaseGrantResponse{ID: 5}})
	b.op(0, Request{Put: &PutRequest{Key: "a", Value: "1", Lease: 5}}, rev(2))
	b.t += 2e9 // the lease's TTL passes: it may expire from now on
	b.op(0, get("a"), kvs(3))
	b.op(0, put("b", "1"), rev(4))
	b.h.Watches = []Watch{{Call: 1, Request: WatchRequest{Key: "a", RangeEnd: "c"}, Responses: []WatchResponse{
		{Time: 2, Revision: 1, Created: true},
		{Time: 21, Revision: 2, Events: []Event{{Type: Put, Kv: KeyValue{Key: "a", Value: "1", CreateRevision: 2, ModRevision: 2, Version: 1, Lease: 5}}}},
		{Time: b.t - 1, Revision: 3, Events: []Event{{Type: Delete, Kv: KeyValue{Key: "a", ModRevision: 3}}}},
		{Time: b.t + 6, Revision: 4, Events: []Event{{Type: Put, Kv: kv("b", "1", 4, 4, 1)}}},
	}}}
	res := wantOK(t, &b.h)
	if len(res.Events) != 3 || res.Events[1].Type != Delete || res.Coverage.LeaseExpiries != 1 {
		t.Fatalf("reference log %v, %d lease expiries", res.Events, res.Coverage.LeaseExpiries)
	}
	// a lease cannot expire before its TTL: with one of an hour the delete is nobody's
	long := b.h
	long.Operations = slices.Clone(b.h.Operations)
	long.Operations[0].Request = Request{LeaseGrant: &LeaseGrantRequest{ID: 5, TTL: 3600}}
	if res := mustCheck(t, &long); res.OK() {
		t.Fatal("a lease of an hour expired within two seconds")
	}
	// an expiry that only a read shows, no watch and no "lease not found": the read finds the key
	// gone, at a revision nobody claims (closed) or in a gap of the store's revisions (open)
	unseen := b.h
	unseen.Watches = nil
	if res := mustCheck(t, &unseen); !res.OK() || res.Coverage.LeaseExpiries != 1 {
		t.Fatalf("an expiry only a read shows: %v, %d lease expiries", res.Err(), res.Coverage.LeaseExpiries)
	}
	open := unseen
	open.Prefix, open.StartRevision = "", 1
	open.Operations = slices.Clone(unseen.Operations)
	open.Operations[2].Response = kvs(7)
	open.Operations[3].Response = rev(9)
	if res := mustCheck(t, &open); !res.OK() || res.Coverage.LeaseExpiries != 1 {
		t.Fatalf("an open history's expiry only a read shows: %v, %d lease expiries", res.Err(), res.Coverage.LeaseExpiries)
	}
	// the sweep finds both: in the open history, by making the gap's last revision the expiry's
	for _, h := range []*History{&unseen, &open} {
		if got := sweepVerdict(h); got != VerdictLinearizable {
			t.Fatalf("the sweep says %q", got)
		}
	}
	b.h.Watches[0].Responses[2].Events = []Event{{Type: Put, Kv: kv("c", "1", 3, 3, 1)}}
	b.h.Watches[0].Request.RangeEnd = "d"
	res = mustCheck(t, &b.h)
	if res.OK() {
		t.Fatal("a put nobody made passed")
	}
}

// TestPrevKVAndCompaction: prev_kv may be missing only if a compaction that may have run before the
// response removed the previous revision.
func TestPrevKVAndCompaction(t *testing.T) {
	mk := func(compact bool) *History {
		var b builder
		b.op(0, put("a", "1"), rev(2))
		b.op(0, put("a", "2"), rev(3))
		if compact {
			b.op(0, Request{Compact: &CompactRequest{Revision: 3}}, rev(3))
		}
		b.h.Watches = []Watch{{Call: 50, Request: WatchRequest{Key: "a", StartRevision: 3, PrevKV: true}, Responses: []WatchResponse{
			{Time: 51, Revision: 3, Created: true},
			{Time: 52, Revision: 3, Events: []Event{{Type: Put, Kv: kv("a", "2", 2, 3, 2)}}},
		}}}
		return &b.h
	}
	wantOK(t, mk(true))
	wantOnly(t, mk(false), PrevKV, -1)
	h := mk(false)
	h.Watches[0].Request.PrevKV = false
	wantOK(t, h)
	h.Watches[0].Responses[1].Events[0].PrevKV = &KeyValue{Key: "a", Value: "1", CreateRevision: 2, ModRevision: 2, Version: 1}
	wantOnly(t, h, PrevKV, -1)
}

func TestInvalidHistories(t *testing.T) {
	good := func() *History {
		return &History{Operations: []Operation{{Call: 1, Return: 2, Request: put("a", "1"), Response: rev(2)}}}
	}
	cases := []struct {
		name, want string
		mutate     func(h *History)
	}{
		{"nil", "nil history", nil},
		{"returns before call", "returns (0) before it is called (1)", func(h *History) { h.Operations[0].Return = 0 }},
		{"two requests", "exactly one is allowed", func(h *History) { h.Operations[0].Request.Range = &RangeRequest{Key: "a"} }},
		{"no request", "request sets nothing", func(h *History) { h.Operations[0].Request = Request{} }},
		{"both outcomes", "both a response and an error", func(h *History) { h.Operations[0].Error = "x" }},
		{"no outcome", "neither a response nor an error", func(h *History) { h.Operations[0].Response = nil }},
		{"unknown without error", "unknown outcome without an error", func(h *History) { h.Operations[0].Unknown = true }},
		{"mismatched response", "put request has a range response", func(h *History) { h.Operations[0].Response.Range = &RangeResponse{} }},
		{"negative client", "negative client", func(h *History) { h.Operations[0].Client = -1 }},
		{"txn op with two requests", "sets 2 requests", func(h *History) {
			h.Operations[0].Request = Request{Txn: &TxnRequest{Success: []RequestOp{{Put: &PutRequest{Key: "a"}, Range: &RangeRequest{Key: "a"}}}}}
			h.Operations[0].Response = &Response{Revision: 2}
		}},
		{"watch response before call", "before the watch was called", func(h *History) {
			h.Watches = []Watch{{Call: 5, Request: WatchRequest{Key: "a"}, Responses: []WatchResponse{{Time: 4, Created: true}}}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h *History
			if c.mutate != nil {
				h = good()
				c.mutate(h)
			}
			_, err := Check(h, Options{})
			if !errors.Is(err, ErrInvalidHistory) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Check error %v, want ErrInvalidHistory mentioning %q", err, c.want)
			}
		})
	}
	if _, err := Check(good(), Options{}); err != nil {
		t.Fatalf("the good history: %v", err)
	}
}

func TestGuaranteesListedOnce(t *testing.T) {
	r := &Result{Violations: []Violation{{Violation: check.Violation{Guarantee: Reliable}}, {Violation: check.Violation{Guarantee: Atomic}}, {Violation: check.Violation{Guarantee: Reliable}}}}
	if got := r.Guarantees(); !slices.Equal(got, []Guarantee{Reliable, Atomic}) {
		t.Fatal(got)
	}
}

// TestTimeout: a search that cannot finish in time gives VerdictTimeout, not a verdict.
func TestTimeout(t *testing.T) {
	var h History
	for i := range 18 {
		h.Operations = append(h.Operations, Operation{Client: i, Call: 1, Return: 2, Request: put(string(rune('a'+i)), "1"),
			Error: "context deadline exceeded", Unknown: true})
	}
	// a read no order of the writes explains: the search must try them all
	h.Operations = append(h.Operations, Operation{Client: 20, Call: 10, Return: 20,
		Request: Request{Range: &RangeRequest{Key: "\x00", RangeEnd: "\x00", CountOnly: true}}, Response: &Response{Revision: 12, Range: &RangeResponse{Count: 3}}})
	res, err := Check(&h, Options{Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != VerdictTimeout || !errors.Is(res.Err(), ErrInconclusive) || res.OK() {
		t.Fatalf("verdict %s, err %v", res.Verdict, res.Err())
	}
}

func TestLeaseGrantGetsItsID(t *testing.T) {
	var b builder
	b.op(0, Request{LeaseGrant: &LeaseGrantRequest{ID: 5, TTL: 60}}, &Response{Revision: 1, LeaseGrant: &LeaseGrantResponse{ID: 5}})
	wantOK(t, &b.h)
	b.op(0, Request{LeaseGrant: &LeaseGrantRequest{ID: 6, TTL: 60}}, &Response{Revision: 1, LeaseGrant: &LeaseGrantResponse{ID: 7}})
	wantOnly(t, &b.h, Linearizable, 1)
}

// TestViolationsCappedPerWatch: at most maxPerGuarantee violations of one guarantee are listed per
// watch; a note counts the rest.
func TestViolationsCappedPerWatch(t *testing.T) {
	var b builder
	w := Watch{Call: 1, Request: WatchRequest{Key: "a"}, Responses: []WatchResponse{{Time: 2, Revision: 1, Created: true}}}
	const n = maxPerGuarantee + 5
	for i := range n {
		r := int64(i + 2)
		b.op(0, put("b", "1"), rev(r))
		// events of a key the watch does not watch: each breaks filter
		w.Responses = append(w.Responses, WatchResponse{Time: b.t + 6, Revision: r,
			Events: []Event{{Type: Put, Kv: kv("b", "1", 2, r, r-1)}}})
	}
	b.h.Watches = []Watch{w}
	res := wantOnly(t, &b.h, Filter, -1)
	if len(res.Violations) != maxPerGuarantee {
		t.Fatalf("%d violations listed, want %d", len(res.Violations), maxPerGuarantee)
	}
	if !slices.Contains(res.Notes, "watch 0: 5 more filter violations not listed") {
		t.Fatalf("notes %q do not count the rest", res.Notes)
	}
}

// TestNoLinearizationChecksOnlyStructure: without a linearization there is no reference event log,
// so only the guarantees that need none are judged: a progress notification that goes back is
// reported, a skipped event is not, and a note says why.
func TestNoLinearizationChecksOnlyStructure(t *testing.T) {
	mk := func(stale bool) *History {
		var b builder
		b.op(0, put("a", "1"), rev(2))
		b.op(0, put("a", "2"), rev(3))
		if stale {
			b.op(1, get("a"), kvs(3, kv("a", "1", 2, 2, 1)))
		}
		b.h.Watches = []Watch{{Call: 1, Request: WatchRequest{Key: "a"}, Responses: []WatchResponse{
			{Time: 2, Revision: 1, Created: true},
			{Time: 40, Revision: 3, Events: []Event{{Type: Put, Kv: kv("a", "2", 2, 3, 2)}}}, // the event at 2 skipped
			// a progress notification below an event received
			{Time: 41, Revision: 2},
		}}}
		return &b.h
	}
	structural := map[Guarantee]bool{Linearizable: true, Filter: true, Unique: true, Ordered: true, Atomic: true,
		Bookmarkable: true, Compaction: true}
	res := mustCheck(t, mk(true))
	got := res.Guarantees()
	if !slices.Contains(got, Linearizable) || !slices.Contains(got, Bookmarkable) {
		t.Fatalf("want linearizable and bookmarkable reported, got %v", got)
	}
	for _, g := range got {
		if !structural[g] {
			t.Errorf("%s judged without a reference: %v", g, res.Err())
		}
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "no linearization") }) {
		t.Errorf("notes %q do not say the reference checks were skipped", res.Notes)
	}
	// With a linearization the same watch is judged against the reference: the skip is reported.
	if got := mustCheck(t, mk(false)).Guarantees(); !slices.Contains(got, Resumable) {
		t.Fatalf("with a linearization: %v, want resumable among them", got)
	}
}

// TestCheckPhases: Options.Phase is told each part of a check as it begins, in order.
func TestCheckPhases(t *testing.T) {
	var got []string
	if _, err := Check(scenario(t), Options{Phase: func(name string) { got = append(got, name) }}); err != nil {
		t.Fatal(err)
	}
	if want := []string{check.PhaseSearch, PhaseReplay, check.PhaseWatches}; !slices.Equal(got, want) {
		t.Errorf("phases %q, want %q", got, want)
	}
}
