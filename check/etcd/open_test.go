package etcd

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/listwatch/listwatch/etcdrules"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

// TestOpenHistoryWithForeignWrites: a history recorded under a prefix of a store that another client
// writes to outside it, and that holds keys of the prefix when it begins, passes: revisions advance
// by more than its writes (each run of others' revisions is a gap), updates of initial keys carry
// their versions and prev_kv, and a watch of the prefix from its start gets exactly its events.
func TestOpenHistoryWithForeignWrites(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	foreign := func(k string) {
		if _, err := applyToStore(st, &Request{Put: &PutRequest{Key: Bytes(k), Value: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	foreign("other/a")
	if _, err := applyToStore(st, &Request{Put: &PutRequest{Key: "p/a", Value: "old"}}); err != nil {
		t.Fatal(err)
	}
	foreign("other/b")
	rec := newStoreRecorder(st)
	ctx := context.Background()
	if err := rec.Begin(ctx, "p/"); err != nil {
		t.Fatal(err)
	}
	if err := rec.Begin(ctx, "p/"); !errors.Is(err, ErrBegun) {
		t.Fatalf("second Begin: %v, want ErrBegun", err)
	}
	var mu sync.Mutex
	var last int64
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = rec.Watch(wctx, WatchRequest{Key: "p/", RangeEnd: "p0", StartRevision: 4, PrevKV: true}, func(r WatchResponse) {
			mu.Lock()
			defer mu.Unlock()
			for _, ev := range r.Events {
				last = ev.Kv.ModRevision
			}
		})
	})
	var final int64
	for _, step := range []func(){
		func() { _, _ = rec.Do(ctx, put("p/a", "new")) },
		func() { foreign("other/c"); foreign("other/d") },
		func() { _, _ = rec.Do(ctx, put("p/b", "1")) },
		func() { foreign("other/e") },
		func() { _, _ = rec.Do(ctx, get("p/a")) },
		func() { _, _ = rec.Do(ctx, del("p/a")) },
		func() {
			resp, _ := rec.Do(ctx, Request{Range: &RangeRequest{Key: "p/", RangeEnd: "p0", Revision: 4}})
			final = resp.Revision
		},
	} {
		step()
	}
	testutil.WaitFor(t, "the watch's last event", func() bool { mu.Lock(); defer mu.Unlock(); return last == final })
	cancel()
	wg.Wait()
	h := rec.History()
	if !h.Open() || h.StartRevision != 4 || len(h.Initial) != 1 || h.Initial[0].Key != "p/a" {
		t.Fatalf("history begins at %d with %+v, want revision 4 and p/a", h.StartRevision, h.Initial)
	}
	res := wantOK(t, h)
	want := []Gap{{From: 6, To: 7}, {From: 9, To: 9}}
	if len(res.Gaps) != len(want) || res.Gaps[0] != want[0] || res.Gaps[1] != want[1] {
		t.Fatalf("gaps %+v, want %+v", res.Gaps, want)
	}
	if res.Coverage.Gaps != 2 || res.Coverage.GapRevisions != 3 || res.Coverage.PastReads != 1 || res.Coverage.WatchesFromHistory != 1 {
		t.Errorf("coverage %+v", res.Coverage)
	}
	if ev := res.Events[0]; ev.Kv.Version != 2 || ev.PrevKV == nil || ev.PrevKV.Value != "old" {
		t.Errorf("first event %+v: want version 2 with the initial value as prev_kv", ev)
	}
}

// TestOpenHistoryViolations: gaps do not excuse what no foreign write explains: a read that misses a
// write of the prefix, a revision that goes backwards, or a watch that misses an event of the prefix.
func TestOpenHistoryViolations(t *testing.T) {
	open := func() *builder {
		b := &builder{}
		b.h.Prefix, b.h.StartRevision = "p/", 10
		b.h.Initial = []KeyValue{kv("p/a", "0", 3, 3, 1)}
		return b
	}
	t.Run("stale read", func(t *testing.T) {
		b := open()
		b.op(0, put("p/a", "1"), rev(12))
		bad := b.op(0, get("p/a"), kvs(15, kv("p/a", "0", 3, 3, 1)))
		wantOnly(t, &b.h, Linearizable, bad)
	})
	t.Run("revision backwards", func(t *testing.T) {
		b := open()
		b.op(0, put("p/a", "1"), rev(12))
		bad := b.op(0, put("p/b", "1"), rev(11))
		wantOnly(t, &b.h, Linearizable, bad)
	})
	t.Run("read below the start is not judged", func(t *testing.T) {
		b := open()
		b.op(0, Request{Range: &RangeRequest{Key: "p/a", Revision: 5}}, kvs(10, kv("p/a", "anything", 3, 3, 1)))
		res := wantOK(t, &b.h)
		if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "1 reads at revisions below the start revision 10 not judged") {
			t.Errorf("notes %q", res.Notes)
		}
	})
	t.Run("compaction below the start may have happened", func(t *testing.T) {
		b := open()
		b.fail(0, Request{Compact: &CompactRequest{Revision: 8}}, etcdrules.ErrCompacted.Error(), false)
		b.op(0, Request{Compact: &CompactRequest{Revision: 9}}, rev(10))
		res := wantOK(t, &b.h)
		if res.Coverage.Compactions != 1 || res.Coverage.RefusedCompactions != 1 {
			t.Errorf("coverage %+v", res.Coverage)
		}
	})
	t.Run("missed event", func(t *testing.T) {
		b := open()
		b.op(0, put("p/a", "1"), rev(12))
		b.op(0, put("p/b", "1"), rev(14))
		b.h.Watches = []Watch{{Client: 1, Call: 1, Request: WatchRequest{Key: "p/", RangeEnd: "p0", StartRevision: 11},
			Responses: []WatchResponse{{Time: 2, Revision: 10, Created: true},
				{Time: 40, Revision: 14, Events: []Event{{Type: Put, Kv: kv("p/b", "1", 14, 14, 1)}}}}}}
		res := wantOnly(t, &b.h, Resumable, -1)
		if v := res.Violations[0]; v.Signature != SigMissing || len(v.Events) != 1 || v.Events[0].Kv.Key != "p/a" {
			t.Errorf("violation %+v: want the missing event of p/a", v)
		}
	})
}

func TestOpenHistoryValidate(t *testing.T) {
	cases := map[string]History{
		"a prefix or an initial state needs a start revision": {Prefix: "p/"},
		"negative start revision":                             {StartRevision: -1},
		"must be in key order":                                {Prefix: "p/", StartRevision: 5, Initial: []KeyValue{kv("p/b", "", 2, 2, 1), kv("p/a", "", 2, 2, 1)}},
		"initial key \"q\" is outside the prefix":             {Prefix: "p/", StartRevision: 5, Initial: []KeyValue{kv("q", "", 2, 2, 1)}},
		"are not those of a key at revision 5":                {Prefix: "p/", StartRevision: 5, Initial: []KeyValue{kv("p/a", "", 2, 6, 1)}},
		"operation 0: put of \"q/a\" is outside the prefix":   {Prefix: "p/", StartRevision: 5, Operations: []Operation{{Request: put("q/a", "1"), Response: rev(6)}}},
		"operation 0: range [\"p/\", ∞) is outside":           {Prefix: "p/", StartRevision: 5, Operations: []Operation{{Request: Request{Range: &RangeRequest{Key: "p/", RangeEnd: "\x00"}}, Response: rev(6)}}},
		"txn compare on \"z\" is outside":                     {Prefix: "p/", StartRevision: 5, Operations: []Operation{{Request: Request{Txn: &TxnRequest{Compare: []Compare{{Key: "z"}}}}, Response: rev(6)}}},
		"txn reads revision 3, below the start revision 5":    {Prefix: "p/", StartRevision: 5, Operations: []Operation{{Request: Request{Txn: &TxnRequest{Success: []RequestOp{{Range: &RangeRequest{Key: "p/a", Revision: 3}}}}}, Response: rev(6)}}},
		"watch 0: watches \"\\x00\", outside the prefix":      {Prefix: "p/", StartRevision: 5, Watches: []Watch{{}}},
	}
	for want, h := range cases {
		err := h.Validate()
		if !errors.Is(err, ErrInvalidHistory) || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want ErrInvalidHistory with %q", h, err, want)
		}
	}
	ok := History{Prefix: "p/", StartRevision: 5, Initial: []KeyValue{kv("p/a", "", 2, 5, 3)},
		Operations: []Operation{{Request: Request{Range: &RangeRequest{Key: "p/", RangeEnd: "p0"}}, Response: rev(6)}},
		Watches:    []Watch{{Request: WatchRequest{Key: "p/x"}}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid open history: %v", err)
	}
}

func TestPrefixEnd(t *testing.T) {
	for in, want := range map[Bytes]Bytes{"p/": "p0", "a\xff": "b", "\xff\xff": "\x00", "": "\x00"} {
		if got := PrefixEnd(in); got != want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestIgnoreVersions: a store that answers every key with version 0 (kine) fails linearizability
// unless the check ignores versions; then the rest of each answer is still judged.
func TestIgnoreVersions(t *testing.T) {
	b := &builder{}
	b.op(0, put("a", "1"), rev(2))
	b.op(0, put("a", "2"), rev(3))
	b.op(0, get("a"), kvs(3, kv("a", "2", 2, 3, 0)))
	b.h.Watches = []Watch{{Client: 1, Call: 1, Request: WatchRequest{Key: "a", StartRevision: 2, PrevKV: true},
		Responses: []WatchResponse{{Time: 2, Revision: 1, Created: true},
			{Time: 40, Revision: 3, Events: []Event{{Type: Put, Kv: kv("a", "1", 2, 2, 0)},
				{Type: Put, Kv: kv("a", "2", 2, 3, 0), PrevKV: &KeyValue{Key: "a", Value: "1", CreateRevision: 2, ModRevision: 2}}}}}}}
	if res := mustCheck(t, &b.h); res.OK() {
		t.Fatal("version 0 passed without IgnoreVersions")
	}
	res, err := Check(&b.h, Options{IgnoreVersions: true})
	if err != nil || !res.OK() {
		t.Fatalf("%v %v", err, res.Err())
	}
	if b.h.Operations[2].Response.Range.Kvs[0].Version != 0 || res.Events[1].Kv.Version != 0 {
		t.Fatal("the history or the reference kept versions")
	}
	b.h.Operations[2].Response.Range.Kvs[0].Value = "1"
	if res, _ := Check(&b.h, Options{IgnoreVersions: true}); res.OK() {
		t.Fatal("a stale value passed with IgnoreVersions")
	}
}
