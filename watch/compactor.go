package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"
)

// compactRevKey is the etcd key through which apiservers share their compactions: whoever compacts
// (etcd3/compact.go Compact) first writes the revision it compacts there.
const compactRevKey = "compact_rev_key"

// compactWatchRetry is how long the watch of compact_rev_key waits before it reads the key, at the
// start and again whenever a read failed or the watch ended.
const compactWatchRetry = time.Second

// ErrMalformedCompactRevision is what a compact_rev_key value that is not a revision is reported as.
// The value is skipped: the compacted revision already known stays.
var ErrMalformedCompactRevision = errors.New("failed to parse compact revision")

// compactTracker knows the newest compacted revision of etcd: those compacted through Store.Compact
// and, because every compaction by the apiserver's protocol is announced in compact_rev_key, those
// any other client made. The cache's compactor reads it to drop snapshots etcd can no longer serve.
//
// Mirrors etcd3/compact.go compactor (its runWatchLoop, which runs while ListFromCacheSnapshot is
// on, its default; with the gate off only the compactions made through Store.Compact are known).
type compactTracker struct {
	client *clientv3.Client
	clock  clock.Clock
	logger *slog.Logger

	rev atomic.Int64

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// newCompactTracker starts the watch of compact_rev_key when follow is set (ListFromCacheSnapshot,
// as upstream's NewCompactor); close stops it.
func newCompactTracker(client *clientv3.Client, clk clock.Clock, logger *slog.Logger, follow bool) *compactTracker {
	ctx, cancel := context.WithCancel(context.Background())
	c := &compactTracker{client: client, clock: clk, logger: logger, cancel: cancel, done: make(chan struct{})}
	if !follow {
		close(c.done)
		return c
	}
	go func() {
		defer close(c.done)
		c.run(ctx)
	}()
	return c
}

// close stops the watch and waits until its goroutine has returned. Calling it again does nothing.
func (c *compactTracker) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		<-c.done
	})
}

// revision is the newest compacted revision seen, 0 for none.
func (c *compactTracker) revision() int64 { return c.rev.Load() }

// update raises the revision to rev; an older or zero one changes nothing.
//
// Mirrors etcd3/compact.go compactor.UpdateCompactRevision.
func (c *compactTracker) update(rev int64) {
	for {
		cur := c.rev.Load()
		if rev <= cur || c.rev.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// run reads compact_rev_key, then watches it from the revision of that read, until ctx ends. A failed
// read, an undecodable value or a watch that ends is reported and retried after compactWatchRetry.
//
// Mirrors etcd3/compact.go compactor.runWatchLoop.
func (c *compactTracker) run(ctx context.Context) {
	for {
		select {
		case <-c.clock.After(compactWatchRetry):
		case <-ctx.Done():
			return
		}
		rev, current, err := c.read(ctx)
		if err != nil {
			c.report(ctx, err)
			continue
		}
		c.update(rev)
		for resp := range c.client.Watch(ctx, compactRevKey, clientv3.WithRev(current)) {
			rev, err := compactRevisionOf(resp)
			if err != nil {
				c.report(ctx, err)
				continue
			}
			c.update(rev)
		}
	}
}

// report logs a failure of the watch loop, as upstream logs it, unless the loop is being stopped.
func (c *compactTracker) report(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	c.logger.Error("etcd: following the compaction revision failed", "endpoints", c.client.Endpoints(), "err", err)
}

// read returns the revision compact_rev_key holds (0 when it does not exist) and etcd's revision.
//
// Mirrors etcd3/compact.go compactor.getCompactRev.
func (c *compactTracker) read(ctx context.Context) (rev, current int64, err error) {
	resp, err := c.client.Get(ctx, compactRevKey)
	if err != nil {
		return 0, 0, fmt.Errorf("get %q failed: %w", compactRevKey, err)
	}
	if len(resp.Kvs) != 0 {
		if rev, err = parseCompactRevision(resp.Kvs[0].Value); err != nil {
			return 0, 0, err
		}
	}
	if resp.Header == nil {
		return 0, 0, errors.New("empty response header")
	}
	return rev, resp.Header.Revision, nil
}

// compactRevisionOf is the revision the last write of compact_rev_key in resp holds; 0 when resp has
// no event (a progress notification).
//
// Mirrors etcd3/compact.go compactor.fromWatchResponse.
func compactRevisionOf(resp clientv3.WatchResponse) (int64, error) {
	if err := resp.Err(); err != nil {
		return 0, err
	}
	if len(resp.Events) == 0 {
		return 0, nil
	}
	return parseCompactRevision(resp.Events[len(resp.Events)-1].Kv.Value)
}

func parseCompactRevision(value []byte) (int64, error) {
	rev, err := strconv.ParseInt(string(value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q in %s: %w", ErrMalformedCompactRevision, value, compactRevKey, err)
	}
	return rev, nil
}
