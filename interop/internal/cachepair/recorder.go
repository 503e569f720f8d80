package cachepair

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"google.golang.org/grpc"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
)

// ListRecorder feeds the lists a client sends to upstream's KubernetesRecorder, keyed by the
// storagetesting.RecorderContextKey of the request's context: a range with an end that reads
// values (not a count or keys only), or a range stream, as RecordedList{Key: where the range
// starts, Revision, Limit}, which is what upstream's KubernetesRecorder and KVRecorder note for
// kubernetes.Client.List and KV.GetStream. Recording at the gRPC call records both etcd3 storages
// alike: listwatch's builds its own kubernetes.Client.
type ListRecorder struct {
	R *storagetesting.KubernetesRecorder
}

// NewRecorder is a KubernetesRecorder that only records: it answers no list itself.
func NewRecorder() *storagetesting.KubernetesRecorder {
	return storagetesting.NewKubernetesRecorder(recordingSink{})
}

func (l ListRecorder) note(ctx context.Context, req *pb.RangeRequest) {
	if req == nil || len(req.RangeEnd) == 0 || req.CountOnly || req.KeysOnly {
		return
	}
	// List is the recorder's only way in; recordingSink answers nothing.
	_, _ = l.R.List(ctx, string(req.Key), kubernetes.ListOptions{Revision: req.Revision, Limit: req.Limit})
}

// Unary records a Range.
func (l ListRecorder) Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(*pb.RangeRequest); ok && method == pb.KV_Range_FullMethodName {
		l.note(ctx, r)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// Stream records a RangeStream.
func (l ListRecorder) Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != pb.KV_RangeStream_FullMethodName {
		return cs, err
	}
	return &recordedStream{ClientStream: cs, ctx: ctx, l: l}, nil
}

type recordedStream struct {
	grpc.ClientStream
	ctx context.Context
	l   ListRecorder
}

func (s *recordedStream) SendMsg(m any) error {
	if r, ok := m.(*pb.RangeRequest); ok {
		s.l.note(s.ctx, r)
	}
	return s.ClientStream.SendMsg(m)
}

// recordingSink is the kubernetes.Interface under the recorder.
type recordingSink struct{ kubernetes.Interface }

func (recordingSink) List(context.Context, string, kubernetes.ListOptions) (kubernetes.ListResponse, error) {
	return kubernetes.ListResponse{}, nil
}
