package watch

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"
)

// DefaultCompactionInterval is kube-apiserver's --etcd-compaction-interval default.
const DefaultCompactionInterval = 5 * time.Minute

// Compactor is the apiserver's compactor of an etcd endpoint: every interval it takes part in the
// compact_rev_key protocol (Compact), so that of all the apiservers of a cluster one compacts each
// interval, at the revision seen an interval before. It runs until Stop.
//
// Mirrors etcd3/compact.go compactor.runCompactLoop, one per endpoint as startCompactorOnce.
type Compactor struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// StartCompactor starts the compact loop of client every interval on clk; an interval of 0 or
// less starts nothing, as the apiserver's --etcd-compaction-interval=0. onCompact, if not nil, is
// told every revision this compactor compacted.
func StartCompactor(client *clientv3.Client, interval time.Duration, clk clock.Clock, logger *slog.Logger, onCompact func(rev int64)) *Compactor {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Compactor{cancel: cancel, done: make(chan struct{})}
	if interval <= 0 {
		close(c.done)
		return c
	}
	go func() {
		defer close(c.done)
		var version, rev int64
		for {
			select {
			case <-clk.After(interval):
			case <-ctx.Done():
				return
			}
			var compacted int64
			var err error
			version, rev, compacted, err = Compact(ctx, client, version, rev)
			if err != nil {
				if ctx.Err() == nil {
					logger.Error("etcd: compact failed", "endpoints", client.Endpoints(), "err", err)
				}
				continue
			}
			if compacted != 0 {
				logger.Debug("etcd: compacted", "rev", compacted, "endpoints", client.Endpoints())
				if onCompact != nil {
					onCompact(compacted)
				}
			}
		}
	}()
	return c
}

// Stop stops the loop and waits for it. Calling it again does nothing.
func (c *Compactor) Stop() {
	c.once.Do(func() {
		c.cancel()
		<-c.done
	})
}

// Compact is one round of the compaction protocol: if compact_rev_key's version is still the
// version this compactor saw last (so no other compactor wrote it since), it writes rev there and
// compacts etcd at rev (not on the first round, whose rev is 0); otherwise it only learns the
// key's version. It returns the version and etcd's revision to pass to the next round, and the
// revision it compacted (0 for none). A lost race is no error.
//
// Mirrors etcd3/compact.go Compact.
func Compact(ctx context.Context, client *clientv3.Client, version, rev int64) (nextVersion, nextRev, compacted int64, err error) {
	resp, err := client.KV.Txn(ctx).If(
		clientv3.Compare(clientv3.Version(compactRevKey), "=", version),
	).Then(
		clientv3.OpPut(compactRevKey, strconv.FormatInt(rev, 10)),
	).Else(
		clientv3.OpGet(compactRevKey),
	).Commit()
	if err != nil {
		return version, rev, 0, err
	}
	current := resp.Header.Revision
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			return 0, current, 0, fmt.Errorf("%s changed and then vanished", compactRevKey)
		}
		return kvs[0].Version, current, 0, nil
	}
	if rev == 0 {
		// No compaction on the first round: the revision of an interval ago is not known yet.
		return version + 1, current, 0, nil
	}
	if _, err := client.Compact(ctx, rev); err != nil {
		return version + 1, current, 0, err
	}
	return version + 1, current, rev, nil
}
