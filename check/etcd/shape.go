package etcd

import "github.com/listwatch/listwatch/etcdrules"

// shapeError returns the error etcd gives req whatever the state: the checks v3rpc and the lessor
// make before reading anything, at etcd's default limits. The rules are package etcdrules', which
// reads the request's keys and values in place.
func shapeError(req *Request) error {
	var limits etcdrules.Limits
	switch {
	case req.Range != nil:
		r := rangeShape(req.Range)
		return r.Check()
	case req.Put != nil:
		p := putShape(req.Put)
		return p.Check(limits)
	case req.DeleteRange != nil:
		d := deleteShape(req.DeleteRange)
		return d.Check(limits)
	case req.Txn != nil:
		t := txnShape(req.Txn)
		return t.Check(limits)
	case req.Compact != nil:
		return etcdrules.CheckCompact(req.Compact.Revision, limits)
	case req.LeaseGrant != nil:
		return etcdrules.CheckLeaseGrant(req.LeaseGrant.TTL)
	}
	return nil
}

func rangeShape(r *RangeRequest) etcdrules.Range[Bytes] {
	return etcdrules.Range[Bytes]{Key: r.Key, RangeEnd: r.RangeEnd, Limit: r.Limit, Revision: r.Revision,
		SortOrder: int32(r.SortOrder), SortTarget: int32(r.SortTarget), Serializable: r.Serializable,
		KeysOnly: r.KeysOnly, CountOnly: r.CountOnly, MinModRevision: r.MinModRevision,
		MaxModRevision: r.MaxModRevision, MinCreateRevision: r.MinCreateRevision, MaxCreateRevision: r.MaxCreateRevision}
}

func putShape(r *PutRequest) etcdrules.Put[Bytes] {
	return etcdrules.Put[Bytes]{Key: r.Key, Value: r.Value, Lease: r.Lease, PrevKV: r.PrevKV,
		IgnoreValue: r.IgnoreValue, IgnoreLease: r.IgnoreLease}
}

func deleteShape(r *DeleteRangeRequest) etcdrules.DeleteRange[Bytes] {
	return etcdrules.DeleteRange[Bytes]{Key: r.Key, RangeEnd: r.RangeEnd, PrevKV: r.PrevKV}
}

func txnShape(r *TxnRequest) etcdrules.Txn[Bytes] {
	t := etcdrules.Txn[Bytes]{Success: opsShape(r.Success), Failure: opsShape(r.Failure)}
	for _, c := range r.Compare {
		t.Compare = append(t.Compare, etcdrules.Compare[Bytes]{Result: int32(c.Result), Target: int32(c.Target),
			Key: c.Key, RangeEnd: c.RangeEnd, Version: c.Version, CreateRevision: c.CreateRevision,
			ModRevision: c.ModRevision, Value: c.Value, Lease: c.Lease})
	}
	return t
}

func opsShape(ops []RequestOp) []etcdrules.Op[Bytes] {
	var out []etcdrules.Op[Bytes]
	for _, op := range ops {
		var so etcdrules.Op[Bytes]
		if op.Range != nil {
			r := rangeShape(op.Range)
			so.Range = &r
		}
		if op.Put != nil {
			p := putShape(op.Put)
			so.Put = &p
		}
		if op.DeleteRange != nil {
			d := deleteShape(op.DeleteRange)
			so.DeleteRange = &d
		}
		if op.Txn != nil {
			t := txnShape(op.Txn)
			so.Txn = &t
		}
		out = append(out, so)
	}
	return out
}
