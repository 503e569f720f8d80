package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"sort"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Size model. The store has no database file; it reports the size etcd's bbolt file would have as a
// prediction a user can check: a fixed base, plus for each retained revision of a key its key and
// value bytes and RecordOverheadBytes (the revision key etcd writes, the encoded KeyValue's other
// fields, bbolt's element header and page slack, rounded). SizeInUse is that sum over what is
// retained now; Size is its high-water mark since the last Defragment, as bbolt's file grows and
// only defragmentation shrinks it.
const (
	// BaseDBBytes is the size of an empty store: what a fresh etcd member reports (5 pages of 4 KiB).
	BaseDBBytes = 20480
	// RecordOverheadBytes is what each retained revision costs beyond its key and value bytes.
	RecordOverheadBytes = 64
)

func recordBytes(keyLen int, valueLen uint32) int64 {
	return int64(keyLen) + int64(valueLen) + RecordOverheadBytes
}

// counters are the store's operation counts, read by metrics without the store's lock.
type counters struct {
	ranges, puts, deletes, txns             atomic.Int64
	leaseGranted, leaseRevoked, leaseRenews atomic.Int64
	leaseExpired                            atomic.Int64
}

// Stats is a snapshot of the store's counts and gauges, named after etcd's metrics
// (server/storage/mvcc/metrics.go, server/lease/metrics.go).
type Stats struct {
	Ranges, Puts, Deletes, Txns int64 // etcd_mvcc_{range,put,delete,txn}_total
	Keys                        int64 // etcd_debugging_mvcc_keys_total: keys with a retained history
	Revision, CompactRevision   int64 // etcd_debugging_mvcc_{current,compact}_revision
	DBSize, DBSizeInUse         int64 // etcd_mvcc_db_total_size_in_bytes, ..._in_use_in_bytes
	WatchStreams                int64 // etcd_debugging_mvcc_watch_stream_total
	Watchers                    int64 // etcd_debugging_mvcc_watcher_total
	SlowWatchers                int64 // etcd_debugging_mvcc_slow_watcher_total: unsynced and victims
	Leases                      int64 // leases alive
	LeaseGranted, LeaseRevoked  int64 // etcd_debugging_lease_{granted,revoked}_total
	LeaseRenewed                int64 // etcd_debugging_lease_renewed_total
	LeaseExpired                int64 // etcd_debugging_server_lease_expired_total
}

// Stats returns the store's counts and gauges.
func (s *Store) Stats() Stats {
	st := Stats{
		Ranges: s.stats.ranges.Load(), Puts: s.stats.puts.Load(), Deletes: s.stats.deletes.Load(),
		Txns: s.stats.txns.Load(), LeaseGranted: s.stats.leaseGranted.Load(),
		LeaseRevoked: s.stats.leaseRevoked.Load(), LeaseRenewed: s.stats.leaseRenews.Load(),
		LeaseExpired: s.stats.leaseExpired.Load(),
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	st.Keys = int64(len(s.idx.keys))
	st.Revision, st.CompactRevision = s.currentRev, s.compactRev
	st.DBSize, st.DBSizeInUse = s.dbSize, s.dbInUse
	st.WatchStreams = int64(len(s.watch.streams))
	slow := int64(s.watch.unsynced.size())
	for _, b := range s.watch.victims {
		slow += int64(len(b))
	}
	st.Watchers = int64(s.watch.synced.size()) + slow
	st.SlowWatchers = slow
	st.Leases = int64(len(s.leases.byID))
	return st
}

// Size returns the predicted database size and the part of it in use (see BaseDBBytes).
func (s *Store) Size() (size, inUse int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.dbSize, s.dbInUse
}

// Defragment gives the space compaction freed back: Size drops to SizeInUse, as etcd's defragment
// rewrites the bbolt file with only the pages in use. It changes no revision.
func (s *Store) Defragment() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.dbSize = s.dbInUse
	return nil
}

// KVHash is the answer of HashKV, as mvcc.KeyValueHash.
type KVHash struct {
	Hash            uint32
	CompactRevision int64
	Revision        int64
}

// HashKV hashes the history up to rev (0: the current revision) by the rules of etcd's
// server/storage/mvcc hashByRev and kvHasher: a CRC-32C over the bucket name, then each retained
// revision at or below rev in revision order, as etcd's key bucket holds it (the revision key, then
// the encoded KeyValue), skipping revisions at or below the compact revision that are not the
// newest live revision of their key at rev (unless no key is live at rev), and a tombstone at exactly
// the compact revision. As in etcd, a compaction at C first hashes the history up to C with the compact
// revision before it and keeps that hash (the newest 10 such): HashKV at C answers the kept hash,
// looked up before anything else, so even below the compact revision and for 0 after a compaction
// at 0, as etcd's hash storage does. So
// equal histories compacted alike hash alike, and writes after rev leave its hash as it was. It fails with ErrCompacted for 0 < rev < compact
// revision and with ErrFutureRev above the current revision; it also returns the current revision.
func (s *Store) HashKV(rev int64) (KVHash, int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return KVHash{}, 0, ErrClosed
	}
	cur, compact := s.currentRev, s.compactRev
	// mvcc's hashStorage.HashByRev looks the asked revision up among the kept hashes first, before
	// any check and before 0 means the current revision
	for _, h := range s.hashes {
		if h.Revision == rev {
			return h, cur, nil
		}
	}
	switch {
	case rev > 0 && rev < compact:
		return KVHash{}, 0, ErrCompacted
	case rev > 0 && rev > cur:
		return KVHash{}, cur, ErrFutureRev
	case rev == 0:
		rev = cur
	}
	return s.hashKVLocked(rev, compact), cur, nil
}

// hashKVLocked is HashKV's hash of the history up to rev as it stands with compact revision compact.
func (s *Store) hashKVLocked(rev, compact int64) KVHash {
	keep := make(map[*rec]struct{})
	s.idx.tree.Ascend(func(ki *keyIndex) bool {
		if r := ki.at(rev); r != nil {
			keep[r] = struct{}{}
		}
		return true
	})
	h := newKVHash()
	s.eachRecord(func(r *rec, sub int64) bool {
		if r.mod > rev {
			return false
		}
		if r.mod <= compact && len(keep) > 0 {
			if _, ok := keep[r]; !ok {
				return true
			}
		}
		if r.mod == compact && r.tombstone() {
			return true
		}
		s.hashRecord(h, r, sub)
		return true
	})
	return KVHash{Hash: h.Sum32(), CompactRevision: compact, Revision: rev}
}

// hashStorageMaxSize is how many compaction hashes the store keeps (mvcc/hash.go).
const hashStorageMaxSize = 10

// storeCompactionHashLocked keeps the hash of the history up to rev as it stood before the
// compaction at rev, as etcd's compaction computes and stores it (kvstore_compaction.go, mvcc's
// hashStorage.Store): HashKV at rev answers it afterwards, with the compact revision before it.
func (s *Store) storeCompactionHashLocked(rev int64) {
	h := s.hashKVLocked(rev, s.compactRev)
	i := sort.Search(len(s.hashes), func(i int) bool { return s.hashes[i].Revision >= h.Revision })
	s.hashes = append(s.hashes, KVHash{})
	copy(s.hashes[i+1:], s.hashes[i:])
	s.hashes[i] = h
	if len(s.hashes) > hashStorageMaxSize {
		s.hashes = s.hashes[len(s.hashes)-hashStorageMaxSize:]
	}
}

// Hash hashes everything the store retains (every revision, and the compact and current
// revisions), as etcd's Hash covers its whole backend; it returns the current revision too.
func (s *Store) Hash() (uint32, int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, 0, ErrClosed
	}
	h := newKVHash()
	s.eachRecord(func(r *rec, sub int64) bool {
		s.hashRecord(h, r, sub)
		return true
	})
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(s.compactRev))
	binary.BigEndian.PutUint64(b[8:], uint64(s.currentRev))
	h.Write(b[:])
	return h.Sum32(), s.currentRev, nil
}

func newKVHash() hash.Hash32 {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	h.Write([]byte("key")) // etcd's key bucket name, which its hash starts with
	return h
}

// eachRecord calls f with each retained record in revision order and its sub-revision, until f
// returns false. A record's sub-revision is its position among the retained records of its main
// revision, unless compaction dropped records of that revision before it: then Store.subs keeps
// the one it was written with, as etcd's key bucket does.
func (s *Store) eachRecord(f func(r *rec, sub int64) bool) {
	var main, pos int64 = -1, 0
	s.log.scan(0, func(r *rec) bool {
		if r.mod != main {
			main, pos = r.mod, 0
		} else {
			pos++
		}
		sub, ok := s.subs[r]
		if !ok {
			sub = pos
		}
		return f(r, sub)
	})
}

// subTracker carries the sub-revisions of the records a compaction keeps at or below its revision
// across the log's rebuild: it sees every record there in order (seen), then each survivor's new
// address (moved), and builds the new Store.subs.
type subTracker struct {
	old             map[*rec]int64
	out             map[*rec]int64
	main, pos, kept int64
	sub             int64 // the sub-revision of the record last seen
}

func newSubTracker(old map[*rec]int64, rev int64) *subTracker {
	t := &subTracker{old: old, main: -1}
	// records above rev keep their addresses and their positions
	for r, sub := range old {
		if r.mod > rev {
			if t.out == nil {
				t.out = make(map[*rec]int64)
			}
			t.out[r] = sub
		}
	}
	return t
}

func (t *subTracker) seen(r *rec, kept bool) {
	if r.mod != t.main {
		t.main, t.pos, t.kept = r.mod, 0, 0
	} else {
		t.pos++
	}
	sub, ok := t.old[r]
	if !ok {
		sub = t.pos
	}
	t.sub = sub
}

func (t *subTracker) moved(cur *rec) {
	if t.sub != t.kept {
		if t.out == nil {
			t.out = make(map[*rec]int64)
		}
		t.out[cur] = t.sub
	}
	t.kept++
}

func (s *Store) hashRecord(h hash.Hash32, r *rec, sub int64) {
	var scratch [256]byte
	h.Write(revisionKey(scratch[:0], r.mod, sub, r.tombstone()))
	h.Write(s.encodeKeyValue(scratch[:0], r))
}

// revisionKey appends the key etcd's key bucket files a revision under: main and sub revision
// big-endian with '_' between them, and a trailing 't' for a tombstone (mvcc/revision.go).
func revisionKey(b []byte, main, sub int64, tombstone bool) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(main))
	b = append(b, '_')
	b = binary.BigEndian.AppendUint64(b, uint64(sub))
	if tombstone {
		b = append(b, 't')
	}
	return b
}

// encodeKeyValue appends the protobuf encoding of r as an mvccpb.KeyValue; a tombstone is the key
// alone, as etcd writes it.
func (s *Store) encodeKeyValue(b []byte, r *rec) []byte {
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte(s.idx.keyOf(r)))
	for _, f := range []struct {
		num protowire.Number
		v   int64
	}{{2, r.create}, {3, r.mod}, {4, r.ver}} {
		if f.v != 0 && !r.tombstone() {
			b = protowire.AppendTag(b, f.num, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(f.v))
		}
	}
	if v := s.idx.vals.get(r); len(v) > 0 {
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendBytes(b, v)
	}
	if r.lease != 0 {
		b = protowire.AppendTag(b, 6, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(r.lease))
	}
	return b
}

// SnapshotRecord is one retained revision of a key as etcd's key bucket files it.
type SnapshotRecord struct {
	Sub       int64 // the sub-revision; the main revision is KV.ModRevision
	Tombstone bool  // a deletion: KV holds the key and ModRevision only
	KV        KeyValue
}

// SnapshotLease is a lease as etcd's lease bucket files it.
type SnapshotLease struct {
	ID, TTL, RemainingTTL int64
}

// Snapshot is a consistent copy of what the store retains.
type Snapshot struct {
	Revision        int64
	CompactRevision int64 // -1: never compacted
	Records         []SnapshotRecord
	Leases          []SnapshotLease
}

// Snapshot copies what the store retains at one instant: every retained revision in revision order,
// the leases with their remaining TTL, and the current and compact revisions.
func (s *Store) Snapshot() (*Snapshot, error) {
	now := s.opts.Clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	snap := &Snapshot{Revision: s.currentRev, CompactRevision: s.compactRev}
	snap.Records = make([]SnapshotRecord, 0, s.log.len())
	s.eachRecord(func(r *rec, sub int64) bool {
		sr := SnapshotRecord{Sub: sub, Tombstone: r.tombstone()}
		if sr.Tombstone {
			sr.KV = KeyValue{Key: []byte(s.idx.keyOf(r)), ModRevision: r.mod}
		} else {
			sr.KV = *s.idx.keyValue(r, false)
		}
		snap.Records = append(snap.Records, sr)
		return true
	})
	for _, l := range s.sortedByExpiryLocked() {
		rem := int64(l.remaining(now) / time.Second)
		snap.Leases = append(snap.Leases, SnapshotLease{ID: l.id, TTL: l.ttl, RemainingTTL: max(rem, 0)})
	}
	return snap, nil
}

// ErrBadSnapshot is returned by Restore for a snapshot whose records are out of order or
// inconsistent; the error names the record.
var ErrBadSnapshot = errors.New("store: bad snapshot")

// Restore returns a store that holds snap: its records at their revisions, its compact revision, and
// its leases, each with its remaining TTL (its TTL if none remains) from now on the store's clock,
// as an etcd member restores its lessor. The current revision is the newest record's, or the
// snapshot's Revision or compact revision if higher (mvcc's restore). Records must come in
// revision order, each key's in the order etcd's key index needs: a tombstone only after a live
// revision. It starts the store's goroutine as New does.
func Restore(opts Options, snap *Snapshot) (*Store, error) {
	s := New(opts)
	s.mu.Lock()
	err := s.restoreLocked(snap)
	s.mu.Unlock()
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) restoreLocked(snap *Snapshot) error {
	x := s.idx
	last, lastMain, pos := int64(0), int64(-1), int64(0)
	for i, sr := range snap.Records {
		kv := sr.KV
		if len(kv.Key) == 0 || kv.ModRevision < 1 || kv.ModRevision < last {
			return fmt.Errorf("%w: record %d (key %q at revision %d) is out of order or has no key", ErrBadSnapshot, i, kv.Key, kv.ModRevision)
		}
		last = kv.ModRevision
		ki := x.getOrCreate(kv.Key)
		nr := rec{key: ki.id, mod: kv.ModRevision}
		if !sr.Tombstone {
			if kv.Version < 1 || kv.CreateRevision < 1 || kv.CreateRevision > kv.ModRevision {
				return fmt.Errorf("%w: record %d (key %q at revision %d) has version %d and create revision %d", ErrBadSnapshot, i, kv.Key, kv.ModRevision, kv.Version, kv.CreateRevision)
			}
			nr.create, nr.ver, nr.lease = kv.CreateRevision, kv.Version, kv.Lease
			x.vals.add(&nr, kv.Value)
		}
		p := s.log.append(nr)
		ki.revs = append(ki.revs, p)
		s.dbInUse += recordBytes(len(kv.Key), nr.vlen)
		if kv.ModRevision != lastMain {
			lastMain, pos = kv.ModRevision, 0
		} else {
			pos++
		}
		if sr.Sub != pos {
			if s.subs == nil {
				s.subs = make(map[*rec]int64)
			}
			s.subs[p] = sr.Sub
		}
	}
	s.currentRev = max(last, snap.Revision, snap.CompactRevision, 1)
	s.compactRev = snap.CompactRevision
	if s.compactRev == 0 {
		s.compactRev = -1
	}
	s.dbSize = s.dbInUse
	now := s.opts.Clock.Now()
	for _, sl := range snap.Leases {
		if sl.ID == 0 || s.leases.get(sl.ID) != nil {
			return fmt.Errorf("%w: lease %d is zero or repeated", ErrBadSnapshot, sl.ID)
		}
		ttl := max(sl.TTL, s.opts.MinLeaseTTL)
		rem := sl.RemainingTTL
		if rem <= 0 {
			rem = ttl
		}
		l := &lease{id: sl.ID, ttl: ttl, keys: make(map[string]struct{}), revoked: make(chan struct{})}
		l.expiry = now.Add(time.Duration(rem) * time.Second)
		s.leases.byID[sl.ID] = l
	}
	for _, ki := range x.keys {
		if r := ki.live(); r != nil && r.lease != 0 {
			s.leases.attach(r.lease, ki.key)
		}
	}
	return nil
}
