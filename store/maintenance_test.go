package store_test

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"github.com/listwatch/listwatch/store"
)

// TestSizeModel checks the documented size prediction: each retained revision costs its key and
// value bytes plus RecordOverheadBytes; compaction lowers the size in use but not the size, and
// Defragment gives the freed space back.
func TestSizeModel(t *testing.T) {
	e := newEnv(t, store.Options{})
	size, inUse := e.s.Size()
	if size != store.BaseDBBytes || inUse != store.BaseDBBytes {
		t.Fatalf("fresh size = %d, %d; want %d both", size, inUse, store.BaseDBBytes)
	}
	val := string(make([]byte, 100))
	for range 10 {
		e.put("key", val) // 3 + 100 + overhead each
	}
	e.del("key", "") // a tombstone: the key and the overhead
	per := int64(3 + 100 + store.RecordOverheadBytes)
	tomb := int64(3 + store.RecordOverheadBytes)
	want := store.BaseDBBytes + 10*per + tomb
	if size, inUse = e.s.Size(); size != want || inUse != want {
		t.Fatalf("after 10 puts and a delete: size %d, in use %d; want %d", size, inUse, want)
	}
	if _, err := e.s.Compact(e.s.Rev()); err != nil {
		t.Fatal(err)
	}
	// the tombstone at the compact revision stays, as etcd keeps it
	if size, inUse = e.s.Size(); size != want || inUse != store.BaseDBBytes+tomb {
		t.Fatalf("after compaction: size %d, in use %d; want %d, %d", size, inUse, want, store.BaseDBBytes+tomb)
	}
	if err := e.s.Defragment(); err != nil {
		t.Fatal(err)
	}
	if size, inUse = e.s.Size(); size != inUse || inUse != store.BaseDBBytes+tomb {
		t.Fatalf("after defragment: size %d, in use %d; want both %d", size, inUse, store.BaseDBBytes+tomb)
	}
	e.s.Close()
	if err := e.s.Defragment(); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Defragment on a closed store = %v, want ErrClosed", err)
	}
}

// etcdHashKV is the hash etcd's kvHasher computes over a key bucket holding recs, at rev, given the
// compact revision and the set of revisions its key index keeps at rev; it encodes each record with
// mvccpb, as etcd does, to check the store's own encoding.
func etcdHashKV(recs []store.SnapshotRecord, compact, rev int64, keep map[[2]int64]bool) uint32 {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	h.Write([]byte("key"))
	for _, r := range recs {
		main := r.KV.ModRevision
		if main > rev {
			break
		}
		if main <= compact && len(keep) > 0 && !keep[[2]int64{main, r.Sub}] {
			continue
		}
		if main == compact && r.Tombstone {
			continue
		}
		k := binary.BigEndian.AppendUint64(nil, uint64(main))
		k = append(k, '_')
		k = binary.BigEndian.AppendUint64(k, uint64(r.Sub))
		kv := &mvccpb.KeyValue{Key: r.KV.Key}
		if r.Tombstone {
			k = append(k, 't')
		} else {
			kv = &mvccpb.KeyValue{Key: r.KV.Key, CreateRevision: r.KV.CreateRevision, ModRevision: main,
				Version: r.KV.Version, Value: r.KV.Value, Lease: r.KV.Lease}
		}
		v, _ := proto.MarshalOptions{Deterministic: true}.Marshal(kv)
		h.Write(k)
		h.Write(v)
	}
	return h.Sum32()
}

// keepAt is mvcc's kvindex.Keep(rev): each key's newest revision at or below rev, unless a tombstone.
func keepAt(recs []store.SnapshotRecord, rev int64) map[[2]int64]bool {
	newest := map[string]store.SnapshotRecord{}
	for _, r := range recs {
		if r.KV.ModRevision <= rev {
			newest[string(r.KV.Key)] = r
		}
	}
	keep := map[[2]int64]bool{}
	for _, r := range newest {
		if !r.Tombstone {
			keep[[2]int64{r.KV.ModRevision, r.Sub}] = true
		}
	}
	return keep
}

func hashHistory(t *testing.T, e *env) {
	t.Helper()
	e.put("a", "1")                                                                             // 2
	e.put("b", "1")                                                                             // 3
	lease, _ := e.s.LeaseGrant(0, 60)                                                           //
	_, err := e.s.Put(&store.PutRequest{Key: []byte("c"), Value: []byte("x"), Lease: lease.ID}) // 4
	if err != nil {
		t.Fatal(err)
	}
	e.del("a", "")                                                 // 5
	_, err = e.s.Txn(&store.TxnRequest{Success: []store.RequestOp{ // 6: two puts in one revision
		{Put: &store.PutRequest{Key: []byte("d"), Value: []byte("1")}},
		{Put: &store.PutRequest{Key: []byte("e"), Value: []byte("1")}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.put("b", "2") // 7
}

func TestHashKVFollowsEtcdRules(t *testing.T) {
	e := newEnv(t, store.Options{})
	hashHistory(t, e)
	check := func(rev int64) store.KVHash {
		t.Helper()
		got, cur, err := e.s.HashKV(rev)
		if err != nil || cur != e.s.Rev() {
			t.Fatalf("HashKV(%d) = %+v, %d, %v", rev, got, cur, err)
		}
		snap, _ := e.s.Snapshot()
		at := rev
		if at == 0 {
			at = cur
		}
		want := etcdHashKV(snap.Records, snap.CompactRevision, at, keepAt(snap.Records, at))
		if got.Hash != want || got.Revision != at || got.CompactRevision != snap.CompactRevision {
			t.Fatalf("HashKV(%d) = %+v, want hash %d, revision %d, compact %d", rev, got, want, at, snap.CompactRevision)
		}
		return got
	}
	before := map[int64]store.KVHash{}
	for rev := int64(0); rev <= 7; rev++ {
		before[rev] = check(rev)
	}
	if before[3].Hash == before[4].Hash {
		t.Fatalf("revisions 3 and 4 hash alike: %d", before[3].Hash)
	}
	// writes after a revision leave its hash alone
	e.put("z", "1")
	if got := check(7); got != before[7] {
		t.Fatalf("HashKV(7) changed with a later write: %+v, was %+v", got, before[7])
	}
	if _, err := e.s.Compact(5); err != nil { // compact at the tombstone of a
		t.Fatal(err)
	}
	for rev := int64(6); rev <= 8; rev++ {
		check(rev)
	}
	// at the compact revision, the hash the compaction kept: the history before it was compacted
	if got, _, err := e.s.HashKV(5); err != nil || got != before[5] {
		t.Fatalf("HashKV at the compact revision = %+v, %v; want the hash from before, %+v", got, err, before[5])
	}
	if _, _, err := e.s.HashKV(4); !errors.Is(err, store.ErrCompacted) {
		t.Fatalf("HashKV below the compact revision = %v, want ErrCompacted", err)
	}
	if _, cur, err := e.s.HashKV(9); !errors.Is(err, store.ErrFutureRev) || cur != 8 {
		t.Fatalf("HashKV above the current revision = %d, %v; want 8, ErrFutureRev", cur, err)
	}

	// the same history compacted at 5 in two steps hashes alike above 5 (at 5, each kept the hash
	// its compaction saw, with the compact revision before it, as etcd does)
	e2 := newEnv(t, store.Options{})
	hashHistory(t, e2)
	e2.put("z", "1")
	for _, c := range []int64{3, 5} {
		if _, err := e2.s.Compact(c); err != nil {
			t.Fatal(err)
		}
	}
	for rev := int64(6); rev <= 8; rev++ {
		a, _, _ := e.s.HashKV(rev)
		b, _, _ := e2.s.HashKV(rev)
		if a != b {
			t.Fatalf("equal histories at revision %d hash apart: %+v, %+v", rev, a, b)
		}
	}
	h1, r1, _ := e.s.Hash()
	h2, r2, _ := e2.s.Hash()
	if h1 != h2 || r1 != r2 {
		t.Fatalf("Hash of equal stores: %d@%d, %d@%d", h1, r1, h2, r2)
	}
	e2.put("z", "2")
	if h3, _, _ := e2.s.Hash(); h3 == h1 {
		t.Fatalf("Hash did not change with a write")
	}
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	e := newEnv(t, store.Options{})
	hashHistory(t, e)
	if _, err := e.s.Compact(3); err != nil {
		t.Fatal(err)
	}
	snap, err := e.s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Leases) != 1 || snap.Leases[0].TTL != 60 || snap.Leases[0].RemainingTTL != 60 {
		t.Fatalf("snapshot leases = %+v", snap.Leases)
	}
	fc := e.clock
	r, err := store.Restore(store.Options{Clock: fc, ManualTick: true}, snap)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Rev() != e.s.Rev() || r.CompactRevision() != 3 {
		t.Fatalf("restored at %d, compact %d; want %d, 3", r.Rev(), r.CompactRevision(), e.s.Rev())
	}
	for rev := int64(3); rev <= e.s.Rev(); rev++ {
		want, _ := e.s.Range(&store.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: rev})
		got, err := r.Range(&store.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, Revision: rev})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("range at %d differs (-original +restored):\n%s", rev, diff)
		}
		if rev == 3 {
			continue // the original kept its compaction's hash there; a restored store has none
		}
		a, _, _ := e.s.HashKV(rev)
		b, _, _ := r.HashKV(rev)
		if a != b {
			t.Fatalf("HashKV(%d): original %+v, restored %+v", rev, a, b)
		}
	}
	ttl, err := r.LeaseTimeToLive(snap.Leases[0].ID, true)
	if err != nil || len(ttl.Keys) != 1 || string(ttl.Keys[0]) != "c" {
		t.Fatalf("restored lease = %+v, %v", ttl, err)
	}
	// the lease expires on the restored store's clock and takes its key along
	fc.Step(61 * time.Second)
	r.Tick()
	if got, _ := r.Range(&store.RangeRequest{Key: []byte("c")}); got.Count != 0 {
		t.Fatalf("key of the expired lease still there: %+v", got.Kvs)
	}
}

func TestRestoreRejectsBadSnapshot(t *testing.T) {
	for name, snap := range map[string]*store.Snapshot{
		"out of order": {Records: []store.SnapshotRecord{
			{KV: store.KeyValue{Key: []byte("a"), CreateRevision: 3, ModRevision: 3, Version: 1}},
			{KV: store.KeyValue{Key: []byte("b"), CreateRevision: 2, ModRevision: 2, Version: 1}},
		}},
		"no version": {Records: []store.SnapshotRecord{{KV: store.KeyValue{Key: []byte("a"), ModRevision: 2}}}},
		"empty key":  {Records: []store.SnapshotRecord{{KV: store.KeyValue{CreateRevision: 2, ModRevision: 2, Version: 1}}}},
		"lease 0":    {Leases: []store.SnapshotLease{{ID: 0, TTL: 5}}},
	} {
		s, err := store.Restore(store.Options{ManualTick: true}, snap)
		if !errors.Is(err, store.ErrBadSnapshot) || s != nil {
			t.Errorf("%s: Restore = %v, %v; want ErrBadSnapshot", name, s, err)
		}
	}
}

func TestStatsCounts(t *testing.T) {
	e := newEnv(t, store.Options{})
	e.put("a", "1")
	e.put("b", "1")
	e.get("a", 0)
	e.del("a", "")
	l, _ := e.s.LeaseGrant(0, 5)
	if _, err := e.s.LeaseKeepAlive(t.Context(), l.ID); err != nil {
		t.Fatal(err)
	}
	ws, err := e.s.NewWatchStream()
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if _, err := ws.Watch(t.Context(), &store.WatchRequest{Key: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	e.step(10 * time.Second) // the lease expires
	got := e.s.Stats()
	want := store.Stats{Ranges: 1, Puts: 2, Deletes: 1, Txns: 5, Keys: 2, Revision: 4, CompactRevision: -1,
		DBSize: got.DBSize, DBSizeInUse: got.DBSizeInUse, WatchStreams: 1, Watchers: 1,
		LeaseGranted: 1, LeaseRevoked: 1, LeaseRenewed: 1, LeaseExpired: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("stats (-want +got):\n%s", diff)
	}
}

// TestSubRevisionsSurviveCompaction: a record keeps the sub-revision it was written with when
// compaction drops records of its revision before it, as etcd's key bucket keeps it, through later
// compactions, Snapshot and Restore.
func TestSubRevisionsSurviveCompaction(t *testing.T) {
	e := newEnv(t, store.Options{})
	_, err := e.s.Txn(&store.TxnRequest{Success: []store.RequestOp{ // 2: x.0, y.1, z.2
		{Put: &store.PutRequest{Key: []byte("x"), Value: []byte("1")}},
		{Put: &store.PutRequest{Key: []byte("y"), Value: []byte("1")}},
		{Put: &store.PutRequest{Key: []byte("z"), Value: []byte("1")}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.put("x", "2") // 3
	subsAt2 := func(s *store.Store) map[string]int64 {
		snap, err := s.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, r := range snap.Records {
			if r.KV.ModRevision == 2 {
				out[string(r.KV.Key)] = r.Sub
			}
		}
		return out
	}
	want := map[string]int64{"y": 1, "z": 2}
	for _, c := range []int64{3, 4} {
		if _, err := e.s.Compact(c); err != nil {
			t.Fatal(err)
		}
		if got := subsAt2(e.s); !cmp.Equal(got, want) {
			t.Fatalf("after compaction at %d: sub-revisions at 2 = %v, want %v", c, got, want)
		}
		e.put("w", "1")
	}
	snap, _ := e.s.Snapshot()
	r, err := store.Restore(store.Options{ManualTick: true}, snap)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := subsAt2(r); !cmp.Equal(got, want) {
		t.Fatalf("restored: sub-revisions at 2 = %v, want %v", got, want)
	}
	a, _, _ := e.s.HashKV(0)
	b, _, _ := r.HashKV(0)
	want2 := etcdHashKV(snap.Records, snap.CompactRevision, snap.Revision, keepAt(snap.Records, snap.Revision))
	if a != b || a.Hash != want2 {
		t.Fatalf("HashKV: original %+v, restored %+v, etcd's rules %d", a, b, want2)
	}
}
