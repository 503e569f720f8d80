package store

import (
	"sort"

	"github.com/google/btree"

	"github.com/listwatch/listwatch/etcdrules"
)

// rec is one revision of one key. Records live inline in the log's chunks and hold no pointers, so
// the garbage collector does not scan the history: the key is an ID in the index's key table and the
// value lives in the value log. A tombstone has ver 0 (and create 0, lease 0, no value), as the Kv of
// an etcd DELETE event. The sub-revision is the record's position among the records of its main
// revision in the log.
type rec struct {
	create int64
	mod    int64
	ver    int64
	lease  int64
	key    uint32 // index.tab slot
	vchunk uint32
	voff   uint32
	vlen   uint32
}

func (r *rec) tombstone() bool { return r.ver == 0 }

// keyValue copies the record out; key and value share one allocation.
func (x *index) keyValue(r *rec, keysOnly bool) *KeyValue {
	kv := &KeyValue{}
	x.fillKeyValue(kv, r, keysOnly, nil)
	return kv
}

// recSize is the number of bytes a copy of r needs.
func (x *index) recSize(r *rec, keysOnly bool) int {
	n := len(x.tab[r.key].key)
	if !keysOnly {
		n += int(r.vlen)
	}
	return n
}

// fillKeyValue copies r into kv, taking the key and value bytes from buf if it is large enough.
func (x *index) fillKeyValue(kv *KeyValue, r *rec, keysOnly bool, buf []byte) {
	key := x.tab[r.key].key
	n := x.recSize(r, keysOnly)
	if len(buf) < n {
		buf = make([]byte, n)
	}
	copy(buf, key)
	*kv = KeyValue{
		Key:            buf[:len(key):len(key)],
		CreateRevision: r.create,
		ModRevision:    r.mod,
		Version:        r.ver,
		Lease:          r.lease,
	}
	if !keysOnly && r.vlen > 0 {
		copy(buf[len(key):], x.vals.get(r))
		kv.Value = buf[len(key):n:n]
	}
}

// arena hands out Events and their bytes carved from shared chunks, so that a sync pass makes a few
// allocations instead of two per record. What it hands out is never reused; a chunk lives as long as
// anything carved from it.
type arena struct {
	events []Event
	bytes  []byte
}

const (
	arenaItems = 128
	arenaBytes = 16 << 10
)

func (a *arena) alloc(n int) []byte {
	if n > arenaBytes/4 {
		return make([]byte, n)
	}
	if cap(a.bytes)-len(a.bytes) < n {
		a.bytes = make([]byte, 0, arenaBytes)
	}
	b := a.bytes[len(a.bytes) : len(a.bytes)+n : len(a.bytes)+n]
	a.bytes = a.bytes[:len(a.bytes)+n]
	return b
}

// event builds the watch event of a record.
func (a *arena) event(x *index, r *rec) *Event {
	if len(a.events) == cap(a.events) {
		a.events = make([]Event, 0, arenaItems)
	}
	a.events = a.events[:len(a.events)+1]
	ev := &a.events[len(a.events)-1]
	if r.tombstone() {
		ev.Type = etcdrules.EventDelete
		key := x.tab[r.key].key
		ev.Kv = KeyValue{Key: a.alloc(len(key)), ModRevision: r.mod}
		copy(ev.Kv.Key, key)
	} else {
		x.fillKeyValue(&ev.Kv, r, false, a.alloc(x.recSize(r, false)))
	}
	return ev
}

// keyIndex is the history of one key: pointers to its records in ascending revision order, tombstones
// included. Generations are implicit: a tombstone ends one, the next put starts another.
type keyIndex struct {
	key  string
	id   uint32 // slot in index.tab, the key's name in records
	revs []*rec
}

// at returns the key's live record at revision rev, or nil if the key did not exist then.
func (ki *keyIndex) at(rev int64) *rec {
	revs := ki.revs
	if n := len(revs); n > 0 && revs[n-1].mod <= rev {
		// the common case, a read at or after the key's last change
		if revs[n-1].tombstone() {
			return nil
		}
		return revs[n-1]
	}
	i := sort.Search(len(revs), func(i int) bool { return revs[i].mod > rev }) - 1
	if i < 0 || revs[i].tombstone() {
		return nil
	}
	return revs[i]
}

// live returns the key's current record, or nil if it is deleted.
func (ki *keyIndex) live() *rec {
	if len(ki.revs) == 0 {
		return nil
	}
	if r := ki.revs[len(ki.revs)-1]; !r.tombstone() {
		return r
	}
	return nil
}

// compact drops the revisions a compaction at rev no longer needs: everything older than the newest
// revision <= rev, and that one too if it is a tombstone older than rev. It follows
// server/storage/mvcc/key_index.go keyIndex.compact, which since v3.6 keeps a tombstone at exactly rev.
func (ki *keyIndex) compact(rev int64, dropped func(r *rec)) {
	revs := ki.revs
	i := sort.Search(len(revs), func(i int) bool { return revs[i].mod > rev }) - 1
	if i < 0 {
		return
	}
	cut := i
	if revs[i].tombstone() && revs[i].mod < rev {
		cut = i + 1
	}
	if cut == 0 {
		return
	}
	for _, r := range revs[:cut] {
		dropped(r)
	}
	kept := make([]*rec, len(revs)-cut)
	copy(kept, revs[cut:])
	ki.revs = kept
}

// keyRange is a key, a range [key, end) or every key >= key.
type keyRange struct {
	key     string
	end     string
	isRange bool // end == "" with isRange means "to the end of the keyspace"
}

// rangeOf decodes etcd's key/range_end convention: end empty is one key, end "\x00" is key and
// everything after it.
func rangeOf(key, end []byte) keyRange {
	switch {
	case len(end) == 0:
		return keyRange{key: string(key)}
	case len(end) == 1 && end[0] == 0:
		return keyRange{key: string(key), isRange: true}
	default:
		return keyRange{key: string(key), end: string(end), isRange: true}
	}
}

func (r keyRange) contains(k string) bool {
	if !r.isRange {
		return k == r.key
	}
	return k >= r.key && (r.end == "" || k < r.end)
}

// prefixEnd returns the end of the range of keys that start with prefix, as clientv3.GetPrefixRangeEnd;
// "" when every key from prefix on qualifies.
func prefixEnd(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}

// isPrefix reports whether the range is exactly the keys that start with r.key.
func (r keyRange) isPrefix() bool {
	return r.isRange && r.key != "" && r.end == prefixEnd(r.key)
}

// index is the ordered key index (a B-tree, as etcd's treeIndex), a map for point lookups, the table
// that names keys in records, and the value log.
type index struct {
	tree *btree.BTreeG[*keyIndex]
	keys map[string]*keyIndex
	tab  []*keyIndex // by keyIndex.id; nil slots are free
	free []uint32
	vals valueLog
}

func newIndex() *index {
	return &index{
		tree: btree.NewG(32, func(a, b *keyIndex) bool { return a.key < b.key }),
		keys: make(map[string]*keyIndex),
		vals: valueLog{cur: -1},
	}
}

func (x *index) get(key string) *keyIndex { return x.keys[key] }

func (x *index) keyOf(r *rec) string { return x.tab[r.key].key }

// getOrCreate returns the key's index, creating it (and interning the key) if it is new.
func (x *index) getOrCreate(key []byte) *keyIndex {
	if ki := x.keys[string(key)]; ki != nil {
		return ki
	}
	ki := &keyIndex{key: string(key)}
	if n := len(x.free); n > 0 {
		ki.id = x.free[n-1]
		x.free = x.free[:n-1]
		x.tab[ki.id] = ki
	} else {
		ki.id = uint32(len(x.tab))
		x.tab = append(x.tab, ki)
	}
	x.keys[ki.key] = ki
	x.tree.ReplaceOrInsert(ki)
	return ki
}

func (x *index) remove(ki *keyIndex) {
	delete(x.keys, ki.key)
	x.tree.Delete(ki)
	x.tab[ki.id] = nil
	x.free = append(x.free, ki.id)
}

// visit calls f for every key in the range in key order until f returns false.
func (x *index) visit(r keyRange, f func(ki *keyIndex) bool) {
	if !r.isRange {
		if ki := x.keys[r.key]; ki != nil {
			f(ki)
		}
		return
	}
	if r.end != "" && r.end <= r.key {
		return
	}
	pivot := &keyIndex{key: r.key}
	x.tree.AscendGreaterOrEqual(pivot, func(ki *keyIndex) bool {
		if r.end != "" && ki.key >= r.end {
			return false
		}
		return f(ki)
	})
}

// chunkSize is the number of records per log chunk. Chunks never grow, so pointers into them stay valid.
const chunkSize = 1024

// revLog holds every retained record in revision order (sub-revision order within a revision).
type revLog struct {
	chunks [][]rec // each chunk has capacity chunkSize; the first may start past its beginning after compaction
	n      int
}

func (l *revLog) len() int { return l.n }

// append adds a record and returns a stable pointer to it.
func (l *revLog) append(r rec) *rec {
	if len(l.chunks) == 0 || len(l.chunks[len(l.chunks)-1]) == cap(l.chunks[len(l.chunks)-1]) {
		l.chunks = append(l.chunks, make([]rec, 0, chunkSize))
	}
	c := &l.chunks[len(l.chunks)-1]
	*c = append(*c, r)
	l.n++
	return &(*c)[len(*c)-1]
}

// position returns the chunk and offset of the first record with mod >= rev.
func (l *revLog) position(rev int64) (ci, i int) {
	// first chunk whose last record has mod >= rev
	ci = sort.Search(len(l.chunks), func(c int) bool {
		ch := l.chunks[c]
		return ch[len(ch)-1].mod >= rev
	})
	if ci == len(l.chunks) {
		return ci, 0
	}
	ch := l.chunks[ci]
	i = sort.Search(len(ch), func(j int) bool { return ch[j].mod >= rev })
	return ci, i
}

// scan calls f for each record with mod >= from, in order, until f returns false.
func (l *revLog) scan(from int64, f func(r *rec) bool) {
	ci, i := l.position(from)
	for ; ci < len(l.chunks); ci, i = ci+1, 0 {
		ch := l.chunks[ci]
		for ; i < len(ch); i++ {
			if !f(&ch[i]) {
				return
			}
		}
	}
}

// compact removes the records at or below rev that no key needs any more, moving the survivors into
// fresh chunks and repointing their keys. keep reports whether a record at or below rev survives;
// moved is told its new address. Records at rev itself are judged too: a txn that put a key and
// then deleted it leaves two records of the key at one revision, and the key index keeps only the
// newest, so the log must drop the other (kvstore_compaction.go scheduleCompaction deletes every
// revision up to the compact revision that the index does not keep).
func (l *revLog) compact(rev int64, keep func(r *rec) bool, moved func(old, cur *rec)) {
	ci, i := l.position(rev + 1)
	var out revLog
	for c := 0; c < ci || (c == ci && c < len(l.chunks)); c++ {
		ch := l.chunks[c]
		end := len(ch)
		if c == ci {
			end = i
		}
		for j := 0; j < end; j++ {
			if keep(&ch[j]) {
				moved(&ch[j], out.append(ch[j]))
			}
		}
	}
	rest := l.chunks[ci:]
	if len(rest) > 0 {
		rest[0] = rest[0][i:]
		if len(rest[0]) == 0 && len(rest) > 1 {
			rest = rest[1:]
		}
	}
	n := out.n
	for _, ch := range rest {
		n += len(ch)
	}
	out.chunks = append(out.chunks, rest...)
	out.n = n
	// a trailing chunk that was sliced from the front has lost capacity at its start, never at its end,
	// so appends into it keep stable pointers
	*l = out
}

// valueChunkSize is the size of the value log's chunks; a larger value gets a chunk of its own.
const valueChunkSize = 1 << 20

// valueLog stores values in large byte chunks that the garbage collector need not scan. Each chunk
// counts the bytes records still claim in it; it is freed when the count drops to zero, and
// compaction moves the survivors out of chunks that are mostly dead.
type valueLog struct {
	chunks [][]byte
	live   []int // bytes claimed by records, per chunk
	free   []uint32
	cur    int32 // chunk being filled, -1 when there is none
}

// add copies b into the log and points r at it.
func (v *valueLog) add(r *rec, b []byte) {
	r.vlen = uint32(len(b))
	if len(b) == 0 {
		r.vchunk, r.voff = 0, 0
		return
	}
	if len(b) > valueChunkSize/4 {
		c := v.newChunk(len(b))
		r.vchunk, r.voff = c, 0
		v.chunks[c] = append(v.chunks[c], b...)
		v.live[c] += len(b)
		return
	}
	if v.cur < 0 || cap(v.chunks[v.cur])-len(v.chunks[v.cur]) < len(b) {
		if v.cur >= 0 && v.live[v.cur] == 0 {
			v.drop(uint32(v.cur))
		}
		v.cur = int32(v.newChunk(valueChunkSize))
	}
	c := uint32(v.cur)
	r.vchunk, r.voff = c, uint32(len(v.chunks[c]))
	v.chunks[c] = append(v.chunks[c], b...)
	v.live[c] += len(b)
}

func (v *valueLog) newChunk(size int) uint32 {
	ch := make([]byte, 0, size)
	if n := len(v.free); n > 0 {
		c := v.free[n-1]
		v.free = v.free[:n-1]
		v.chunks[c], v.live[c] = ch, 0
		return c
	}
	v.chunks = append(v.chunks, ch)
	v.live = append(v.live, 0)
	return uint32(len(v.chunks) - 1)
}

func (v *valueLog) drop(c uint32) {
	v.chunks[c] = nil
	v.free = append(v.free, c)
}

// share points r at the same bytes as from, claiming them once more.
func (v *valueLog) share(r, from *rec) {
	r.vchunk, r.voff, r.vlen = from.vchunk, from.voff, from.vlen
	if r.vlen > 0 {
		v.live[r.vchunk] += int(r.vlen)
	}
}

// get returns r's value, a view into the log that must not be modified or kept.
func (v *valueLog) get(r *rec) []byte {
	if r.vlen == 0 {
		return nil
	}
	return v.chunks[r.vchunk][r.voff : r.voff+r.vlen : r.voff+r.vlen]
}

// release drops r's claim on its bytes.
func (v *valueLog) release(r *rec) {
	if r.vlen == 0 {
		return
	}
	c := r.vchunk
	if v.live[c] -= int(r.vlen); v.live[c] == 0 && int32(c) != v.cur {
		v.drop(c)
	}
}

// sparse reports whether r's chunk is less than half used, so that its survivors are worth moving.
func (v *valueLog) sparse(r *rec) bool {
	return r.vlen > 0 && int32(r.vchunk) != v.cur && 2*v.live[r.vchunk] < cap(v.chunks[r.vchunk])
}

// relocate copies r's value to the current chunk and releases the old bytes.
func (v *valueLog) relocate(r *rec) {
	old := *r
	v.add(r, v.get(&old))
	v.release(&old)
}
