package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/storage"
)

const (
	// storageListPageSize is the page size of the reflector's lists.
	storageListPageSize = 10000
	// maxInternalErrorRetryDuration is how long the reflector keeps re-watching through 500s before
	// it relists: etcd's "no leader" heals within a few election cycles.
	maxInternalErrorRetryDuration = 30 * time.Second
	// internalErrorResetPeriod is how long without an internal error resets that allowance.
	internalErrorResetPeriod = time.Minute
	// backoffResetInterval resets the backoff after that long without a backoff.
	backoffResetInterval = 2 * time.Minute
)

// DefaultBackoff is the reflector's backoff before re-watching after a 429 or a refused connection, as
// client-go's: 800 ms doubling to 30 s, with full jitter.
var DefaultBackoff = wait.Backoff{Duration: 800 * time.Millisecond, Cap: 30 * time.Second, Steps: 38, Factor: 2, Jitter: 1}

// errVeryShortWatch is a watch that closed within a second without any event: the reflector relists.
var errVeryShortWatch = errors.New("very short watch: watch closed before it delivered anything")

// reflectorStore is what the reflector keeps up to date: the watch cache.
type reflectorStore interface {
	Add(obj runtime.Object) error
	Update(obj runtime.Object) error
	Delete(obj runtime.Object) error
	Replace(objs []runtime.Object, resourceVersion string) error
	UpdateResourceVersion(resourceVersion string) error
}

// reflector fills the watch cache from the storage: a consistent paginated list of the whole resource,
// then a watch from the list's resourceVersion with progress notifications, re-watched from the last
// resourceVersion seen when it ends cleanly, relisted (by returning) when it fails.
//
// Mirrors client-go tools/cache reflector.go (ListAndWatch, list, watch, handleAnyWatch) as the
// cacher configures it (cacher/lister_watcher.go): list with resourceVersion unset and page size
// 10000, watch with ProgressNotify and AllowWatchBookmarks, no resync, no watch-list.
type reflector struct {
	storage        storage.Interface
	resourcePrefix string
	newListFunc    func() runtime.Object
	store          reflectorStore
	clock          clock.Clock
	delay          wait.DelayFunc
	pageSize       int64
	logger         *slog.Logger

	mu              sync.Mutex
	lastSyncVersion string
}

func newReflector(s storage.Interface, resourcePrefix string, newListFunc func() runtime.Object, store reflectorStore,
	c clock.Clock, backoff wait.Backoff, logger *slog.Logger) *reflector {
	return &reflector{
		storage:        s,
		resourcePrefix: resourcePrefix,
		newListFunc:    newListFunc,
		store:          store,
		clock:          c,
		delay:          backoff.DelayWithReset(c, backoffResetInterval),
		pageSize:       storageListPageSize,
		logger:         logger,
	}
}

func (r *reflector) lastSyncResourceVersion() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastSyncVersion
}

func (r *reflector) setLastSyncResourceVersion(v string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastSyncVersion = v
}

// listAndWatch lists, replaces the store, then watches until the watch fails (nil: relist) or ctx
// ends (nil). A list failure is returned.
//
// Mirrors Reflector.ListAndWatchWithContext.
func (r *reflector) listAndWatch(ctx context.Context) error {
	if err := r.list(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return r.watch(ctx)
}

// list reads the whole resource page by page, every page pinned by its continue token to the first
// page's revision; a token expiring mid-way falls back to one unpaginated list.
//
// Mirrors Reflector.list and client-go tools/pager ListPager.List.
func (r *reflector) list(ctx context.Context) error {
	opts := storage.ListOptions{Predicate: storage.Everything, Recursive: true}
	opts.Predicate.Limit = r.pageSize
	var items []runtime.Object
	var resourceVersion string
	for {
		page := r.newListFunc()
		err := r.storage.GetList(ctx, r.resourcePrefix, opts, page)
		if err != nil {
			if !apierrors.IsResourceExpired(err) || opts.Predicate.Continue == "" {
				return fmt.Errorf("failed to list %s: %w", r.resourcePrefix, err)
			}
			opts.Predicate.Limit, opts.Predicate.Continue = 0, ""
			items, resourceVersion = nil, ""
			continue
		}
		lm, err := meta.ListAccessor(page)
		if err != nil {
			return fmt.Errorf("unable to understand list result %T: %w", page, err)
		}
		if resourceVersion == "" {
			resourceVersion = lm.GetResourceVersion()
		}
		pageItems, err := meta.ExtractListWithAlloc(page)
		if err != nil {
			return fmt.Errorf("unable to understand list result %T: %w", page, err)
		}
		items = append(items, pageItems...)
		if lm.GetContinue() == "" {
			break
		}
		opts.Predicate.Continue = lm.GetContinue()
	}
	if err := r.store.Replace(items, resourceVersion); err != nil {
		return fmt.Errorf("unable to sync list result: %w", err)
	}
	r.setLastSyncResourceVersion(resourceVersion)
	return nil
}

// watch watches from the last resourceVersion seen, re-watching after a clean close, a 429 (with
// backoff) or an internal error (for up to maxInternalErrorRetryDuration); any other end returns nil,
// which makes the Cacher relist.
//
// Mirrors Reflector.watch.
func (r *reflector) watch(ctx context.Context) error {
	retry := &retryWithDeadline{max: maxInternalErrorRetryDuration, reset: internalErrorResetPeriod, clock: r.clock}
	for {
		if ctx.Err() != nil {
			return nil
		}
		start := r.clock.Now()
		pred := storage.Everything
		pred.AllowWatchBookmarks = true
		w, err := r.storage.Watch(ctx, r.resourcePrefix, storage.ListOptions{
			ResourceVersion: r.lastSyncResourceVersion(),
			Predicate:       pred,
			Recursive:       true,
			ProgressNotify:  true,
		})
		if err != nil {
			if apierrors.IsTooManyRequests(err) {
				if !r.sleep(ctx, r.delay()) {
					return nil
				}
				continue
			}
			return err
		}
		err = r.handleWatch(ctx, start, w)
		w.Stop()
		retry.after(err)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			r.logger.Debug("watch closed", "resource", r.resourcePrefix, "err", err)
		case apierrors.IsTooManyRequests(err):
			if !r.sleep(ctx, r.delay()) {
				return nil
			}
			continue
		case apierrors.IsInternalError(err) && retry.shouldRetry():
			r.logger.Info("retrying watch after internal error", "resource", r.resourcePrefix, "err", err)
			continue
		default:
			r.logger.Warn("watch ended with error", "resource", r.resourcePrefix, "err", err)
		}
		return nil
	}
}

func (r *reflector) sleep(ctx context.Context, d time.Duration) bool {
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// handleWatch applies the watch's events to the store, recording each event's resourceVersion, until
// the watch closes (nil, or errVeryShortWatch) or sends an ERROR (its API error).
//
// Mirrors client-go handleAnyWatch.
func (r *reflector) handleWatch(ctx context.Context, start time.Time, w watch.Interface) error {
	count := 0
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case event, ok := <-w.ResultChan():
			if !ok {
				if r.clock.Since(start) < time.Second && count == 0 {
					return errVeryShortWatch
				}
				return nil
			}
			if event.Type == watch.Error {
				return apierrors.FromObject(event.Object)
			}
			m, err := meta.Accessor(event.Object)
			if err != nil {
				r.logger.Error("unable to understand watch event", "event", event, "err", err)
				continue
			}
			resourceVersion := m.GetResourceVersion()
			switch event.Type {
			case watch.Added:
				err = r.store.Add(event.Object)
			case watch.Modified:
				err = r.store.Update(event.Object)
			case watch.Deleted:
				err = r.store.Delete(event.Object)
			case watch.Bookmark:
			default:
				err = fmt.Errorf("unknown watch event type %q", event.Type)
			}
			if err != nil {
				r.logger.Error("unable to apply watch event to the cache", "type", event.Type, "err", err)
			}
			r.setLastSyncResourceVersion(resourceVersion)
			if err := r.store.UpdateResourceVersion(resourceVersion); err != nil {
				r.logger.Error("couldn't parse resourceVersion", "resourceVersion", resourceVersion, "err", err)
			}
			count++
		}
	}
}

// retryWithDeadline allows retrying internal errors for max after the first one, resetting when none
// came for reset.
//
// Mirrors client-go tools/cache retry_with_deadline.go.
type retryWithDeadline struct {
	max, reset            time.Duration
	clock                 clock.PassiveClock
	firstError, lastError time.Time
}

func (r *retryWithDeadline) after(err error) {
	if !apierrors.IsInternalError(err) {
		return
	}
	now := r.clock.Now()
	if now.Sub(r.lastError) >= r.reset {
		r.firstError, r.lastError = time.Time{}, time.Time{}
	}
	if r.firstError.IsZero() {
		r.firstError = now
	}
	r.lastError = now
}

func (r *retryWithDeadline) shouldRetry() bool {
	if r.max <= 0 {
		return false
	}
	if r.clock.Now().Sub(r.firstError) <= r.max {
		return true
	}
	r.firstError, r.lastError = time.Time{}, time.Time{}
	return false
}
