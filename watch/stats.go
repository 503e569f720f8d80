package watch

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/storage"
)

// sizerRefreshInterval is how often the size estimate drops the keys its KeysFunc no longer returns
// (jittered by up to half of it).
const sizerRefreshInterval = time.Minute

var (
	// ErrNilKeysFunc is what EnableResourceSizeEstimation returns for a nil KeysFunc.
	ErrNilKeysFunc = errors.New("KeysFunc cannot be nil")
	// ErrSizeEstimationEnabled is what EnableResourceSizeEstimation returns when the estimate is
	// already kept.
	ErrSizeEstimationEnabled = errors.New("resourceSizeEstimator already enabled")
	// ErrStoreClosed is what EnableResourceSizeEstimation returns after Close: the estimate's
	// goroutine would have no owner left to stop it.
	ErrStoreClosed = errors.New("etcd3 store closed")
)

// Stats counts the objects under the resource prefix. With a size estimate (see
// EnableResourceSizeEstimation) the count is that of the estimate's KeysFunc and the average size that
// of the values the estimate has seen; otherwise it is etcd's count of the keys under the prefix and
// the size is 0.
//
// Mirrors etcd3/store.go store.Stats.
func (s *Store) Stats(ctx context.Context) (storage.Stats, error) {
	if e := s.sizeEstimator(); e != nil {
		return e.stats(ctx)
	}
	prefix, err := s.prepareKey(s.resourcePrefix, true)
	if err != nil {
		return storage.Stats{}, err
	}
	count, err := s.kc.Kubernetes.Count(ctx, prefix, kubernetes.CountOptions{})
	if err != nil {
		return storage.Stats{}, err
	}
	return storage.Stats{ObjectCount: count}, nil
}

// EnableResourceSizeEstimation makes the Store keep the size of every value its lists and watches
// read, for Stats to estimate the average object size; getKeys names the objects that exist (a watch
// cache gives its own keys, as upstream's Cacher does with SizeBasedListCostEstimate on). Once a
// minute the sizes of keys getKeys no longer returns are dropped, from a goroutine that Close stops.
//
// Mirrors etcd3/store.go store.EnableResourceSizeEstimation.
func (s *Store) EnableResourceSizeEstimation(getKeys storage.KeysFunc) error {
	if getKeys == nil {
		return ErrNilKeysFunc
	}
	s.estimatorMu.Lock()
	defer s.estimatorMu.Unlock()
	if s.closed {
		return ErrStoreClosed
	}
	if s.estimator != nil {
		return ErrSizeEstimationEnabled
	}
	s.estimator = newResourceSizeEstimator(s.pathPrefix, getKeys, s.clock, s.logger)
	return nil
}

// keys returns the etcd keys under the resource prefix: the KeysFunc of a Store's own size estimate.
//
// Mirrors etcd3/store.go store.getKeys.
func (s *Store) keys(ctx context.Context) ([]string, error) {
	prefix, err := s.prepareKey(s.resourcePrefix, true)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.KV.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys, nil
}

func (s *Store) sizeEstimator() *resourceSizeEstimator {
	s.estimatorMu.Lock()
	defer s.estimatorMu.Unlock()
	return s.estimator
}

// closeSizeEstimator stops the estimate's goroutine, if any, and refuses later estimates.
func (s *Store) closeSizeEstimator() {
	s.estimatorMu.Lock()
	e := s.estimator
	s.closed = true
	s.estimatorMu.Unlock()
	if e != nil {
		e.close()
	}
}

// resourceSizeEstimator keeps, per etcd key, the size of the newest value read (by mod revision), so
// that Stats can estimate the average object size without reading the values again. Deletions the
// watches see drop keys; keys whose deletion was never seen are dropped when getKeys no longer
// returns them.
//
// Mirrors etcd3/stats.go resourceSizeEstimator.
type resourceSizeEstimator struct {
	prefix  string
	getKeys storage.KeysFunc
	clock   clock.Clock
	logger  *slog.Logger

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once

	mu          sync.Mutex
	keys        map[string]sizeRevision
	lastCleanup time.Time
	cleaned     bool
}

type sizeRevision struct {
	sizeBytes int64
	revision  int64
}

func newResourceSizeEstimator(prefix string, getKeys storage.KeysFunc, clk clock.Clock, logger *slog.Logger) *resourceSizeEstimator {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &resourceSizeEstimator{
		prefix:  prefix,
		getKeys: getKeys,
		clock:   clk,
		logger:  logger,
		cancel:  cancel,
		done:    make(chan struct{}),
		keys:    make(map[string]sizeRevision),
	}
	go func() {
		defer close(e.done)
		e.run(ctx)
	}()
	return e
}

// close stops the cleanup goroutine and waits for it. Calling it again does nothing.
func (e *resourceSizeEstimator) close() {
	e.closeOnce.Do(func() {
		e.cancel()
		<-e.done
	})
}

// stats counts getKeys' keys and averages the sizes kept for them.
//
// Mirrors etcd3/stats.go resourceSizeEstimator.Stats.
func (e *resourceSizeEstimator) stats(ctx context.Context) (storage.Stats, error) {
	keys, err := e.getKeys(ctx)
	if err != nil {
		return storage.Stats{}, err
	}
	st := storage.Stats{ObjectCount: int64(len(keys))}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cleanKeysLocked(keys)
	if len(e.keys) > 0 {
		var total int64
		for _, sr := range e.keys {
			total += sr.sizeBytes
		}
		st.EstimatedAverageObjectSizeBytes = total / int64(len(e.keys))
	}
	return st, nil
}

// run drops stale keys every sizerRefreshInterval (jittered), the first time one interval after the
// start, skipping a round when stats cleaned meanwhile.
//
// Mirrors etcd3/stats.go resourceSizeEstimator.run and cleanKeysIfNeeded.
func (e *resourceSizeEstimator) run(ctx context.Context) {
	for {
		t := e.clock.NewTimer(wait.Jitter(sizerRefreshInterval, 0.5))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		e.mu.Lock()
		recent := e.cleaned && e.clock.Since(e.lastCleanup) < sizerRefreshInterval
		e.mu.Unlock()
		if recent {
			continue
		}
		keys, err := e.getKeys(ctx)
		if err != nil {
			e.logger.Info("Error getting keys", "err", err)
			continue
		}
		e.mu.Lock()
		e.cleanKeysLocked(keys)
		e.mu.Unlock()
	}
}

// cleanKeysLocked keeps only the sizes of keep, whose apiserver keys are turned into etcd keys.
func (e *resourceSizeEstimator) cleanKeysLocked(keep []string) {
	kept := make(map[string]sizeRevision, len(keep))
	for _, key := range keep {
		if !strings.HasPrefix(key, e.prefix) {
			key = e.prefix + strings.TrimPrefix(key, "/")
		}
		if sr, ok := e.keys[key]; ok {
			kept[key] = sr
		}
	}
	e.keys = kept
	e.lastCleanup = e.clock.Now()
	e.cleaned = true
}

// update records the values a list read.
func (e *resourceSizeEstimator) update(kvs []*mvccpb.KeyValue) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, kv := range kvs {
		e.updateLocked(kv)
	}
}

// updateKey records the value a watch saw put.
func (e *resourceSizeEstimator) updateKey(kv *mvccpb.KeyValue) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.updateLocked(kv)
}

// updateLocked keeps the size of kv unless a newer value of its key was recorded already: lists and
// watches report values out of order.
func (e *resourceSizeEstimator) updateLocked(kv *mvccpb.KeyValue) {
	key := string(kv.Key)
	if e.keys[key].revision >= kv.ModRevision {
		return
	}
	e.keys[key] = sizeRevision{sizeBytes: int64(len(kv.Value)), revision: kv.ModRevision}
}

// deleteKey drops the key a watch saw deleted, unless a newer value was recorded already.
func (e *resourceSizeEstimator) deleteKey(kv *mvccpb.KeyValue) {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := string(kv.Key)
	if e.keys[key].revision >= kv.ModRevision {
		return
	}
	delete(e.keys, key)
}
