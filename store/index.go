package store

import (
	"sort"

	"github.com/google/btree"
)

// rec is one revision of one key. Records live inline in the log's chunks; a key's index points at
// them. A tombstone has ver 0 (and create 0, lease 0, empty value), as the Kv of an etcd DELETE event.
// The sub-revision is the record's position among the records of its main revision in the log.
type rec struct {
	key    string
	val    string
	create int64
	mod    int64
	ver    int64
	lease  int64
}

func (r *rec) tombstone() bool { return r.ver == 0 }

// keyValue copies the record out; key and value share one allocation.
func (r *rec) keyValue(keysOnly bool) *KeyValue {
	n := len(r.key)
	if !keysOnly {
		n += len(r.val)
	}
	buf := make([]byte, n)
	copy(buf, r.key)
	kv := &KeyValue{
		Key:            buf[:len(r.key):len(r.key)],
		CreateRevision: r.create,
		ModRevision:    r.mod,
		Version:        r.ver,
		Lease:          r.lease,
	}
	if !keysOnly && len(r.val) > 0 {
		copy(buf[len(r.key):], r.val)
		kv.Value = buf[len(r.key):]
	}
	return kv
}

// event builds the watch event of a record; the event and its KeyValue share one allocation.
func (r *rec) event() *Event {
	box := &struct {
		ev Event
		kv KeyValue
	}{}
	buf := make([]byte, len(r.key)+len(r.val))
	copy(buf, r.key)
	box.kv = KeyValue{Key: buf[:len(r.key):len(r.key)], ModRevision: r.mod}
	box.ev.Kv = &box.kv
	if r.tombstone() {
		box.ev.Type = EventDelete
	} else {
		copy(buf[len(r.key):], r.val)
		if len(r.val) > 0 {
			box.kv.Value = buf[len(r.key):]
		}
		box.kv.CreateRevision, box.kv.Version, box.kv.Lease = r.create, r.ver, r.lease
	}
	return &box.ev
}

// keyIndex is the history of one key: pointers to its records in ascending revision order, tombstones
// included. Generations are implicit: a tombstone ends one, the next put starts another.
type keyIndex struct {
	key  string
	revs []*rec
}

// at returns the key's live record at revision rev, or nil if the key did not exist then.
func (ki *keyIndex) at(rev int64) *rec {
	revs := ki.revs
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
func (ki *keyIndex) compact(rev int64) {
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

// index is the ordered key index (a B-tree, as etcd's treeIndex) plus a map for point lookups.
type index struct {
	tree *btree.BTreeG[*keyIndex]
	keys map[string]*keyIndex
}

func newIndex() *index {
	return &index{
		tree: btree.NewG(32, func(a, b *keyIndex) bool { return a.key < b.key }),
		keys: make(map[string]*keyIndex),
	}
}

func (x *index) get(key string) *keyIndex { return x.keys[key] }

// getOrCreate returns the key's index, creating it (and interning the key) if it is new.
func (x *index) getOrCreate(key []byte) *keyIndex {
	if ki := x.keys[string(key)]; ki != nil {
		return ki
	}
	ki := &keyIndex{key: string(key)}
	x.keys[ki.key] = ki
	x.tree.ReplaceOrInsert(ki)
	return ki
}

func (x *index) remove(ki *keyIndex) {
	delete(x.keys, ki.key)
	x.tree.Delete(ki)
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

// compact removes the records older than rev that no key needs any more, moving the survivors into
// fresh chunks and repointing their keys. keep reports whether a record older than rev survives; moved
// is told its new address.
func (l *revLog) compact(rev int64, keep func(r *rec) bool, moved func(old, cur *rec)) {
	ci, i := l.position(rev)
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
			ch[j] = rec{} // release the strings of a dead record
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
