package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/listwatch/listwatch/etcdrules"
	"github.com/listwatch/listwatch/store"
)

func TestFreshStoreRevisions(t *testing.T) {
	e := newEnv(t, store.Options{})
	if got := e.s.Rev(); got != 1 {
		t.Fatalf("fresh revision = %d, want 1", got)
	}
	if got := e.s.CompactRevision(); got != -1 {
		t.Fatalf("fresh compact revision = %d, want -1", got)
	}
	r, err := e.s.Range(&store.RangeRequest{Key: []byte("a")})
	if err != nil || r.Header.Revision != 1 || r.Count != 0 {
		t.Fatalf("empty range = %+v, %v", r, err)
	}
	if got := e.put("a", "1").Header.Revision; got != 2 {
		t.Fatalf("first write revision = %d, want 2", got)
	}
}

func TestPutGenerations(t *testing.T) {
	e := newEnv(t, store.Options{})
	e.put("a", "1") // 2
	e.put("a", "1") // 3: an unchanged value still raises the revision
	if diff := cmp.Diff(kv("a", "1", 2, 3, 2), e.get("a", 0)); diff != "" {
		t.Fatalf("live key after two puts (-want +got):\n%s", diff)
	}
	e.del("a", "")  // 4
	e.put("a", "2") // 5: a new generation
	if diff := cmp.Diff(kv("a", "2", 5, 5, 1), e.get("a", 0)); diff != "" {
		t.Fatalf("new generation (-want +got):\n%s", diff)
	}
	if got := e.get("a", 4); got != nil {
		t.Fatalf("deleted key visible at its deletion revision: %+v", got)
	}
	if diff := cmp.Diff(kv("a", "1", 2, 2, 1), e.get("a", 2)); diff != "" {
		t.Fatalf("historical read (-want +got):\n%s", diff)
	}
}

func TestNoOpWritesKeepRevision(t *testing.T) {
	e := newEnv(t, store.Options{})
	e.put("a", "1")
	if r := e.del("zz", ""); r.Deleted != 0 || r.Header.Revision != 2 {
		t.Fatalf("deleting a missing key = %+v, want 0 deleted at revision 2", r)
	}
	if r := e.del("b", "c"); r.Deleted != 0 || r.Header.Revision != 2 {
		t.Fatalf("deleting an empty range = %+v", r)
	}
	// read-only txn, and a failed compare whose branch is empty
	r, err := e.s.Txn(&store.TxnRequest{
		Compare: []store.Compare{{Key: []byte("a"), Target: etcdrules.CompareValue, Result: etcdrules.CompareEqual, Value: []byte("nope")}},
		Success: []store.RequestOp{{Put: &store.PutRequest{Key: []byte("a")}}},
	})
	if err != nil || r.Succeeded || r.Header.Revision != 2 {
		t.Fatalf("failed compare txn = %+v, %v", r, err)
	}
	r, err = e.s.Txn(&store.TxnRequest{Success: []store.RequestOp{{Range: &store.RangeRequest{Key: []byte("a")}}}})
	if err != nil || !r.Succeeded || r.Header.Revision != 2 || r.Responses[0].Range.Count != 1 {
		t.Fatalf("read-only txn = %+v, %v", r, err)
	}
	// a txn whose only op deletes a missing key
	r, err = e.s.Txn(&store.TxnRequest{Success: []store.RequestOp{{DeleteRange: &store.DeleteRangeRequest{Key: []byte("zz")}}}})
	if err != nil || r.Header.Revision != 2 {
		t.Fatalf("no-op delete txn = %+v, %v", r, err)
	}
	if _, err := e.s.LeaseGrant(0, 10); err != nil || e.s.Rev() != 2 {
		t.Fatalf("lease grant changed the revision: rev %d, %v", e.s.Rev(), err)
	}
	if _, err := e.s.Compact(2); err != nil || e.s.Rev() != 2 {
		t.Fatalf("compaction changed the revision: rev %d, %v", e.s.Rev(), err)
	}
}

func TestRangeEndConventions(t *testing.T) {
	e := newEnv(t, store.Options{})
	for _, k := range []string{"\x00", "a", "ab", "b", "c\xff", "\xff\xff"} {
		e.put(k, "v")
	}
	keys := func(key, end string) []string {
		t.Helper()
		r, err := e.s.Range(&store.RangeRequest{Key: []byte(key), RangeEnd: []byte(end), KeysOnly: true})
		if err != nil {
			t.Fatalf("range %q..%q: %v", key, end, err)
		}
		var out []string
		for _, kv := range r.Kvs {
			out = append(out, string(kv.Key))
		}
		return out
	}
	cases := []struct {
		key, end string
		want     []string
	}{
		{"a", "", []string{"a"}},
		{"a", "\x00", []string{"a", "ab", "b", "c\xff", "\xff\xff"}},
		{"\x00", "\x00", []string{"\x00", "a", "ab", "b", "c\xff", "\xff\xff"}},
		{"a", "b", []string{"a", "ab"}},
		{"b", "a", nil}, // end below key: empty, not an error
		{"b", "b", nil},
		{"c\xff", "d", []string{"c\xff"}}, // WithPrefix("c\xff") ends at "d"
		{"\xff\xff", "\x00", []string{"\xff\xff"}},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.want, keys(c.key, c.end)); diff != "" {
			t.Errorf("range %q..%q (-want +got):\n%s", c.key, c.end, diff)
		}
	}
}

func TestRangeRevisionsAndErrors(t *testing.T) {
	e := newEnv(t, store.Options{})
	e.put("a", "1") // 2
	e.put("a", "2") // 3
	e.put("a", "3") // 4
	if _, err := e.s.Range(&store.RangeRequest{Key: []byte("a"), Revision: 5}); !errors.Is(err, store.ErrFutureRev) {
		t.Fatalf("future revision: %v", err)
	}
	if _, err := e.s.Compact(3); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Range(&store.RangeRequest{Key: []byte("a"), Revision: 2}); !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("compacted revision: %v", err)
	}
	r, err := e.s.Range(&store.RangeRequest{Key: []byte("a"), Revision: 3})
	if err != nil || string(r.Kvs[0].Value) != "2" || r.Header.Revision != 4 {
		t.Fatalf("range at exactly the compact revision = %+v, %v (header must be the current revision)", r, err)
	}
	if r := e.get("a", -7); string(r.Value) != "3" {
		t.Fatalf("negative revision reads current: %+v", r)
	}
	for _, req := range []*store.RangeRequest{
		{},
		{Key: []byte("a"), SortOrder: 3},
		{Key: []byte("a"), SortTarget: 5},
		{Key: []byte("a"), SortOrder: -1},
	} {
		_, err := e.s.Range(req)
		want := store.ErrInvalidSortOption
		if len(req.Key) == 0 {
			want = store.ErrEmptyKey
		}
		if !errors.Is(err, want) {
			t.Errorf("range %+v: got %v, want %v", req, err, want)
		}
	}
}

func TestRangeLimitCountSortFilters(t *testing.T) {
	e := newEnv(t, store.Options{})
	e.put("a", "3") // 2
	e.put("b", "1") // 3
	e.put("c", "2") // 4
	e.put("a", "4") // 5: a has version 2, create 2, mod 5
	all := []byte("\x00")
	r, err := e.s.Range(&store.RangeRequest{Key: []byte("a"), RangeEnd: all, Limit: 2})
	if err != nil || len(r.Kvs) != 2 || !r.More || r.Count != 3 {
		t.Fatalf("limit 2 = %+v, %v", r, err)
	}
	r, _ = e.s.Range(&store.RangeRequest{Key: []byte("a"), RangeEnd: all, Limit: 3})
	if len(r.Kvs) != 3 || r.More {
		t.Fatalf("limit equal to count must not set More: %+v", r)
	}
	r, _ = e.s.Range(&store.RangeRequest{Key: []byte("a"), RangeEnd: all, CountOnly: true, Limit: 1})
	if r.Kvs != nil || r.Count != 3 || r.More {
		t.Fatalf("count only = %+v", r)
	}
	order := func(r *store.RangeResponse) string {
		var b strings.Builder
		for _, kv := range r.Kvs {
			b.Write(kv.Key)
		}
		return b.String()
	}
	cases := []struct {
		req  store.RangeRequest
		want string
	}{
		{store.RangeRequest{SortTarget: etcdrules.SortByValue}, "bca"}, // a non-key target with NONE ascends
		{store.RangeRequest{SortTarget: etcdrules.SortByValue, SortOrder: etcdrules.SortDescend}, "acb"},
		{store.RangeRequest{SortTarget: etcdrules.SortByKey, SortOrder: etcdrules.SortDescend}, "cba"},
		{store.RangeRequest{SortTarget: etcdrules.SortByMod, SortOrder: etcdrules.SortDescend}, "acb"},
		{store.RangeRequest{SortTarget: etcdrules.SortByCreate, SortOrder: etcdrules.SortAscend}, "abc"},
		{store.RangeRequest{SortTarget: etcdrules.SortByVersion, SortOrder: etcdrules.SortDescend, Limit: 1}, "a"},
		{store.RangeRequest{MinModRevision: 4}, "ac"},
		{store.RangeRequest{MaxModRevision: 4}, "bc"},
		{store.RangeRequest{MinCreateRevision: 3, MaxCreateRevision: 3}, "b"},
		{store.RangeRequest{MinModRevision: 3, Limit: 1}, "a"},
	}
	for _, c := range cases {
		req := c.req
		req.Key, req.RangeEnd = []byte("a"), all
		r, err := e.s.Range(&req)
		if err != nil {
			t.Fatal(err)
		}
		if got := order(r); got != c.want {
			t.Errorf("%+v: order %q, want %q", c.req, got, c.want)
		}
		if r.Count != 3 {
			t.Errorf("%+v: count %d ignores filters and limit, want 3", c.req, r.Count)
		}
	}
	r, _ = e.s.Range(&store.RangeRequest{Key: []byte("a"), RangeEnd: all, MinModRevision: 3, Limit: 1})
	if !r.More {
		t.Errorf("filtered result longer than limit must set More")
	}
}

func TestKeysOnlyOmitsValueAndLease(t *testing.T) {
	e := newEnv(t, store.Options{})
	l, _ := e.s.LeaseGrant(0, 60)
	if _, err := e.s.Put(&store.PutRequest{Key: []byte("a"), Value: []byte("v"), Lease: l.ID}); err != nil {
		t.Fatal(err)
	}
	r, _ := e.s.Range(&store.RangeRequest{Key: []byte("a"), KeysOnly: true})
	if diff := cmp.Diff(kv("a", "", 2, 2, 1), &r.Kvs[0]); diff != "" {
		t.Fatalf("keys only from the index (-want +got):\n%s", diff)
	}
	r, _ = e.s.Range(&store.RangeRequest{Key: []byte("a"), KeysOnly: true, SortTarget: etcdrules.SortByValue})
	if r.Kvs[0].Value != nil || r.Kvs[0].Lease != l.ID {
		t.Fatalf("keys only sorted by value keeps the lease: %+v", r.Kvs[0])
	}
}

func TestPutOptionsAndErrors(t *testing.T) {
	e := newEnv(t, store.Options{})
	l, _ := e.s.LeaseGrant(7, 60)
	cases := []struct {
		req  store.PutRequest
		want error
	}{
		{store.PutRequest{}, store.ErrEmptyKey},
		{store.PutRequest{Key: []byte("a"), Value: []byte("x"), IgnoreValue: true}, store.ErrValueProvided},
		{store.PutRequest{Key: []byte("a"), Lease: 7, IgnoreLease: true}, store.ErrLeaseProvided},
		{store.PutRequest{Key: []byte("a"), IgnoreValue: true}, store.ErrKeyNotFound},
		{store.PutRequest{Key: []byte("a"), IgnoreLease: true}, store.ErrKeyNotFound},
		{store.PutRequest{Key: []byte("a"), Lease: 99}, store.ErrLeaseNotFound},
		{store.PutRequest{Key: []byte("a"), Value: bytes.Repeat([]byte("x"), store.DefaultMaxRequestBytes)}, store.ErrRequestTooLarge},
	}
	for _, c := range cases {
		if _, err := e.s.Put(&c.req); !errors.Is(err, c.want) {
			t.Errorf("put %+v: got %v, want %v", c.req.Key, err, c.want)
		}
	}
	if e.s.Rev() != 1 {
		t.Fatalf("rejected puts changed the revision to %d", e.s.Rev())
	}
	if _, err := e.s.Put(&store.PutRequest{Key: []byte("a"), Value: []byte("1"), Lease: l.ID}); err != nil {
		t.Fatal(err)
	}
	r, err := e.s.Put(&store.PutRequest{Key: []byte("a"), IgnoreValue: true, PrevKV: true})
	if err != nil {
		t.Fatal(err)
	}
	want := kv("a", "1", 2, 2, 1)
	want.Lease = 7
	if diff := cmp.Diff(want, r.PrevKV); diff != "" {
		t.Fatalf("prev kv (-want +got):\n%s", diff)
	}
	// ignore_value kept the value; the plain put without lease detached the lease
	if got := e.get("a", 0); string(got.Value) != "1" || got.Lease != 0 {
		t.Fatalf("after ignore_value put: %+v", got)
	}
	ttl, _ := e.s.LeaseTimeToLive(7, true)
	if len(ttl.Keys) != 0 {
		t.Fatalf("lease still holds %q after a put without lease", ttl.Keys)
	}
	if _, err := e.s.Put(&store.PutRequest{Key: []byte("a"), Lease: 7, IgnoreValue: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Put(&store.PutRequest{Key: []byte("a"), Value: []byte("2"), IgnoreLease: true}); err != nil {
		t.Fatal(err)
	}
	if got := e.get("a", 0); string(got.Value) != "2" || got.Lease != 7 || got.Version != 4 {
		t.Fatalf("after ignore_lease put: %+v", got)
	}
}

func TestDeleteRangePrevKvsInKeyOrder(t *testing.T) {
	e := newEnv(t, store.Options{})
	e.put("b", "2")
	e.put("a", "1")
	e.put("c", "3")
	r, err := e.s.DeleteRange(&store.DeleteRangeRequest{Key: []byte("a"), RangeEnd: []byte("c"), PrevKV: true})
	if err != nil {
		t.Fatal(err)
	}
	want := &store.DeleteRangeResponse{
		Header:  store.Header{Revision: 5},
		Deleted: 2,
		PrevKVs: []store.KeyValue{*kv("a", "1", 3, 3, 1), *kv("b", "2", 2, 2, 1)},
	}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Fatalf("delete range (-want +got):\n%s", diff)
	}
	if _, err := e.s.DeleteRange(&store.DeleteRangeRequest{}); !errors.Is(err, store.ErrEmptyKey) {
		t.Fatalf("empty key delete: %v", err)
	}
}

func TestRequestBytesAreCopied(t *testing.T) {
	e := newEnv(t, store.Options{})
	k, v := []byte("key"), []byte("value")
	if _, err := e.s.Put(&store.PutRequest{Key: k, Value: v}); err != nil {
		t.Fatal(err)
	}
	k[0], v[0] = 'X', 'X'
	got := e.get("key", 0)
	if got == nil || string(got.Value) != "value" {
		t.Fatalf("store kept the caller's buffers: %+v", got)
	}
	got.Value[0] = 'Y'
	if again := e.get("key", 0); string(again.Value) != "value" {
		t.Fatalf("a returned value aliases the store: %q", again.Value)
	}
}

func TestCompactionRules(t *testing.T) {
	e := newEnv(t, store.Options{})
	if _, err := e.s.Compact(0); err != nil {
		t.Fatalf("Compact(0) on a fresh store: %v", err)
	}
	if _, err := e.s.Compact(0); !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("second Compact(0): %v", err)
	}
	e.put("a", "1") // 2
	e.put("b", "1") // 3
	e.del("a", "")  // 4
	e.put("b", "2") // 5
	e.put("c", "1") // 6
	e.del("c", "")  // 7
	if _, err := e.s.Compact(8); !errors.Is(err, store.ErrFutureRev) {
		t.Fatalf("future compaction: %v", err)
	}
	if _, err := e.s.Compact(7); err != nil {
		t.Fatalf("compaction at the current revision: %v", err)
	}
	if _, err := e.s.Compact(7); !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("compaction at the compact revision: %v", err)
	}
	if _, err := e.s.Compact(5); !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("compaction below the compact revision: %v", err)
	}
	if got := e.get("b", 7); got == nil || got.Version != 2 || got.CreateRevision != 3 {
		t.Fatalf("b after compaction: %+v", got)
	}
	if got := e.get("a", 7); got != nil {
		t.Fatalf("a is deleted: %+v", got)
	}
	if _, err := e.s.Range(&store.RangeRequest{Key: []byte("b"), Revision: 6}); !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("range below compaction: %v", err)
	}
	e.put("b", "3")
	if got := e.get("b", 0); got.Version != 3 || got.CreateRevision != 3 {
		t.Fatalf("version after compaction: %+v", got)
	}
}

func TestTombstoneAtCompactRevisionIsWatchable(t *testing.T) {
	e := newEnv(t, store.Options{})
	e.put("a", "1") // 2
	e.put("b", "1") // 3
	e.del("a", "")  // 4
	if _, err := e.s.Compact(4); err != nil {
		t.Fatal(err)
	}
	ws := openStream(t, e)
	id := ws.watch(&store.WatchRequest{Key: []byte("a"), RangeEnd: []byte("c"), StartRevision: 4})
	e.step(store.DefaultSyncInterval)
	r := ws.next()
	if r.WatchID != id || len(r.Events) != 1 || r.Events[0].Type != etcdrules.EventDelete || string(r.Events[0].Kv.Key) != "a" {
		t.Fatalf("watch from the compact revision must see the delete at it: %+v", r)
	}
	if _, err := e.s.Compact(5); !errors.Is(err, store.ErrFutureRev) {
		t.Fatalf("compact past current: %v", err)
	}
	e.put("c", "1") // 5
	if _, err := e.s.Compact(5); err != nil {
		t.Fatal(err)
	}
	if got := e.get("a", 5); got != nil {
		t.Fatalf("a resurrected: %+v", got)
	}
}

func TestClosedStoreRefusesCalls(t *testing.T) {
	e := newEnv(t, store.Options{})
	e.s.Close()
	if _, err := e.s.Put(&store.PutRequest{Key: []byte("a")}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("put after close: %v", err)
	}
	if _, err := e.s.NewWatchStream(); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("watch stream after close: %v", err)
	}
	if err := e.s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

// TestCheckRequest: CheckRequest gives exactly the errors no state explains, the ones each operation
// itself returns for the request; a request that passes them, or fails only on the store's state,
// gets nil; and nothing is stored.
func TestCheckRequest(t *testing.T) {
	e := newEnv(t, store.Options{MaxTxnOps: 2})
	big := bytes.Repeat([]byte("x"), store.DefaultMaxRequestBytes)
	put := func(k string) store.RequestOp { return store.RequestOp{Put: &store.PutRequest{Key: []byte(k)}} }
	cases := []struct {
		name string
		req  any
		want error
	}{
		{"range", &store.RangeRequest{Key: []byte("a"), Revision: 99}, nil}, // future revision: state
		{"range empty key", &store.RangeRequest{}, store.ErrEmptyKey},
		{"range sort", &store.RangeRequest{Key: []byte("a"), SortOrder: 7}, store.ErrInvalidSortOption},
		{"put", &store.PutRequest{Key: []byte("a"), IgnoreValue: true}, nil}, // key not found: state
		{"put value with ignore_value", &store.PutRequest{Key: []byte("a"), Value: []byte("x"), IgnoreValue: true}, store.ErrValueProvided},
		{"put lease with ignore_lease", &store.PutRequest{Key: []byte("a"), Lease: 1, IgnoreLease: true}, store.ErrLeaseProvided},
		{"put too large", &store.PutRequest{Key: []byte("a"), Value: big}, store.ErrRequestTooLarge},
		{"delete empty key", &store.DeleteRangeRequest{}, store.ErrEmptyKey},
		{"delete too large", &store.DeleteRangeRequest{Key: big}, store.ErrRequestTooLarge},
		{"txn", &store.TxnRequest{Success: []store.RequestOp{put("a"), put("b")}}, nil},
		{"txn too many ops", &store.TxnRequest{Success: []store.RequestOp{put("a"), put("b"), put("c")}}, store.ErrTooManyOps},
		{"txn duplicate key", &store.TxnRequest{Failure: []store.RequestOp{put("a"), put("a")}}, store.ErrDuplicateKey},
		{"txn empty op", &store.TxnRequest{Success: []store.RequestOp{{}}}, store.ErrKeyNotFound},
		{"not a request", "put a", nil},
	}
	for _, c := range cases {
		got := e.s.CheckRequest(c.req)
		if !errors.Is(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
		if c.want == nil {
			continue
		}
		var opErr error
		switch r := c.req.(type) {
		case *store.RangeRequest:
			_, opErr = e.s.Range(r)
		case *store.PutRequest:
			_, opErr = e.s.Put(r)
		case *store.DeleteRangeRequest:
			_, opErr = e.s.DeleteRange(r)
		case *store.TxnRequest:
			_, opErr = e.s.Txn(r)
		}
		if !errors.Is(opErr, c.want) {
			t.Errorf("%s: the operation itself fails with %v, CheckRequest with %v", c.name, opErr, got)
		}
	}
	if e.s.Rev() != 1 {
		t.Fatalf("checks changed the revision to %d", e.s.Rev())
	}
}

// TestCompactionAtPutThenDeleteRevision: a txn may put a key and then delete it (a delete from the
// key is the empty interval to v3rpc's checkIntervals), leaving two changes of the key at one
// revision. Compaction there keeps only the newest of them, the tombstone (key_index.go compact),
// and drops the put from history as kvstore_compaction.go scheduleCompaction does, so a watch from
// that revision gets the DELETE alone and nothing reads the value the compaction released (which,
// for a value in a value-log chunk of its own, used to panic).
func TestCompactionAtPutThenDeleteRevision(t *testing.T) {
	for _, size := range []int{3, 1<<20 + 100} {
		t.Run(fmt.Sprintf("value of %d bytes", size), func(t *testing.T) {
			e := newEnv(t, store.Options{})
			e.put("k", "old") // 2
			txn := &store.TxnRequest{Success: []store.RequestOp{put("k", strings.Repeat("v", size)), del("k", "\x00")}}
			if _, err := e.s.Txn(txn); err != nil { // 3
				t.Fatal(err)
			}
			if _, err := e.s.Compact(3); err != nil {
				t.Fatal(err)
			}
			if got := e.get("k", 3); got != nil {
				t.Fatalf("k at the compact revision: %+v, want deleted", got)
			}
			s := openStream(t, e)
			s.watch(&store.WatchRequest{Key: []byte("k"), StartRevision: 3, PrevKV: true})
			e.step(store.DefaultSyncInterval)
			if r := s.next(); diffStrings(evsOf(r), "DELETE k=@3") != "" {
				t.Fatalf("watch from the compact revision: %s, want the DELETE alone", describe(r))
			}
			e.put("k", "after") // 4
			if r := s.next(); diffStrings(evsOf(r), "PUT k=after@4") != "" {
				t.Fatalf("after the catch-up: %s", describe(r))
			}
		})
	}
}

// TestReadOnlyTxnNotBoundByRequestSize: etcd checks MaxRequestBytes where a request is proposed
// through raft (etcdserver/v3_server.go processInternalRaftRequestOnce); a txn of compares and
// ranges only is served without raft (v3_server.go Txn, txn.IsTxnReadonly) and so is bound by
// gRPC's receive limit alone. A txn that can write is still checked, whichever branch runs.
func TestReadOnlyTxnNotBoundByRequestSize(t *testing.T) {
	e := newEnv(t, store.Options{})
	e.put("a", "x") // 2
	big := bytes.Repeat([]byte("y"), store.DefaultMaxRequestBytes)
	cmpBig := []store.Compare{{Key: []byte("a"), Target: etcdrules.CompareValue, Result: etcdrules.CompareEqual, Value: big}}
	ro := &store.TxnRequest{Compare: cmpBig, Success: []store.RequestOp{get("a")}, Failure: []store.RequestOp{get("a")}}
	if err := e.s.CheckRequest(ro); err != nil {
		t.Fatalf("CheckRequest of a read-only txn over MaxRequestBytes: %v", err)
	}
	r, err := e.s.Txn(ro)
	if err != nil {
		t.Fatalf("read-only txn over MaxRequestBytes: %v", err)
	}
	if r.Succeeded || r.Header.Revision != 2 || len(r.Responses) != 1 || len(r.Responses[0].Range.Kvs) != 1 {
		t.Fatalf("read-only txn answer %+v", r)
	}
	rw := &store.TxnRequest{Compare: cmpBig, Success: []store.RequestOp{put("b", "1")}, Failure: []store.RequestOp{get("a")}}
	if _, err := e.s.Txn(rw); !errors.Is(err, store.ErrRequestTooLarge) {
		t.Fatalf("txn that may write, over MaxRequestBytes: %v, want %v", err, store.ErrRequestTooLarge)
	}
	nested := &store.TxnRequest{Compare: cmpBig, Success: []store.RequestOp{{Txn: &store.TxnRequest{Success: []store.RequestOp{get("a")}}}}}
	if _, err := e.s.Txn(nested); !errors.Is(err, store.ErrRequestTooLarge) {
		t.Fatalf("txn with a nested txn, over MaxRequestBytes: %v, want %v (IsTxnReadonly counts ranges only)", err, store.ErrRequestTooLarge)
	}
	if e.s.Rev() != 2 {
		t.Fatalf("revision %d, want 2", e.s.Rev())
	}
}
