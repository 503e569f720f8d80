package etcd

import (
	"slices"
)

// withoutVersions is a copy of h whose keys in answers and events have Version 0, for
// Options.IgnoreVersions.
func withoutVersions(h *History) *History {
	n := *h
	n.Operations = slices.Clone(h.Operations)
	for i := range n.Operations {
		if r := n.Operations[i].Response; r != nil {
			c := *r
			c.Range = rangeWithoutVersions(r.Range)
			c.Put = putWithoutVersions(r.Put)
			c.DeleteRange = deleteWithoutVersions(r.DeleteRange)
			c.Txn = txnWithoutVersions(r.Txn)
			n.Operations[i].Response = &c
		}
	}
	n.Watches = slices.Clone(h.Watches)
	for i := range n.Watches {
		w := &n.Watches[i]
		w.Responses = slices.Clone(w.Responses)
		for j := range w.Responses {
			r := &w.Responses[j]
			r.Events = slices.Clone(r.Events)
			for k := range r.Events {
				ev := &r.Events[k]
				ev.Kv.Version = 0
				ev.PrevKV = kvWithoutVersion(ev.PrevKV)
			}
		}
	}
	return &n
}

func kvWithoutVersion(kv *KeyValue) *KeyValue {
	if kv == nil {
		return nil
	}
	c := *kv
	c.Version = 0
	return &c
}

func kvsWithoutVersions(kvs []KeyValue) []KeyValue {
	out := slices.Clone(kvs)
	for i := range out {
		out[i].Version = 0
	}
	return out
}

func rangeWithoutVersions(r *RangeResponse) *RangeResponse {
	if r == nil {
		return nil
	}
	c := *r
	c.Kvs = kvsWithoutVersions(r.Kvs)
	return &c
}

func putWithoutVersions(r *PutResponse) *PutResponse {
	if r == nil {
		return nil
	}
	return &PutResponse{PrevKV: kvWithoutVersion(r.PrevKV)}
}

func deleteWithoutVersions(r *DeleteRangeResponse) *DeleteRangeResponse {
	if r == nil {
		return nil
	}
	c := *r
	c.PrevKVs = kvsWithoutVersions(r.PrevKVs)
	return &c
}

func txnWithoutVersions(r *TxnResponse) *TxnResponse {
	if r == nil {
		return nil
	}
	c := *r
	c.Responses = slices.Clone(r.Responses)
	for i := range c.Responses {
		op := &c.Responses[i]
		op.Range = rangeWithoutVersions(op.Range)
		op.Put = putWithoutVersions(op.Put)
		op.DeleteRange = deleteWithoutVersions(op.DeleteRange)
		op.Txn = txnWithoutVersions(op.Txn)
	}
	return &c
}

// zeroResponseVersions clears, in place, the versions of an answer the model made, and of the
// candidates of its ranges sorted by another target than the key.
func zeroResponseVersions(r *Response, ties map[*RangeResponse]*rangeTies) {
	zeroKVs := func(kvs []KeyValue) {
		for i := range kvs {
			kvs[i].Version = 0
		}
	}
	var walkTxn func(t *TxnResponse)
	walkTxn = func(t *TxnResponse) {
		if t == nil {
			return
		}
		for i := range t.Responses {
			op := &t.Responses[i]
			if op.Range != nil {
				zeroKVs(op.Range.Kvs)
			}
			if op.Put != nil && op.Put.PrevKV != nil {
				op.Put.PrevKV.Version = 0
			}
			if op.DeleteRange != nil {
				zeroKVs(op.DeleteRange.PrevKVs)
			}
			walkTxn(op.Txn)
		}
	}
	if r.Range != nil {
		zeroKVs(r.Range.Kvs)
	}
	if r.Put != nil && r.Put.PrevKV != nil {
		r.Put.PrevKV.Version = 0
	}
	if r.DeleteRange != nil {
		zeroKVs(r.DeleteRange.PrevKVs)
	}
	walkTxn(r.Txn)
	for _, t := range ties {
		zeroKVs(t.cand)
	}
}
