package etcdgrpc

import (
	"context"
	"errors"
	"io"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/listwatch/listwatch/store"
)

// watchServer serves Watch streams. The store's WatchStream already does what v3rpc's
// serverWatchStream adds to mvcc (created and canceled answers in order, prev_kv, progress ticks), so
// a stream here is a receive loop that turns requests into stream calls and a send loop that turns
// the stream's responses into pb.WatchResponses.
type watchServer struct {
	pb.UnimplementedWatchServer
	s *server
}

// watchStream is one gRPC watch stream and the store stream behind it.
type watchStream struct {
	s    *server
	grpc pb.Watch_WatchServer
	ws   *store.WatchStream

	// mu guards createFragment: the fragment flag of each create the store has not answered yet, in
	// call order. The store answers creates in call order, so the send loop pops one flag per created
	// answer and knows, by watch ID, which watchers asked for fragmentation before any of their events.
	mu             sync.Mutex
	createFragment []bool
}

// Watch follows v3rpc/watch.go watchServer.Watch. The receive loop runs in the handler's goroutine:
// Recv returns when the client ends the stream or its context ends, and a failed Send ends the stream
// too, so the handler always gets back control; the send loop is its one other goroutine, which it
// stops and waits for before returning.
func (w *watchServer) Watch(stream pb.Watch_WatchServer) error {
	ws, err := w.s.st.NewWatchStream()
	if err != nil {
		return toGRPCError(err)
	}
	sws := &watchStream{s: w.s, grpc: stream, ws: ws}
	ctx, cancel := context.WithCancel(stream.Context())
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		defer cancel()
		sws.sendLoop(ctx)
	}()

	err = sws.recvLoop(ctx)
	if err == nil {
		// The client closed its side; events still flow until the stream ends, as in etcd.
		select {
		case <-stream.Context().Done():
			err = stream.Context().Err()
		case <-sent:
		}
	}
	ws.Close()
	cancel()
	<-sent
	if errors.Is(err, context.Canceled) {
		err = rpctypes.ErrGRPCWatchCanceled
	}
	return err
}

// recvLoop follows v3rpc/watch.go recvLoop. It returns nil when the client closes its side, or the
// error that ended the stream.
func (sws *watchStream) recvLoop(ctx context.Context) error {
	for {
		req, err := sws.grpc.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch u := req.RequestUnion.(type) {
		case *pb.WatchRequest_CreateRequest:
			if u.CreateRequest == nil {
				continue
			}
			sws.mu.Lock()
			sws.createFragment = append(sws.createFragment, u.CreateRequest.Fragment)
			sws.mu.Unlock()
			// A create the store refuses is answered on the stream (created and canceled, watch ID -1,
			// the reason), not as an error of the RPC; only the end of the stream stops the loop.
			if _, err := sws.ws.Watch(ctx, watchFromPB(u.CreateRequest)); streamEnded(ctx, err) {
				return err
			}
		case *pb.WatchRequest_CancelRequest:
			if u.CancelRequest == nil {
				continue
			}
			// An unknown ID gets no answer (store.ErrWatcherNotExist).
			if err := sws.ws.Cancel(ctx, u.CancelRequest.WatchId); streamEnded(ctx, err) {
				return err
			}
		case *pb.WatchRequest_ProgressRequest:
			if u.ProgressRequest != nil {
				sws.ws.RequestProgress()
			}
		default:
			// v3rpc ignores requests it does not know rather than end the stream.
		}
	}
}

func streamEnded(ctx context.Context, err error) bool {
	return err != nil && (errors.Is(err, store.ErrStreamClosed) || ctx.Err() != nil)
}

// popCreateFragment returns the fragment flag of the oldest create not yet answered.
func (sws *watchStream) popCreateFragment() bool {
	sws.mu.Lock()
	defer sws.mu.Unlock()
	if len(sws.createFragment) == 0 {
		return false
	}
	f := sws.createFragment[0]
	sws.createFragment = sws.createFragment[1:]
	return f
}

// sendLoop follows v3rpc/watch.go sendLoop: one pb.WatchResponse per store response, in the store's
// order, fragmented for the watchers that asked. It returns when ctx ends, the store stream closes,
// or a Send fails (which ends the gRPC stream).
func (sws *watchStream) sendLoop(ctx context.Context) {
	fragment := make(map[int64]bool) // watch IDs whose create asked for fragmentation
	limit := sws.s.opts.MaxRequestBytes + GRPCOverheadBytes
	for {
		var wr store.WatchResponse
		var ok bool
		select {
		case <-ctx.Done():
			return
		case wr, ok = <-sws.ws.Chan():
			if !ok {
				return
			}
		}
		out := &pb.WatchResponse{
			Header:          sws.s.watchHeader(wr.Revision),
			WatchId:         wr.WatchID,
			Created:         wr.Created,
			Canceled:        wr.Canceled,
			CompactRevision: wr.CompactRevision,
			CancelReason:    wr.CancelReason,
			Events:          eventsToPB(wr.Events),
		}
		var err error
		switch {
		case wr.Created:
			if f := sws.popCreateFragment(); f && !wr.Canceled {
				fragment[wr.WatchID] = true
			}
			err = sws.grpc.Send(out)
		case fragment[wr.WatchID]:
			err = sendFragments(out, limit, sws.grpc.Send)
		default:
			err = sws.grpc.Send(out)
		}
		if wr.Canceled && !wr.Created {
			delete(fragment, wr.WatchID)
		}
		if err != nil {
			return
		}
	}
}

// eventsField is the field number of WatchResponse.events.
const eventsField = 11

// sendFragments follows v3rpc/watch.go sendFragments: a response of fewer than two events or one
// that encodes to less than limit goes whole; otherwise it is cut into fragments, each taking events
// in order while it stays under limit (a single event may exceed it), all but the last marked
// fragment=true. Sizes are summed per event rather than re-encoding each candidate fragment; they are
// the sizes proto.Size would give.
func sendFragments(wr *pb.WatchResponse, limit int, send func(*pb.WatchResponse) error) error {
	if len(wr.Events) < 2 || proto.Size(wr) < limit {
		return send(wr)
	}
	base := proto.Size(&pb.WatchResponse{
		Header:          wr.Header,
		WatchId:         wr.WatchId,
		Created:         wr.Created,
		Canceled:        wr.Canceled,
		CompactRevision: wr.CompactRevision,
		CancelReason:    wr.CancelReason,
		Fragment:        true,
	})
	evs := wr.Events
	for len(evs) > 0 {
		size, n := base, 0
		for n < len(evs) {
			es := protowire.SizeTag(eventsField) + protowire.SizeBytes(proto.Size(evs[n]))
			if n > 0 && size+es >= limit {
				break
			}
			size += es
			n++
		}
		cur := &pb.WatchResponse{
			Header:          wr.Header,
			WatchId:         wr.WatchId,
			Created:         wr.Created,
			Canceled:        wr.Canceled,
			CompactRevision: wr.CompactRevision,
			CancelReason:    wr.CancelReason,
			Fragment:        n < len(evs),
			Events:          evs[:n:n],
		}
		if err := send(cur); err != nil {
			return err
		}
		evs = evs[n:]
	}
	return nil
}
