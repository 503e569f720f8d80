package store

import (
	"bytes"
	"cmp"
	"sort"

	"github.com/listwatch/listwatch/etcdrules"
)

// Range reads keys at a revision. Its checks and results follow etcd's v3rpc checkRangeRequest and
// server/etcdserver/txn/range.go executeRange.
func (s *Store) Range(r *RangeRequest) (*RangeResponse, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	s.stats.txns.Add(1)
	return s.rangeLocked(r, s.currentRev)
}

// Put stores a value under a key; it always raises the revision. Checks follow v3rpc checkPutRequest,
// the request-size check of etcdserver, then txn/put.go checkLease and checkAndGetPrevKV.
func (s *Store) Put(r *PutRequest) (*PutResponse, error) {
	if err := r.Check(s.limits()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if err := s.checkPutLocked(r, s.currentRev); err != nil {
		return nil, err
	}
	tw := s.beginWrite()
	resp := tw.put(r)
	tw.end()
	return resp, nil
}

// DeleteRange deletes the keys in a range that exist; deleting nothing keeps the revision.
func (s *Store) DeleteRange(r *DeleteRangeRequest) (*DeleteRangeResponse, error) {
	if err := r.Check(s.limits()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	tw := s.beginWrite()
	resp := tw.deleteRange(r)
	tw.end()
	return resp, nil
}

// Txn evaluates the compares against the revision at its start, then runs the chosen branch
// atomically. It follows v3rpc checkTxnRequest and checkIntervals, then txn/txn.go Txn: the branch is
// checked in full before anything is written, so a failing txn changes nothing.
func (s *Store) Txn(r *TxnRequest) (*TxnResponse, error) {
	if err := r.Check(s.limits()); err != nil {
		return nil, err
	}
	if isTxnReadOnly(r) {
		s.mu.RLock()
		defer s.mu.RUnlock()
	} else {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	if s.closed {
		return nil, ErrClosed
	}
	path := s.compareToPath(r)
	var deletes []keyRange
	if _, err := s.checkTxnLocked(r, path, &deletes); err != nil {
		return nil, err
	}
	tw := s.beginWrite()
	resp := &TxnResponse{}
	tw.executeTxn(r, path, resp)
	resp.Header.Revision = tw.rev()
	tw.end()
	return resp, nil
}

// Compact discards history older than rev. It fails with ErrCompacted if rev is not above the last
// compact revision and with ErrFutureRev if rev is above the current revision. Ranges and watches
// from rev itself still work.
func (s *Store) Compact(rev int64) (*CompactResponse, error) {
	if err := etcdrules.CheckCompact(rev, s.limits()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if rev <= s.compactRev {
		return nil, ErrCompacted
	}
	if rev > s.currentRev {
		return nil, ErrFutureRev
	}
	s.storeCompactionHashLocked(rev)
	s.compactRev = rev
	s.compactLocked(rev)
	return &CompactResponse{Header: Header{Revision: s.currentRev}}, nil
}

// compactLocked drops the history a compaction at rev frees, per key as key_index.go compact does,
// then rebuilds the old end of the log around the survivors, which are exactly the records the key
// index still holds at or below rev: each key's first, if it is that old.
func (s *Store) compactLocked(rev int64) {
	x := s.idx
	var empty []*keyIndex
	x.tree.Ascend(func(ki *keyIndex) bool {
		ki.compact(rev, func(r *rec) {
			s.dbInUse -= recordBytes(len(ki.key), r.vlen)
			x.vals.release(r)
		})
		if len(ki.revs) == 0 {
			empty = append(empty, ki)
		}
		return true
	})
	for _, ki := range empty {
		x.remove(ki)
	}
	subs := newSubTracker(s.subs, rev)
	s.log.compact(rev,
		func(r *rec) bool {
			ki := x.tab[r.key]
			kept := ki != nil && len(ki.revs) > 0 && ki.revs[0] == r
			subs.seen(r, kept)
			return kept
		},
		func(old, cur *rec) {
			x.tab[cur.key].revs[0] = cur
			subs.moved(cur)
			if x.vals.sparse(cur) {
				x.vals.relocate(cur)
			}
		})
	s.subs = subs.out
}

// CheckRequest returns the error Range, Put, DeleteRange or Txn gives req whatever the store holds
// (req is a *RangeRequest, *PutRequest, *DeleteRangeRequest or *TxnRequest; any other is nil): the
// checks v3rpc makes before a request reaches the store (empty key, sort option, a value or lease
// given with ignore_value or ignore_lease, too many txn ops, a key put twice in a txn branch) and
// the request size limit of writes (a read-only txn has none), under the store's limits. The rules
// are package etcdrules'.
func (s *Store) CheckRequest(req any) error {
	switch r := req.(type) {
	case *RangeRequest:
		return r.Check()
	case *PutRequest:
		return r.Check(s.limits())
	case *DeleteRangeRequest:
		return r.Check(s.limits())
	case *TxnRequest:
		return r.Check(s.limits())
	}
	return nil
}

func (s *Store) limits() etcdrules.Limits {
	return etcdrules.Limits{MaxTxnOps: s.opts.MaxTxnOps, MaxRequestBytes: s.opts.MaxRequestBytes}
}

// isTxnReadOnly is txn/txn.go IsTxnReadonly: ranges only; a nested txn counts as a write.
func isTxnReadOnly(r *TxnRequest) bool {
	for _, ops := range [][]RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			if op.Range == nil {
				return false
			}
		}
	}
	return true
}

// ---- reads ----

// rangeLocked executes a range as txn/range.go executeRange; curRev is the revision the reading
// transaction sees (the current revision, or the txn's own next revision once it has written).
func (s *Store) rangeLocked(r *RangeRequest, curRev int64) (*RangeResponse, error) {
	rev := r.Revision
	s.stats.ranges.Add(1)
	if rev > curRev {
		return nil, ErrFutureRev
	}
	if rev <= 0 {
		rev = curRev
	}
	if rev < s.compactRev {
		return nil, ErrCompacted
	}
	kr := rangeOf(r.Key, r.RangeEnd)
	resp := &RangeResponse{Header: Header{Revision: curRev}}

	if r.CountOnly {
		s.idx.visit(kr, func(ki *keyIndex) bool {
			if ki.at(rev) != nil {
				resp.Count++
			}
			return true
		})
		return resp, nil
	}

	limit := r.FetchLimit()
	var recs []*rec
	s.idx.visit(kr, func(ki *keyIndex) bool {
		if rc := ki.at(rev); rc != nil {
			if limit <= 0 || int64(len(recs)) < limit {
				recs = append(recs, rc)
			}
			resp.Count++
		}
		return true
	})
	recs = filterRecs(recs, r)
	s.sortRecs(recs, r)
	if r.Limit > 0 && int64(len(recs)) > r.Limit {
		recs = recs[:r.Limit]
		resp.More = true
	}
	// keys_only without a value sort is served from the index in etcd v3.7: no value and no lease
	fastKeysOnly := r.KeysOnly && r.SortTarget != etcdrules.SortByValue
	if len(recs) == 0 {
		return resp, nil
	}
	// one allocation for the KeyValues and one for all their bytes
	size := 0
	for _, rc := range recs {
		size += s.idx.recSize(rc, r.KeysOnly)
	}
	buf := make([]byte, size)
	resp.Kvs = make([]KeyValue, len(recs))
	for i, rc := range recs {
		kv := &resp.Kvs[i]
		s.idx.fillKeyValue(kv, rc, r.KeysOnly, buf)
		buf = buf[len(kv.Key)+len(kv.Value):]
		if fastKeysOnly {
			kv.Lease = 0
		}
	}
	return resp, nil
}

// filterRecs prunes recs by r's revision filters.
func filterRecs(recs []*rec, r *RangeRequest) []*rec {
	if !r.HasRevisionFilters() {
		return recs
	}
	out := recs[:0]
	for _, rc := range recs {
		if r.Keeps(rc.create, rc.mod) {
			out = append(out, rc)
		}
	}
	return out
}

// sortRecs is txn/range.go sortRangeResults; like etcd's sort.Sort it is not stable on ties.
func (s *Store) sortRecs(recs []*rec, r *RangeRequest) {
	x := s.idx
	order, sorted := r.Sort()
	if !sorted {
		return
	}
	var less func(a, b *rec) bool
	switch r.SortTarget {
	case etcdrules.SortByKey:
		less = func(a, b *rec) bool { return x.keyOf(a) < x.keyOf(b) }
	case etcdrules.SortByVersion:
		less = func(a, b *rec) bool { return a.ver < b.ver }
	case etcdrules.SortByCreate:
		less = func(a, b *rec) bool { return a.create < b.create }
	case etcdrules.SortByMod:
		less = func(a, b *rec) bool { return a.mod < b.mod }
	case etcdrules.SortByValue:
		less = func(a, b *rec) bool { return bytes.Compare(x.vals.get(a), x.vals.get(b)) < 0 }
	}
	if order == etcdrules.SortDescend {
		asc := less
		less = func(a, b *rec) bool { return asc(b, a) }
	}
	sort.Sort(recSorter{recs, less})
}

type recSorter struct {
	recs []*rec
	less func(a, b *rec) bool
}

func (x recSorter) Len() int           { return len(x.recs) }
func (x recSorter) Less(i, j int) bool { return x.less(x.recs[i], x.recs[j]) }
func (x recSorter) Swap(i, j int)      { x.recs[i], x.recs[j] = x.recs[j], x.recs[i] }

// ---- txn evaluation (txn/txn.go) ----

// compareToPath evaluates the compares of r and of every nested txn on the chosen branches, depth
// first, against the state at txn start.
func (s *Store) compareToPath(r *TxnRequest) []bool {
	path := []bool{s.applyCompares(r.Compare)}
	ops := r.Success
	if !path[0] {
		ops = r.Failure
	}
	for _, op := range ops {
		if op.Txn != nil {
			path = append(path, s.compareToPath(op.Txn)...)
		}
	}
	return path
}

func (s *Store) applyCompares(cs []Compare) bool {
	for i := range cs {
		if !s.applyCompare(&cs[i]) {
			return false
		}
	}
	return true
}

func (s *Store) applyCompare(c *Compare) bool {
	kr := rangeOf(c.Key, c.RangeEnd)
	ok, found := true, false
	s.idx.visit(kr, func(ki *keyIndex) bool {
		rc := ki.live()
		if rc == nil {
			return true
		}
		found = true
		if !s.compareRec(c, rc) {
			ok = false
			return false
		}
		return true
	})
	if !found {
		if c.Target == etcdrules.CompareValue {
			return false
		}
		return s.compareRec(c, &rec{})
	}
	return ok
}

func (s *Store) compareRec(c *Compare, rc *rec) bool {
	var result int
	switch c.Target {
	case etcdrules.CompareValue:
		result = bytes.Compare(s.idx.vals.get(rc), c.Value)
	case etcdrules.CompareCreate:
		result = cmp.Compare(rc.create, c.CreateRevision)
	case etcdrules.CompareMod:
		result = cmp.Compare(rc.mod, c.ModRevision)
	case etcdrules.CompareVersion:
		result = cmp.Compare(rc.ver, c.Version)
	case etcdrules.CompareLease:
		result = cmp.Compare(rc.lease, c.Lease)
	}
	return c.Holds(result)
}

// checkTxnLocked checks the chosen branch against the state at txn start before anything is written,
// as txn/txn.go checkTxn. deletes collects the branch's delete ranges in execution order: etcd checks
// ignore_value and ignore_lease only against the start state and then panics at apply time when an
// earlier delete of the same txn removed the key (possible with a range end of "\x00", which
// checkIntervals lets through); here such a txn fails with ErrKeyNotFound instead.
func (s *Store) checkTxnLocked(r *TxnRequest, path []bool, deletes *[]keyRange) (int, error) {
	txns := 0
	ops := r.Success
	if !path[0] {
		ops = r.Failure
	}
	for _, op := range ops {
		var err error
		switch {
		case op.Range != nil:
			err = s.checkRangeRevLocked(op.Range)
		case op.Put != nil:
			err = s.checkPutLocked(op.Put, s.currentRev)
			if err == nil && (op.Put.IgnoreValue || op.Put.IgnoreLease) {
				for _, d := range *deletes {
					if d.contains(string(op.Put.Key)) {
						err = ErrKeyNotFound
					}
				}
			}
		case op.DeleteRange != nil:
			*deletes = append(*deletes, rangeOf(op.DeleteRange.Key, op.DeleteRange.RangeEnd))
		case op.Txn != nil:
			var n int
			n, err = s.checkTxnLocked(op.Txn, path[1:], deletes)
			txns += n + 1
			path = path[n+1:]
		}
		if err != nil {
			return 0, err
		}
	}
	return txns, nil
}

func (s *Store) checkRangeRevLocked(r *RangeRequest) error {
	switch {
	case r.Revision == 0:
		return nil
	case r.Revision > s.currentRev:
		return ErrFutureRev
	case r.Revision < s.compactRev:
		return ErrCompacted
	}
	return nil
}

// checkPutLocked is txn/put.go checkLease and checkAndGetPrevKV, read at revision rev.
func (s *Store) checkPutLocked(r *PutRequest, rev int64) error {
	if r.Lease != 0 && s.leases.get(r.Lease) == nil {
		return ErrLeaseNotFound
	}
	if r.IgnoreValue || r.IgnoreLease {
		ki := s.idx.get(string(r.Key))
		if ki == nil || ki.at(rev) == nil {
			return ErrKeyNotFound
		}
	}
	return nil
}

// ---- writes (mvcc/kvstore_txn.go storeTxnWrite) ----

// writeTxn collects the changes of one write transaction; they become visible at beginRev+1 when it ends.
type writeTxn struct {
	s        *Store
	beginRev int64
	changes  []*rec
}

func (s *Store) beginWrite() *writeTxn {
	s.stats.txns.Add(1)
	return &writeTxn{s: s, beginRev: s.currentRev}
}

// rev is the revision the txn's reads see: its own next revision once it has changed something.
func (tw *writeTxn) rev() int64 {
	if len(tw.changes) > 0 {
		return tw.beginRev + 1
	}
	return tw.beginRev
}

func (tw *writeTxn) put(r *PutRequest) *PutResponse {
	s := tw.s
	x := s.idx
	rev := tw.beginRev + 1
	ki := x.getOrCreate(r.Key)
	prev := ki.at(rev)
	resp := &PutResponse{Header: Header{Revision: rev}}
	if r.PrevKV && prev != nil {
		resp.PrevKV = x.keyValue(prev, false)
	}
	nr := rec{key: ki.id, create: rev, mod: rev, ver: 1, lease: r.Lease}
	oldLease := int64(0)
	if prev != nil {
		nr.create, nr.ver, oldLease = prev.create, prev.ver+1, prev.lease
	}
	if r.IgnoreLease {
		nr.lease = prev.lease
	}
	if r.IgnoreValue {
		x.vals.share(&nr, prev)
	} else {
		x.vals.add(&nr, r.Value)
	}
	p := s.log.append(nr)
	ki.revs = append(ki.revs, p)
	tw.changes = append(tw.changes, p)
	s.dbInUse += recordBytes(len(ki.key), nr.vlen)
	s.stats.puts.Add(1)
	if oldLease != nr.lease {
		if oldLease != 0 {
			s.leases.detach(oldLease, ki.key)
		}
		if nr.lease != 0 {
			s.leases.attach(nr.lease, ki.key)
		}
	}
	return resp
}

func (tw *writeTxn) deleteRange(r *DeleteRangeRequest) *DeleteRangeResponse {
	s := tw.s
	s.stats.deletes.Add(1)
	readRev := tw.rev()
	var victims []*keyIndex
	var prevs []KeyValue
	s.idx.visit(rangeOf(r.Key, r.RangeEnd), func(ki *keyIndex) bool {
		if rc := ki.at(readRev); rc != nil {
			victims = append(victims, ki)
			if r.PrevKV {
				prevs = append(prevs, KeyValue{})
				s.idx.fillKeyValue(&prevs[len(prevs)-1], rc, false, nil)
			}
		}
		return true
	})
	resp := &DeleteRangeResponse{Deleted: int64(len(victims))}
	if r.PrevKV {
		resp.PrevKVs = prevs
	}
	for _, ki := range victims {
		tw.delete(ki)
	}
	resp.Header.Revision = tw.rev()
	return resp
}

func (tw *writeTxn) delete(ki *keyIndex) {
	s := tw.s
	old := ki.revs[len(ki.revs)-1]
	p := s.log.append(rec{key: ki.id, mod: tw.beginRev + 1})
	ki.revs = append(ki.revs, p)
	tw.changes = append(tw.changes, p)
	s.dbInUse += recordBytes(len(ki.key), 0)
	if old.lease != 0 {
		s.leases.detach(old.lease, ki.key)
	}
}

// executeTxn runs the branch chosen by path and fills resp; it returns how many nested txns it consumed.
func (tw *writeTxn) executeTxn(r *TxnRequest, path []bool, resp *TxnResponse) int {
	resp.Succeeded = path[0]
	ops := r.Success
	if !path[0] {
		ops = r.Failure
	}
	resp.Responses = make([]ResponseOp, len(ops))
	txns := 0
	for i, op := range ops {
		out := &resp.Responses[i]
		switch {
		case op.Range != nil:
			// checked against the start state; the txn's own writes cannot make it fail
			rr, _ := tw.s.rangeLocked(op.Range, tw.rev())
			out.Range = rr
		case op.Put != nil:
			out.Put = tw.put(op.Put)
		case op.DeleteRange != nil:
			out.DeleteRange = tw.deleteRange(op.DeleteRange)
		case op.Txn != nil:
			// a nested response's header stays zero, as etcd fills only the outer one
			sub := &TxnResponse{}
			n := tw.executeTxn(op.Txn, path[1:], sub)
			out.Txn = sub
			txns += n + 1
			path = path[n+1:]
		}
	}
	return txns
}

// end commits the txn: the revision rises by one if anything changed, and synced watchers hear of it
// before the lock is released (mvcc/watchable_store_txn.go End).
func (tw *writeTxn) end() {
	if len(tw.changes) == 0 {
		return
	}
	s := tw.s
	s.currentRev = tw.beginRev + 1
	s.dbSize = max(s.dbSize, s.dbInUse)
	s.notifyLocked(s.currentRev, tw.changes)
}
