package store

import "github.com/listwatch/listwatch/etcdrules"

// The checks etcd makes before a request reads any state are package etcdrules'; these functions
// describe the store's requests in its shapes, sharing the byte slices.

func rangeShape(r *RangeRequest) etcdrules.Range[[]byte] {
	return etcdrules.Range[[]byte]{Key: r.Key, RangeEnd: r.RangeEnd, Limit: r.Limit, Revision: r.Revision,
		SortOrder: int32(r.SortOrder), SortTarget: int32(r.SortTarget), Serializable: r.Serializable,
		KeysOnly: r.KeysOnly, CountOnly: r.CountOnly, MinModRevision: r.MinModRevision,
		MaxModRevision: r.MaxModRevision, MinCreateRevision: r.MinCreateRevision, MaxCreateRevision: r.MaxCreateRevision}
}

func putShape(r *PutRequest) etcdrules.Put[[]byte] {
	return etcdrules.Put[[]byte]{Key: r.Key, Value: r.Value, Lease: r.Lease, PrevKV: r.PrevKv,
		IgnoreValue: r.IgnoreValue, IgnoreLease: r.IgnoreLease}
}

func deleteShape(r *DeleteRangeRequest) etcdrules.DeleteRange[[]byte] {
	return etcdrules.DeleteRange[[]byte]{Key: r.Key, RangeEnd: r.RangeEnd, PrevKV: r.PrevKv}
}

func txnShape(r *TxnRequest) etcdrules.Txn[[]byte] {
	t := etcdrules.Txn[[]byte]{Success: opsShape(r.Success), Failure: opsShape(r.Failure)}
	if len(r.Compare) > 0 {
		t.Compare = make([]etcdrules.Compare[[]byte], len(r.Compare))
		for i := range r.Compare {
			c := &r.Compare[i]
			t.Compare[i] = etcdrules.Compare[[]byte]{Result: int32(c.Result), Target: int32(c.Target), Key: c.Key,
				RangeEnd: c.RangeEnd, Version: c.Version, CreateRevision: c.CreateRevision,
				ModRevision: c.ModRevision, Value: c.Value, Lease: c.Lease}
		}
	}
	return t
}

func opsShape(ops []RequestOp) []etcdrules.Op[[]byte] {
	if len(ops) == 0 {
		return nil
	}
	out := make([]etcdrules.Op[[]byte], len(ops))
	for i := range ops {
		op := &ops[i]
		if op.Range != nil {
			r := rangeShape(op.Range)
			out[i].Range = &r
		}
		if op.Put != nil {
			p := putShape(op.Put)
			out[i].Put = &p
		}
		if op.DeleteRange != nil {
			d := deleteShape(op.DeleteRange)
			out[i].DeleteRange = &d
		}
		if op.Txn != nil {
			t := txnShape(op.Txn)
			out[i].Txn = &t
		}
	}
	return out
}
