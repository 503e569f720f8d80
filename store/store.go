package store

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/listwatch/listwatch/etcdrules"
)

// Clock is the time source the store reads for lease expiry and for its periodic work. Both
// k8s.io/utils/clock.RealClock and its testing.FakeClock satisfy it.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Defaults, as etcd v3.7 has them.
const (
	DefaultMaxTxnOps              = etcdrules.DefaultMaxTxnOps
	DefaultMaxRequestBytes        = etcdrules.DefaultMaxRequestBytes
	DefaultProgressNotifyInterval = 10 * time.Minute
	MinProgressNotifyInterval     = 100 * time.Millisecond
	DefaultSyncInterval           = 100 * time.Millisecond // mvcc watchResyncPeriod
	DefaultVictimRetryInterval    = 10 * time.Millisecond
	DefaultLeaseCheckInterval     = 500 * time.Millisecond // lessor runLoop
	DefaultMinLeaseTTL            = 2                      // seconds: ceil(3*electionTicks/2 * heartbeat) for 10 ticks of 100 ms
	MaxLeaseTTL                   = etcdrules.MaxLeaseTTL
	watchBatchMaxRevs             = 1000
	maxWatchersPerSync            = 512
	chanBufLen                    = 128
	ctrlStreamBufLen              = 16  // v3rpc watch.go ctrlStreamBufLen
	leaseRevokePerPass            = 500 // defaultLeaseRevokeRate / 2
)

// Options configure a Store. The zero value gives etcd's defaults on the real clock.
type Options struct {
	// Clock is read for lease expiry and drives the periodic work. Default: the real clock.
	Clock Clock
	// ManualTick starts no goroutine: the caller drives the periodic work (catching up unsynced
	// watchers, retrying slow ones, expiring leases, progress notifications) by calling Tick, as
	// raft.RawNode is driven by its caller. Tests use it with a fake clock to step the store exactly.
	ManualTick bool
	// ProgressNotifyInterval is the period of progress notifications for watchers that asked for them
	// (etcd's --experimental-watch-progress-notify-interval); up to 10% jitter is added per stream.
	// Default 10 minutes, floor 100 ms.
	ProgressNotifyInterval time.Duration
	// SyncInterval is how often unsynced watchers are caught up from history. Default 100 ms.
	SyncInterval time.Duration
	// VictimRetryInterval is how often responses that a full stream refused are retried. Default 10 ms.
	VictimRetryInterval time.Duration
	// LeaseCheckInterval is how often expired leases are revoked. Default 500 ms.
	LeaseCheckInterval time.Duration
	// MinLeaseTTL in seconds; shorter grants are raised to it. Default 2.
	MinLeaseTTL int64
	// MaxTxnOps bounds the compares and the ops of each txn branch. Default 128.
	MaxTxnOps int
	// MaxRequestBytes bounds the encoded size of a write request. Default 1.5 MiB.
	MaxRequestBytes int
	// MemberID seeds lease IDs chosen by the store, as etcd's request ID generator.
	MemberID uint64
	// Seed seeds the progress-notify jitter. Default: random.
	Seed uint64
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.ProgressNotifyInterval <= 0 {
		o.ProgressNotifyInterval = DefaultProgressNotifyInterval
	}
	if o.ProgressNotifyInterval < MinProgressNotifyInterval {
		o.ProgressNotifyInterval = MinProgressNotifyInterval
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.VictimRetryInterval <= 0 {
		o.VictimRetryInterval = DefaultVictimRetryInterval
	}
	if o.LeaseCheckInterval <= 0 {
		o.LeaseCheckInterval = DefaultLeaseCheckInterval
	}
	if o.MinLeaseTTL <= 0 {
		o.MinLeaseTTL = DefaultMinLeaseTTL
	}
	if o.MaxTxnOps <= 0 {
		o.MaxTxnOps = DefaultMaxTxnOps
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	return o
}

// Store is a revisioned key-value store with etcd v3 semantics. All methods are safe for concurrent
// use and linearizable: each takes effect atomically at one point between its call and its return.
type Store struct {
	opts Options

	mu         sync.RWMutex
	currentRev int64
	compactRev int64 // -1 until the first compaction
	idx        *index
	log        revLog
	leases     leases
	watch      watchState
	arena      arena // events for watchers, carved under the write lock
	closed     bool
	// dbInUse and dbSize are the predicted database size in use and its high-water mark since the
	// last Defragment (maintenance.go)
	dbInUse, dbSize int64
	stats           counters
	// hashes are the HashKV answers compactions kept, by revision (maintenance.go)
	hashes []KVHash
	// subs holds the sub-revisions of records that compaction left after dropping records of the
	// same revision before them (maintenance.go eachRecord)
	subs map[*rec]int64

	// ticking state, guarded by mu
	nextSync  time.Time
	nextLease time.Time
	rnd       *rand.Rand

	kick    chan struct{} // wakes the driver to recompute its deadline
	stop    chan struct{}
	stopped chan struct{}

	// afterStep, if set, runs after each step of the periodic work, with the lock free. Only
	// tests set it (export_test.go), before the store does any periodic work.
	afterStep func()
}

// New returns an empty store: current revision 1, compact revision -1. Unless opts.ManualTick is set it
// starts one goroutine that does the store's periodic work; Close stops it.
func New(opts Options) *Store {
	opts = opts.withDefaults()
	now := opts.Clock.Now()
	s := &Store{
		opts:       opts,
		currentRev: 1,
		compactRev: -1,
		dbInUse:    BaseDBBytes,
		dbSize:     BaseDBBytes,
		idx:        newIndex(),
		leases:     newLeases(opts.MemberID, now),
		watch:      newWatchState(),
		nextSync:   now.Add(opts.SyncInterval),
		nextLease:  now.Add(opts.LeaseCheckInterval),
		rnd:        rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		kick:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		stopped:    make(chan struct{}),
	}
	if opts.ManualTick {
		close(s.stopped)
	} else {
		go s.drive()
	}
	return s
}

// Close stops the store's goroutine and closes every watch stream's channel. Calls after Close fail
// with ErrClosed. Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.stopped
		return nil
	}
	s.closed = true
	streams := s.watch.allStreams()
	s.mu.Unlock()
	close(s.stop)
	<-s.stopped
	for _, ws := range streams {
		ws.Close()
	}
	return nil
}

// Rev returns the current revision.
func (s *Store) Rev() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.currentRev
}

// CompactRevision returns the revision of the last compaction, or -1 if there was none.
func (s *Store) CompactRevision() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.compactRev
}

// wake asks the driver to recompute its next deadline.
func (s *Store) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// drive is the store's one goroutine: it runs Tick whenever work is due.
func (s *Store) drive() {
	defer close(s.stopped)
	for {
		next := s.Tick()
		select {
		case <-s.opts.Clock.After(next):
		case <-s.kick:
		case <-s.stop:
			return
		}
	}
}

// Tick does the periodic work that is due at the clock's current time and returns how long until more
// is due: it hands waiting created and canceled answers to streams that have room again, retries
// responses that full streams refused, catches up unsynced watchers from history (repeating while a
// pass makes progress, as etcd's syncWatchersLoop), revokes expired leases, and sends due progress
// notifications. With Options.ManualTick the caller must call it; otherwise the store's goroutine
// does.
//
// Like etcd's loops, Tick holds the store's lock for one step at a time — a catch-up pass of at
// most 512 watchers, one batch of victims, one lease revocation, one stream's progress tick — and
// releases it in between, so a request waits for at most one step. When a catch-up pass took time
// on the store's clock and more remains, Tick leaves the next pass for as long again, as etcd
// yields the time a pass took to other requests; on a fake clock, where a pass takes none, it goes
// on at once.
func (s *Store) Tick() time.Duration {
	now := s.opts.Clock.Now()
	if s.isClosed() {
		return time.Hour
	}
	s.flushControlAnswers()
	s.moveVictims()
	if s.due(now, &s.nextSync) {
		s.syncPasses(now)
	}
	if s.due(now, &s.nextLease) {
		s.revokeExpired(now)
	}
	s.progressTicks(now)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return time.Hour
	}
	next := s.nextSync
	if s.nextLease.Before(next) {
		next = s.nextLease
	}
	if t, ok := s.watch.nextProgressTick(); ok && t.Before(next) {
		next = t
	}
	d := next.Sub(now)
	if (len(s.watch.victims) > 0 || len(s.watch.ctrlPending) > 0) && d > s.opts.VictimRetryInterval {
		d = s.opts.VictimRetryInterval
	}
	if d < 0 {
		d = 0
	}
	return d
}

func (s *Store) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

// due reports whether the deadline *at (nextSync or nextLease) has come.
func (s *Store) due(now time.Time, at *time.Time) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return !s.closed && !now.Before(*at)
}

// step runs f under the store's lock as one step of the periodic work, unless the store is closed,
// and reports whether it ran. Requests take the lock between steps.
func (s *Store) step(f func()) bool {
	s.mu.Lock()
	ran := !s.closed
	if ran {
		f()
	}
	s.mu.Unlock()
	if s.afterStep != nil {
		s.afterStep()
	}
	return ran
}

// flushControlAnswers gives each stream with waiting control answers the room its reader made, one
// stream a step.
func (s *Store) flushControlAnswers() {
	s.mu.RLock()
	streams := make([]*WatchStream, 0, len(s.watch.ctrlPending))
	for ws := range s.watch.ctrlPending {
		streams = append(streams, ws)
	}
	s.mu.RUnlock()
	for _, ws := range streams {
		s.step(ws.flushCtrlLocked)
	}
}

// moveVictims retries the victim batches, one a step, round after round while a round delivers
// something (watchable_store.go syncVictimsLoop).
func (s *Store) moveVictims() {
	for {
		s.mu.RLock()
		n := len(s.watch.victims)
		s.mu.RUnlock()
		moved := 0
		for range n {
			s.step(func() { moved += s.moveVictimBatchLocked() })
		}
		if moved == 0 {
			return
		}
	}
}

// syncPasses catches up unsynced watchers, one pass a step, while passes make progress
// (watchable_store.go syncWatchersLoop).
func (s *Store) syncPasses(now time.Time) {
	for {
		start := s.opts.Clock.Now()
		var before, after int
		if !s.step(func() {
			before = s.watch.unsynced.size()
			after = s.syncWatchersLocked()
			s.nextSync = now.Add(s.opts.SyncInterval)
		}) {
			return
		}
		if after == 0 || after >= before {
			return
		}
		// More work pending: yield as long as the pass took, then go on.
		end := s.opts.Clock.Now()
		if took := end.Sub(start); took > 0 {
			s.mu.Lock()
			s.nextSync = end.Add(took)
			s.mu.Unlock()
			return
		}
		s.moveVictims()
	}
}

// progressTicks runs the progress ticker of each stream that is due, one stream a step (v3rpc runs
// one ticker per stream).
func (s *Store) progressTicks(now time.Time) {
	s.mu.RLock()
	var due []*WatchStream
	for ws := range s.watch.progressStreams {
		if !now.Before(ws.nextProgress) {
			due = append(due, ws)
		}
	}
	s.mu.RUnlock()
	for _, ws := range due {
		s.step(func() {
			if _, ok := s.watch.progressStreams[ws]; ok {
				s.progressTickLocked(ws, now)
			}
		})
	}
}

// jitter returns up to 10% of d, as etcd's GetProgressReportInterval adds per stream.
func (s *Store) jitter(d time.Duration) time.Duration {
	if d/10 <= 0 {
		return 0
	}
	return time.Duration(s.rnd.Int64N(int64(d / 10)))
}
