package cache

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/storage"
)

const (
	// blockTimeout bounds how long a request waits for the cache to reach a resourceVersion.
	blockTimeout = 3 * time.Second
	// resourceVersionTooHighRetrySeconds is the Retry-After of the 504 that ends such a wait.
	resourceVersionTooHighRetrySeconds = 1
)

// watchCacheEvent is one event of the cache: the watch event plus what filtering needs, the previous
// state of the object and both states' attributes.
//
// Mirrors watch_cache.go watchCacheEvent.
type watchCacheEvent struct {
	Type            watch.EventType
	Object          runtime.Object
	ObjLabels       labels.Set
	ObjFields       fields.Set
	PrevObject      runtime.Object
	PrevObjLabels   labels.Set
	PrevObjFields   fields.Set
	Key             string
	ResourceVersion uint64
	RecordTime      time.Time
}

// watchCache is the sliding window of recent events plus the current state, both at resourceVersion.
// Exactly one goroutine (the reflector's) calls Add, Update, Delete, Replace and UpdateResourceVersion.
//
// Mirrors watch_cache.go watchCache.
type watchCache struct {
	sync.RWMutex
	// cond wakes requests waiting for a fresher resourceVersion; its locker is the read lock.
	cond *sync.Cond

	// resourceVersion is the newest revision the cache reflects: an event's, a progress
	// notification's or a list's.
	resourceVersion uint64
	// listResourceVersion is the revision of the last relist, 0 before the first.
	listResourceVersion uint64

	history *watchCacheHistory
	store   *objectStore
	// snapshots are the store's states at the revisions the history keeps, for lists at them; nil
	// without ListFromCacheSnapshot, as upstream's WatchCacheStorage keeps none with the gate off.
	snapshots *snapshotter

	// onReplace runs under the lock at the end of every Replace.
	onReplace func()

	keyFunc      func(runtime.Object) (string, error)
	getAttrs     storage.AttrFunc
	versioner    storage.Versioner
	clock        clock.Clock
	eventHandler func(*watchCacheEvent)
	// replays, if set, lets the watchers replaying one element or history event at the same time
	// share what they deliver of it.
	replays *replaySharing
	// metrics count received events and follow the resourceVersion.
	metrics      *resourceMetrics
	progress     *progressRequester
	getCurrentRV func(context.Context) (uint64, error)

	// helpers are the goroutines that wake freshness waits on timeout, cancellation or stop.
	helpers *goroutines
	stopCh  <-chan struct{}

	// listed is closed by the first Replace.
	listed     chan struct{}
	listedOnce sync.Once
}

func newWatchCache(keyFunc func(runtime.Object) (string, error), getAttrs storage.AttrFunc, versioner storage.Versioner,
	clk clock.Clock, eventFreshDuration time.Duration, eventHandler func(*watchCacheEvent), progress *progressRequester,
	getCurrentRV func(context.Context) (uint64, error), stopCh <-chan struct{}, snapshotting bool) *watchCache {
	w := &watchCache{
		history:      newWatchCacheHistory(eventFreshDuration),
		store:        newObjectStore(),
		keyFunc:      keyFunc,
		getAttrs:     getAttrs,
		versioner:    versioner,
		clock:        clk,
		eventHandler: eventHandler,
		progress:     progress,
		getCurrentRV: getCurrentRV,
		helpers:      &goroutines{},
		stopCh:       stopCh,
		listed:       make(chan struct{}),
	}
	// Mirrors store/watch_cache_storage.go NewWatchCacheStorage: the snapshotter exists only with
	// ListFromCacheSnapshot.
	if snapshotting {
		w.snapshots = newSnapshotter()
	}
	w.cond = sync.NewCond(w.RLocker())
	return w
}

// snapshottingEnabled reports whether the cache keeps snapshots (ListFromCacheSnapshot).
//
// Mirrors WatchCacheStorage.SnapshottingEnabled.
func (w *watchCache) snapshottingEnabled() bool { return w.snapshots != nil }

// Add records the creation of obj.
func (w *watchCache) Add(obj runtime.Object) error { return w.processEvent(watch.Added, obj) }

// Update records a change of obj.
func (w *watchCache) Update(obj runtime.Object) error { return w.processEvent(watch.Modified, obj) }

// Delete records the deletion of obj, which carries the deletion's resourceVersion.
func (w *watchCache) Delete(obj runtime.Object) error { return w.processEvent(watch.Deleted, obj) }

// processEvent appends the event to the history, applies it to the store and moves resourceVersion,
// all under the lock, then hands the event to the dispatcher outside it.
//
// Mirrors watchCache.processEvent.
func (w *watchCache) processEvent(eventType watch.EventType, obj runtime.Object) error {
	w.metrics.eventReceived()
	resourceVersion, err := w.versioner.ObjectResourceVersion(obj)
	if err != nil {
		return err
	}
	key, err := w.keyFunc(obj)
	if err != nil {
		return fmt.Errorf("couldn't compute key: %w", err)
	}
	elem := &element{Key: key, Object: obj}
	if elem.Labels, elem.Fields, err = w.getAttrs(obj); err != nil {
		return err
	}
	event := &watchCacheEvent{
		Type:            eventType,
		Object:          obj,
		ObjLabels:       elem.Labels,
		ObjFields:       elem.Fields,
		Key:             key,
		ResourceVersion: resourceVersion,
		RecordTime:      w.clock.Now(),
	}

	w.Lock()
	if prev, ok := w.store.get(key); ok {
		event.PrevObject, event.PrevObjLabels, event.PrevObjFields = prev.Object, prev.Labels, prev.Fields
	}
	w.history.add(event)
	w.resourceVersion = resourceVersion
	if w.history.isFull() && w.snapshots != nil {
		// A revision before the oldest event the history keeps can no longer be listed exactly.
		w.snapshots.removeLess(w.history.at(w.history.startIndex).ResourceVersion)
	}
	if eventType == watch.Deleted {
		w.store.remove(key)
	} else {
		w.store.put(elem)
	}
	if w.snapshots != nil {
		w.snapshots.add(resourceVersion, w.store.snapshot())
	}
	w.cond.Broadcast()
	w.Unlock()

	if w.eventHandler != nil {
		w.eventHandler(event)
	}
	w.metrics.setResourceVersion(resourceVersion)
	return nil
}

// UpdateResourceVersion moves the cache to resourceVersion without an event (a progress notification,
// or the revision of the event just applied) and queues a bookmark for the dispatcher.
//
// Mirrors watchCache.UpdateResourceVersion.
func (w *watchCache) UpdateResourceVersion(resourceVersion string) error {
	rv, err := w.versioner.ParseResourceVersion(resourceVersion)
	if err != nil {
		return err
	}
	w.Lock()
	w.resourceVersion = rv
	w.cond.Broadcast()
	w.Unlock()
	if w.eventHandler != nil {
		w.eventHandler(&watchCacheEvent{Type: watch.Bookmark, ResourceVersion: rv})
	}
	w.metrics.setResourceVersion(rv)
	return nil
}

// Replace makes objs the whole state at resourceVersion after a (re)list. The history is emptied with
// its start index moved forward, never back, so intervals built before are invalidated.
//
// Mirrors watchCache.Replace.
func (w *watchCache) Replace(objs []runtime.Object, resourceVersion string) error {
	version, err := w.versioner.ParseResourceVersion(resourceVersion)
	if err != nil {
		return err
	}
	elems := make([]*element, 0, len(objs))
	for _, obj := range objs {
		key, err := w.keyFunc(obj)
		if err != nil {
			return fmt.Errorf("couldn't compute key: %w", err)
		}
		l, f, err := w.getAttrs(obj)
		if err != nil {
			return err
		}
		elems = append(elems, &element{Key: key, Object: obj, Labels: l, Fields: f})
	}

	w.Lock()
	defer w.Unlock()
	w.history.reset()
	w.store.replace(elems)
	if w.snapshots != nil {
		w.snapshots.reset()
		w.snapshots.add(version, w.store.snapshot())
	}
	w.listResourceVersion = version
	w.resourceVersion = version
	w.metrics.setResourceVersion(version)
	if w.onReplace != nil {
		w.onReplace()
	}
	w.cond.Broadcast()
	w.listedOnce.Do(func() { close(w.listed) })
	return nil
}

func (w *watchCache) setOnReplace(f func()) {
	w.Lock()
	defer w.Unlock()
	w.onReplace = f
}

func (w *watchCache) suggestedWatchChannelSize(indexExists, triggerUsed bool) int {
	w.RLock()
	defer w.RUnlock()
	return w.history.suggestedWatchChannelSize(indexExists, triggerUsed)
}

// waitUntilFreshLocked waits, with the read lock held, until the cache reaches resourceVersion; after
// blockTimeout it fails with 504 TooLargeResourceVersion (Retry-After 1). While it waits, progress
// notifications are requested so that an idle cache still moves forward. The request's context does
// not shorten the wait, as upstream's never looks at it: a request whose deadline passes meanwhile
// still ends with the 504 clients retry on, not with a 500.
//
// Mirrors watchCache.waitUntilFreshLocked. Unlike upstream, a stopped cache ends the wait (503), so
// that Stop never waits for it.
func (w *watchCache) waitUntilFreshLocked(resourceVersion uint64) error {
	if resourceVersion == 0 || resourceVersion <= w.resourceVersion {
		return nil
	}
	// The deadline is set before the wait is announced to the progress requester: whoever sees the
	// waiter (a test stepping a fake clock included) sees its timer already running.
	start := w.clock.Now()
	timer := w.clock.NewTimer(blockTimeout)
	w.progress.add()
	defer w.progress.remove()
	waitDone := make(chan struct{})
	defer func() {
		close(waitDone)
		timer.Stop()
	}()
	w.helpers.start(func() {
		select {
		case <-timer.C():
		case <-w.stopCh:
		case <-waitDone:
			return
		}
		// Taking the write lock makes sure the waiter has released its read lock inside cond.Wait, so the
		// broadcast cannot fall between its check and its wait.
		w.Lock()
		w.Unlock()
		w.cond.Broadcast()
	})
	for w.resourceVersion < resourceVersion {
		if w.clock.Since(start) >= blockTimeout {
			return storage.NewTooLargeResourceVersionError(resourceVersion, w.resourceVersion, resourceVersionTooHighRetrySeconds)
		}
		select {
		case <-w.stopCh:
			return apierrors.NewServiceUnavailable(ErrStopped.Error())
		default:
		}
		w.cond.Wait()
	}
	return nil
}

// waitUntilFreshAndGet returns the element at key once the cache has reached resourceVersion, and the
// cache's resourceVersion at the read.
//
// Mirrors watchCache.WaitUntilFreshAndGet.
func (w *watchCache) waitUntilFreshAndGet(resourceVersion uint64, key string) (*element, bool, uint64, error) {
	w.RLock()
	defer w.RUnlock()
	if err := w.waitUntilFreshLocked(resourceVersion); err != nil {
		return nil, false, 0, err
	}
	e, ok := w.store.get(key)
	return e, ok, w.resourceVersion, nil
}

// waitUntilFreshAndGetKeys returns the keys of the cache once it has reached resourceVersion.
//
// Mirrors watchCache.WaitUntilFreshAndGetKeys.
func (w *watchCache) waitUntilFreshAndGetKeys(resourceVersion uint64) ([]string, error) {
	w.RLock()
	defer w.RUnlock()
	if err := w.waitUntilFreshLocked(resourceVersion); err != nil {
		return nil, err
	}
	return w.store.listKeys(), nil
}

// waitUntilFreshAndGetList returns what a list from the cache reads (key is a prefix when
// opts.Recursive) and the resourceVersion the list has: the requested one for a list at an exact
// revision, the cache's otherwise. The caller has decided that the cache answers it.
//
// Mirrors watchCache.WaitUntilFreshAndGetList.
func (w *watchCache) waitUntilFreshAndGetList(ctx context.Context, key string, opts storage.ListOptions) ([]*element, uint64, error) {
	if opts.Recursive {
		return w.waitUntilFreshAndList(ctx, key, opts)
	}
	var listRV uint64
	var err error
	if opts.ResourceVersionMatch == "" && opts.ResourceVersion == "" {
		listRV, err = w.getCurrentRV(ctx)
	} else {
		listRV, err = w.versioner.ParseResourceVersion(opts.ResourceVersion)
	}
	if err != nil {
		return nil, 0, err
	}
	e, exists, readRV, err := w.waitUntilFreshAndGet(listRV, key)
	if err != nil || !exists {
		return nil, readRV, err
	}
	return []*element{e}, readRV, nil
}

// waitUntilFreshAndList lists the prefix key: Exact lists, legacy exact lists (a resourceVersion with
// a limit) and continue tokens at a revision from the snapshot of that revision, a continue token of
// a consistent list (a negative revision) and a consistent list at etcd's current revision, the rest
// at least at the requested revision.
//
// Mirrors watchCache.waitUntilFreshAndList, which follows delegator/interface.go ShouldDelegateList.
func (w *watchCache) waitUntilFreshAndList(ctx context.Context, key string, opts storage.ListOptions) ([]*element, uint64, error) {
	listRV, err := w.versioner.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, 0, err
	}
	switch opts.ResourceVersionMatch {
	case metav1.ResourceVersionMatchExact:
		return w.waitAndListExactRV(key, "", listRV)
	case metav1.ResourceVersionMatchNotOlderThan:
	case "":
		if opts.Predicate.Continue != "" {
			continueKey, continueRV, err := storage.DecodeContinue(opts.Predicate.Continue, key)
			if err != nil {
				return nil, 0, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
			}
			if continueRV > 0 {
				return w.waitAndListExactRV(key, continueKey, uint64(continueRV))
			}
			return w.waitAndListConsistent(ctx, key, continueKey)
		}
		if opts.Predicate.Limit > 0 && opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return w.waitAndListExactRV(key, "", listRV)
		}
		if opts.ResourceVersion == "" {
			return w.waitAndListConsistent(ctx, key, "")
		}
	}
	return w.waitAndListLatestRV(listRV, key, "")
}

// waitAndListExactRV lists key from continueKey on in the snapshot of resourceVersion, once the cache
// has reached it: 504 after blockTimeout if it does not, 410 if the snapshot is gone.
//
// Mirrors watchCache.waitAndListExactRV and waitAndGetExactSnapshot.
func (w *watchCache) waitAndListExactRV(key, continueKey string, resourceVersion uint64) ([]*element, uint64, error) {
	// The snapshot is taken under the read lock, so no event evicts it between the wait and the
	// read; it is immutable, so the list is made without the lock.
	w.RLock()
	err := w.waitUntilFreshLocked(resourceVersion)
	var snap *storeSnapshot
	if err == nil {
		snap, err = w.exactSnapshot(resourceVersion)
	}
	w.RUnlock()
	if err != nil {
		return nil, 0, err
	}
	return snap.listPrefix(key, continueKey), resourceVersion, nil
}

// exactSnapshot is the state at resourceVersion: the snapshot of the newest revision at or below it,
// 410 if there is none (always, without snapshots).
//
// Mirrors WatchCacheStorage.GetExactSnapshotLocked.
func (w *watchCache) exactSnapshot(resourceVersion uint64) (*storeSnapshot, error) {
	var snap *storeSnapshot
	ok := false
	if w.snapshots != nil {
		snap, ok = w.snapshots.getLessOrEqual(resourceVersion)
	}
	if !ok {
		return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d", resourceVersion))
	}
	return snap, nil
}

// waitAndListConsistent lists key from continueKey on at etcd's current revision.
//
// Mirrors watchCache.waitAndListConsistent.
func (w *watchCache) waitAndListConsistent(ctx context.Context, key, continueKey string) ([]*element, uint64, error) {
	resourceVersion, err := w.getCurrentRV(ctx)
	if err != nil {
		return nil, 0, err
	}
	return w.waitAndListLatestRV(resourceVersion, key, continueKey)
}

// waitAndListLatestRV lists key from continueKey on once the cache has reached minResourceVersion,
// at the cache's resourceVersion.
//
// Mirrors watchCache.waitAndListLatestRV.
func (w *watchCache) waitAndListLatestRV(minResourceVersion uint64, key, continueKey string) ([]*element, uint64, error) {
	w.RLock()
	defer w.RUnlock()
	if err := w.waitUntilFreshLocked(minResourceVersion); err != nil {
		return nil, 0, err
	}
	return w.store.listPrefix(key, continueKey), w.resourceVersion, nil
}

// notFresh reports whether the cache has not reached resourceVersion yet.
//
// Mirrors watchCache.notFresh.
func (w *watchCache) notFresh(resourceVersion uint64) bool {
	w.RLock()
	defer w.RUnlock()
	return resourceVersion > w.resourceVersion
}

// canServeExactRV reports whether a snapshot at or below resourceVersion is kept.
//
// Mirrors WatchCacheStorage.CanServeExactRV.
func (w *watchCache) canServeExactRV(resourceVersion uint64) bool {
	if w.snapshots == nil {
		return false
	}
	_, ok := w.snapshots.getLessOrEqual(resourceVersion)
	return ok
}

// compact drops the snapshots below a revision the storage compacted.
//
// Mirrors WatchCacheStorage.Compact.
func (w *watchCache) compact(resourceVersion uint64) {
	if w.snapshots == nil {
		return
	}
	w.snapshots.removeLess(resourceVersion)
}

// getByKey returns the current element at key, for the suggestions passed to storage writes.
func (w *watchCache) getByKey(key string) (*element, bool) {
	w.RLock()
	defer w.RUnlock()
	return w.store.get(key)
}

// getAllEventsSinceLocked picks what a new watcher replays: the current state (SendInitialEvents, or
// the legacy RV=0 watch) or the history after resourceVersion (RV=0 with SendInitialEvents=false
// meaning "from now"). The caller holds the read lock until the watcher is registered.
//
// Mirrors watchCache.getAllEventsSinceLocked.
func (w *watchCache) getAllEventsSinceLocked(resourceVersion uint64, key string, opts storage.ListOptions) (*watchCacheInterval, error) {
	_, matchesSingle := opts.Predicate.MatchesSingle()
	matchesSingle = matchesSingle && !opts.Recursive
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		return w.intervalFromStoreLocked(key, matchesSingle), nil
	}
	if resourceVersion == 0 {
		if opts.SendInitialEvents == nil {
			return w.intervalFromStoreLocked(key, matchesSingle), nil
		}
		resourceVersion = w.resourceVersion
	}
	interval, err := w.history.intervalLocked(resourceVersion, w.listResourceVersion, w.RLocker())
	if err != nil {
		return nil, err
	}
	interval.source.(*historyInterval).replays = w.replays
	return interval, nil
}

// intervalFromStoreLocked is the current state under key as of the cache's resourceVersion.
//
// Mirrors watchCache.getIntervalFromStoreLocked.
func (w *watchCache) intervalFromStoreLocked(key string, matchesSingle bool) *watchCacheInterval {
	if matchesSingle {
		var elems []*element
		if e, ok := w.store.get(key); ok {
			elems = append(elems, e)
		}
		interval := newElementsInterval(elems, w.resourceVersion)
		interval.source.(*snapshotInterval).replays = w.replays
		return interval
	}
	interval := newSnapshotInterval(w.store.snapshot(), key, w.resourceVersion)
	interval.source.(*snapshotInterval).replays = w.replays
	return interval
}
