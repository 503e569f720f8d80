package etcdgrpc

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/listwatch/listwatch/etcdrules"
	"github.com/listwatch/listwatch/store"
)

// The store's types mirror etcdserverpb field for field; these functions copy between them. Byte
// slices are shared, not copied: the store copies what it keeps, and the slices it hands out are
// only read while a response is encoded.

func rangeFromPB(r *pb.RangeRequest) *store.RangeRequest {
	if r == nil {
		return &store.RangeRequest{}
	}
	return &store.RangeRequest{
		Key:               r.Key,
		RangeEnd:          r.RangeEnd,
		Limit:             r.Limit,
		Revision:          r.Revision,
		SortOrder:         etcdrules.SortOrder(r.SortOrder),
		SortTarget:        etcdrules.SortTarget(r.SortTarget),
		Serializable:      r.Serializable,
		KeysOnly:          r.KeysOnly,
		CountOnly:         r.CountOnly,
		MinModRevision:    r.MinModRevision,
		MaxModRevision:    r.MaxModRevision,
		MinCreateRevision: r.MinCreateRevision,
		MaxCreateRevision: r.MaxCreateRevision,
	}
}

func putFromPB(r *pb.PutRequest) *store.PutRequest {
	if r == nil {
		return &store.PutRequest{}
	}
	return &store.PutRequest{
		Key:         r.Key,
		Value:       r.Value,
		Lease:       r.Lease,
		PrevKV:      r.PrevKv,
		IgnoreValue: r.IgnoreValue,
		IgnoreLease: r.IgnoreLease,
	}
}

func deleteRangeFromPB(r *pb.DeleteRangeRequest) *store.DeleteRangeRequest {
	if r == nil {
		return &store.DeleteRangeRequest{}
	}
	return &store.DeleteRangeRequest{Key: r.Key, RangeEnd: r.RangeEnd, PrevKV: r.PrevKv}
}

func compareFromPB(c *pb.Compare) store.Compare {
	if c == nil {
		return store.Compare{}
	}
	out := store.Compare{
		Result:   etcdrules.CompareResult(c.Result),
		Target:   etcdrules.CompareTarget(c.Target),
		Key:      c.Key,
		RangeEnd: c.RangeEnd,
	}
	switch u := c.TargetUnion.(type) {
	case *pb.Compare_Version:
		out.Version = u.Version
	case *pb.Compare_CreateRevision:
		out.CreateRevision = u.CreateRevision
	case *pb.Compare_ModRevision:
		out.ModRevision = u.ModRevision
	case *pb.Compare_Value:
		out.Value = u.Value
	case *pb.Compare_Lease:
		out.Lease = u.Lease
	}
	return out
}

// requestOpFromPB maps an op with no request set (or a nil entry) to an empty store op, which the
// store rejects with ErrKeyNotFound as v3rpc's checkRequestOp does.
func requestOpFromPB(op *pb.RequestOp) store.RequestOp {
	if op == nil {
		return store.RequestOp{}
	}
	switch u := op.Request.(type) {
	case *pb.RequestOp_RequestRange:
		return store.RequestOp{Range: rangeFromPB(u.RequestRange)}
	case *pb.RequestOp_RequestPut:
		return store.RequestOp{Put: putFromPB(u.RequestPut)}
	case *pb.RequestOp_RequestDeleteRange:
		return store.RequestOp{DeleteRange: deleteRangeFromPB(u.RequestDeleteRange)}
	case *pb.RequestOp_RequestTxn:
		return store.RequestOp{Txn: txnFromPB(u.RequestTxn)}
	}
	return store.RequestOp{}
}

func txnFromPB(r *pb.TxnRequest) *store.TxnRequest {
	if r == nil {
		return &store.TxnRequest{}
	}
	out := &store.TxnRequest{
		Compare: make([]store.Compare, len(r.Compare)),
		Success: make([]store.RequestOp, len(r.Success)),
		Failure: make([]store.RequestOp, len(r.Failure)),
	}
	for i, c := range r.Compare {
		out.Compare[i] = compareFromPB(c)
	}
	for i, op := range r.Success {
		out.Success[i] = requestOpFromPB(op)
	}
	for i, op := range r.Failure {
		out.Failure[i] = requestOpFromPB(op)
	}
	return out
}

// txnWrites reports whether a txn has a put or delete in any branch: such a txn is a raft proposal in
// etcd, a read-only one is not.
func txnWrites(r *store.TxnRequest) bool {
	for _, ops := range [][]store.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			if op.Put != nil || op.DeleteRange != nil || (op.Txn != nil && txnWrites(op.Txn)) {
				return true
			}
		}
	}
	return false
}

func kvToPB(kv *store.KeyValue) *mvccpb.KeyValue {
	if kv == nil {
		return nil
	}
	return &mvccpb.KeyValue{
		Key:            kv.Key,
		CreateRevision: kv.CreateRevision,
		ModRevision:    kv.ModRevision,
		Version:        kv.Version,
		Value:          kv.Value,
		Lease:          kv.Lease,
	}
}

func kvsToPB(kvs []store.KeyValue) []*mvccpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*mvccpb.KeyValue, len(kvs))
	for i := range kvs {
		out[i] = kvToPB(&kvs[i])
	}
	return out
}

// The nested converters keep the store's header (revision only), as etcd's txn package fills nested
// headers; the handlers fill the top-level one.

func rangeToPB(r *store.RangeResponse) *pb.RangeResponse {
	return &pb.RangeResponse{
		Header: &pb.ResponseHeader{Revision: r.Header.Revision},
		Kvs:    kvsToPB(r.Kvs),
		More:   r.More,
		Count:  r.Count,
	}
}

func putToPB(r *store.PutResponse) *pb.PutResponse {
	return &pb.PutResponse{Header: &pb.ResponseHeader{Revision: r.Header.Revision}, PrevKv: kvToPB(r.PrevKV)}
}

func deleteRangeToPB(r *store.DeleteRangeResponse) *pb.DeleteRangeResponse {
	return &pb.DeleteRangeResponse{
		Header:  &pb.ResponseHeader{Revision: r.Header.Revision},
		Deleted: r.Deleted,
		PrevKvs: kvsToPB(r.PrevKVs),
	}
}

func txnToPB(r *store.TxnResponse) *pb.TxnResponse {
	out := &pb.TxnResponse{
		Header:    &pb.ResponseHeader{Revision: r.Header.Revision},
		Succeeded: r.Succeeded,
		Responses: make([]*pb.ResponseOp, len(r.Responses)),
	}
	for i, op := range r.Responses {
		var resp pb.ResponseOp
		switch {
		case op.Range != nil:
			resp.Response = &pb.ResponseOp_ResponseRange{ResponseRange: rangeToPB(op.Range)}
		case op.Put != nil:
			resp.Response = &pb.ResponseOp_ResponsePut{ResponsePut: putToPB(op.Put)}
		case op.DeleteRange != nil:
			resp.Response = &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: deleteRangeToPB(op.DeleteRange)}
		case op.Txn != nil:
			resp.Response = &pb.ResponseOp_ResponseTxn{ResponseTxn: txnToPB(op.Txn)}
		}
		out.Responses[i] = &resp
	}
	return out
}

func watchFromPB(r *pb.WatchCreateRequest) *store.WatchRequest {
	out := &store.WatchRequest{
		Key:            r.Key,
		RangeEnd:       r.RangeEnd,
		StartRevision:  r.StartRevision,
		ProgressNotify: r.ProgressNotify,
		PrevKV:         r.PrevKv,
		WatchID:        r.WatchId,
		Fragment:       r.Fragment,
	}
	for _, f := range r.Filters {
		out.Filters = append(out.Filters, etcdrules.WatchFilter(f))
	}
	return out
}

func eventsToPB(evs []*store.Event) []*mvccpb.Event {
	if len(evs) == 0 {
		return nil
	}
	out := make([]*mvccpb.Event, len(evs))
	for i, ev := range evs {
		out[i] = &mvccpb.Event{
			Type:   mvccpb.Event_EventType(ev.Type),
			Kv:     kvToPB(&ev.Kv),
			PrevKv: kvToPB(ev.PrevKV),
		}
	}
	return out
}
