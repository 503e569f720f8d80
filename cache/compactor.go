package cache

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// compactorPollPeriod is how often the compactor reads the storage's compaction.
const compactorPollPeriod = 15 * time.Second

// compactRevisioner is a storage that knows its last compaction, as *watch.Store does.
type compactRevisioner interface {
	CompactRevision() int64
}

// compactor drops the cache's snapshots below the storage's last compaction: a list at a compacted
// revision then goes to the storage, which answers 410, instead of being answered from the cache.
// Until it polls, the cache still answers from the snapshot, as upstream's does.
//
// Mirrors cacher/compactor.go.
type compactor struct {
	clock   clock.Clock
	storage compactRevisioner
	wc      *watchCache

	mu              sync.Mutex
	compactRevision int64
}

func newCompactor(s compactRevisioner, wc *watchCache, clk clock.Clock) *compactor {
	return &compactor{clock: clk, storage: s, wc: wc}
}

// run polls every compactorPollPeriod until ctx ends.
func (c *compactor) run(ctx context.Context) {
	timer := c.clock.NewTimer(compactorPollPeriod)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
			c.compactIfNeeded()
			timer.Reset(compactorPollPeriod)
		}
	}
}

func (c *compactor) compactIfNeeded() {
	rev := c.storage.CompactRevision()
	if rev == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev <= c.compactRevision {
		return
	}
	c.wc.compact(uint64(rev))
	c.compactRevision = rev
}

func (c *compactor) revision() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.compactRevision
}
