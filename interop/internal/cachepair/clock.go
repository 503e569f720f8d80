package cachepair

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/internal/testutil"
)

// CompactorPollPeriod is how often upstream's cache compactor (pkg/storage/cacher/compactor.go
// compactorPollPeriod) reads the storage's compacted revision; PollClock fires it on demand.
const CompactorPollPeriod = 15 * time.Second

// PollClock is the real clock, except that the timers of the cache compactor's poll
// (CompactorPollPeriod) fire only when FirePollers fires them. No other timer of either cache has
// that period.
type PollClock struct {
	clock.RealClock
	mu      sync.Mutex
	pollers []*pollTimer
}

// NewPollClock returns a PollClock with no poll timer yet.
func NewPollClock() *PollClock { return &PollClock{} }

// NewTimer implements clock.Clock.
func (c *PollClock) NewTimer(d time.Duration) clock.Timer {
	if d != CompactorPollPeriod {
		return c.RealClock.NewTimer(d)
	}
	t := &pollTimer{c: make(chan time.Time), reset: make(chan struct{}, 1)}
	c.mu.Lock()
	c.pollers = append(c.pollers, t)
	c.mu.Unlock()
	return t
}

// HasPollers says whether some component made a poll timer.
func (c *PollClock) HasPollers() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pollers) > 0
}

// FirePollers fires every poll timer and waits until its owner, having done its poll, re-arms it.
func (c *PollClock) FirePollers(ctx context.Context) error {
	c.mu.Lock()
	pollers := c.pollers
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, testutil.WaitTimeout)
	defer cancel()
	for i, p := range pollers {
		select {
		case <-p.reset:
		default:
		}
		select {
		case p.c <- c.Now():
		case <-ctx.Done():
			return fmt.Errorf("poll timer %d of %d: nobody waits on it: %w", i+1, len(pollers), ctx.Err())
		}
		select {
		case <-p.reset:
		case <-ctx.Done():
			return fmt.Errorf("poll timer %d of %d: not re-armed after it fired: %w", i+1, len(pollers), ctx.Err())
		}
	}
	return nil
}

type pollTimer struct {
	c     chan time.Time
	reset chan struct{}
}

func (t *pollTimer) C() <-chan time.Time { return t.c }
func (t *pollTimer) Stop() bool          { return true }
func (t *pollTimer) Reset(time.Duration) bool {
	select {
	case t.reset <- struct{}{}:
	default:
	}
	return true
}
