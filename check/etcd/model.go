package etcd

import (
	"cmp"
	"errors"
	"slices"

	"github.com/listwatch/listwatch/etcdrules"
)

// The model evaluates requests on an immutable state with etcd v3.7's semantics: server/etcdserver/txn
// (range.go, put.go, delete.go, txn.go) over server/storage/mvcc (kvstore_txn.go, key_index.go) and
// server/lease/lessor.go. Request-shape errors, which do not depend on the state, are package
// etcdrules' and computed once per request (shapeError). The model imports nothing of what it
// judges; proptest's TestCheckerReferenceMatchesStore holds it to listwatch's store, and the
// interop module's runs of the workloads hold it to a real etcd.

// change is one event a write produces, in execution order.
type change struct {
	typ EventType
	kv  KeyValue
}

// rangeTies keeps what is needed to judge a range whose order among equal sort keys is arbitrary (etcd
// sorts with sort.Sort): the filtered candidates before sorting and truncation.
type rangeTies struct {
	cand   []KeyValue
	target SortTarget
	desc   bool
}

// outcome is the result of evaluating one request on a state.
type outcome struct {
	state   *mstate
	resp    *Response
	err     error
	changes []change
	ties    map[*RangeResponse]*rangeTies
}

// writer accumulates one write transaction on top of base, as mvcc/kvstore_txn.go storeTxnWrite does.
type writer struct {
	base    *mstate
	kv      *tnode
	kvHash  uint64
	changes []change
	ties    map[*RangeResponse]*rangeTies
}

func newWriter(base *mstate) *writer {
	return &writer{base: base, kv: base.kv(), kvHash: base.snap.kvHash}
}

// rev is the revision the txn's reads see: its own next revision once it has changed something.
func (w *writer) rev() int64 {
	if len(w.changes) > 0 {
		return w.base.rev + 1
	}
	return w.base.rev
}

func (w *writer) kvAt(rev int64) *tnode {
	if rev == w.rev() {
		return w.kv
	}
	if sn := w.base.snap.at(rev); sn != nil {
		return sn.kv
	}
	return nil
}

func (w *writer) setKey(k Bytes, old, rec *krec) {
	if old != nil {
		w.kvHash ^= old.hash(k)
	}
	if rec == nil {
		w.kv = w.kv.remove(k)
		return
	}
	w.kvHash ^= rec.hash(k)
	w.kv = w.kv.set(k, rec)
}

// end returns the state after the txn: a new revision if anything changed.
func (w *writer) end() *mstate {
	if len(w.changes) == 0 {
		return w.base
	}
	n := *w.base
	n.rev = w.base.rev + 1
	n.snap = newSnapshot(w.base.snap, n.rev, w.kv, w.kvHash)
	n.rehash()
	return &n
}

// rangeAt follows etcd's server/etcdserver/txn/range.go executeRange and checkRange: curRev is the
// revision the reading txn sees (mvcc/kvstore_txn.go storeTxnWrite.Range: its own next revision
// once it has written).
func (w *writer) rangeAt(r *RangeRequest, curRev int64) (*RangeResponse, error) {
	rev := r.Revision
	if rev > curRev {
		return nil, etcdrules.ErrFutureRev
	}
	if rev <= 0 {
		rev = curRev
	}
	if rev < w.base.compactRev {
		return nil, etcdrules.ErrCompacted
	}
	kv := w.kvAt(rev)
	kr := rangeOf(r.Key, r.RangeEnd)
	resp := &RangeResponse{}
	if r.CountOnly {
		kv.ascend(kr, func(Bytes, *krec) bool { resp.Count++; return true })
		return resp, nil
	}
	limit := r.FetchLimit()
	var recs []KeyValue
	kv.ascend(kr, func(k Bytes, rc *krec) bool {
		if limit <= 0 || int64(len(recs)) < limit {
			recs = append(recs, rc.keyValue(k))
		}
		resp.Count++
		return true
	})
	recs = filterKVs(recs, r)
	order, less := sortOf(r)
	if less != nil {
		slices.SortStableFunc(recs, less)
		if r.SortTarget != SortByKey {
			if w.ties == nil {
				w.ties = make(map[*RangeResponse]*rangeTies)
			}
			w.ties[resp] = &rangeTies{cand: slices.Clone(recs), target: r.SortTarget, desc: order == SortDescend}
		}
	}
	if r.Limit > 0 && int64(len(recs)) > r.Limit {
		recs = recs[:r.Limit]
		resp.More = true
	}
	for i := range recs {
		keysOnlyKV(&recs[i], r)
	}
	if len(recs) > 0 {
		resp.Kvs = recs
	}
	return resp, nil
}

// keysOnlyKV strips what a keys_only range leaves out: the value, and the lease when etcd v3.7
// serves the range from its index without reading the values (every keys_only range not sorted by
// value; mvcc/kvstore_txn.go rangeKeys).
func keysOnlyKV(kv *KeyValue, r *RangeRequest) {
	if r.KeysOnly {
		kv.Value = ""
		if r.SortTarget != SortByValue {
			kv.Lease = 0
		}
	}
}

// filterKVs prunes kvs by r's revision filters.
func filterKVs(kvs []KeyValue, r *RangeRequest) []KeyValue {
	if !r.HasRevisionFilters() {
		return kvs
	}
	out := kvs[:0]
	for _, kv := range kvs {
		if r.Keeps(kv.CreateRevision, kv.ModRevision) {
			out = append(out, kv)
		}
	}
	return out
}

// sortOf returns the effective order and the comparison a range sorts by, nil for key order.
func sortOf(r *RangeRequest) (SortOrder, func(a, b KeyValue) int) {
	order, sorted := r.Sort()
	if !sorted {
		return order, nil
	}
	by := sortKey(r.SortTarget)
	if order == SortDescend {
		return order, func(a, b KeyValue) int { return by(b, a) }
	}
	return order, by
}

func sortKey(t SortTarget) func(a, b KeyValue) int {
	switch t {
	case SortByVersion:
		return func(a, b KeyValue) int { return cmp.Compare(a.Version, b.Version) }
	case SortByCreate:
		return func(a, b KeyValue) int { return cmp.Compare(a.CreateRevision, b.CreateRevision) }
	case SortByMod:
		return func(a, b KeyValue) int { return cmp.Compare(a.ModRevision, b.ModRevision) }
	case SortByValue:
		return func(a, b KeyValue) int { return cmp.Compare(a.Value, b.Value) }
	default:
		return func(a, b KeyValue) int { return cmp.Compare(a.Key, b.Key) }
	}
}

// checkPut follows etcd's txn/put.go checkLease and checkAndGetPrevKV, against the txn's start
// state.
func (w *writer) checkPut(r *PutRequest) error {
	if r.Lease != 0 && !w.base.hasLease(r.Lease) {
		return etcdrules.ErrLeaseNotFound
	}
	if (r.IgnoreValue || r.IgnoreLease) && w.base.kv().get(r.Key) == nil {
		return etcdrules.ErrKeyNotFound
	}
	return nil
}

func (w *writer) put(r *PutRequest) *PutResponse {
	rev := w.base.rev + 1
	prev := w.kv.get(r.Key)
	val, lease := r.Value, r.Lease
	if r.IgnoreValue {
		val = prev.value
	}
	if r.IgnoreLease {
		lease = prev.lease
	}
	resp := &PutResponse{}
	if r.PrevKV && prev != nil {
		kv := prev.keyValue(r.Key)
		resp.PrevKV = &kv
	}
	nr := &krec{value: val, create: rev, mod: rev, version: 1, lease: lease}
	if prev != nil {
		nr.create, nr.version = prev.create, prev.version+1
	}
	w.setKey(r.Key, prev, nr)
	w.changes = append(w.changes, change{typ: Put, kv: nr.keyValue(r.Key)})
	return resp
}

func (w *writer) deleteRange(r *DeleteRangeRequest) *DeleteRangeResponse {
	type victim struct {
		key Bytes
		rec *krec
	}
	var victims []victim
	w.kv.ascend(rangeOf(r.Key, r.RangeEnd), func(k Bytes, rc *krec) bool {
		victims = append(victims, victim{k, rc})
		return true
	})
	resp := &DeleteRangeResponse{Deleted: int64(len(victims))}
	for _, v := range victims {
		if r.PrevKV {
			resp.PrevKVs = append(resp.PrevKVs, v.rec.keyValue(v.key))
		}
		w.deleteKey(v.key, v.rec)
	}
	return resp
}

func (w *writer) deleteKey(k Bytes, old *krec) {
	w.setKey(k, old, nil)
	w.changes = append(w.changes, change{typ: Delete, kv: KeyValue{Key: k, ModRevision: w.base.rev + 1}})
}

// compareToPath follows etcd's txn/txn.go compareToPath: every compare on the chosen branches,
// against the start state.
func (w *writer) compareToPath(r *TxnRequest) []bool {
	ok := true
	for i := range r.Compare {
		if !w.compare(&r.Compare[i]) {
			ok = false
			break
		}
	}
	path := []bool{ok}
	ops := r.Success
	if !ok {
		ops = r.Failure
	}
	for _, op := range ops {
		if op.Txn != nil {
			path = append(path, w.compareToPath(op.Txn)...)
		}
	}
	return path
}

func (w *writer) compare(c *Compare) bool {
	ok, found := true, false
	w.base.kv().ascend(rangeOf(c.Key, c.RangeEnd), func(k Bytes, rc *krec) bool {
		found = true
		if !compareRec(c, rc) {
			ok = false
			return false
		}
		return true
	})
	if !found {
		if c.Target == CompareValue {
			return false
		}
		return compareRec(c, &krec{})
	}
	return ok
}

func compareRec(c *Compare, rc *krec) bool {
	var result int
	switch c.Target {
	case CompareValue:
		result = cmp.Compare(rc.value, c.Value)
	case CompareCreate:
		result = cmp.Compare(rc.create, c.CreateRevision)
	case CompareMod:
		result = cmp.Compare(rc.mod, c.ModRevision)
	case CompareVersion:
		result = cmp.Compare(rc.version, c.Version)
	case CompareLease:
		result = cmp.Compare(rc.lease, c.Lease)
	}
	return c.Holds(result)
}

// checkTxn follows etcd's txn/txn.go checkTxn: the chosen branch is checked against the start
// state. deletes collects the branch's delete ranges: etcd checks ignore_value and ignore_lease
// against the start state only, and then panics applying a put whose key an earlier delete of the
// same txn removed (possible with a range end of "\x00", which v3rpc/key.go checkIntervals lets
// through); listwatch's store refuses such a txn with ErrKeyNotFound, and so does the model.
func (w *writer) checkTxn(r *TxnRequest, path []bool, deletes *[]keyRange) (int, error) {
	txns := 0
	ops := r.Success
	if !path[0] {
		ops = r.Failure
	}
	for _, op := range ops {
		var err error
		switch {
		case op.Range != nil:
			switch rev := op.Range.Revision; {
			case rev == 0:
			case rev > w.base.rev:
				err = etcdrules.ErrFutureRev
			case rev < w.base.compactRev:
				err = etcdrules.ErrCompacted
			}
		case op.Put != nil:
			err = w.checkPut(op.Put)
			if err == nil && (op.Put.IgnoreValue || op.Put.IgnoreLease) {
				for _, d := range *deletes {
					if d.contains(op.Put.Key) {
						err = etcdrules.ErrKeyNotFound
					}
				}
			}
		case op.DeleteRange != nil:
			*deletes = append(*deletes, rangeOf(op.DeleteRange.Key, op.DeleteRange.RangeEnd))
		case op.Txn != nil:
			var n int
			n, err = w.checkTxn(op.Txn, path[1:], deletes)
			txns += n + 1
			path = path[n+1:]
		}
		if err != nil {
			return 0, err
		}
	}
	return txns, nil
}

// executeTxn follows etcd's txn/txn.go executeTxn.
func (w *writer) executeTxn(r *TxnRequest, path []bool, resp *TxnResponse) int {
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
			out.Range, _ = w.rangeAt(op.Range, w.rev())
		case op.Put != nil:
			out.Put = w.put(op.Put)
		case op.DeleteRange != nil:
			out.DeleteRange = w.deleteRange(op.DeleteRange)
		case op.Txn != nil:
			sub := &TxnResponse{}
			n := w.executeTxn(op.Txn, path[1:], sub)
			out.Txn = sub
			txns += n + 1
			path = path[n+1:]
		}
	}
	if len(resp.Responses) == 0 {
		resp.Responses = nil
	}
	return txns
}

// errNoLease marks an operation that cannot be evaluated: a grant whose server-chosen ID is unknown.
var errNoLease = errors.New("lease ID unknown")

// eval applies one prepared operation to s. It never modifies s.
func eval(s *mstate, op *kvOp) outcome {
	if op.shapeErr != nil {
		return outcome{state: s, err: op.shapeErr}
	}
	req := op.req
	w := newWriter(s)
	switch {
	case req.Range != nil:
		rr, err := w.rangeAt(req.Range, s.rev)
		if err != nil {
			return outcome{state: s, err: err}
		}
		return outcome{state: s, resp: &Response{Revision: s.rev, Range: rr}, ties: w.ties}
	case req.Put != nil:
		if err := w.checkPut(req.Put); err != nil {
			return outcome{state: s, err: err}
		}
		pr := w.put(req.Put)
		n := w.end()
		return outcome{state: n, resp: &Response{Revision: n.rev, Put: pr}, changes: w.changes}
	case req.DeleteRange != nil:
		dr := w.deleteRange(req.DeleteRange)
		n := w.end()
		return outcome{state: n, resp: &Response{Revision: n.rev, DeleteRange: dr}, changes: w.changes}
	case req.Txn != nil:
		path := w.compareToPath(req.Txn)
		var deletes []keyRange
		if _, err := w.checkTxn(req.Txn, path, &deletes); err != nil {
			return outcome{state: s, err: err}
		}
		tr := &TxnResponse{}
		w.executeTxn(req.Txn, path, tr)
		n := w.end()
		return outcome{state: n, resp: &Response{Revision: n.rev, Txn: tr}, changes: w.changes, ties: w.ties}
	case req.Compact != nil:
		rev := req.Compact.Revision
		if rev <= s.compactRev {
			return outcome{state: s, err: etcdrules.ErrCompacted}
		}
		if rev > s.rev {
			return outcome{state: s, err: etcdrules.ErrFutureRev}
		}
		return outcome{state: s.withCompactRev(rev), resp: &Response{Revision: s.rev}}
	case req.LeaseGrant != nil:
		id := op.grantID
		if id == 0 {
			return outcome{state: s, err: errNoLease}
		}
		if s.hasLease(id) {
			return outcome{state: s, err: etcdrules.ErrLeaseExists}
		}
		leases := slices.Clone(s.leases)
		i, _ := slices.BinarySearch(leases, id)
		leases = slices.Insert(leases, i, id)
		return outcome{state: s.withLeases(leases, id), resp: &Response{Revision: s.rev, LeaseGrant: &LeaseGrantResponse{ID: id}}}
	case req.LeaseRevoke != nil:
		return revoke(s, req.LeaseRevoke.ID)
	case req.LeaseKeepAlive != nil:
		if !s.hasLease(req.LeaseKeepAlive.ID) {
			return outcome{state: s, err: etcdrules.ErrLeaseNotFound}
		}
		return outcome{state: s, resp: &Response{Revision: s.rev, LeaseKeepAlive: &LeaseKeepAliveResponse{ID: req.LeaseKeepAlive.ID}}}
	}
	return outcome{state: s, err: errNoLease}
}

// revoke follows etcd's lease/lessor.go Revoke: one write txn deleting the lease's keys in key
// order (a lease without keys changes no revision).
func revoke(s *mstate, id int64) outcome {
	i, ok := slices.BinarySearch(s.leases, id)
	if !ok {
		return outcome{state: s, err: etcdrules.ErrLeaseNotFound}
	}
	w := newWriter(s)
	type victim struct {
		key Bytes
		rec *krec
	}
	var victims []victim
	s.kv().ascend(keyRange{key: "", isRange: true}, func(k Bytes, rc *krec) bool {
		if rc.lease == id {
			victims = append(victims, victim{k, rc})
		}
		return true
	})
	for _, v := range victims {
		w.deleteKey(v.key, v.rec)
	}
	n := w.end()
	n = n.withLeases(slices.Delete(slices.Clone(s.leases), i, i+1), id)
	return outcome{state: n, resp: &Response{Revision: n.rev}, changes: w.changes}
}
