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

	// ticking state, guarded by mu
	nextSync  time.Time
	nextLease time.Time
	rnd       *rand.Rand

	kick    chan struct{} // wakes the driver to recompute its deadline
	stop    chan struct{}
	stopped chan struct{}
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
// is due: it retries responses that full streams refused, catches up unsynced watchers from history
// (repeating at once while a pass makes progress, as etcd's syncWatchersLoop), revokes expired leases,
// and sends due progress notifications. With Options.ManualTick the caller must call it; otherwise the
// store's goroutine does.
func (s *Store) Tick() time.Duration {
	now := s.opts.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return time.Hour
	}
	for s.moveVictimsLocked() != 0 {
	}
	if !now.Before(s.nextSync) {
		for {
			before := s.watch.unsynced.size()
			after := s.syncWatchersLocked()
			s.nextSync = now.Add(s.opts.SyncInterval)
			if after == 0 || after >= before {
				break
			}
			// More work pending: etcd waits only as long as the pass took, which on the store's clock
			// is no time at all. Victims get their turn between passes.
			for s.moveVictimsLocked() != 0 {
			}
		}
	}
	if !now.Before(s.nextLease) {
		s.revokeExpiredLocked(now)
		s.nextLease = now.Add(s.opts.LeaseCheckInterval)
	}
	s.progressTickLocked(now)

	next := s.nextSync
	if s.nextLease.Before(next) {
		next = s.nextLease
	}
	if t, ok := s.watch.nextProgressTick(); ok && t.Before(next) {
		next = t
	}
	d := next.Sub(now)
	if len(s.watch.victims) > 0 && d > s.opts.VictimRetryInterval {
		d = s.opts.VictimRetryInterval
	}
	if d < 0 {
		d = 0
	}
	return d
}

// jitter returns up to 10% of d, as etcd's GetProgressReportInterval adds per stream.
func (s *Store) jitter(d time.Duration) time.Duration {
	if d/10 <= 0 {
		return 0
	}
	return time.Duration(s.rnd.Int64N(int64(d / 10)))
}
