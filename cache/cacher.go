package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/storage"
)

const (
	// DefaultEventFreshDuration is the shortest (and default) EventsHistoryWindow: the bookmark
	// frequency plus 15 s, so that the last bookmark a client saw is very likely still in the history.
	DefaultEventFreshDuration = defaultBookmarkFrequency + 15*time.Second
	// defaultBookmarkFrequency is how often a watch with bookmarks gets one.
	defaultBookmarkFrequency = time.Minute
	// incomingBufferSize is the capacity of the queue from the watch cache to the dispatcher.
	incomingBufferSize = 100
	// restartPeriod is the pause between the end of a list-and-watch and the next.
	restartPeriod = time.Second
)

// ErrInvalidConfig is matched by every error New returns for a bad Config.
var ErrInvalidConfig = errors.New("invalid cacher config")

// IndexerFunc returns the value of an object's trigger field, such as a pod's spec.nodeName.
type IndexerFunc func(obj runtime.Object) string

// Config configures a Cacher.
type Config struct {
	// Storage is the storage to cache. Required.
	Storage storage.Interface
	// ResourcePrefix is the key prefix of the resource, such as "/pods/". Required: it starts with "/"
	// and is not "/".
	ResourcePrefix string
	// GroupResource names the resource in logs.
	GroupResource schema.GroupResource
	// EventsHistoryWindow is the minimum age of the events the history keeps; it drives the history's
	// resizing. 0 means DefaultEventFreshDuration; less than that is an error.
	EventsHistoryWindow time.Duration
	// KeyFunc computes an object's key. Default: storage.NamespaceKeyFunc under ResourcePrefix (use
	// storage.NoNamespaceKeyFunc for cluster-scoped resources).
	KeyFunc func(runtime.Object) (string, error)
	// GetAttrsFunc computes the labels and fields predicates match; watches and lists served from the
	// cache use it instead of the predicate's GetAttrs. Default storage.DefaultNamespaceScopedAttr.
	GetAttrsFunc storage.AttrFunc
	// IndexerFuncs holds at most one trigger: watchers whose predicate names that field among its
	// IndexFields and whose field selector requires an exact value of it are only offered events
	// whose object (now or before) has that value.
	IndexerFuncs map[string]IndexerFunc
	// NewFunc returns the empty object of a bookmark. Default *unstructured.Unstructured.
	NewFunc func() runtime.Object
	// NewListFunc returns the empty list the reflector lists into. Default *unstructured.UnstructuredList.
	NewListFunc func() runtime.Object
	// Versioner reads and writes resourceVersions. Default storage.APIObjectVersioner.
	Versioner storage.Versioner
	// Clock drives every timeout, timer and timestamp of the Cacher. Default the real clock.
	Clock clock.Clock
	// Backoff is the reflector's backoff before re-watching after a 429. Default DefaultBackoff.
	Backoff *wait.Backoff
	// Logger receives what upstream logs with klog. Default slog.Default().
	Logger *slog.Logger
	// DisableListFromCacheSnapshot turns upstream's ListFromCacheSnapshot feature gate off (it is
	// beta and on by default in v0.37, which the zero value mirrors): the cache then keeps no
	// snapshots and runs no compactor, so exact lists, legacy exact lists (a resourceVersion with a
	// limit) and every continue token go to the storage, and a 410 from the cache is returned rather
	// than retried against the storage.
	DisableListFromCacheSnapshot bool
	// DisableSizeBasedListCostEstimate turns upstream's SizeBasedListCostEstimate feature gate off
	// (beta and on by default in v0.37, which the zero value mirrors). With it on, New enables the
	// size estimate of a storage that keeps one (*watch.Store's EnableResourceSizeEstimation) with
	// the cache's keys, so that Stats reports the average object size; off, Stats has no size.
	DisableSizeBasedListCostEstimate bool
	// Metrics, if set, receive the watch cache's metrics (NewMetrics) under GroupResource's labels.
	Metrics *Metrics
	// Kind is the resource's kind, the labels of apiserver_registered_watchers.
	Kind schema.GroupVersionKind
}

// sizeEstimator is a storage that can estimate the size of its objects, as *watch.Store does.
type sizeEstimator interface {
	EnableResourceSizeEstimation(storage.KeysFunc) error
}

// indexedTrigger is the configured trigger field and its value function.
type indexedTrigger struct {
	indexName string
	fn        IndexerFunc
}

// namespacedName is a watcher's scope: the namespace and name its selector pins, if any.
type namespacedName struct {
	namespace string
	name      string
}

type watchersMap map[int]*cacheWatcher

// indexedWatchers indexes watchers by trigger value when they use the trigger, else by scope.
//
// Mirrors cacher.go indexedWatchers.
type indexedWatchers struct {
	allWatchers   map[namespacedName]watchersMap
	valueWatchers map[string]watchersMap
	// metrics count the registered watchers.
	metrics *resourceMetrics
}

func (i *indexedWatchers) add(w *cacheWatcher, number int, scope namespacedName, value string, supported bool) {
	i.metrics.watchersRegistered(1)
	if supported {
		if i.valueWatchers[value] == nil {
			i.valueWatchers[value] = watchersMap{}
		}
		i.valueWatchers[value][number] = w
		return
	}
	if i.allWatchers[scope] == nil {
		i.allWatchers[scope] = watchersMap{}
	}
	i.allWatchers[scope][number] = w
}

func (i *indexedWatchers) remove(number int, scope namespacedName, value string, supported bool) {
	if supported {
		if _, ok := i.valueWatchers[value][number]; ok {
			i.metrics.watchersRegistered(-1)
		}
		delete(i.valueWatchers[value], number)
		if len(i.valueWatchers[value]) == 0 {
			delete(i.valueWatchers, value)
		}
		return
	}
	if _, ok := i.allWatchers[scope][number]; ok {
		i.metrics.watchersRegistered(-1)
	}
	delete(i.allWatchers[scope], number)
	if len(i.allWatchers[scope]) == 0 {
		delete(i.allWatchers, scope)
	}
}

func (i *indexedWatchers) terminateAll(done func(*cacheWatcher)) {
	for _, ws := range i.allWatchers {
		for _, w := range ws {
			i.metrics.watchersRegistered(-1)
			done(w)
		}
	}
	for _, ws := range i.valueWatchers {
		for _, w := range ws {
			i.metrics.watchersRegistered(-1)
			done(w)
		}
	}
	i.allWatchers = map[namespacedName]watchersMap{}
	i.valueWatchers = map[string]watchersMap{}
}

// bookmarkBuckets holds the watchers due a bookmark, by the second (since creation) it is due; a bucket
// pops when its second has begun, so a bookmark due at X comes within (X−1 s, X+1 s).
//
// Mirrors cacher.go watcherBookmarkTimeBuckets.
type bookmarkBuckets struct {
	buckets       map[int64][]*cacheWatcher
	createTime    time.Time
	startBucketID int64
	clock         clock.PassiveClock
	frequency     time.Duration
}

func newBookmarkBuckets(c clock.PassiveClock, frequency time.Duration) *bookmarkBuckets {
	return &bookmarkBuckets{buckets: map[int64][]*cacheWatcher{}, createTime: c.Now(), clock: c, frequency: frequency}
}

func (t *bookmarkBuckets) add(w *cacheWatcher) bool {
	next, ok := w.nextBookmarkTime(t.clock.Now(), t.frequency)
	if !ok {
		return false
	}
	id := int64(next.Sub(t.createTime) / time.Second)
	if id < t.startBucketID {
		id = t.startBucketID
	}
	t.buckets[id] = append(t.buckets[id], w)
	return true
}

func (t *bookmarkBuckets) popExpired() [][]*cacheWatcher {
	current := int64(t.clock.Since(t.createTime) / time.Second)
	expired := make([][]*cacheWatcher, 0, 2)
	for ; t.startBucketID <= current; t.startBucketID++ {
		if ws, ok := t.buckets[t.startBucketID]; ok {
			delete(t.buckets, t.startBucketID)
			expired = append(expired, ws)
		}
	}
	return expired
}

// Cacher serves Watch, Get and GetList of one resource from an in-memory watch cache that a reflector
// keeps in sync with the storage, and passes writes through to the storage. See the package
// documentation for the guarantees.
//
// Mirrors cacher.go Cacher together with delegator.go CacheDelegator.
type Cacher struct {
	incoming chan *watchCacheEvent

	resourcePrefix string
	groupResource  schema.GroupResource
	storage        storage.Interface
	versioner      storage.Versioner
	newFunc        func() runtime.Object
	trigger        *indexedTrigger
	clock          clock.Clock
	logger         *slog.Logger
	metrics        *resourceMetrics

	ready      *ready
	watchCache *watchCache
	reflector  *reflector
	progress   *progressRequester
	// compactor is nil when the storage does not tell its compactions, or without snapshots.
	compactor *compactor

	// mu guards the watcher registry and the dispatch state below.
	mu         sync.Mutex
	watcherIdx int
	watchers   indexedWatchers
	// live holds every watcher whose goroutine runs, registered or already forgotten (draining).
	live map[*cacheWatcher]struct{}
	// dispatching is set while an event is being offered to watchers; stops are deferred meanwhile.
	dispatching    bool
	watchersBuffer []*cacheWatcher
	watchersToStop []*cacheWatcher
	// batchGroups and deliveries are the dispatcher's scratch for a batch (see dispatchBatch).
	batchGroups      map[watcherGroup][]*watchCacheEvent
	deliveries       []delivery
	bookmarkWatchers *bookmarkBuckets
	expiredBookmarks []*cacheWatcher

	// lastProcessedRV is the resourceVersion of the last event the dispatcher finished with.
	lastProcessedRV atomic.Uint64
	// batch, batchEvents and batchTriggers are the dispatcher's own: the events taken from incoming
	// together, their copies with caching objects, and their trigger values.
	batch         []*watchCacheEvent
	batchEvents   []*watchCacheEvent
	batchTriggers []triggerSelection

	budget *timeBudget
	// timer is the dispatcher's one reusable timer for blocking adds; only the dispatcher touches it.
	timer clock.Timer

	ctx       context.Context
	cancel    context.CancelFunc
	stopOnce  sync.Once
	stopWg    sync.WaitGroup
	watcherGo goroutines
}

// New validates cfg and starts a Cacher: its reflector lists and watches the storage in the
// background, and the Cacher is ready once the first list is applied (Wait blocks until then).
//
// Mirrors cacher.go NewCacherFromConfig.
func New(cfg Config) (*Cacher, error) {
	if err := cfg.complete(); err != nil {
		return nil, err
	}
	var trigger *indexedTrigger
	for name, fn := range cfg.IndexerFuncs {
		if fn != nil {
			trigger = &indexedTrigger{indexName: name, fn: fn}
		}
	}
	backoff := DefaultBackoff
	if cfg.Backoff != nil {
		backoff = *cfg.Backoff
	}
	logger := cfg.Logger.With("resource", cfg.GroupResource.String())

	ctx, cancel := context.WithCancel(context.Background())
	metrics := cfg.Metrics.forResource(cfg.GroupResource, cfg.Kind)
	c := &Cacher{
		incoming:         make(chan *watchCacheEvent, incomingBufferSize),
		resourcePrefix:   cfg.ResourcePrefix,
		groupResource:    cfg.GroupResource,
		storage:          cfg.Storage,
		versioner:        cfg.Versioner,
		newFunc:          cfg.NewFunc,
		trigger:          trigger,
		clock:            cfg.Clock,
		logger:           logger,
		metrics:          metrics,
		ready:            newReady(cfg.Clock),
		watchers:         indexedWatchers{allWatchers: map[namespacedName]watchersMap{}, valueWatchers: map[string]watchersMap{}, metrics: metrics},
		live:             map[*cacheWatcher]struct{}{},
		bookmarkWatchers: newBookmarkBuckets(cfg.Clock, defaultBookmarkFrequency),
		batchGroups:      map[watcherGroup][]*watchCacheEvent{},
		budget:           newTimeBudget(cfg.Clock),
		ctx:              ctx,
		cancel:           cancel,
	}
	c.progress = newProgressRequester(cfg.Storage.RequestWatchProgress, cfg.Clock, logger)
	c.watchCache = newWatchCache(cfg.KeyFunc, cfg.GetAttrsFunc, cfg.Versioner, cfg.Clock, cfg.EventsHistoryWindow,
		c.processEvent, c.progress, cfg.Storage.GetCurrentResourceVersion, ctx.Done(), !cfg.DisableListFromCacheSnapshot)
	c.watchCache.replays = &replaySharing{versioner: c.versioner, logger: logger}
	c.watchCache.metrics, c.watchCache.history.metrics = metrics, metrics
	metrics.setCapacity(c.watchCache.history.capacity)
	c.reflector = newReflector(cfg.Storage, cfg.ResourcePrefix, cfg.NewListFunc, c.watchCache, cfg.Clock, backoff, logger)

	if s, ok := cfg.Storage.(sizeEstimator); ok && !cfg.DisableSizeBasedListCostEstimate {
		if err := s.EnableResourceSizeEstimation(c.getKeys); err != nil {
			cancel()
			return nil, fmt.Errorf("failed to enable resource size estimation: %w", err)
		}
	}
	c.start(ctx, cfg)
	return c, nil
}

// complete checks cfg and fills in its defaults, as NewCacherFromConfig checks its Config.
func (cfg *Config) complete() error {
	if cfg.Storage == nil {
		return fmt.Errorf("%w: storage cannot be nil", ErrInvalidConfig)
	}
	switch {
	case cfg.ResourcePrefix == "":
		return fmt.Errorf("%w: resourcePrefix cannot be empty", ErrInvalidConfig)
	case cfg.ResourcePrefix == "/":
		return fmt.Errorf("%w: resourcePrefix cannot be /", ErrInvalidConfig)
	case !strings.HasPrefix(cfg.ResourcePrefix, "/"):
		return fmt.Errorf("%w: resourcePrefix needs to start from /", ErrInvalidConfig)
	}
	if cfg.EventsHistoryWindow == 0 {
		cfg.EventsHistoryWindow = DefaultEventFreshDuration
	}
	if cfg.EventsHistoryWindow < DefaultEventFreshDuration {
		return fmt.Errorf("%w: config.EventsHistoryWindow (%v) must not be below %v", ErrInvalidConfig, cfg.EventsHistoryWindow, DefaultEventFreshDuration)
	}
	if len(cfg.IndexerFuncs) > 1 {
		return fmt.Errorf("%w: cacher %s doesn't support more than one IndexerFunc", ErrInvalidConfig, cfg.GroupResource)
	}
	if cfg.KeyFunc == nil {
		prefix := cfg.ResourcePrefix
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		cfg.KeyFunc = func(obj runtime.Object) (string, error) { return storage.NamespaceKeyFunc(prefix, obj) }
	}
	if cfg.GetAttrsFunc == nil {
		cfg.GetAttrsFunc = storage.DefaultNamespaceScopedAttr
	}
	if cfg.NewFunc == nil {
		cfg.NewFunc = func() runtime.Object { return &unstructured.Unstructured{} }
	}
	if cfg.NewListFunc == nil {
		cfg.NewListFunc = func() runtime.Object { return &unstructured.UnstructuredList{} }
	}
	if cfg.Versioner == nil {
		cfg.Versioner = storage.APIObjectVersioner{}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return nil
}

// start starts the Cacher's goroutines, which Stop stops and waits for: the compactor, the
// dispatcher, the progress requester and the list-and-watch loop.
func (c *Cacher) start(ctx context.Context, cfg Config) {
	// As upstream, the compactor runs only with ListFromCacheSnapshot: it drops snapshots.
	if s, ok := cfg.Storage.(compactRevisioner); ok && !cfg.DisableListFromCacheSnapshot {
		c.compactor = newCompactor(s, c.watchCache, cfg.Clock)
		c.stopWg.Add(1)
		go func() {
			defer c.stopWg.Done()
			c.compactor.run(ctx)
		}()
	}

	c.stopWg.Add(3)
	go func() {
		defer c.stopWg.Done()
		c.dispatchEvents()
	}()
	go func() {
		defer c.stopWg.Done()
		c.progress.run(ctx)
	}()
	go func() {
		defer c.stopWg.Done()
		defer c.terminateAllWatchers()
		for {
			c.startCaching(ctx)
			t := c.clock.NewTimer(restartPeriod)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
			}
		}
	}()
}

// startCaching runs one list-and-watch: every watcher of the previous generation is terminated first,
// the first Replace makes the cache ready, and the end makes it pending again.
//
// Mirrors Cacher.startCaching.
func (c *Cacher) startCaching(ctx context.Context) {
	start := c.clock.Now()
	c.watchCache.setOnReplace(func() {
		c.ready.setReady()
		c.logger.Debug("cacher initialized", "duration", c.clock.Since(start))
		c.metrics.initialized()
	})
	var err error
	defer func() { c.ready.setError(err) }()
	c.terminateAllWatchers()
	if err = c.reflector.listAndWatch(ctx); err != nil {
		c.logger.Error("unexpected ListAndWatch error; reinitializing", "err", err)
	}
}

// getKeys is the KeysFunc of the storage's size estimate: the cache's keys once it has reached the
// storage's current revision, so that a count read right after a write includes it.
//
// Mirrors Cacher.getKeys.
func (c *Cacher) getKeys(ctx context.Context) ([]string, error) {
	rev, err := c.storage.GetCurrentResourceVersion(ctx)
	if err != nil {
		return nil, err
	}
	return c.watchCache.waitUntilFreshAndGetKeys(rev)
}

// Ready reports whether the cache is initialized and serving.
func (c *Cacher) Ready() bool {
	_, _, err := c.ready.check()
	return err == nil
}

// Wait blocks until the cache is ready (nil), stopped (an error matching ErrStopped) or ctx ends.
func (c *Cacher) Wait(ctx context.Context) error { return c.ready.wait(ctx) }

// Stop stops the reflector and the dispatcher, terminates every watcher and waits for all the
// goroutines of the Cacher. It is idempotent.
//
// Mirrors Cacher.Stop.
func (c *Cacher) Stop() {
	c.stopOnce.Do(func() {
		c.ready.stop()
		c.cancel()
		c.stopWg.Wait()
		c.mu.Lock()
		c.watchers.terminateAll(c.stopWatcherLocked)
		// Draining watchers were already forgotten; they must not outlive the Cacher either.
		for w := range c.live {
			w.drainInputBuffer = false
			w.stopLocked()
		}
		c.mu.Unlock()
		c.watcherGo.closeAndWait()
		c.watchCache.helpers.closeAndWait()
	})
}

func (c *Cacher) prepareKey(key string, recursive bool) (string, error) {
	return storage.PrepareKey(c.resourcePrefix, key, recursive)
}

// Watch watches key (a prefix when opts.Recursive) from the cache. Key and resourceVersion errors and
// a cache that is not ready (429 with Retry-After) are returned; every later failure is an ERROR
// event on an already closed watch. See the package documentation for the resourceVersion rules.
// The watcher is indexed by the request's scope (storage.RequestScopeFrom(ctx)), or by the trigger.
//
// Mirrors Cacher.Watch.
func (c *Cacher) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	key, err := c.prepareKey(key, opts.Recursive)
	if err != nil {
		return nil, err
	}
	pred := opts.Predicate
	requestedRV, err := c.versioner.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	readyGeneration, downtime, err := c.ready.check()
	if err != nil {
		return nil, apierrors.NewTooManyRequests(err.Error(), retryAfterForUnreadyCache(downtime))
	}

	idx := c.indexOf(ctx, pred)
	chanSize := c.watchCache.suggestedWatchChannelSize(c.trigger != nil, idx.triggerSupported)

	requiredRV, err := c.watchCacheResourceVersion(ctx, requestedRV, opts)
	if err != nil {
		return newErrWatcher(err), nil
	}
	deadline, _ := ctx.Deadline()
	watcher := newCacheWatcher(chanSize, newWatchFilter(key, pred), c.versioner, deadline, pred.AllowWatchBookmarks,
		c.clock, c.logger, identifierFor(key, pred))

	// The freshness wait takes and releases the read lock itself: holding it across would block the
	// events the wait is for.
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		c.watchCache.RLock()
		err := c.watchCache.waitUntilFreshLocked(requiredRV)
		c.watchCache.RUnlock()
		if err != nil {
			return newErrWatcher(err), nil
		}
	}

	// Under the read lock no event can be applied, so the interval and the registration below see the
	// same cache state: every later event reaches the watcher through input.
	c.watchCache.RLock()
	defer c.watchCache.RUnlock()
	interval, err := c.watchCache.getAllEventsSinceLocked(requiredRV, key, opts)
	if err != nil {
		return newErrWatcher(err), nil
	}
	if isListWatchRequest(opts) {
		be := &watchCacheEvent{Type: watch.Bookmark, Object: c.newFunc(), ResourceVersion: c.watchCache.resourceVersion}
		if err := c.versioner.UpdateObject(be.Object, be.ResourceVersion); err != nil {
			c.logger.Error("failure to set resourceVersion on the initial-events-end bookmark", "err", err)
		} else {
			interval.initialEventsEndBookmark = be
		}
	}
	bookmarkAfterRV := c.bookmarkAfterResourceVersionLocked(requestedRV, requiredRV, opts)

	return c.register(ctx, watcher, readyGeneration, idx, bookmarkAfterRV, interval, requiredRV), nil
}

// watcherIndex is how a watcher is indexed: its scope and, when the Cacher has a trigger, the
// trigger's value.
type watcherIndex struct {
	scope            namespacedName
	triggerValue     string
	triggerSupported bool
}

// indexOf returns the index of a watcher with pred in ctx's request scope.
func (c *Cacher) indexOf(ctx context.Context, pred storage.Predicate) watcherIndex {
	// The request's namespace and name scope the watcher; the field selector's stand in where the
	// request has none. A watcher of one namespace is then offered only that namespace's events.
	request := storage.RequestScopeFrom(ctx)
	idx := watcherIndex{scope: namespacedName{namespace: request.Namespace, name: request.Name}}
	if pred.Field != nil {
		if ns, ok := pred.Field.RequiresExactMatch("metadata.namespace"); ok && idx.scope.namespace == "" {
			idx.scope.namespace = ns
		}
		if name, ok := pred.Field.RequiresExactMatch("metadata.name"); ok && idx.scope.name == "" {
			idx.scope.name = name
		}
	}
	// Namespaces carry no metadata.namespace field, so a namespace scoped to itself is cluster-wide.
	if c.groupResource == (schema.GroupResource{Resource: "namespaces"}) && idx.scope.namespace != "" && idx.scope.namespace == idx.scope.name {
		idx.scope.namespace = ""
	}
	// The trigger indexes only predicates that name its field among their IndexFields.
	if c.trigger != nil && pred.Field != nil && slices.Contains(pred.IndexFields, c.trigger.indexName) {
		if v, ok := pred.Field.RequiresExactMatch(c.trigger.indexName); ok {
			idx.triggerValue, idx.triggerSupported = v, true
		}
	}
	return idx
}

// register adds watcher to the Cacher's watchers and starts its goroutine, which sends interval and
// then its input; it returns the watch the caller gets, one closed at once when the cache was
// re-initialized or stopped since readyGeneration. The caller holds the watch cache's read lock.
func (c *Cacher) register(ctx context.Context, watcher *cacheWatcher, readyGeneration int, idx watcherIndex,
	bookmarkAfterRV uint64, interval *watchCacheInterval, requiredRV uint64) watch.Interface {
	c.mu.Lock()
	defer c.mu.Unlock()
	if generation, _, err := c.ready.check(); err != nil || generation != readyGeneration {
		// Re-initialized (or stopped) since the watch began: it would be terminated at once anyway.
		return newImmediateCloseWatcher()
	}
	index := c.watcherIdx
	c.watcherIdx++
	watcher.forget = c.forgetWatcher(watcher, index, idx.scope, idx.triggerValue, idx.triggerSupported)
	watcher.setBookmarkAfterResourceVersion(bookmarkAfterRV)
	watcher.metrics = c.metrics
	c.watchers.add(watcher, index, idx.scope, idx.triggerValue, idx.triggerSupported)
	if watcher.allowWatchBookmarks {
		c.bookmarkWatchers.add(watcher)
	}
	c.live[watcher] = struct{}{}
	started := c.watcherGo.start(func() {
		defer func() {
			c.mu.Lock()
			delete(c.live, watcher)
			c.mu.Unlock()
		}()
		watcher.processInterval(ctx, interval, requiredRV)
	})
	if !started {
		delete(c.live, watcher)
		c.watchers.remove(index, idx.scope, idx.triggerValue, idx.triggerSupported)
		c.stopWatcherLocked(watcher)
		return newImmediateCloseWatcher()
	}
	return watcher
}

// watchCacheResourceVersion is the resourceVersion the cache must reach for this watch: the one asked
// for, 0 for the legacy watch with neither resourceVersion nor SendInitialEvents, and etcd's current
// revision for a consistent watch (resourceVersion unset, SendInitialEvents set).
//
// Mirrors Cacher.getWatchCacheResourceVersion.
func (c *Cacher) watchCacheResourceVersion(ctx context.Context, requestedRV uint64, opts storage.ListOptions) (uint64, error) {
	if opts.ResourceVersion != "" {
		return requestedRV, nil
	}
	if opts.SendInitialEvents == nil {
		return 0, nil
	}
	return c.storage.GetCurrentResourceVersion(ctx)
}

// bookmarkAfterResourceVersionLocked is the resourceVersion a watch-list's end bookmark must reach:
// the required one for a consistent watch, the cache's for RV=0, the requested one otherwise; 0 (none)
// for other watches. The caller holds the watch cache's read lock.
//
// Mirrors Cacher.getBookmarkAfterResourceVersionLockedFunc.
func (c *Cacher) bookmarkAfterResourceVersionLocked(requestedRV, requiredRV uint64, opts storage.ListOptions) uint64 {
	switch {
	case !isListWatchRequest(opts):
		return 0
	case opts.ResourceVersion == "":
		return requiredRV
	case requestedRV == 0:
		return c.watchCache.resourceVersion
	default:
		return requestedRV
	}
}

// isListWatchRequest reports a watch-list: initial events ended by an annotated bookmark.
func isListWatchRequest(opts storage.ListOptions) bool {
	return opts.SendInitialEvents != nil && *opts.SendInitialEvents && opts.Predicate.AllowWatchBookmarks
}

// forgetWatcher returns the watcher's forget: unregister it and stop it (deferred during a dispatch).
//
// Mirrors cacher.go forgetWatcher.
func (c *Cacher) forgetWatcher(w *cacheWatcher, index int, scope namespacedName, value string, supported bool) func(bool) {
	return func(drain bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		w.drainInputBuffer = drain
		// Safe when already removed (a Stop racing terminateAllWatchers); stopLocked is idempotent.
		c.watchers.remove(index, scope, value, supported)
		c.stopWatcherLocked(w)
	}
}

func (c *Cacher) stopWatcherLocked(w *cacheWatcher) {
	if c.dispatching {
		c.watchersToStop = append(c.watchersToStop, w)
		return
	}
	w.stopLocked()
}

func (c *Cacher) terminateAllWatchers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.watchers.allWatchers) > 0 || len(c.watchers.valueWatchers) > 0 {
		c.logger.Warn("terminating all watchers")
	}
	c.watchers.terminateAll(c.stopWatcherLocked)
}

// processEvent queues an event of the watch cache for the dispatcher, blocking while the queue is full
// (this pushes back on the reflector) unless the Cacher stops.
func (c *Cacher) processEvent(event *watchCacheEvent) {
	select {
	case c.incoming <- event:
	case <-c.ctx.Done():
	}
}

// dispatchEvents is the dispatcher: once the cache has listed, it offers every event to the watchers
// that may want it, and every 1–1.25 s sends a bookmark at the last processed resourceVersion to the
// watchers whose bookmark is due. Storage bookmarks only move that resourceVersion. The events already
// queued when it takes one are taken with it and dispatched as a batch (dispatchBatch says why).
//
// Mirrors Cacher.dispatchEvents.
func (c *Cacher) dispatchEvents() {
	select {
	case <-c.watchCache.listed:
	case <-c.ctx.Done():
		return
	}
	c.watchCache.RLock()
	lastProcessedRV := c.watchCache.listResourceVersion
	c.watchCache.RUnlock()
	c.lastProcessedRV.Store(lastProcessedRV)

	bookmarkTimer := c.clock.NewTimer(wait.Jitter(time.Second, 0.25))
	defer bookmarkTimer.Stop()
	for {
		select {
		case event := <-c.incoming:
			c.batch = append(c.batch[:0], event)
		more:
			for len(c.batch) < maxDispatchBatch {
				select {
				case event := <-c.incoming:
					c.batch = append(c.batch, event)
				default:
					break more
				}
			}
			c.dispatchBatch(c.batch)
			c.metrics.dispatched(len(c.batch))
			lastProcessedRV = c.batch[len(c.batch)-1].ResourceVersion
			c.lastProcessedRV.Store(lastProcessedRV)
			clear(c.batch)
		case <-bookmarkTimer.C():
			bookmarkTimer.Reset(wait.Jitter(time.Second, 0.25))
			be := &watchCacheEvent{Type: watch.Bookmark, Object: c.newFunc(), ResourceVersion: lastProcessedRV}
			if err := c.versioner.UpdateObject(be.Object, lastProcessedRV); err != nil {
				c.logger.Error("failure to set resourceVersion on bookmark event", "resourceVersion", lastProcessedRV, "err", err)
				continue
			}
			c.dispatchBookmark(be)
		case <-c.ctx.Done():
			return
		}
	}
}

// dispatchBookmark offers a bookmark, without blocking, to the watchers whose bookmark is due; a
// full watcher misses it.
//
// Mirrors Cacher.dispatchEvent for a bookmark.
func (c *Cacher) dispatchBookmark(event *watchCacheEvent) {
	c.startDispatchingBookmark()
	defer c.finishDispatching()
	for _, w := range c.watchersBuffer {
		w.nonblockingAdd(event)
	}
}

// startDispatchingBookmark collects the watchers whose bookmark is due and marks a dispatch in flight.
//
// Mirrors Cacher.startDispatching for a bookmark.
func (c *Cacher) startDispatchingBookmark() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dispatching = true
	c.watchersBuffer = c.watchersBuffer[:0]
	for _, ws := range c.bookmarkWatchers.popExpired() {
		for _, w := range ws {
			// Stopped watchers stay in their bucket until it pops.
			if w.stopped {
				continue
			}
			c.watchersBuffer = append(c.watchersBuffer, w)
			c.expiredBookmarks = append(c.expiredBookmarks, w)
		}
	}
}

// triggerValues are the trigger values of the object now and before.
//
// Mirrors Cacher.triggerValuesThreadUnsafe.
func (c *Cacher) triggerValues(event *watchCacheEvent) ([]string, bool) {
	if c.trigger == nil {
		return nil, false
	}
	result := []string{c.trigger.fn(event.Object)}
	if event.PrevObject == nil {
		return result, true
	}
	if prev := c.trigger.fn(event.PrevObject); prev != result[0] {
		result = append(result, prev)
	}
	return result, true
}

// finishDispatching ends the dispatch: the stops deferred meanwhile happen now (closing an input that
// add may still write to would panic), and the watchers that got a bookmark are queued for the next.
//
// Mirrors Cacher.finishDispatching.
func (c *Cacher) finishDispatching() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dispatching = false
	for _, w := range c.watchersToStop {
		w.stopLocked()
	}
	clear(c.watchersToStop)
	c.watchersToStop = c.watchersToStop[:0]
	for _, w := range c.expiredBookmarks {
		if !w.stopped {
			c.bookmarkWatchers.add(w)
		}
	}
	clear(c.expiredBookmarks)
	c.expiredBookmarks = c.expiredBookmarks[:0]
	clear(c.watchersBuffer)
}

// errWatcher is a watch that delivers one ERROR event and is closed.
type errWatcher struct{ result chan watch.Event }

// newErrWatcher carries err as an ERROR event: an API error's Status, anything else as a 500.
//
// Mirrors cacher.go newErrWatcher.
func newErrWatcher(err error) watch.Interface {
	ev := watch.Event{Type: watch.Error}
	var se *apierrors.StatusError
	if errors.As(err, &se) {
		status := se.ErrStatus
		ev.Object = &status
	} else {
		ev.Object = &metav1.Status{
			Status:  metav1.StatusFailure,
			Message: err.Error(),
			Reason:  metav1.StatusReasonInternalError,
			Code:    http.StatusInternalServerError,
		}
	}
	w := &errWatcher{result: make(chan watch.Event, 1)}
	w.result <- ev
	close(w.result)
	return w
}

func (w *errWatcher) ResultChan() <-chan watch.Event { return w.result }

func (w *errWatcher) Stop() {}

// immediateCloseWatcher is a watch closed before any event: the client re-watches.
type immediateCloseWatcher struct{ result chan watch.Event }

func newImmediateCloseWatcher() watch.Interface {
	w := &immediateCloseWatcher{result: make(chan watch.Event)}
	close(w.result)
	return w
}

func (w *immediateCloseWatcher) ResultChan() <-chan watch.Event { return w.result }

func (w *immediateCloseWatcher) Stop() {}

// getFromCache reads key from the cache once it has reached opts.ResourceVersion (waiting up to 3 s,
// else 504). A missing key is a KeyNotFound storage error at the cache's resourceVersion unless
// opts.IgnoreNotFound, which zeroes out.
//
// Mirrors Cacher.Get.
func (c *Cacher) getFromCache(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	getRV, err := c.versioner.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return err
	}
	preparedKey, err := c.prepareKey(key, false)
	if err != nil {
		return err
	}
	outVal, err := enforcePtr(out)
	if err != nil {
		return err
	}
	elem, exists, readRV, err := c.watchCache.waitUntilFreshAndGet(getRV, preparedKey)
	if err != nil {
		return err
	}
	if !exists {
		outVal.Set(reflect.Zero(outVal.Type()))
		if opts.IgnoreNotFound {
			return nil
		}
		return storage.NewKeyNotFoundError(preparedKey, int64(readRV))
	}
	return setObject(outVal, elem.Object.DeepCopyObject())
}

func enforcePtr(obj runtime.Object) (reflect.Value, error) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return reflect.Value{}, fmt.Errorf("expected pointer, but got %T", obj)
	}
	return v.Elem(), nil
}

func setObject(outVal reflect.Value, obj runtime.Object) error {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Type() != outVal.Type() {
		return fmt.Errorf("cached object of type %T cannot be stored in %v", obj, outVal.Type())
	}
	outVal.Set(v.Elem())
	return nil
}

// listFromCache serves a list from the watch cache: 429 while it is not ready; the items the watch
// cache reads (waitUntilFreshAndGetList), those the predicate selects up to the limit (none for RV
// "0"), and a continue token relative to the caller's key at the list's resourceVersion.
//
// Mirrors Cacher.GetList.
func (c *Cacher) listFromCache(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	preparedKey, err := c.prepareKey(key, opts.Recursive)
	if err != nil {
		return err
	}
	if _, err := c.versioner.ParseResourceVersion(opts.ResourceVersion); err != nil {
		return err
	}
	if _, downtime, err := c.ready.check(); err != nil {
		return apierrors.NewTooManyRequests(err.Error(), retryAfterForUnreadyCache(downtime))
	}
	if _, err := meta.GetItemsPtr(listObj); err != nil {
		return err
	}
	elems, readRV, err := c.watchCache.waitUntilFreshAndGetList(ctx, preparedKey, opts)
	if err != nil {
		return err
	}

	limit := computeListLimit(opts)
	var selected []runtime.Object
	var lastKey string
	hasMore := false
	for i, e := range elems {
		if opts.Predicate.MatchesObjectAttributes(e.Labels, e.Fields) {
			selected = append(selected, e.Object.DeepCopyObject())
			lastKey = e.Key
		}
		if limit > 0 && int64(len(selected)) >= limit {
			hasMore = i < len(elems)-1
			break
		}
	}
	if selected == nil {
		selected = []runtime.Object{}
	}
	if err := meta.SetList(listObj, selected); err != nil {
		return err
	}
	// Upstream encodes the token relative to the key it was given, not the prepared one.
	continueValue, remaining, err := storage.PrepareContinueToken(lastKey, key, int64(readRV), int64(len(elems)), hasMore, opts)
	if err != nil {
		return err
	}
	return c.versioner.UpdateList(listObj, readRV, continueValue, remaining)
}

// computeListLimit is the limit a list from the cache applies: none for RV "0".
//
// Mirrors cacher.go computeListLimit.
func computeListLimit(opts storage.ListOptions) int64 {
	if opts.Predicate.Limit <= 0 || opts.ResourceVersion == "0" {
		return 0
	}
	return opts.Predicate.Limit
}
