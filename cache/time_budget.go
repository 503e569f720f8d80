package cache

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

const (
	// budgetRefreshPerSecond is how much blocking time the dispatcher regains per second.
	budgetRefreshPerSecond = 50 * time.Millisecond
	// maxBudget caps the blocking time the dispatcher may spend on one event.
	maxBudget = 100 * time.Millisecond
)

// timeBudget is the time the dispatcher may spend blocked on slow watchers. It starts empty, refills
// at budgetRefreshPerSecond up to maxBudget, is taken whole before a blocking phase, and what the
// phase did not use is given back.
//
// Mirrors cacher/time_budget.go timeBudgetImpl.
type timeBudget struct {
	mu      sync.Mutex
	clock   clock.PassiveClock
	budget  time.Duration
	max     time.Duration
	refresh time.Duration
	last    time.Time
}

func newTimeBudget(c clock.PassiveClock) *timeBudget {
	return &timeBudget{clock: c, max: maxBudget, refresh: budgetRefreshPerSecond, last: c.Now()}
}

// takeAvailable returns the whole accumulated budget and leaves it empty.
func (t *timeBudget) takeAvailable() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	acc := now.Sub(t.last).Seconds() * t.refresh.Seconds()
	if acc < 0 {
		acc = 0
	}
	if t.budget += time.Duration(acc * 1e9); t.budget > t.max {
		t.budget = t.max
	}
	t.last = now
	result := t.budget
	t.budget = 0
	return result
}

// returnUnused gives back the part of a taken budget that was not spent.
func (t *timeBudget) returnUnused(unused time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if unused < 0 {
		return
	}
	if t.budget += unused; t.budget > t.max {
		t.budget = t.max
	}
}
