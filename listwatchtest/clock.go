package listwatchtest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ErrClockBackwards is wrapped by the errors of Clock.Step and Clock.SetTime for a move back in
// time: timers already armed could not be honoured, so the clock refuses.
var ErrClockBackwards = errors.New("listwatchtest: the clock only moves forward")

// Clock is the time of an Env: the real time plus how far the test has moved it forward. Every
// time-driven part of the environment reads it: the store's lease expiry and progress
// notifications, the watch caches' bookmark, freshness and restart timers, and the HTTP API's watch
// timeouts and timestamps. Left alone it runs as the real clock does, so nothing that only waits
// for time (an etcd watch catching up from history, a cache waiting for a progress notification)
// ever hangs; Step and SetTime jump it forward, firing at once every timer whose time has come,
// as k8s.io/utils/clock/testing.FakeClock does.
//
// It implements clock.WithTicker and store.Clock. Timers and tickers keep FakeClock's semantics:
// a channel holds one value, a send to a full channel is dropped, Stop does not drain, and a ticker
// that a jump carried past several periods fires once.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
	armed  map[*clockTimer]struct{}
}

var _ clock.WithTicker = (*Clock)(nil)

// NewClock returns a clock at the real time.
func NewClock() *Clock { return &Clock{armed: map[*clockTimer]struct{}{}} }

// Now is the real time moved forward by every Step so far.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked()
}

func (c *Clock) nowLocked() time.Time { return time.Now().Add(c.offset) }

// Since is Now().Sub(t).
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Step moves the clock forward by d and fires every timer and ticker whose time has come. A negative
// d is refused with an error matching ErrClockBackwards.
func (c *Clock) Step(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: Step(%v)", ErrClockBackwards, d)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
	now := c.nowLocked()
	for t := range c.armed {
		t.rearmLocked(now)
	}
	return nil
}

// SetTime moves the clock forward to t, as Step(t.Sub(Now())). A t before Now is refused with an
// error matching ErrClockBackwards.
func (c *Clock) SetTime(t time.Time) error {
	c.mu.Lock()
	d := t.Sub(c.nowLocked())
	c.mu.Unlock()
	if d < 0 {
		return fmt.Errorf("%w: SetTime(%v) is %v before now", ErrClockBackwards, t, -d)
	}
	return c.Step(d)
}

// After returns the channel of a new timer.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// Sleep waits until the clock has moved d forward, by itself or by Step.
func (c *Clock) Sleep(d time.Duration) { <-c.After(d) }

// NewTimer returns a timer that fires once the clock has moved d forward.
func (c *Clock) NewTimer(d time.Duration) clock.Timer { return c.newTimer(d, 0) }

// NewTicker returns a ticker that fires every d of the clock's time. A non-positive d fires once,
// as FakeClock's ticker does.
func (c *Clock) NewTicker(d time.Duration) clock.Ticker { return clockTicker{c.newTimer(d, max(d, 0))} }

// clockTicker is a clockTimer with a period, behind clock.Ticker's Stop.
type clockTicker struct{ t *clockTimer }

func (t clockTicker) C() <-chan time.Time { return t.t.C() }
func (t clockTicker) Stop()               { t.t.Stop() }

// Tick returns the channel of a ticker that is never stopped, as time.Tick.
func (c *Clock) Tick(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return c.NewTicker(d).C()
}

func (c *Clock) newTimer(d, period time.Duration) *clockTimer {
	t := &clockTimer{clock: c, ch: make(chan time.Time, 1), period: period}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.nowLocked()
	t.deadline = now.Add(d)
	c.armed[t] = struct{}{}
	t.rearmLocked(now)
	return t
}

// clockTimer is a timer or (with a period) a ticker of a Clock. A real timer wakes it when the real
// time reaches its deadline; Step re-evaluates it at once.
type clockTimer struct {
	clock    *Clock
	ch       chan time.Time
	period   time.Duration
	deadline time.Time   // guarded by clock.mu
	real     *time.Timer // guarded by clock.mu; nil while not waiting
	gen      uint64      // guarded by clock.mu; tells a stale real timer from the current one
}

// rearmLocked fires the timer if its deadline has come, and otherwise (or, for a ticker, after
// firing) waits for the real time of the next deadline.
func (t *clockTimer) rearmLocked(now time.Time) {
	if t.real != nil {
		t.real.Stop()
		t.real = nil
	}
	t.gen++
	if !now.Before(t.deadline) {
		select {
		case t.ch <- now:
		default:
		}
		if t.period == 0 {
			delete(t.clock.armed, t)
			return
		}
		for !now.Before(t.deadline) {
			t.deadline = t.deadline.Add(t.period)
		}
	}
	gen := t.gen
	t.real = time.AfterFunc(t.deadline.Sub(now), func() { t.wake(gen) })
}

// wake runs when the real time reached the deadline the timer waited for.
func (t *clockTimer) wake(gen uint64) {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.gen != gen {
		return // stopped, reset or re-evaluated since
	}
	t.real = nil
	if _, ok := c.armed[t]; ok {
		t.rearmLocked(c.nowLocked())
	}
}

func (t *clockTimer) C() <-chan time.Time { return t.ch }

// Stop disarms the timer and reports whether it was armed. It does not drain the channel.
func (t *clockTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	_, armed := c.armed[t]
	delete(c.armed, t)
	if t.real != nil {
		t.real.Stop()
		t.real = nil
	}
	t.gen++
	return armed
}

// Reset re-arms the timer to fire d from now and reports whether it was armed.
func (t *clockTimer) Reset(d time.Duration) bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	_, armed := c.armed[t]
	now := c.nowLocked()
	t.deadline = now.Add(d)
	c.armed[t] = struct{}{}
	t.rearmLocked(now)
	return armed
}
