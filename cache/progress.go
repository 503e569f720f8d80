package cache

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// progressRequestPeriod is how often progress is requested while a request waits for freshness.
const progressRequestPeriod = 100 * time.Millisecond

// progressRequester asks the storage for a progress notification every progressRequestPeriod while at
// least one request waits for the cache to reach a resourceVersion: on an idle resource the
// notification is what moves the cache forward.
//
// Mirrors cacher/progress/watch_progress.go ConditionalProgressRequester.
type progressRequester struct {
	clock   clock.Clock
	request func(context.Context) error
	logger  *slog.Logger

	mu      sync.Mutex
	cond    *sync.Cond
	waiting int
	stopped bool
}

func newProgressRequester(request func(context.Context) error, c clock.Clock, logger *slog.Logger) *progressRequester {
	p := &progressRequester{clock: c, request: request, logger: logger}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// run requests progress until ctx ends.
func (p *progressRequester) run(ctx context.Context) {
	stopWatcher := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.stopped = true
		p.cond.Broadcast()
	})
	defer stopWatcher()
	timer := p.clock.NewTimer(progressRequestPeriod)
	defer timer.Stop()
	for {
		p.mu.Lock()
		for p.waiting == 0 && !p.stopped {
			p.cond.Wait()
		}
		stopped := p.stopped
		p.mu.Unlock()
		if stopped {
			return
		}
		select {
		case <-timer.C():
			p.mu.Lock()
			should := p.waiting > 0 && !p.stopped
			p.mu.Unlock()
			if !should {
				timer.Reset(0)
				continue
			}
			timer.Reset(progressRequestPeriod)
			if err := p.request(ctx); err != nil {
				p.logger.Debug("error requesting watch progress", "err", err)
			}
		case <-ctx.Done():
			return
		}
	}
}

func (p *progressRequester) add() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiting++
	p.cond.Signal()
}

func (p *progressRequester) remove() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiting--
}
