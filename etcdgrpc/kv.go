package etcdgrpc

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// kvServer follows v3rpc/key.go kvServer. The request checks v3rpc makes before proposing (empty key,
// sort options, ignore_value/ignore_lease, txn shape and overlaps) are the store's, with the same
// errors.
type kvServer struct {
	pb.UnimplementedKVServer
	s *server
}

func (k *kvServer) Range(_ context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	resp, err := k.s.st.Range(rangeFromPB(r))
	if err != nil {
		return nil, toGRPCError(err)
	}
	out := rangeToPB(resp)
	k.s.fill(out.Header)
	return out, nil
}

func (k *kvServer) Put(_ context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	resp, err := k.s.st.Put(putFromPB(r))
	if err != nil {
		return nil, toGRPCError(err)
	}
	k.s.applied.Add(1)
	out := putToPB(resp)
	k.s.fill(out.Header)
	return out, nil
}

func (k *kvServer) DeleteRange(_ context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	resp, err := k.s.st.DeleteRange(deleteRangeFromPB(r))
	if err != nil {
		return nil, toGRPCError(err)
	}
	k.s.applied.Add(1)
	out := deleteRangeToPB(resp)
	k.s.fill(out.Header)
	return out, nil
}

func (k *kvServer) Txn(_ context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	req := txnFromPB(r)
	resp, err := k.s.st.Txn(req)
	if err != nil {
		return nil, toGRPCError(err)
	}
	if txnWrites(req) {
		k.s.applied.Add(1)
	}
	out := txnToPB(resp)
	k.s.fill(out.Header)
	return out, nil
}

// Compact ignores Physical: the store's compaction is complete when Compact returns.
func (k *kvServer) Compact(_ context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	resp, err := k.s.st.Compact(r.Revision)
	if err != nil {
		return nil, toGRPCError(err)
	}
	k.s.applied.Add(1)
	return &pb.CompactionResponse{Header: k.s.header(resp.Header)}, nil
}
