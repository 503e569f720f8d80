package etcd

import (
	"context"
	"errors"

	"github.com/listwatch/listwatch/store"
)

// The conversions between the history's types and the store's, for storeBackend: tests record
// histories of workloads run against the in-process store directly, without gRPC.

func toStoreRange(r *RangeRequest) *store.RangeRequest {
	return &store.RangeRequest{
		Key: bs(r.Key), RangeEnd: bs(r.RangeEnd), Limit: r.Limit, Revision: r.Revision,
		SortOrder: r.SortOrder, SortTarget: r.SortTarget,
		Serializable: r.Serializable, KeysOnly: r.KeysOnly, CountOnly: r.CountOnly,
		MinModRevision: r.MinModRevision, MaxModRevision: r.MaxModRevision,
		MinCreateRevision: r.MinCreateRevision, MaxCreateRevision: r.MaxCreateRevision,
	}
}

func toStorePut(r *PutRequest) *store.PutRequest {
	return &store.PutRequest{Key: bs(r.Key), Value: bs(r.Value), Lease: r.Lease, PrevKV: r.PrevKV,
		IgnoreValue: r.IgnoreValue, IgnoreLease: r.IgnoreLease}
}

func toStoreDelete(r *DeleteRangeRequest) *store.DeleteRangeRequest {
	return &store.DeleteRangeRequest{Key: bs(r.Key), RangeEnd: bs(r.RangeEnd), PrevKV: r.PrevKV}
}

func toStoreTxn(r *TxnRequest) *store.TxnRequest {
	t := &store.TxnRequest{}
	for _, c := range r.Compare {
		t.Compare = append(t.Compare, store.Compare{
			Result: c.Result, Target: c.Target,
			Key: bs(c.Key), RangeEnd: bs(c.RangeEnd), Version: c.Version, CreateRevision: c.CreateRevision,
			ModRevision: c.ModRevision, Value: bs(c.Value), Lease: c.Lease,
		})
	}
	t.Success = toStoreOps(r.Success)
	t.Failure = toStoreOps(r.Failure)
	return t
}

func toStoreOps(ops []RequestOp) []store.RequestOp {
	var out []store.RequestOp
	for _, op := range ops {
		var so store.RequestOp
		if op.Range != nil {
			so.Range = toStoreRange(op.Range)
		}
		if op.Put != nil {
			so.Put = toStorePut(op.Put)
		}
		if op.DeleteRange != nil {
			so.DeleteRange = toStoreDelete(op.DeleteRange)
		}
		if op.Txn != nil {
			so.Txn = toStoreTxn(op.Txn)
		}
		out = append(out, so)
	}
	return out
}

func fromStoreKV(kv *store.KeyValue) KeyValue {
	return KeyValue{Key: Bytes(kv.Key), CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
		Version: kv.Version, Value: Bytes(kv.Value), Lease: kv.Lease}
}

func fromStoreKVPtr(kv *store.KeyValue) *KeyValue {
	if kv == nil {
		return nil
	}
	k := fromStoreKV(kv)
	return &k
}

func fromStoreKVs(kvs []store.KeyValue) []KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]KeyValue, len(kvs))
	for i := range kvs {
		out[i] = fromStoreKV(&kvs[i])
	}
	return out
}

func fromStoreRange(r *store.RangeResponse) *RangeResponse {
	if r == nil {
		return nil
	}
	return &RangeResponse{Kvs: fromStoreKVs(r.Kvs), More: r.More, Count: r.Count}
}

func fromStoreDelete(r *store.DeleteRangeResponse) *DeleteRangeResponse {
	return &DeleteRangeResponse{Deleted: r.Deleted, PrevKVs: fromStoreKVs(r.PrevKVs)}
}

func fromStoreTxn(r *store.TxnResponse) *TxnResponse {
	t := &TxnResponse{Succeeded: r.Succeeded}
	for _, op := range r.Responses {
		var ro ResponseOp
		switch {
		case op.Range != nil:
			ro.Range = fromStoreRange(op.Range)
		case op.Put != nil:
			ro.Put = &PutResponse{PrevKV: fromStoreKVPtr(op.Put.PrevKV)}
		case op.DeleteRange != nil:
			ro.DeleteRange = fromStoreDelete(op.DeleteRange)
		case op.Txn != nil:
			ro.Txn = fromStoreTxn(op.Txn)
		}
		t.Responses = append(t.Responses, ro)
	}
	return t
}

// fromStoreEvent converts an event delivered by a store watch stream.
func fromStoreEvent(ev *store.Event) Event {
	return Event{Type: ev.Type, Kv: fromStoreKV(&ev.Kv), PrevKV: fromStoreKVPtr(ev.PrevKV)}
}

// fromStoreWatchResponse converts a store watch response; t is when it was received.
func fromStoreWatchResponse(wr *store.WatchResponse, t int64) WatchResponse {
	out := WatchResponse{Time: t, Revision: wr.Revision, Created: wr.Created, Canceled: wr.Canceled,
		CompactRevision: wr.CompactRevision, CancelReason: wr.CancelReason}
	for _, ev := range wr.Events {
		out.Events = append(out.Events, fromStoreEvent(ev))
	}
	return out
}

// toStoreWatchRequest converts a watch request for a store watch stream.
func toStoreWatchRequest(r *WatchRequest) *store.WatchRequest {
	return &store.WatchRequest{Key: bs(r.Key), RangeEnd: bs(r.RangeEnd), StartRevision: r.StartRevision,
		ProgressNotify: r.ProgressNotify, PrevKV: r.PrevKV, Fragment: r.Fragment, Filters: r.Filters}
}

// applyToStore executes req on st, as a server backed by st would, and converts the answer. A lease
// grant with ID 0 lets st choose.
func applyToStore(st *store.Store, req *Request) (*Response, error) {
	switch {
	case req.Range != nil:
		r, err := st.Range(toStoreRange(req.Range))
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.Header.Revision, Range: fromStoreRange(r)}, nil
	case req.Put != nil:
		r, err := st.Put(toStorePut(req.Put))
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.Header.Revision, Put: &PutResponse{PrevKV: fromStoreKVPtr(r.PrevKV)}}, nil
	case req.DeleteRange != nil:
		r, err := st.DeleteRange(toStoreDelete(req.DeleteRange))
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.Header.Revision, DeleteRange: fromStoreDelete(r)}, nil
	case req.Txn != nil:
		r, err := st.Txn(toStoreTxn(req.Txn))
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.Header.Revision, Txn: fromStoreTxn(r)}, nil
	case req.Compact != nil:
		r, err := st.Compact(req.Compact.Revision)
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.Header.Revision}, nil
	case req.LeaseGrant != nil:
		r, err := st.LeaseGrant(req.LeaseGrant.ID, req.LeaseGrant.TTL)
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.Header.Revision, LeaseGrant: &LeaseGrantResponse{ID: r.ID, TTL: r.TTL}}, nil
	case req.LeaseRevoke != nil:
		r, err := st.LeaseRevoke(req.LeaseRevoke.ID)
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.Header.Revision}, nil
	case req.LeaseKeepAlive != nil:
		r, err := st.LeaseKeepAlive(context.Background(), req.LeaseKeepAlive.ID)
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.Header.Revision, LeaseKeepAlive: &LeaseKeepAliveResponse{ID: r.ID, TTL: r.TTL}}, nil
	}
	return nil, errors.New("history: empty request")
}
