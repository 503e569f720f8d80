package etcd

import "testing"

// TestUnknownOutcomesResolved: the checker decides each unknown-outcome write from what follows it:
// one a later read shows took effect, one nothing shows took none; an unknown read needs no
// decision; and without a linearization no write is decided.
func TestUnknownOutcomesResolved(t *testing.T) {
	var b builder
	b.fail(0, put("a", "1"), "context deadline exceeded", true)
	b.fail(2, put("c", "1"), "context deadline exceeded", true)
	b.op(1, get("a"), kvs(1))
	b.op(1, get("a"), kvs(2, kv("a", "1", 2, 2, 1)))
	b.fail(1, get("b"), "rpc error: code = Unavailable", true)
	res := wantOK(t, &b.h)
	want := UnknownOutcomes{Reads: 1, Writes: 2, TookEffect: 1, NoEffect: 1}
	if res.Unknown != want || res.Unknown.Total() != 3 || res.Unknown.Resolved() != 2 || res.Unknown.Unresolved() != 0 {
		t.Fatalf("Unknown = %+v, want %+v", res.Unknown, want)
	}
	b.op(1, get("a"), kvs(2))
	res = mustCheck(t, &b.h)
	if res.Verdict != VerdictNotLinearizable || res.Unknown.Resolved() != 0 || res.Unknown.Unresolved() != 2 {
		t.Fatalf("a history without linearization: verdict %v, Unknown = %+v, want no write decided", res.Verdict, res.Unknown)
	}
}

// TestSerializableReadChoosesUnknownWrite: of two unknown-outcome writes that could each have made
// revision 3, only one gives the answer a serializable read at 3 got; the checker must find it,
// though the other was called first (a history the sweep alone once failed, from
// TestValidHistoriesPass's "forget write responses").
func TestSerializableReadChoosesUnknownWrite(t *testing.T) {
	var b builder
	b.fail(1, del("a2"), "context deadline exceeded", true)
	b.op(0, put("a2", "y"), rev(2))
	b.fail(2, put("a1", "y"), "context deadline exceeded", true)
	b.op(0, Request{Range: &RangeRequest{Key: "a1", RangeEnd: "a2", Serializable: true}}, kvs(3, kv("a1", "y", 3, 3, 1)))
	b.op(0, put("b", "1"), rev(4))
	res := wantOK(t, &b.h)
	if want := (UnknownOutcomes{Writes: 2, TookEffect: 1, NoEffect: 1}); res.Unknown != want {
		t.Errorf("Unknown = %+v, want %+v", res.Unknown, want)
	}
}

// TestSweepPlacesUnknownWriteAnAnswerShows: in an open history, a revision no answer claims and no
// watch saw, but which a later read shows a key put at, was made by the history's unknown-outcome
// write of that key and value, not by others and not by another unknown write called first: the
// sweep decides it, without porcupine.
func TestSweepPlacesUnknownWriteAnAnswerShows(t *testing.T) {
	var b builder
	b.h.StartRevision = 10
	b.op(0, put("p/a", "1"), rev(11))
	b.fail(1, put("p/b", "1"), "context deadline exceeded", true)
	b.fail(2, put("p/c", "1"), "context deadline exceeded", true)
	b.op(0, put("p/d", "1"), rev(14))
	b.op(0, prefix("p/"), &Response{Revision: 14, Range: &RangeResponse{Count: 3, Kvs: []KeyValue{
		kv("p/a", "1", 11, 11, 1), kv("p/c", "1", 13, 13, 1), kv("p/d", "1", 14, 14, 1)}}})
	if v := sweepVerdict(&b.h); v != VerdictLinearizable {
		t.Fatalf("the sweep's verdict %q, want it to place the write the read shows", v)
	}
	res := wantOK(t, &b.h)
	if want := (UnknownOutcomes{Writes: 2, TookEffect: 1, NoEffect: 1}); res.Unknown != want || len(res.Gaps) != 1 || res.Gaps[0] != (Gap{From: 12, To: 12}) {
		t.Errorf("Unknown = %+v, gaps %v; want %+v and others' write at 12", res.Unknown, res.Gaps, want)
	}
}
