package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/internal/runplan"
)

// Kind names a workload.
type Kind string

// The workloads; doc.go describes each.
const (
	K8s  Kind = "k8s"
	Etcd Kind = "etcd"
)

// Kinds lists the workloads.
var Kinds = []Kind{K8s, Etcd}

// Errors of this package; match them with errors.Is.
var (
	// ErrInvalidConfig: a Config field is out of range (the error names it).
	ErrInvalidConfig = errors.New("workload: invalid config")
	// ErrUnknownKind: ParseKind was given a name that is not a workload.
	ErrUnknownKind = errors.New("workload: unknown workload")
)

// ParseKind returns the workload named s.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("%w %q (want one of %v)", ErrUnknownKind, s, Kinds)
}

// Defaults of Config.
const (
	DefaultClients        = 4
	DefaultWatchers       = 4
	DefaultRequestTimeout = 10 * time.Second
)

// Config describes a run.
type Config struct {
	Kind Kind
	// Seed seeds every client's, watcher's and compactor's choices.
	Seed uint64
	// Clients issue requests concurrently, each one at a time; at least one.
	Clients int
	// Watchers keep watches open; zero or more.
	Watchers int
	// Ops bounds the requests the clients issue, split evenly among them (the watchers' lists, the
	// compactors and the final read are not counted); 0: no bound.
	Ops int64
	// Duration bounds the run; 0: no bound. Without Ops or Duration, Run goes on until ctx ends.
	Duration time.Duration
	// CompactEvery is how many revisions the store goes between compactions; 0: never compact.
	CompactEvery int64
	// RequestTimeout bounds each request; a request that runs out has an unknown outcome.
	// Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Prefix, if set, is where the workload's keys go: the history is an open one (etcd.Recorder
	// Begin), the store may be one others use, and it need not be fresh. Without it the store must be
	// fresh and nobody else's.
	Prefix string
	// Avoid are the features the workload does without: those the store refuses or answers
	// differently (ProbeCapabilities), or that a run does not want (RequestProgress, under the
	// apiserver's gating). Everything else it uses, known upstream bugs notwithstanding.
	Avoid Features
	// Clock times the run. Default: the real clock.
	Clock clock.WithTicker
	// Stats, if set, is updated while the run goes.
	Stats *Stats
}

// Validate checks the config; its errors wrap ErrInvalidConfig.
func (c Config) Validate() error {
	if _, err := ParseKind(string(c.Kind)); err != nil {
		return check.Invalid(ErrInvalidConfig, "kind: %v", err)
	}
	load := check.Load{Clients: c.Clients, Watchers: c.Watchers, Ops: c.Ops, Duration: c.Duration, RequestTimeout: c.RequestTimeout}
	if err := load.Validate(ErrInvalidConfig); err != nil {
		return err
	}
	if c.CompactEvery < 0 {
		return check.Invalid(ErrInvalidConfig, "compact-every %d: must not be negative", c.CompactEvery)
	}
	return nil
}

// Timing of the run's housekeeping.
const (
	progressRequestInterval = 250 * time.Millisecond
	syncPollInterval        = 20 * time.Millisecond
	// syncTimeout bounds the wait for the watches at the end.
	syncTimeout = 10 * time.Second
	// syncIdle: without RequestProgress, the watches are taken to be done once none has received
	// an event for this long (progress notifications come on their own period).
	syncIdle = 500 * time.Millisecond
	// retryBackoff spaces a watcher's attempts after a failed list or a refused watch.
	retryBackoff = 50 * time.Millisecond
)

// Roles seed the generators: each (role, index) gets its own stream.
const (
	roleClient uint64 = iota + 1
	roleWatcher
	roleCompactor
)

// runner is one run: what its clients, watchers and compactors share.
type runner struct {
	cfg   Config
	rec   *etcd.Recorder
	stats *Stats
	clock clock.WithTicker

	// reqCtx is never canceled: requests end by their own timeout, so stopping does not turn
	// the request in flight into an unknown outcome.
	reqCtx context.Context
	// stop is closed when the clients must stop: Ops done, Duration over or ctx ended.
	stop chan struct{}
	// watchCtx ends the watches, once the end has been synced.
	watchCtx context.Context
	// ending is set once the clients are done: watchers then stop ending their watches on purpose.
	ending atomic.Bool

	rev   atomic.Int64 // the highest header revision seen
	wakes []chan struct{}

	// floor is the lowest revision the workload reads or watches at: the history's start revision
	// (1 for a closed one)
	floor int64

	// watchersUp is closed once every watcher's first watch was created or its first attempt
	// ended (watcherUp): the clients start writing then, so that the watches see the traffic
	// whatever the schedule (a run of a few thousand requests can end before a watcher has listed).
	watchersUp chan struct{}
	up         []sync.Once
	upLeft     atomic.Int64

	mu        sync.Mutex
	open      map[*watchState]struct{}
	lastEvent time.Time // when a watch last received events
}

// Run runs the workload cfg describes through rec: clients, watchers and compactors, until Ops
// requests are done, Duration is over or ctx ends; then it syncs the watches to the final
// revision and closes them. It returns what was done, once every goroutine it started has ended.
// It fails only for an invalid cfg.
func Run(ctx context.Context, rec *etcd.Recorder, cfg Config) (Snapshot, error) {
	if err := cfg.Validate(); err != nil {
		return Snapshot{}, err
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Stats == nil {
		cfg.Stats = &Stats{}
	}
	watchCtx, endWatches := context.WithCancel(context.WithoutCancel(ctx))
	defer endWatches()
	r := &runner{cfg: cfg, rec: rec, stats: cfg.Stats, clock: cfg.Clock,
		reqCtx: context.WithoutCancel(ctx), stop: make(chan struct{}), watchCtx: watchCtx,
		open: map[*watchState]struct{}{}, lastEvent: cfg.Clock.Now()}
	r.rev.Store(1)
	r.floor = 1
	if cfg.Prefix != "" {
		// like every request, not canceled by ctx: a run stopped at once still has its start
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.RequestTimeout)
		err := rec.Begin(bctx, etcd.Bytes(cfg.Prefix))
		cancel()
		if err != nil {
			return Snapshot{}, err
		}
		start := rec.History().StartRevision
		r.rev.Store(start)
		r.floor = start
	}

	var clients, compactors, watchers sync.WaitGroup
	var newClient func(i int, rng *rand.Rand, budget int64) func()
	var newWatcher func(i int, rng *rand.Rand) func()
	var newCompactors []func(rng *rand.Rand, wake <-chan struct{}) func()
	switch cfg.Kind {
	case K8s:
		newClient, newWatcher = r.k8sClient, r.k8sWatcher
		newCompactors = []func(*rand.Rand, <-chan struct{}) func(){r.k8sCompactor, r.k8sCompactor}
	case Etcd:
		newClient, newWatcher = r.etcdClient, r.etcdWatcher
		newCompactors = []func(*rand.Rand, <-chan struct{}) func(){r.etcdCompactor}
	}
	if cfg.CompactEvery == 0 || cfg.Avoid.Has(FeatCompaction) {
		newCompactors = nil
	}

	// every goroutine reads wakes (through seeRevision): it is complete before the first starts
	for range newCompactors {
		r.wakes = append(r.wakes, make(chan struct{}, 1))
	}
	for i, nc := range newCompactors {
		compactors.Go(nc(runplan.Rand(cfg.Seed, roleCompactor, i), r.wakes[i]))
	}
	r.startGate(cfg.Watchers)
	for i := range cfg.Watchers {
		watcher := newWatcher(i, runplan.Rand(cfg.Seed, roleWatcher, i))
		watchers.Go(func() {
			defer r.watcherUp(i)
			watcher()
		})
	}
	for i := range cfg.Clients {
		client := newClient(i, runplan.Rand(cfg.Seed, roleClient, i), runplan.Share(cfg.Ops, cfg.Clients, i))
		clients.Go(func() {
			select {
			case <-r.watchersUp:
			case <-r.stop:
			}
			client()
		})
	}

	// The clients end by themselves with their budget; stop tells them to end sooner.
	clientsDone := make(chan struct{})
	var stopper sync.WaitGroup
	stopper.Go(func() {
		var timeout <-chan time.Time
		if cfg.Duration > 0 {
			timeout = r.clock.After(cfg.Duration)
		}
		select {
		case <-ctx.Done():
		case <-timeout:
		case <-clientsDone:
		}
		close(r.stop)
	})
	progressDone := make(chan struct{})
	var progress sync.WaitGroup
	if !cfg.Avoid.Has(FeatRequestProgress) && cfg.Watchers > 0 {
		progress.Go(func() { r.requestProgressLoop(progressDone) })
	}

	clients.Wait()
	close(clientsDone)
	stopper.Wait()
	compactors.Wait()
	r.ending.Store(true)
	r.syncWatches(r.finalRevision())
	close(progressDone)
	progress.Wait()
	endWatches()
	watchers.Wait()
	return r.stats.Snapshot(), nil
}

// stopped reports whether the clients must stop.
func (r *runner) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// do sends one request through the recorder and counts it under name.
func (r *runner) do(name string, req etcd.Request) (*etcd.Response, error) {
	ctx, cancel := context.WithTimeout(r.reqCtx, r.cfg.RequestTimeout)
	defer cancel()
	resp, err := r.rec.Do(ctx, req)
	r.stats.countOp(name, outcomeOf(resp, err))
	if resp != nil && req.LeaseKeepAlive == nil {
		r.seeRevision(resp.Revision)
	}
	return resp, err
}

func outcomeOf(resp *etcd.Response, err error) Outcome {
	switch {
	case err != nil && etcd.IsDefiniteError(rpctypes.ErrorDesc(err)):
		return Failed
	case err != nil:
		return Unknown
	case resp.Txn != nil && !resp.Txn.Succeeded:
		return Conflict
	}
	return OK
}

// seeRevision raises the highest revision seen and wakes the compactors when it rises.
func (r *runner) seeRevision(rev int64) {
	for {
		cur := r.rev.Load()
		if rev <= cur {
			return
		}
		if r.rev.CompareAndSwap(cur, rev) {
			break
		}
	}
	r.stats.revision.Store(r.rev.Load())
	for _, w := range r.wakes {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// waitRevision blocks until the highest revision seen reaches rev; false when the clients stop
// first.
func (r *runner) waitRevision(rev int64, wake <-chan struct{}) bool {
	for r.rev.Load() < rev {
		select {
		case <-wake:
		case <-r.stop:
			return false
		}
	}
	return !r.stopped()
}

// sleep waits d on the run's clock, or less if the watches end.
func (r *runner) sleep(d time.Duration) {
	select {
	case <-r.clock.After(d):
	case <-r.watchCtx.Done():
	}
}

func (r *runner) requestProgressLoop(done <-chan struct{}) {
	t := r.clock.NewTicker(progressRequestInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C():
			r.requestProgress()
		}
	}
}

func (r *runner) requestProgress() {
	ctx, cancel := context.WithTimeout(r.reqCtx, r.cfg.RequestTimeout)
	defer cancel()
	_ = r.rec.RequestProgress(ctx)
}

// finalRevision reads the store's revision once the clients are done (a recorded read, so the
// history shows it), falling back to the highest revision seen.
func (r *runner) finalRevision() int64 {
	key := r.compactRevKey()
	if r.cfg.Kind == Etcd {
		key = r.etcdKey(0)
	}
	if resp, err := r.do("final-read", etcd.Request{Range: &etcd.RangeRequest{Key: key}}); err == nil {
		return max(resp.Revision, r.rev.Load())
	}
	return r.rev.Load()
}

// syncWatches waits until every open watch has seen revision final (by an event or a progress
// notification), or, without RequestProgress, until the watches go idle; syncTimeout bounds it.
func (r *runner) syncWatches(final int64) {
	deadline := r.clock.Now().Add(syncTimeout)
	for {
		r.mu.Lock()
		behind := 0
		for ws := range r.open {
			if ws.last < final {
				behind++
			}
		}
		idle := r.clock.Since(r.lastEvent) >= syncIdle
		r.mu.Unlock()
		noProgress := r.cfg.Avoid.Has(FeatRequestProgress)
		if behind == 0 || r.clock.Now().After(deadline) || (noProgress && idle) {
			return
		}
		if !noProgress {
			r.requestProgress()
		}
		select {
		case <-r.clock.After(syncPollInterval):
		case <-r.watchCtx.Done():
			return
		}
	}
}

// watchState is what a running watch has reached, for syncWatches.
type watchState struct {
	last int64 // every event up to last has been received (guarded by runner.mu)
}

// watchResult is how a watch ended.
type watchResult struct {
	// last: every event up to last was received; resuming from last+1 misses nothing.
	last int64
	// compacted is the compaction revision the watch was canceled with, if it was.
	compacted int64
	// refused is set when the server canceled the watch for another reason.
	refused bool
}

// watch runs one recorded watch of watcher until the server cancels it, the run ends, or (unless the run is
// ending) it has received at least endAfter events (0: no such limit).
func (r *runner) watch(watcher int, req etcd.WatchRequest, endAfter int) watchResult {
	defer r.watcherUp(watcher)
	ctx, cancel := context.WithCancel(r.watchCtx)
	defer cancel()
	ws := &watchState{last: max(0, req.StartRevision-1)}
	r.mu.Lock()
	r.open[ws] = struct{}{}
	r.mu.Unlock()
	r.stats.watches.Add(1)
	var res watchResult
	events := 0
	_ = r.rec.Watch(ctx, req, func(resp etcd.WatchResponse) {
		r.mu.Lock()
		if len(resp.Events) > 0 {
			r.lastEvent = r.clock.Now()
		}
		switch {
		case resp.IsCompacted():
			res.compacted = resp.CompactRevision
		case resp.Canceled:
			res.refused = true
		case resp.Created:
			r.watcherUp(watcher)
			if req.StartRevision == 0 {
				ws.last = resp.Revision
			}
		case resp.IsProgressNotify():
			ws.last = max(ws.last, resp.Revision)
		default:
			ws.last = max(ws.last, resp.Events[len(resp.Events)-1].Kv.ModRevision)
		}
		r.mu.Unlock()
		switch {
		case resp.IsCompacted():
			r.stats.compacted.Add(1)
		case resp.IsProgressNotify():
			r.stats.progress.Add(1)
		}
		events += len(resp.Events)
		r.stats.events.Add(int64(len(resp.Events)))
		if endAfter > 0 && events >= endAfter && !r.ending.Load() {
			cancel()
		}
	})
	r.mu.Lock()
	delete(r.open, ws)
	res.last = ws.last
	r.mu.Unlock()
	return res
}

// startGate makes watchersUp wait for n watchers.
func (r *runner) startGate(n int) {
	r.watchersUp = make(chan struct{})
	r.up = make([]sync.Once, n)
	r.upLeft.Store(int64(n))
	if n == 0 {
		close(r.watchersUp)
	}
}

// watcherUp says that watcher i has a watch created, or has ended an attempt at one; the last of
// the watchers to say so opens the start gate.
func (r *runner) watcherUp(i int) {
	r.up[i].Do(func() {
		if r.upLeft.Add(-1) == 0 {
			close(r.watchersUp)
		}
	})
}

// watchEnded reports whether the watches must end.
func (r *runner) watchEnded() bool { return r.watchCtx.Err() != nil }
