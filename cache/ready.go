package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// readyState is the state of the cache: Pending ↔ Ready → Stopped, and Pending → Stopped.
type readyState int

const (
	statePending readyState = iota
	stateReady
	stateStopped
)

// ErrStopped is the cause of every refusal once the Cacher has been stopped.
var ErrStopped = errors.New("apiserver cacher is stopped")

// ready is the cache's readiness: a three-state condition that blocks waiters until Ready or Stopped.
// generation counts the transitions to Ready, so a watch can tell that the cache was re-initialized
// while it was being set up.
//
// Mirrors cacher/ready.go.
type ready struct {
	mu          sync.RWMutex
	state       readyState
	lastErr     error
	generation  int
	restartLock sync.Mutex // guards replacing waitCh on Ready → Pending
	waitCh      chan struct{}

	clock           clock.PassiveClock
	lastStateChange time.Time
}

func newReady(c clock.PassiveClock) *ready {
	return &ready{waitCh: make(chan struct{}), state: statePending, clock: c, lastStateChange: c.Now()}
}

func (r *ready) done() chan struct{} {
	r.restartLock.Lock()
	defer r.restartLock.Unlock()
	return r.waitCh
}

// wait blocks until Ready (nil) or Stopped (an error), or ctx ends.
func (r *ready) wait(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.done():
		}
		r.mu.RLock()
		if r.state == statePending {
			// A quick Pending → Ready → Pending let us through a channel that is already replaced.
			r.mu.RUnlock()
			continue
		}
		_, err := r.generationLocked()
		r.mu.RUnlock()
		return err
	}
}

// check returns the generation, the time since the last state change, and an error unless Ready.
func (r *ready) check() (int, time.Duration, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	g, err := r.generationLocked()
	return g, r.clock.Since(r.lastStateChange), err
}

func (r *ready) generationLocked() (int, error) {
	switch r.state {
	case statePending:
		if r.lastErr == nil {
			return 0, errors.New("storage is (re)initializing")
		}
		return 0, fmt.Errorf("storage is (re)initializing: %w", r.lastErr)
	case stateReady:
		return r.generation, nil
	default:
		return 0, ErrStopped
	}
}

func (r *ready) setReady()          { r.set(true, nil) }
func (r *ready) setError(err error) { r.set(false, err) }

// set moves Pending → Ready (ok) or Ready → Pending (!ok); nothing leaves Stopped.
func (r *ready) set(ok bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == stateStopped {
		return
	}
	r.lastErr = err
	if ok && r.state == statePending {
		r.state = stateReady
		r.generation++
		r.lastStateChange = r.clock.Now()
		select {
		case <-r.waitCh:
		default:
			close(r.waitCh)
		}
	} else if !ok && r.state == stateReady {
		select {
		case <-r.waitCh:
			r.restartLock.Lock()
			r.waitCh = make(chan struct{})
			r.restartLock.Unlock()
		default:
		}
		r.state = statePending
		r.lastStateChange = r.clock.Now()
	}
}

// stop moves to Stopped for good and releases every waiter.
func (r *ready) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != stateStopped {
		r.state = stateStopped
		r.lastStateChange = r.clock.Now()
	}
	select {
	case <-r.waitCh:
	default:
		close(r.waitCh)
	}
}
