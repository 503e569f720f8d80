package etcd

import (
	"hash/maphash"
	"slices"
)

// The model's states are immutable and share structure, so that porcupine can fork, cache and compare
// them cheaply: the keyspace is a persistent treap (path copying, priorities derived from the key, so
// one key set has one shape), and every revision keeps a snapshot of its keyspace for reads at past
// revisions, linked to the previous revision's with skew-binary jump pointers (O(log n) lookups).

var hashSeed = maphash.MakeSeed()

// krec is the live version of a key.
type krec struct {
	value   Bytes
	create  int64
	mod     int64
	version int64
	lease   int64
}

func (r *krec) keyValue(key Bytes) KeyValue {
	return KeyValue{Key: key, CreateRevision: r.create, ModRevision: r.mod, Version: r.version, Value: r.value, Lease: r.lease}
}

func (r *krec) hash(key Bytes) uint64 {
	var h maphash.Hash
	h.SetSeed(hashSeed)
	h.WriteString(string(key))
	h.WriteByte(0)
	h.WriteString(string(r.value))
	var b [32]byte
	putInt(b[0:], r.create)
	putInt(b[8:], r.mod)
	putInt(b[16:], r.version)
	putInt(b[24:], r.lease)
	h.Write(b[:])
	return h.Sum64()
}

func putInt(b []byte, v int64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

func mix(a, b uint64) uint64 {
	a ^= b + 0x9e3779b97f4a7c15 + (a << 6) + (a >> 2)
	a ^= a >> 31
	a *= 0xbf58476d1ce4e5b9
	return a ^ (a >> 29)
}

// tnode is a node of the persistent treap; nil is the empty map.
type tnode struct {
	key         Bytes
	rec         *krec
	prio        uint64
	left, right *tnode
	size        int
}

func keyPrio(k Bytes) uint64 { return maphash.String(hashSeed, string(k)) }

func sizeOf(n *tnode) int {
	if n == nil {
		return 0
	}
	return n.size
}

func mk(key Bytes, rec *krec, prio uint64, l, r *tnode) *tnode {
	return &tnode{key: key, rec: rec, prio: prio, left: l, right: r, size: 1 + sizeOf(l) + sizeOf(r)}
}

func (n *tnode) get(k Bytes) *krec {
	for n != nil {
		switch {
		case k < n.key:
			n = n.left
		case k > n.key:
			n = n.right
		default:
			return n.rec
		}
	}
	return nil
}

// split returns the keys < k and the keys > k; the node for k itself, if any, is dropped.
func split(n *tnode, k Bytes) (*tnode, *tnode) {
	if n == nil {
		return nil, nil
	}
	switch {
	case n.key < k:
		l, r := split(n.right, k)
		return mk(n.key, n.rec, n.prio, n.left, l), r
	case n.key > k:
		l, r := split(n.left, k)
		return l, mk(n.key, n.rec, n.prio, r, n.right)
	default:
		return n.left, n.right
	}
}

// join concatenates two treaps whose keys are ordered l < r.
func join(l, r *tnode) *tnode {
	switch {
	case l == nil:
		return r
	case r == nil:
		return l
	case l.prio >= r.prio:
		return mk(l.key, l.rec, l.prio, l.left, join(l.right, r))
	default:
		return mk(r.key, r.rec, r.prio, join(l, r.left), r.right)
	}
}

func (n *tnode) set(k Bytes, rec *krec) *tnode {
	return insert(n, k, rec, keyPrio(k))
}

func insert(n *tnode, k Bytes, rec *krec, prio uint64) *tnode {
	if n == nil {
		return mk(k, rec, prio, nil, nil)
	}
	if k == n.key {
		return mk(k, rec, n.prio, n.left, n.right)
	}
	if prio > n.prio {
		l, r := split(n, k)
		return mk(k, rec, prio, l, r)
	}
	if k < n.key {
		return mk(n.key, n.rec, n.prio, insert(n.left, k, rec, prio), n.right)
	}
	return mk(n.key, n.rec, n.prio, n.left, insert(n.right, k, rec, prio))
}

func (n *tnode) remove(k Bytes) *tnode {
	if n == nil {
		return nil
	}
	switch {
	case k < n.key:
		return mk(n.key, n.rec, n.prio, n.left.remove(k), n.right)
	case k > n.key:
		return mk(n.key, n.rec, n.prio, n.left, n.right.remove(k))
	default:
		return join(n.left, n.right)
	}
}

// ascend calls f for the keys of kr in order until f returns false.
func (n *tnode) ascend(kr keyRange, f func(k Bytes, r *krec) bool) bool {
	if !kr.isRange {
		if r := n.get(kr.key); r != nil {
			return f(kr.key, r)
		}
		return true
	}
	if n == nil {
		return true
	}
	if n.key > kr.key && !n.left.ascend(kr, f) {
		return false
	}
	if kr.contains(n.key) && !f(n.key, n.rec) {
		return false
	}
	if kr.end == "" || n.key < kr.end {
		return n.right.ascend(kr, f)
	}
	return true
}

func treapEqual(a, b *tnode) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil || a.size != b.size || a.key != b.key || *a.rec != *b.rec {
		return false
	}
	return treapEqual(a.left, b.left) && treapEqual(a.right, b.right)
}

// keyRange is etcd's key/range_end convention: end empty is one key, "\x00" is every key from key on.
type keyRange struct {
	key     Bytes
	end     Bytes // "" with isRange: to the end of the keyspace
	isRange bool
}

func rangeOf(key, end Bytes) keyRange {
	switch end {
	case "":
		return keyRange{key: key}
	case "\x00":
		return keyRange{key: key, isRange: true}
	default:
		return keyRange{key: key, end: end, isRange: true}
	}
}

func (r keyRange) contains(k Bytes) bool {
	if !r.isRange {
		return k == r.key
	}
	return k >= r.key && (r.end == "" || k < r.end)
}

// snapshot is the keyspace as of one revision.
type snapshot struct {
	rev       int64
	kv        *tnode
	kvHash    uint64
	chainHash uint64
	parent    *snapshot
	jump      *snapshot
}

func newSnapshot(parent *snapshot, rev int64, kv *tnode, kvHash uint64) *snapshot {
	s := &snapshot{rev: rev, kv: kv, kvHash: kvHash, parent: parent, chainHash: mix(uint64(rev), kvHash)}
	if parent != nil {
		s.chainHash = mix(parent.chainHash, s.chainHash)
		s.jump = parent
		if j := parent.jump; j != nil && j.jump != nil && parent.rev-j.rev == j.rev-j.jump.rev {
			s.jump = j.jump
		}
	}
	return s
}

// at returns the snapshot holding the keyspace of revision rev: the last one at or below rev (in an
// open history revisions made by others have none), nil below the first.
func (s *snapshot) at(rev int64) *snapshot {
	for s != nil && s.rev > rev {
		if s.jump != nil && s.jump.rev >= rev {
			s = s.jump
		} else {
			s = s.parent
		}
	}
	return s
}

func snapshotsEqual(a, b *snapshot) bool {
	for a != b {
		if a == nil || b == nil || a.rev != b.rev || a.chainHash != b.chainHash || a.kvHash != b.kvHash {
			return false
		}
		if !treapEqual(a.kv, b.kv) {
			return false
		}
		a, b = a.parent, b.parent
	}
	return true
}

// mstate is one state of the model: the store as of its revision, with its whole history (the model
// keeps every revision; compaction only moves compactRev, which is all a client can observe of it).
// In an open history the revision may move past the last revision the history's own writes made
// (writes of others, outside the prefix): snap is then the snapshot of that last revision, which
// holds the prefix's keys at rev.
type mstate struct {
	rev        int64
	compactRev int64
	snap       *snapshot // snap.rev <= rev; snap.kv is the live keyspace
	leases     []int64   // sorted
	leaseHash  uint64    // the xor of the leases' leaseHash
	hash       uint64
}

// initialState is the store where h begins: empty at revision 1 for a closed history, the initial
// keys at the start revision for an open one (whose compaction revision is unknown but at most the
// start revision: 0 stands for it, and checker.step lets a compaction at or below the start
// revision succeed or fail).
func initialState(h *History) *mstate {
	if !h.Open() {
		s := &mstate{rev: 1, compactRev: -1, snap: newSnapshot(nil, 1, nil, 0)}
		s.rehash()
		return s
	}
	var kv *tnode
	var kvHash uint64
	for _, k := range h.Initial {
		rec := &krec{value: k.Value, create: k.CreateRevision, mod: k.ModRevision, version: k.Version, lease: k.Lease}
		kvHash ^= rec.hash(k.Key)
		kv = kv.set(k.Key, rec)
	}
	s := &mstate{rev: h.StartRevision, snap: newSnapshot(nil, h.StartRevision, kv, kvHash)}
	s.rehash()
	return s
}

func (s *mstate) kv() *tnode { return s.snap.kv }

func (s *mstate) rehash() {
	h := mix(s.snap.chainHash, uint64(s.compactRev))
	h = mix(h, uint64(s.rev))
	s.hash = mix(h, s.leaseHash)
}

// leaseHash is one lease's share of leaseHash: the leases hash as the xor of their shares, so that
// a grant or revoke updates the hash without reading the other leases.
func leaseHash(id int64) uint64 { return mix(uint64(id), 0x6c65617365) }

// advance is s at revision rev, which others' writes reached without touching the prefix; s
// itself if rev is not above s.rev.
func (s *mstate) advance(rev int64) *mstate {
	if rev <= s.rev {
		return s
	}
	n := *s
	n.rev = rev
	n.rehash()
	return &n
}

func (s *mstate) hasLease(id int64) bool {
	_, ok := slices.BinarySearch(s.leases, id)
	return ok
}

// withLeases is s with leases, which differ from s.leases by the lease changed alone.
func (s *mstate) withLeases(leases []int64, changed int64) *mstate {
	n := *s
	n.leases = leases
	n.leaseHash ^= leaseHash(changed)
	n.rehash()
	return &n
}

func (s *mstate) withCompactRev(rev int64) *mstate {
	n := *s
	n.compactRev = rev
	n.rehash()
	return &n
}

func statesEqual(a, b *mstate) bool {
	if a == b {
		return true
	}
	return a.hash == b.hash && a.rev == b.rev && a.compactRev == b.compactRev &&
		slices.Equal(a.leases, b.leases) && snapshotsEqual(a.snap, b.snap)
}
