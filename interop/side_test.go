package interop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// side is one implementation under test, reached through a clientv3 client, with what the
// workload learned about it: the lease IDs its server granted, by handle, and its open watches.
type side struct {
	name  string
	cli   *clientv3.Client
	lease pb.LeaseClient // raw client on cli's connection, for grants with explicit IDs
	kv    pb.KVClient    // raw client on cli's connection, for requests clientv3 refuses to send

	leaseIDs []int64       // by handle; 0 when the grant failed on this side
	handles  map[int64]int // granted lease ID -> handle

	watches []*watchRec // by workload watch number
	notify  chan struct{}
	raw     *rawStream // opened by the first raw watch op

	// mangle, if set, changes each watch response before it is recorded: the harness's own tests
	// use it to check that a difference in a watch stream is caught.
	mangle func(*clientv3.WatchResponse)
	// mangleRaw does the same for raw watch stream responses.
	mangleRaw func(*pb.WatchResponse)
}

func newSide(name string, cli *clientv3.Client) *side {
	return &side{
		name:    name,
		cli:     cli,
		lease:   pb.NewLeaseClient(cli.ActiveConnection()),
		kv:      pb.NewKVClient(cli.ActiveConnection()),
		handles: map[int64]int{},
		notify:  make(chan struct{}, 1),
	}
}

// missingLeaseBase is where IDs for handles a side never got start: far from any real ID, so using
// one fails with "lease not found" on that side and the difference shows in the results.
const missingLeaseBase = 0x0bad_0000

// leaseHandleBase is what a granted lease ID is rewritten to, plus its handle, before comparing.
const leaseHandleBase = 1_000_000

func (s *side) leaseID(ref leaseRef) int64 {
	if ref.Handle < 0 {
		return ref.Raw
	}
	if ref.Handle < len(s.leaseIDs) && s.leaseIDs[ref.Handle] != 0 {
		return s.leaseIDs[ref.Handle]
	}
	return missingLeaseBase + int64(ref.Handle)
}

// granted records the ID this side returned for a new handle (0 if the grant failed).
func (s *side) granted(handle int, id int64) {
	for len(s.leaseIDs) <= handle {
		s.leaseIDs = append(s.leaseIDs, 0)
	}
	s.leaseIDs[handle] = id
	if id != 0 {
		s.handles[id] = handle
	}
}

// normLease maps a lease ID as this side reports it to the workload's name for it.
func (s *side) normLease(id int64) int64 {
	if h, ok := s.handles[id]; ok {
		return leaseHandleBase + int64(h)
	}
	return id
}

// outcome is what one operation returned on one side, normalized for comparison.
type outcome struct {
	Resp any
	Code codes.Code
	Err  string
}

func errOutcome(err error) outcome {
	code := status.Code(err)
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	}
	return outcome{Code: code, Err: err.Error()}
}

// streamCtx returns a context whose outgoing metadata selects the named clientv3 watch stream.
func streamCtx(ctx context.Context, stream string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "listwatch-interop-stream", stream)
}

// watchRec collects everything one clientv3 watch channel delivers. Its collector goroutine is
// owned by the side: stopped by cancel, waited for on done.
type watchRec struct {
	spec   watchSpec
	cancel context.CancelFunc
	done   chan struct{}
	// hideCreated: the created notification was asked for only to know the server has the watch;
	// it is not recorded
	hideCreated bool
	createdc    chan struct{} // closed on the created notification, when hideCreated

	mu           sync.Mutex
	resps        []clientv3.WatchResponse
	lastProgress int64
	closed       bool
}

// watch opens a watch. On a shared stream it returns only once the server has created it: clientv3
// sends a stream's creates one at a time but a progress request at once, so a progress request made
// after the watch could reach the server before the create and be answered as if the watch were
// not there. (Progress answered before the create may still reach the new watch: see the comment at
// the top of workload_test.go for why only watches from revision 0 share streams.)
func (s *side) watch(ctx context.Context, spec watchSpec) (*watchRec, error) {
	wctx, cancel := context.WithCancel(streamCtx(ctx, spec.Stream))
	w := &watchRec{spec: spec, cancel: cancel, done: make(chan struct{}), createdc: make(chan struct{})}
	opts := spec.opts()
	if !strings.HasPrefix(spec.Stream, soloPrefix) && !spec.CreatedNotify {
		opts = append(opts, clientv3.WithCreatedNotify())
		w.hideCreated = true
	}
	ch := s.cli.Watch(wctx, spec.Sel.Key, opts...)
	go func() {
		defer close(w.done)
		for wr := range ch {
			if w.hideCreated && wr.Created {
				close(w.createdc)
				continue
			}
			if s.mangle != nil {
				s.mangle(&wr)
			}
			w.mu.Lock()
			w.resps = append(w.resps, wr)
			if wr.IsProgressNotify() && wr.Header.Revision > w.lastProgress {
				w.lastProgress = wr.Header.Revision
			}
			w.mu.Unlock()
			s.poke()
		}
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		s.poke()
	}()
	s.watches = append(s.watches, w)
	if !w.hideCreated {
		return w, nil
	}
	select {
	case <-w.createdc:
		return w, nil
	case <-w.done:
		return w, nil
	case <-time.After(catchUpTimeout):
		return w, fmt.Errorf("%s: watch %v not created within %v", s.name, &w.spec, catchUpTimeout)
	case <-ctx.Done():
		return w, ctx.Err()
	}
}

func (s *side) poke() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// caughtUp reports whether w has shown every event up to rev: its stream sent a progress
// notification at or above rev (RequestProgress is answered only when every watcher of the stream is
// synced, after all their events), or it ended, or it starts above rev and so can have none.
func (w *watchRec) caughtUp(rev int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed || w.lastProgress >= rev || w.spec.Rev > rev
}

func (w *watchRec) isClosed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.closed
}

// catchUpTimeout bounds waiting for watchers to deliver what they owe; etcd syncs unsynced watchers
// every 100 ms, so anything near this is a lost event, not slowness.
const catchUpTimeout = 30 * time.Second

// progressRetry is how often an unanswered RequestProgress is repeated: the server answers it only
// once every watcher of the stream is synced and never queues it, so clients retry (as
// clientv3-based progress waiters do).
const progressRetry = 10 * time.Millisecond

// catchUp waits until every open watch has delivered all its events up to rev.
func (s *side) catchUp(ctx context.Context, rev int64) error {
	deadline := time.NewTimer(catchUpTimeout)
	defer deadline.Stop()
	for {
		pending := map[string]bool{}
		for _, w := range s.watches {
			if !w.caughtUp(rev) {
				pending[w.spec.Stream] = true
			}
		}
		if len(pending) == 0 {
			return nil
		}
		for stream := range pending {
			if err := s.cli.RequestProgress(streamCtx(ctx, stream)); err != nil {
				return fmt.Errorf("%s: RequestProgress on stream %s: %w", s.name, stream, err)
			}
		}
		retry := time.NewTimer(progressRetry)
		select {
		case <-s.notify:
		case <-retry.C:
		case <-deadline.C:
			retry.Stop()
			return fmt.Errorf("%s: watches of streams %v did not catch up to revision %d within %v", s.name, keys(pending), rev, catchUpTimeout)
		case <-ctx.Done():
			retry.Stop()
			return ctx.Err()
		}
		retry.Stop()
	}
}

// stopWatch cancels one watch and waits for its collector.
func (s *side) stopWatch(w *watchRec) error {
	w.cancel()
	select {
	case <-w.done:
		return nil
	case <-time.After(catchUpTimeout):
		return fmt.Errorf("%s: watch %v did not close after cancel", s.name, &w.spec)
	}
}

// stopWatches cancels every watch and waits for all collectors.
func (s *side) stopWatches() error {
	var errs []error
	for _, w := range s.watches {
		errs = append(errs, s.stopWatch(w))
	}
	if s.raw != nil {
		s.raw.close()
	}
	return errors.Join(errs...)
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// expiryPoll is how often awaitExpiry asks whether a lease is gone.
const expiryPoll = 50 * time.Millisecond

// awaitExpiry waits until the server reports the lease gone (remaining TTL -1).
func (s *side) awaitExpiry(ctx context.Context, id int64) error {
	deadline := time.Now().Add(catchUpTimeout)
	for {
		resp, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(id))
		if err != nil {
			return fmt.Errorf("%s: TimeToLive while waiting for lease %x to expire: %w", s.name, id, err)
		}
		if resp.TTL == -1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: lease %x did not expire within %v", s.name, id, catchUpTimeout)
		}
		t := time.NewTimer(expiryPoll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// burstWriters is how many goroutines burst spreads its puts over.
const burstWriters = 8

// burst puts key "burst" = "b" n times from burstWriters concurrent writers and waits for them.
func (s *side) burst(ctx context.Context, n int) error {
	var wg sync.WaitGroup
	errs := make([]error, burstWriters)
	for w := 0; w < burstWriters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += burstWriters {
				if _, err := s.cli.Put(ctx, "burst", "b"); err != nil {
					errs[w] = fmt.Errorf("%s: burst put: %w", s.name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
