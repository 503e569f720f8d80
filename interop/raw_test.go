package interop

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// A raw watch stream is etcd's Watch RPC driven directly on the clientv3 connection, below
// clientv3's watcher: it shows what clientv3 hides (watch IDs, explicit-ID creates and their
// duplicates, the answer to a cancel, fragments, stream-wide progress answers) and lets the workload
// send creates clientv3 would not (empty key).

// rawStream records every response of one raw watch stream. Its receive goroutine is owned by the
// side: stopped by close, which waits for it.
type rawStream struct {
	stream pb.Watch_WatchClient
	cancel context.CancelFunc
	done   chan struct{}
	notify chan struct{}

	mu    sync.Mutex
	resps []*pb.WatchResponse
	open  map[int64]bool // IDs created and not yet cancelled or compacted
	err   error
}

func (s *side) rawStream(ctx context.Context) (*rawStream, error) {
	if s.raw != nil {
		return s.raw, nil
	}
	sctx, cancel := context.WithCancel(ctx)
	// As clientv3 does for its own streams: a catch-up response without fragmentation may exceed
	// gRPC's 4 MiB default.
	st, err := pb.NewWatchClient(s.cli.ActiveConnection()).Watch(sctx, grpc.MaxCallRecvMsgSize(math.MaxInt32))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%s: raw watch stream: %w", s.name, err)
	}
	rs := &rawStream{stream: st, cancel: cancel, done: make(chan struct{}), notify: make(chan struct{}, 1), open: map[int64]bool{}}
	go func() {
		defer close(rs.done)
		for {
			resp, err := st.Recv()
			rs.mu.Lock()
			if err != nil {
				rs.err = err
				rs.mu.Unlock()
				return
			}
			if s.mangleRaw != nil {
				s.mangleRaw(resp)
			}
			rs.resps = append(rs.resps, resp)
			switch {
			case resp.Created && !resp.Canceled:
				rs.open[resp.WatchId] = true
			case resp.Canceled || resp.CompactRevision != 0:
				delete(rs.open, resp.WatchId)
			}
			rs.mu.Unlock()
			select {
			case rs.notify <- struct{}{}:
			default:
			}
		}
	}()
	s.raw = rs
	return rs, nil
}

func (rs *rawStream) close() {
	rs.cancel()
	<-rs.done
}

// waitFor waits until a response after the first from responses satisfies match, and returns it
// and its index.
func (rs *rawStream) waitFor(ctx context.Context, from int, match func(*pb.WatchResponse) bool, retry func() error) (*pb.WatchResponse, int, error) {
	return rs.waitForWithin(ctx, catchUpTimeout, from, match, retry)
}

func (rs *rawStream) waitForWithin(ctx context.Context, timeout time.Duration, from int, match func(*pb.WatchResponse) bool, retry func() error) (*pb.WatchResponse, int, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		rs.mu.Lock()
		for i, r := range rs.resps[from:] {
			if match(r) {
				rs.mu.Unlock()
				return r, from + i, nil
			}
		}
		from = len(rs.resps)
		err := rs.err
		rs.mu.Unlock()
		if err != nil {
			return nil, 0, fmt.Errorf("raw watch stream ended: %w", err)
		}
		tick := time.NewTimer(progressRetry)
		if retry != nil {
			if err := retry(); err != nil {
				tick.Stop()
				return nil, 0, err
			}
		}
		select {
		case <-rs.notify:
		case <-tick.C:
		case <-deadline.C:
			tick.Stop()
			return nil, 0, fmt.Errorf("%w within %v", errNoAnswer, timeout)
		case <-ctx.Done():
			tick.Stop()
			return nil, 0, ctx.Err()
		}
		tick.Stop()
	}
}

func (rs *rawStream) len() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.resps)
}

// errNoAnswer is waitFor's failure: no response matched in time.
var errNoAnswer = errors.New("no matching raw watch response")

// create sends a create request and returns the created answer to it and its index: creates are
// answered in the order they are sent, one created response each, failures included.
func (rs *rawStream) create(ctx context.Context, req *pb.WatchCreateRequest) (*pb.WatchResponse, int, error) {
	from := rs.len()
	if err := rs.stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: req}}); err != nil {
		return nil, 0, err
	}
	return rs.waitFor(ctx, from, func(r *pb.WatchResponse) bool { return r.Created }, nil)
}

// awaitCompacted waits for the compaction answer to the watch created at index created.
func (rs *rawStream) awaitCompacted(ctx context.Context, id int64, created int) error {
	_, _, err := rs.waitFor(ctx, created+1, func(r *pb.WatchResponse) bool {
		return r.WatchId == id && r.CompactRevision != 0
	}, nil)
	return err
}

// openIDs returns the IDs of the stream's open watches, in increasing order.
func (rs *rawStream) openIDs() []int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	ids := make([]int64, 0, len(rs.open))
	for id := range rs.open {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// errNoWatchers ends a catch-up: a stream without watchers has nothing to deliver, and its
// progress requests go unanswered.
var errNoWatchers = errors.New("no open watchers")

// catchUp waits for a stream-wide progress answer at or above rev, asking again until one comes:
// it comes only once every watcher of the stream is synced, after all their events.
func (rs *rawStream) catchUp(ctx context.Context, rev int64) error {
	from := rs.len()
	_, _, err := rs.waitFor(ctx, from, func(r *pb.WatchResponse) bool {
		return r.WatchId == clientv3.InvalidWatchID && !r.Created && !r.Canceled && len(r.Events) == 0 && r.Header.GetRevision() >= rev
	}, func() error {
		if len(rs.openIDs()) == 0 {
			return errNoWatchers
		}
		return rs.stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
	})
	if errors.Is(err, errNoWatchers) {
		return nil
	}
	return err
}

// cancelAnswerTimeout bounds the wait for the answer to a cancel that the reference answered: the
// other side may never answer it, and that is a difference to report, not to wait out. It is
// catchUpTimeout, as every other wait for what a side owes: a shorter bound (it was 5 s) reported a
// side slowed by a loaded machine as one that never answers.
const cancelAnswerTimeout = catchUpTimeout

// cancelWatch sends a cancel request and, if answered is set, waits for the answer and returns it
// (nil if none came within cancelAnswerTimeout).
func (rs *rawStream) cancelWatch(ctx context.Context, id int64, answered bool) (*pb.WatchResponse, error) {
	from := rs.len()
	req := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: id}}}
	if err := rs.stream.Send(req); err != nil || !answered {
		return nil, err
	}
	resp, _, err := rs.waitForWithin(ctx, cancelAnswerTimeout, from, func(r *pb.WatchResponse) bool {
		return r.WatchId == id && r.Canceled && !r.Created && r.CompactRevision == 0
	}, nil)
	if errors.Is(err, errNoAnswer) {
		return nil, nil
	}
	return resp, err
}

// progressAnswersBefore counts the stream-wide progress answers after index from and before the
// cancel answer for id.
func (rs *rawStream) progressAnswersBefore(from int, id int64) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n := 0
	for _, r := range rs.resps[from:] {
		if r.WatchId == id && r.Canceled {
			break
		}
		if r.WatchId == clientv3.InvalidWatchID && !r.Created && !r.Canceled && len(r.Events) == 0 {
			n++
		}
	}
	return n
}

// rawWatch is everything a raw stream delivered for one create request, in order.
type rawWatch struct {
	Created *pb.WatchResponse
	Events  []*mvccpb.Event
	// Ends are the answers that end the watch: a cancel answer, or a compaction answer followed by
	// the answer to the cancel the client sends for it (as clientv3 does).
	Ends []*pb.WatchResponse
	// After holds anything else for the ID after its first end: must be empty.
	After []*pb.WatchResponse
}

// rawWatches splits the stream's responses by create: a created answer opens a record for its ID;
// later responses for that ID go to it. Stream-wide progress answers are left out: how many there
// are depends on timing.
func (s *side) rawWatches() []*rawWatch {
	rs := s.raw
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []*rawWatch
	current := map[int64]*rawWatch{}
	for _, resp := range rs.resps {
		r := s.normProto(resp).(*pb.WatchResponse)
		if r.Created {
			w := &rawWatch{Created: r}
			out = append(out, w)
			if r.WatchId != clientv3.InvalidWatchID {
				current[r.WatchId] = w
			}
			continue
		}
		w, ok := current[r.WatchId]
		if !ok {
			if r.WatchId != clientv3.InvalidWatchID {
				// An answer for an ID no create opened: keep it where the comparison sees it.
				out = append(out, &rawWatch{After: []*pb.WatchResponse{r}})
			}
			continue
		}
		ending := r.Canceled || r.CompactRevision != 0
		switch {
		case len(w.Ends) > 0 && (!ending || len(r.Events) > 0):
			w.After = append(w.After, r)
		case ending:
			w.Ends = append(w.Ends, r)
		default:
			w.Events = append(w.Events, r.Events...)
		}
	}
	return out
}

// rawSel turns a key selection into the create request fields, as clientv3 would, except that an
// empty key stays empty (the server reads it as "\x00").
func rawSel(sel keySel) (key, end []byte) {
	key = []byte(sel.Key)
	switch sel.Mode {
	case selRange:
		end = []byte(sel.End)
	case selPrefix:
		if len(key) == 0 {
			return []byte{0}, []byte{0}
		}
		end = []byte(clientv3.GetPrefixRangeEnd(sel.Key))
	case selFromKey:
		end = []byte{0}
	}
	return key, end
}
