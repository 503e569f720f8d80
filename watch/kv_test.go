package watch

import (
	"context"
	"io"
	"math"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// NewRangeStreamKV returns a clientv3.KV for c whose RangeStream RPC is answered the way etcd v3.7 answers it
// (v3_server.go rangeStream) by issuing ranges to the real server: the first chunk holds 10 keys,
// later ones twice the last, all read at the revision of the first, and the last chunk carries the
// header, More and Count. The in-process server and etcd 3.4 answer RangeStream with Unimplemented;
// this drives the store's streaming paths through the real clientv3 code.
// beforeChunk, if not nil, runs before each chunk after the first; the counter counts the streams.
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
