// Package cache is listwatch's mirror of the apiserver's watch cache (k8s.io/apiserver v0.37
// pkg/storage/cacher: cacher.go, delegator.go, watch_cache.go, watch_cache_history.go,
// watch_cache_interval.go, cache_watcher.go, caching_object.go, time_budget.go, ready.go, store/,
// metrics/)
// over a storage.Interface such as *watch.Store.
//
// # API
//
//   - New(Config) starts a Cacher over Config.Storage, a storage.Interface. Wait blocks until the
//     first list is applied; Ready reports it. Stop ends everything and waits for every goroutine.
//   - A *Cacher is itself a storage.Interface. Upstream splits it in two: the Cacher serves Watch,
//     Get and GetList from the cache, and a CacheDelegator (delegator.go) wrapping the Cacher and the
//     storage decides which reads the cache serves and passes the rest through. listwatch keeps one
//     type with upstream's file map: delegator.go holds the decisions (Get, GetList,
//     shouldDelegateList) and the pass-throughs (Create, GuaranteedUpdate and Delete, which get the
//     cached object as their current-state suggestion, GetCurrentResourceVersion,
//     RequestWatchProgress, Stats, Versioner, CompactRevision); cacher.go the cache reads (Watch,
//     getFromCache, listFromCache) and the dispatcher; compactor.go the compactor.
//   - A watch is indexed by the scope of the API request it serves: storage.RequestScopeFrom(ctx),
//     which the HTTP layer sets with storage.WithRequestScope as the apiserver's request context
//     carries it.
//   - CachingObject is the object of every ADDED, MODIFIED and DELETED event a watcher delivers,
//     live or replayed. It caches each serialization, so writing one event to many watchers encodes
//     the object once per encoder. An HTTP layer keeps that by handing event.Object to an
//     apimachinery encoder (encoder.Encode detects runtime.CacheableObject), or by calling
//     CacheEncode(encoder.Identifier(), encodeFunc, w) to frame the bytes itself. Event objects are
//     shared between watchers and must not be modified (TestCachingObjectEncodesOnce,
//     TestCachingObjectAccessors, TestEventsSerializedOnce). Beyond upstream, which wraps only the
//     live event for its dispatch, the watchers replaying an object at the same time share one
//     wrapper too: those replaying a stored element as an initial event (from resourceVersion 0
//     or with sendInitialEvents), and those replaying one history event, so that thousands of
//     watches starting on a large object encode it once and copy it not at all. The wrapper is
//     held only by the watchers delivering it (the cache keeps weak pointers, to the element or
//     event and to the wrapper, swept out as the map grows), so it and its encodings are released
//     with the last of them and a cached event costs no more memory
//     (TestReplayedEventsShareEncoding, TestSharerForgetsCollectedEntries).
//   - Config.Metrics (NewMetrics(registerer)) records the apiserver's watch cache metrics under the
//     resource's group and resource: apiserver_watch_cache_events_received_total,
//     apiserver_watch_cache_events_dispatched_total (every event the dispatcher takes, storage
//     bookmarks included, as upstream), apiserver_init_events_total (the events a new watcher
//     replays), apiserver_terminated_watchers_total (closed for not keeping up),
//     apiserver_watch_cache_initializations_total, apiserver_watch_cache_resource_version (its 15
//     low digits), watch_cache_capacity and watch_cache_capacity_increase_total /
//     _decrease_total (upstream's names, without the apiserver_ prefix), and
//     apiserver_registered_watchers by Config.Kind's group, version and kind (the gauge earlier
//     apiservers kept). Several Cachers, and several NewMetrics calls, may share one registry
//     (TestMetrics, TestMetricsTerminatedAndCapacity).
//   - A watch's Backlog method (not part of watch.Interface) counts the events queued for it that
//     ResultChan does not show yet, so that a consumer flushing whenever ResultChan is empty can wait
//     for them (TestBacklogCountsQueuedEvents).
//   - Config.DisableListFromCacheSnapshot turns off what upstream's ListFromCacheSnapshot gate
//     (beta, on by default in v0.37) turns on: the snapshots and their compactor (see Lists and gets).
//   - Config.DisableSizeBasedListCostEstimate turns off what upstream's SizeBasedListCostEstimate
//     gate (beta, on by default in v0.37) turns on: New enables the size estimate of a storage that
//     keeps one (*watch.Store's EnableResourceSizeEstimation) with the cache's keys (see Stats).
//   - A watch's initialization signal (storage.WithWatchInitializedSignal on its context, where the
//     apiserver carries API Priority and Fairness's) is called as upstream's Cacher calls
//     utilflowcontrol.WatchInitialized (see Watch initialization).
//   - Errors: New fails with errors matching ErrInvalidConfig (TestConfigValidation); a stopped
//     Cacher answers with errors naming ErrStopped; the API errors are apimachinery StatusErrors
//     (429, 410, 504, 500).
//
// TestConformance plays every case of package storagetest (upstream's pkg/storage/testing) against a
// Cacher over the etcd3 storage, with upstream's expectations for its Cacher where they differ from
// etcd's; the invariants below name those cases next to the package's own tests. With -short it skips
// the cases that wait real time on the cache (a lease's expiry, a 3 s watch deadline, the 3 s
// freshness timeout), whose behaviour the package's fake-clock tests check, and starts each Cacher
// without the failed first list (its relist waits 1 s of real time). Every bookmark but the
// initial-events-end one comes from the dispatcher's timer on the injected clock: on a fake clock a
// watch gets none the test did not step to (TestBookmarksFollowTheClock).
//
// # Filling the cache
//
// A reflector (client-go's, reduced to what the cacher uses) lists the whole resource with
// resourceVersion unset (a consistent read) in pages of 10000, replaces the cache with it, then watches
// from the list's resourceVersion with ProgressNotify. A clean close re-watches from the last
// resourceVersion seen; a 429 backs off and re-watches; a 500 re-watches for up to 30 s; anything else
// (410 included) ends the round, which marks the cache pending, terminates every watcher and relists
// one second later. Every applied event also moves the cache's resourceVersion, and so does every
// progress notification (TestRelist, TestReflectorRewatchesWithoutRelist).
//
// # Invariants
//
//   - Readiness. The cache is Pending until a list is applied, Ready until the round ends, then
//     Pending again; Stopped is final. Each Ready starts a new generation. While not ready, Watch and
//     cache-served GetList answer 429 "storage is (re)initializing" with Retry-After
//     clamp(e^(0.06·downtime s), 1, 30); Get and unfiltered paginated lists read the storage instead. A
//     watch set up across a generation change is closed at once, without an event (TestReady,
//     TestNotReady, TestRetryAfterForUnreadyCache, TestWatchRegistrationChecksGeneration).
//   - History. The cyclic buffer starts at capacity 100; when full it doubles (up to 102400 for a 75 s
//     window, scaled for longer windows) if all of it is younger than the window, halves (down to 100)
//     if its newest quarter is older than the window, then evicts the oldest event. Its start index
//     never decreases; a relist empties it by moving the start to the end, which invalidates every
//     interval built before: such a watcher closes without an ERROR (TestHistoryResize,
//     TestHistoryGrowsToUpperBoundThenEvicts, TestHistoryShrinksWhenStale, TestCapacityUpperBound,
//     TestHistoryIntervalBounds, TestHistoryResetInvalidatesIntervals).
//   - Watch resourceVersions. RV "" without SendInitialEvents (legacy) and RV "0" with
//     SendInitialEvents unset replay the current state as ADDED events in key order, each object with
//     its own resourceVersion and the event at the snapshot's; SendInitialEvents=true does the same
//     after waiting until the cache reaches the required RV (etcd's current revision for RV "", else
//     the RV), requesting progress every 100 ms and failing after 3 s with ERROR 504 "Too large
//     resource version" (Retry-After 1). Like every freshness wait (of gets and lists too), it ends
//     only so, or when the cache stops: a request deadline or cancellation does not cut it short into
//     a 500 (TestWatchListFreshnessWaitOutlivesRequest). RV "0" with SendInitialEvents=false starts
//     from the cache's RV; RV N replays the history after N. The oldest replayable RV is listRV+1 while nothing was
//     evicted since the relist, else the first buffered event's; an RV below it minus one is ERROR 410
//     "too old resource version: RV (oldest−1)". A future RV (SendInitialEvents unset or false) opens
//     a watch that waits for events above it. With SendInitialEvents=true and AllowWatchBookmarks the
//     initial events end with a BOOKMARK at the cache's resourceVersion when the interval was taken
//     (not the highest object RV), annotated k8s.io/initial-events-end: "true"
//     (TestWatchInitialEventsInKeyOrder, TestWatchResourceVersionZeroWithoutInitialEvents,
//     TestWatchListWaitsForFreshness, TestWatchFutureResourceVersion, TestRelist; storagetest
//     WatchSemantics, InitialEventsExtended, WatchListMatchSingle, WatchFromZero, WatchFromNonZero,
//     WatchCompacted, WatchListTooLargeRV, WatchFutureRV).
//   - Order. Each watcher delivers only events above the highest RV it has sent (so replay and live
//     events never duplicate), in RV order, as a gap-free prefix of what it should get: once stopped it
//     may send at most the next event in order. Filtering is by key prefix on a "/" boundary and by the
//     selectors, on the current and the previous state: entering is ADDED, staying MODIFIED, leaving
//     DELETED of the previous object at the event's RV (TestCacheWatcherDoneCheckKeepsPrefix,
//     TestCacheWatcherHandlesFiltering, TestInitialEventsNotDuplicatedByLaggingDispatcher,
//     TestWatchKeyPrefixBoundary, TestWatchersMatchModel; storagetest Watch, ClusterScopedWatch,
//     NamespaceScopedWatch, DeleteTriggerWatch, DeleteEventObjectHaveLatestRV).
//   - Dispatch scope. A watcher is registered under the namespace and name of its request
//     (storage.RequestScopeFrom), the field selector's metadata.namespace and metadata.name standing
//     in where the request has none; with a trigger configured, a predicate naming the trigger's field
//     in IndexFields and pinning it to one value registers it under that value instead (channel size
//     at most 10). An event is offered only to the watchers of its object's namespace and name, of its
//     namespace, of its name, the cluster-wide ones, and those of its object's trigger value now or
//     before: a watcher of a quiet namespace whose client briefly stops reading is never filled, and
//     so never closed, by other namespaces' traffic (TestWatchScopedByRequest,
//     TestQuietNamespaceWatcherKeptDuringTraffic, TestTriggerNeedsIndexFields,
//     TestTriggerIndexedWatchers, TestScopeIndexedWatchers, TestNamespacesScopedToThemselves;
//     storagetest ClusterScopedWatch, NamespaceScopedWatch; proptest
//     TestChainUnreadClientsMatchModel, TestChainQuietNamespaceClientKept).
//   - Dispatch. Every event is offered to the watchers its scope selects, first without blocking, then,
//     for the full ones, blocking within a shared time budget (starts at 0, refills 50 ms per second,
//     caps at 100 ms); a watcher still full when the budget is spent is closed without an ERROR (a
//     watch-list that accepted its bookmark but has not sent it is drained first), and the client
//     re-watches from its last RV. Watchers stopped during a dispatch are stopped once it ends, so
//     input is never closed while the dispatcher may send (TestSlowWatcherClosedWithoutError,
//     TestBlockedWatcherRescuedWithinBudget, TestTimeBudget, TestStopDuringDispatch,
//     TestCacheWatcherDraining, TestEventsSerializedOnce; storagetest WatcherTimeout,
//     DelayedWatchDelivery). The events queued together are dispatched as one batch, watcher by
//     watcher, so that a watcher's goroutine wakes once per batch rather than once per event (with
//     10000 watchers that wake-up is most of a delivery's cost); a watcher whose input fills part
//     way is offered the rest again without blocking after the others, and blocked on only when
//     such a round makes no progress. Each watcher still gets exactly its events in order
//     (TestBatchDeliversEachWatcherItsEvents), and a closed one a gap-free prefix
//     (TestBatchClosesSlowWatcherAfterPrefix).
//   - Bookmarks. About every second the watchers with AllowWatchBookmarks whose bookmark is due (every
//     minute, 2 s before the watch context's deadline, at once while a watch-list waits for its end
//     bookmark) are offered a BOOKMARK at the last resourceVersion the dispatcher processed, never
//     blocking (dropped if full). A watcher delivers a bookmark only if its RV is above what it sent
//     (or equal, for the still unsent end bookmark), so bookmark RVs never decrease and never pass an
//     event the watcher has yet to deliver. Storage progress notifications are not dispatched
//     (TestBookmarksNeverBlock, TestBookmarkBuckets, TestNextBookmarkTime,
//     TestBookmarkAfterResourceVersion; storagetest WatchDispatchBookmarkEvents,
//     WatchBookmarksWithCorrectResourceVersion).
//   - Watch initialization. A watch signals its initialization once, from its goroutine, after it is
//     registered and its initial events are sent, before it serves live events, as upstream's
//     cacheWatcher.process; a watch refused (a bad key, an unready or stopped cache) or answered with
//     an ERROR (410 too old) does not signal, as upstream's error paths do not
//     (TestWatchSignalsInitialized).
//   - Stats. Stats is the storage's (CacheDelegator.Stats). With the size estimate on (the default),
//     its count is the cache's keys once the cache has reached the storage's current revision
//     (Cacher.getKeys) and its size the average of the stored values the storage read; off, etcd's
//     count and no size. A storage error (a canceled context, the current revision unreadable) is
//     Stats' error, and New fails when the storage refuses the estimate (TestStatsSizeEstimate,
//     TestStatsErrors; storagetest Stats).
//   - Stop. Stop on a watch is idempotent; ResultChan closes once the watcher's goroutine exits.
//     Once Stop returns, no later event is delivered. Cacher.Stop terminates every watcher, draining
//     ones included, and returns only after every goroutine of the Cacher (dispatcher, reflector,
//     progress requester, watchers, wait helpers) has exited (TestCacheWatcherStopIsIdempotent,
//     TestNothingDeliveredAfterStop, TestCacherStop, TestStopDuringBlockedDispatch; goleak in
//     TestMain).
//
// # Lists and gets
//
// GetList serves from the cache RV "0" (any staleness, limit ignored), NotOlderThan N (waiting up to
// 3 s, else 504) and RV "" (consistent: the cache waits up to 3 s for etcd's current revision, else
// the storage answers). With snapshots, as upstream's ListFromCacheSnapshot (beta, on by default in
// v0.37): every event leaves a snapshot of the state after it and every relist one of its state (after
// dropping the others); the snapshots below the oldest event the history keeps go once it is full,
// and those below the storage's compaction once the compactor (polling the storage's CompactRevision
// every 15 s, when it has one) has seen it. A recursive Exact list, a legacy exact list (an RV with a
// limit) and a continue token at RV N are answered from the newest snapshot at or below N while one
// is kept, or waited for while the cache has not reached N (3 s, then 504 "Too large resource
// version" with Retry-After 1 and the cache's RV, without reading the storage); below every snapshot,
// for one key, or when the snapshot went meanwhile (410), the storage answers (and says 410 if etcd
// compacted N). A continue token of a consistent list (negative RV) is a consistent read.
// Config.DisableListFromCacheSnapshot mirrors the gate off, and its zero value the default on
// (TestListFromCacheSnapshotDefault): the cache then keeps no snapshot and runs no compactor
// (CompactRevision stays 0), every exact list, legacy exact list and continue token (a negative one
// too) is read from the storage, and a 410 from the cache is not retried there; lists at RV "0",
// NotOlderThan and consistent lists are the cache's as before (TestListWithoutSnapshots,
// TestShouldDelegateList's ListFromCacheSnapshot=false run; storagetest List and ConsistentList run
// with the gate off by interop/apiserverconf TestCacherConformance). While the
// cache is not ready, every list it would serve is 429 with Retry-After, except an unfiltered list
// with a limit, which reads the storage. A list from the cache has the cache's resourceVersion, or N
// for one at an exact revision; with a limit its continue token resumes at that resourceVersion,
// its start key written relative to the caller's key, as upstream's. Get with an RV waits like a
// list and reads the cached object; without one it reads the storage. Objects returned by Get and
// GetList are copies. Writes pass through with the cached object as suggestion. Checked by
// TestListAnyStaleness, TestListConsistent, TestListNotOlderThan, TestListDelegation,
// TestListPagination, TestListArgumentErrors, TestListSingleObject, TestListExactFromCacheSnapshots,
// TestListContinueTokenRelativeToCallerKey, TestListExactFutureResourceVersion,
// TestListFromSnapshotsNotReady, TestListExactAtCompactedRevision, TestListExactAtEvictedRevision,
// TestShouldDelegateList, TestWatchCacheSnapshots, TestSnapshotter, TestGet, TestWritesPassThrough,
// and storagetest ConsistentList, ListPaging, ExactAtCompactedRV, InconsistentContinue, Get,
// HugeResourceVersion, KeySchema, WriteErrors. Upstream's consistency checker
// (DetectCacheInconsistency), which stops the snapshots while the cache and etcd differ, is not
// mirrored.
//
// Every timeout, timer and timestamp uses Config.Clock; the tests that depend on time drive a fake
// clock (newEnv's withFakeClock).
package cache
