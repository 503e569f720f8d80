package etcdgrpc

import (
	"context"
	"math"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/listwatch/listwatch/etcdrules"
	"github.com/listwatch/listwatch/store"
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

// RangeStream follows v3rpc/key.go kvServer.RangeStream: the stream-specific checks, then the chunks,
// each header filled with the member's identity but never with the live revision.
func (k *kvServer) RangeStream(r *pb.RangeRequest, rs grpc.ServerStreamingServer[pb.RangeStreamResponse]) error {
	req := rangeFromPB(r)
	if err := k.checkRangeStreamRequest(req); err != nil {
		return err
	}
	if err := k.s.rangeStream(rs.Context(), req, rs); err != nil {
		return toGRPCError(err)
	}
	return nil
}

// checkRangeStreamRequest follows v3rpc/key.go checkRangeStreamRequest: Range's own checks (the
// store's) come before the Unimplemented ones.
func (k *kvServer) checkRangeStreamRequest(r *store.RangeRequest) error {
	if err := k.s.st.CheckRequest(r); err != nil {
		return toGRPCError(err)
	}
	// A sort other than by key would order each chunk on its own, not the whole range.
	if !(r.SortOrder == etcdrules.SortNone || (r.SortTarget == etcdrules.SortByKey && r.SortOrder == etcdrules.SortAscend)) {
		return status.Errorf(codes.Unimplemented, "RangeStream does not support custom sort orders")
	}
	if r.HasRevisionFilters() {
		return status.Errorf(codes.Unimplemented, "RangeStream does not support revision filters")
	}
	return nil
}

// initialStreamChunkLimit is etcdserver/v3_server.go initialStreamChunkLimit: the first chunk's keys.
const initialStreamChunkLimit = 10

// rangeStream follows etcdserver/v3_server.go EtcdServer.rangeStream. Every chunk after the first is
// read at the revision the first one saw, so the chunks together are one snapshot, as a single
// Range at that revision; only the last chunk carries Header (that revision), More and Count.
func (s *server) rangeStream(ctx context.Context, r *store.RangeRequest, rs grpc.ServerStreamingServer[pb.RangeStreamResponse]) error {
	send := func(out *pb.RangeResponse) error {
		if out.Header != nil {
			s.fillWithoutRevision(out.Header)
		}
		return rs.Send(&pb.RangeStreamResponse{RangeResponse: out})
	}
	if r.CountOnly {
		resp, err := s.st.Range(r)
		if err != nil {
			return err
		}
		return send(&pb.RangeResponse{Header: &pb.ResponseHeader{Revision: resp.Header.Revision}, Count: resp.Count})
	}

	totalLimit := r.Limit
	if totalLimit == 0 {
		totalLimit = math.MaxInt64
	}
	// A negative limit is kept: like etcd's, the store then reads everything in one chunk.
	r.Limit = min(initialStreamChunkLimit, totalLimit)
	var count, headerRev int64
	for chunk := 0; ; chunk++ {
		if h := s.opts.hooks; h != nil && h.beforeRangeStreamChunk != nil {
			h.beforeRangeStreamChunk(ctx, chunk)
		}
		// etcd's read checks the context while it collects the keys.
		if err := ctx.Err(); err != nil {
			return err
		}
		resp, err := s.st.Range(r)
		if err != nil {
			return err
		}
		if headerRev == 0 {
			headerRev = resp.Header.Revision
			if r.Revision == 0 {
				r.Revision = headerRev
			}
		}
		count += int64(len(resp.Kvs))

		var nextKey []byte
		if resp.More {
			// its own bytes: the last key also goes out in this chunk
			last := resp.Kvs[len(resp.Kvs)-1].Key
			nextKey = append(append(make([]byte, 0, len(last)+1), last...), 0)
		}
		out := &pb.RangeResponse{Kvs: kvsToPB(resp.Kvs)}
		done := !resp.More || count == totalLimit
		if done {
			out.Header = &pb.ResponseHeader{Revision: headerRev}
			out.More = resp.More
			out.Count = count
			if resp.More {
				rest, err := s.st.Range(&store.RangeRequest{Key: nextKey, RangeEnd: r.RangeEnd, Revision: r.Revision, CountOnly: true})
				if err != nil {
					return err
				}
				out.Count += rest.Count
			}
		}
		if err := send(out); err != nil {
			return err
		}
		if done {
			return nil
		}
		r.Key = nextKey
		r.Limit = adjustChunkLimit(r.Limit, chunkSize(resp, out.Kvs, r.Limit), s.opts.MaxRequestBytes)
		r.Limit = min(r.Limit, totalLimit-count)
	}
}

// chunkSize is the encoded size of the range response etcd's rangeStream measures for a chunk read
// with limit: txn.Range's answer before the chunk is cut out of it, with the reading revision in its
// header and, since that read skips the total, a count of the keys it collected (one more than
// limit at most) where the store gives the total.
func chunkSize(resp *store.RangeResponse, kvs []*mvccpb.KeyValue, limit int64) int {
	return proto.Size(&pb.RangeResponse{
		Header: &pb.ResponseHeader{Revision: resp.Header.Revision},
		Kvs:    kvs,
		More:   resp.More,
		Count:  min(resp.Count, limit+1),
	})
}

// adjustChunkLimit is etcdserver/v3_server.go adjustChunkLimit: double the next chunk's limit when
// the last chunk was under half the target size, halve it when over twice, never below 1 (0 would
// mean no limit).
func adjustChunkLimit(lastLimit int64, lastSize, targetSize int) int64 {
	switch {
	case lastSize < targetSize/2:
		lastLimit *= 2
	case lastSize > targetSize*2:
		lastLimit /= 2
	}
	if lastLimit == 0 {
		lastLimit = 1
	}
	return lastLimit
}

func (k *kvServer) Put(_ context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	if err := k.s.admit(r); err != nil {
		return nil, err
	}
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
	if err := k.s.admit(r); err != nil {
		return nil, err
	}
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
	if txnWrites(req) {
		if err := k.s.admit(r); err != nil {
			return nil, err
		}
	}
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
	if err := k.s.admit(r); err != nil {
		return nil, err
	}
	resp, err := k.s.st.Compact(r.Revision)
	if err != nil {
		return nil, toGRPCError(err)
	}
	k.s.applied.Add(1)
	return &pb.CompactionResponse{Header: k.s.header(resp.Header)}, nil
}
