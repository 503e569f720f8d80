package watch

import (
	"context"
	"io"
	"math"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// NewRangeStreamKV returns a clientv3.KV for c whose RangeStream RPC is answered the way etcd v3.7 answers it
// (v3_server.go rangeStream) by issuing ranges to the real server: the first chunk holds 10 keys,
// later ones twice the last, all read at the revision of the first, and the last chunk carries the
// header, More and Count. The in-process server streams as well, but sends its chunks ahead of the
// reader; these are read only when the client asks for the next one, so that beforeChunk, if not
// nil, runs between two chunks (where etcd's tests use the beforeRangeStreamChunk failpoint). It
// runs before each chunk after the first; the counter counts the streams.
func NewRangeStreamKV(c *clientv3.Client, beforeChunk func(chunk int)) (clientv3.KV, *atomic.Int64) {
	n := new(atomic.Int64)
	remote := &rangeStreamClient{KVClient: pb.NewKVClient(c.ActiveConnection()), streams: n, beforeChunk: beforeChunk}
	return clientv3.NewKVFromKVClient(remote, c), n
}

type rangeStreamClient struct {
	pb.KVClient
	streams     *atomic.Int64
	beforeChunk func(int)
}

func (c *rangeStreamClient) RangeStream(ctx context.Context, in *pb.RangeRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pb.RangeStreamResponse], error) {
	c.streams.Add(1)
	r := proto.Clone(in).(*pb.RangeRequest)
	total := r.Limit
	if total == 0 {
		total = math.MaxInt64
	}
	r.Limit = min(10, total)
	return &rangeStream{ctx: ctx, c: c, r: r, total: total, opts: opts}, nil
}

// rangeStream produces the chunks lazily, one per Recv.
type rangeStream struct {
	grpc.ClientStream
	ctx       context.Context
	c         *rangeStreamClient
	r         *pb.RangeRequest
	opts      []grpc.CallOption
	total     int64
	count     int64
	headerRev int64
	chunk     int
	done      bool
}

func (s *rangeStream) Context() context.Context { return s.ctx }

func (s *rangeStream) Recv() (*pb.RangeStreamResponse, error) {
	if s.done {
		return nil, io.EOF
	}
	if s.chunk > 0 && s.c.beforeChunk != nil {
		s.c.beforeChunk(s.chunk)
	}
	s.chunk++
	resp, err := s.c.KVClient.Range(s.ctx, s.r, s.opts...)
	if err != nil {
		s.done = true
		return nil, err
	}
	if s.headerRev == 0 {
		s.headerRev = resp.Header.Revision
		if s.r.Revision == 0 {
			s.r.Revision = s.headerRev
		}
	}
	s.count += int64(len(resp.Kvs))
	out := &pb.RangeResponse{Kvs: resp.Kvs}
	var next []byte
	if resp.More {
		next = append(append([]byte(nil), resp.Kvs[len(resp.Kvs)-1].Key...), 0)
	}
	if !resp.More || s.count == s.total {
		s.done = true
		out.Header = &pb.ResponseHeader{Revision: s.headerRev}
		out.More = resp.More
		out.Count = s.count
		if resp.More {
			rest, err := s.c.KVClient.Range(s.ctx, &pb.RangeRequest{Key: next, RangeEnd: s.r.RangeEnd, Revision: s.r.Revision, CountOnly: true}, s.opts...)
			if err != nil {
				return nil, err
			}
			out.Count += rest.Count
		}
		return &pb.RangeStreamResponse{RangeResponse: out}, nil
	}
	s.r.Key = next
	s.r.Limit = min(s.r.Limit*2, s.total-s.count)
	return &pb.RangeStreamResponse{RangeResponse: out}, nil
}

// NewNoRangeStreamKV returns a clientv3.KV for c whose RangeStream RPC is answered as a server without
// it answers (etcd before v3.7, such as etcd 3.4): the stream opens and its first receive fails with
// gRPC's Unimplemented for an unknown method. Everything else goes to c's server. The counter counts
// the RangeStream attempts.
func NewNoRangeStreamKV(c *clientv3.Client) (clientv3.KV, *atomic.Int64) {
	n := new(atomic.Int64)
	return clientv3.NewKVFromKVClient(&noRangeStreamClient{KVClient: pb.NewKVClient(c.ActiveConnection()), attempts: n}, c), n
}

type noRangeStreamClient struct {
	pb.KVClient
	attempts *atomic.Int64
}

func (c *noRangeStreamClient) RangeStream(ctx context.Context, _ *pb.RangeRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[pb.RangeStreamResponse], error) {
	c.attempts.Add(1)
	return &unimplementedStream{ctx: ctx}, nil
}

type unimplementedStream struct {
	grpc.ClientStream
	ctx context.Context
}

func (s *unimplementedStream) Context() context.Context { return s.ctx }

func (s *unimplementedStream) Recv() (*pb.RangeStreamResponse, error) {
	return nil, status.Error(codes.Unimplemented, "unknown method RangeStream for service etcdserverpb.KV")
}
