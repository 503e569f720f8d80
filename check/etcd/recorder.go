package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
	"k8s.io/utils/clock"
)

// backend executes what a Recorder records.
type backend interface {
	do(ctx context.Context, req *Request) (*Response, error)
	// watch runs one watch, passing each response (without its Time) to recv, until the watch ends or
	// ctx is done.
	watch(ctx context.Context, req *WatchRequest, recv func(WatchResponse)) error
	requestProgress(ctx context.Context) error
}

// Recorder runs requests and watches against an etcd v3 endpoint and records them as a History. It is
// safe for concurrent use; each operation is drawn in the lowest client lane free when it is called.
type Recorder struct {
	be    backend
	clock clock.PassiveClock
	start time.Time

	mu   sync.Mutex
	h    History
	busy []bool // client lanes with an operation in flight
}

// NewRecorder records through c. Times are read from clk (clock.RealClock{} if nil), relative to
// the recorder's creation.
func NewRecorder(c *clientv3.Client, clk clock.PassiveClock) *Recorder {
	return newRecorder(&clientBackend{c: c, kv: clientv3.RetryKVClient(c), lease: clientv3.RetryLeaseClient(c),
		streams: map[int]metadata.MD{}}, clk)
}

func newRecorder(be backend, clk clock.PassiveClock) *Recorder {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Recorder{be: be, clock: clk, start: clk.Now()}
}

func (r *Recorder) now() int64 { return r.clock.Since(r.start).Nanoseconds() }

// Begin makes the history an open one under prefix: it reads the keys under prefix, and records
// the answer's revision as the start revision and its keys as the initial state (the read itself is
// not an operation of the history). Call it before anything else is recorded; from then on every
// request and watch must name keys under prefix only (History.Validate says which does not), and
// other clients may write outside it. ErrBegun if the recorder has recorded anything already.
func (r *Recorder) Begin(ctx context.Context, prefix Bytes) error {
	r.mu.Lock()
	begun := r.h.Open() || len(r.h.Operations) > 0 || len(r.h.Watches) > 0
	r.mu.Unlock()
	if begun {
		return ErrBegun
	}
	resp, err := r.be.do(ctx, &Request{Range: &RangeRequest{Key: prefix, RangeEnd: PrefixEnd(prefix)}})
	if err != nil {
		return fmt.Errorf("read the initial state of %s: %w", short(prefix), err)
	}
	if resp.Revision < 1 {
		return fmt.Errorf("read the initial state of %s: header revision %d", short(prefix), resp.Revision)
	}
	var kvs []KeyValue
	if resp.Range != nil {
		kvs = resp.Range.Kvs
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.h.Prefix, r.h.StartRevision, r.h.Initial = prefix, resp.Revision, kvs
	return nil
}

// ErrBegun: Begin was called on a recorder that has recorded something already.
var ErrBegun = errors.New("etcd: the recorder has begun recording already")

// Do sends req and records it with its outcome. An error that is one of etcd's definite errors
// (IsDefiniteError) is recorded as a failure; any other error (a timeout, a lost connection, a
// canceled context) as an unknown outcome. It returns the response or the client's error. The
// history keeps req: do not modify it, or what it points to, afterwards.
func (r *Recorder) Do(ctx context.Context, req Request) (*Response, error) {
	r.mu.Lock()
	lane := slices.Index(r.busy, false)
	if lane < 0 {
		lane = len(r.busy)
		r.busy = append(r.busy, true)
	}
	r.busy[lane] = true
	call := r.now()
	r.mu.Unlock()

	resp, err := r.be.do(ctx, &req)

	r.mu.Lock()
	defer r.mu.Unlock()
	op := Operation{Client: lane, Call: call, Return: r.now(), Request: req, Response: resp}
	if err != nil {
		op.Response = nil
		op.Error = rpctypes.ErrorDesc(err)
		op.Unknown = !IsDefiniteError(op.Error)
	}
	r.busy[lane] = false
	r.h.Operations = append(r.h.Operations, op)
	return resp, err
}

// Watch opens a watch and records every response it receives until the watch ends (canceled or
// compacted) or ctx is done; each response is also passed to observe, if not nil, once recorded.
// The watch is created with created-notify, so its first response says at which revision it
// started. Watch blocks: run it in a goroutine you own. It returns ctx's error, or the error that
// ended the watch.
func (r *Recorder) Watch(ctx context.Context, req WatchRequest, observe func(WatchResponse)) error {
	r.mu.Lock()
	idx := len(r.h.Watches)
	r.h.Watches = append(r.h.Watches, Watch{Call: r.now(), Request: req})
	r.mu.Unlock()
	return r.be.watch(ctx, &req, func(wr WatchResponse) {
		r.mu.Lock()
		wr.Time = r.now()
		r.h.Watches[idx].Responses = append(r.h.Watches[idx].Responses, wr)
		r.mu.Unlock()
		if observe != nil {
			observe(wr)
		}
	})
}

// RequestProgress asks every open watch for a progress notification (clientv3
// Watcher.RequestProgress on each watch's stream); the notifications are recorded by the watches
// that receive them. etcd answers only a stream whose watches are all synced.
func (r *Recorder) RequestProgress(ctx context.Context) error {
	return r.be.requestProgress(ctx)
}

// History returns a copy of what has been recorded so far.
func (r *Recorder) History() *History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := &History{Prefix: r.h.Prefix, StartRevision: r.h.StartRevision, Initial: slices.Clone(r.h.Initial),
		Operations: slices.Clone(r.h.Operations), Watches: slices.Clone(r.h.Watches)}
	for i := range h.Watches {
		h.Watches[i].Responses = slices.Clone(h.Watches[i].Responses)
	}
	return h
}

// clientBackend talks to an endpoint through clientv3, with its retry policies. Each watch gets a gRPC
// watch stream of its own (clientv3 shares a stream between watches whose contexts carry the same
// metadata), so that a progress request is never held back by another watch that is not synced.
type clientBackend struct {
	c     *clientv3.Client
	kv    pb.KVClient
	lease pb.LeaseClient

	mu      sync.Mutex
	nextID  int
	streams map[int]metadata.MD // the metadata naming each open watch's stream
}

func (b *clientBackend) do(ctx context.Context, req *Request) (*Response, error) {
	switch {
	case req.Range != nil:
		r, err := b.kv.Range(ctx, toPBRange(req.Range))
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.GetHeader().GetRevision(), Range: fromPBRange(r)}, nil
	case req.Put != nil:
		r, err := b.kv.Put(ctx, toPBPut(req.Put))
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.GetHeader().GetRevision(), Put: &PutResponse{PrevKV: fromPBKVPtr(r.PrevKv)}}, nil
	case req.DeleteRange != nil:
		r, err := b.kv.DeleteRange(ctx, toPBDelete(req.DeleteRange))
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.GetHeader().GetRevision(), DeleteRange: fromPBDelete(r)}, nil
	case req.Txn != nil:
		r, err := b.kv.Txn(ctx, toPBTxn(req.Txn))
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.GetHeader().GetRevision(), Txn: fromPBTxn(r)}, nil
	case req.Compact != nil:
		r, err := b.kv.Compact(ctx, &pb.CompactionRequest{Revision: req.Compact.Revision, Physical: req.Compact.Physical})
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.GetHeader().GetRevision()}, nil
	case req.LeaseGrant != nil:
		r, err := b.lease.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: req.LeaseGrant.ID, TTL: req.LeaseGrant.TTL})
		if err == nil && r.Error != "" {
			err = errors.New(r.Error)
		}
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.GetHeader().GetRevision(), LeaseGrant: &LeaseGrantResponse{ID: r.ID, TTL: r.TTL}}, nil
	case req.LeaseRevoke != nil:
		r, err := b.lease.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: req.LeaseRevoke.ID})
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.GetHeader().GetRevision()}, nil
	case req.LeaseKeepAlive != nil:
		r, err := b.c.KeepAliveOnce(ctx, clientv3.LeaseID(req.LeaseKeepAlive.ID))
		if err != nil {
			return nil, err
		}
		return &Response{Revision: r.ResponseHeader.GetRevision(), LeaseKeepAlive: &LeaseKeepAliveResponse{ID: int64(r.ID), TTL: r.TTL}}, nil
	}
	return nil, errors.New("etcd: empty request")
}

func (b *clientBackend) watch(ctx context.Context, req *WatchRequest, recv func(WatchResponse)) error {
	opts := []clientv3.OpOption{clientv3.WithCreatedNotify()}
	if req.RangeEnd != "" {
		opts = append(opts, clientv3.WithRange(string(req.RangeEnd)))
	}
	if req.StartRevision != 0 {
		opts = append(opts, clientv3.WithRev(req.StartRevision))
	}
	if req.PrevKV {
		opts = append(opts, clientv3.WithPrevKV())
	}
	if req.ProgressNotify {
		opts = append(opts, clientv3.WithProgressNotify())
	}
	if req.Fragment {
		opts = append(opts, clientv3.WithFragment())
	}
	for _, f := range req.Filters {
		switch f {
		case FilterNoPut:
			opts = append(opts, clientv3.WithFilterPut())
		case FilterNoDelete:
			opts = append(opts, clientv3.WithFilterDelete())
		}
	}
	b.mu.Lock()
	id := b.nextID
	b.nextID++
	md := metadata.Pairs("listwatch-history-watch", strconv.Itoa(id))
	b.streams[id] = md
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.streams, id)
		b.mu.Unlock()
	}()
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, md))
	defer cancel()
	var last error
	for wr := range b.c.Watch(ctx, string(req.Key), opts...) {
		out := WatchResponse{Revision: wr.Header.GetRevision(), Created: wr.Created, Canceled: wr.Canceled,
			CompactRevision: wr.CompactRevision, CancelReason: wr.CancelReason}
		for _, ev := range wr.Events {
			out.Events = append(out.Events, fromPBEvent(ev))
		}
		if wr.Canceled && out.CancelReason == "" && wr.CompactRevision == 0 {
			// clientv3 answers a refused create with a canceled response whose reason is in Err()
			if err := wr.Err(); err != nil {
				out.CancelReason = rpctypes.ErrorDesc(err)
			}
		}
		recv(out)
		if wr.Canceled {
			last = wr.Err()
			cancel()
		}
	}
	if err := ctx.Err(); err != nil && last == nil {
		return err
	}
	return last
}

func (b *clientBackend) requestProgress(ctx context.Context) error {
	b.mu.Lock()
	mds := make([]metadata.MD, 0, len(b.streams))
	for _, md := range b.streams {
		mds = append(mds, md)
	}
	b.mu.Unlock()
	var errs []error
	for _, md := range mds {
		errs = append(errs, b.c.RequestProgress(metadata.NewOutgoingContext(ctx, md)))
	}
	return errors.Join(errs...)
}

// bs returns b as a byte slice, nil when b is empty (as protobuf decodes an empty field).
func bs(b Bytes) []byte {
	if b == "" {
		return nil
	}
	return []byte(b)
}

func toPBRange(r *RangeRequest) *pb.RangeRequest {
	return &pb.RangeRequest{Key: bs(r.Key), RangeEnd: bs(r.RangeEnd), Limit: r.Limit, Revision: r.Revision,
		SortOrder: pb.RangeRequest_SortOrder(r.SortOrder), SortTarget: pb.RangeRequest_SortTarget(r.SortTarget),
		Serializable: r.Serializable, KeysOnly: r.KeysOnly, CountOnly: r.CountOnly,
		MinModRevision: r.MinModRevision, MaxModRevision: r.MaxModRevision,
		MinCreateRevision: r.MinCreateRevision, MaxCreateRevision: r.MaxCreateRevision}
}

func toPBPut(r *PutRequest) *pb.PutRequest {
	return &pb.PutRequest{Key: bs(r.Key), Value: bs(r.Value), Lease: r.Lease, PrevKv: r.PrevKV,
		IgnoreValue: r.IgnoreValue, IgnoreLease: r.IgnoreLease}
}

func toPBDelete(r *DeleteRangeRequest) *pb.DeleteRangeRequest {
	return &pb.DeleteRangeRequest{Key: bs(r.Key), RangeEnd: bs(r.RangeEnd), PrevKv: r.PrevKV}
}

func toPBTxn(t *TxnRequest) *pb.TxnRequest {
	out := &pb.TxnRequest{Success: toPBOps(t.Success), Failure: toPBOps(t.Failure)}
	for _, c := range t.Compare {
		pc := &pb.Compare{Result: pb.Compare_CompareResult(c.Result), Target: pb.Compare_CompareTarget(c.Target),
			Key: bs(c.Key), RangeEnd: bs(c.RangeEnd)}
		switch c.Target {
		case CompareVersion:
			pc.TargetUnion = &pb.Compare_Version{Version: c.Version}
		case CompareCreate:
			pc.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: c.CreateRevision}
		case CompareMod:
			pc.TargetUnion = &pb.Compare_ModRevision{ModRevision: c.ModRevision}
		case CompareValue:
			pc.TargetUnion = &pb.Compare_Value{Value: bs(c.Value)}
		case CompareLease:
			pc.TargetUnion = &pb.Compare_Lease{Lease: c.Lease}
		}
		out.Compare = append(out.Compare, pc)
	}
	return out
}

func toPBOps(ops []RequestOp) []*pb.RequestOp {
	var out []*pb.RequestOp
	for _, op := range ops {
		po := &pb.RequestOp{}
		switch {
		case op.Range != nil:
			po.Request = &pb.RequestOp_RequestRange{RequestRange: toPBRange(op.Range)}
		case op.Put != nil:
			po.Request = &pb.RequestOp_RequestPut{RequestPut: toPBPut(op.Put)}
		case op.DeleteRange != nil:
			po.Request = &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: toPBDelete(op.DeleteRange)}
		case op.Txn != nil:
			po.Request = &pb.RequestOp_RequestTxn{RequestTxn: toPBTxn(op.Txn)}
		}
		out = append(out, po)
	}
	return out
}

func fromPBKV(kv *mvccpb.KeyValue) KeyValue {
	return KeyValue{Key: Bytes(kv.Key), CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
		Version: kv.Version, Value: Bytes(kv.Value), Lease: kv.Lease}
}

func fromPBKVPtr(kv *mvccpb.KeyValue) *KeyValue {
	if kv == nil {
		return nil
	}
	k := fromPBKV(kv)
	return &k
}

func fromPBKVs(kvs []*mvccpb.KeyValue) []KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = fromPBKV(kv)
	}
	return out
}

func fromPBRange(r *pb.RangeResponse) *RangeResponse {
	return &RangeResponse{Kvs: fromPBKVs(r.Kvs), More: r.More, Count: r.Count}
}

func fromPBDelete(r *pb.DeleteRangeResponse) *DeleteRangeResponse {
	return &DeleteRangeResponse{Deleted: r.Deleted, PrevKVs: fromPBKVs(r.PrevKvs)}
}

func fromPBTxn(r *pb.TxnResponse) *TxnResponse {
	t := &TxnResponse{Succeeded: r.Succeeded}
	for _, op := range r.Responses {
		var ro ResponseOp
		switch {
		case op.GetResponseRange() != nil:
			ro.Range = fromPBRange(op.GetResponseRange())
		case op.GetResponsePut() != nil:
			ro.Put = &PutResponse{PrevKV: fromPBKVPtr(op.GetResponsePut().PrevKv)}
		case op.GetResponseDeleteRange() != nil:
			ro.DeleteRange = fromPBDelete(op.GetResponseDeleteRange())
		case op.GetResponseTxn() != nil:
			ro.Txn = fromPBTxn(op.GetResponseTxn())
		}
		t.Responses = append(t.Responses, ro)
	}
	return t
}

func fromPBEvent(ev *clientv3.Event) Event {
	out := Event{Type: EventType(ev.Type), PrevKV: fromPBKVPtr(ev.PrevKv)}
	if ev.Kv != nil {
		out.Kv = fromPBKV(ev.Kv)
	}
	return out
}
