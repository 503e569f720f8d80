// Package kubemodel is the one model of what a Kubernetes watch must deliver, shared by the property
// tests that judge listwatch's watches: etcd3's TestWatchMatchesModel (the etcd3 storage), cache's
// TestWatchersMatchModel (the watch cache) and proptest's TestChainWatchersMatchModel and fault tests
// (HTTP watches of the whole chain, through proptest/chaintest). It knows nothing of the code it
// judges: it takes a write history and delivered events, and uses only apimachinery and the
// vocabulary of package storage (storage.Predicate to select).
//
// It follows k8s.io/apiserver's pkg/storage/etcd3/watcher.go (Watch, getStartWatchResourceVersion,
// areInitialEventsRequired, isInitialEventsEndBookmarkRequired, startWatching, transform),
// pkg/storage/etcd3/event.go (parseEvent), pkg/storage/cacher/cacher.go (Watch, startDispatching),
// pkg/storage/cacher/cache_watcher.go (convertToWatchEvent, processInterval, process),
// pkg/storage/cacher/watch_cache.go (waitUntilFreshAndBlock, getAllEventsSinceLocked), apimachinery's
// pkg/apis/meta/internalversion/defaults.go (SetListOptionsDefaults), and the expectations of
// pkg/storage/testing/watcher_tests.go (RunWatchSemantics, RunTestWatchFromZero,
// RunTestWatchDeleteEventObjectHaveLatestRV, RunTestClusterScopedWatch, RunTestNamespaceScopedWatch,
// RunTestOptionalWatchBookmarksWithCorrectResourceVersion).
//
// A History holds the writes (Apply; Advance for writes of other resources) as Objects: a key,
// the revision that wrote it, the labels and fields predicates match, and a Render of the object as
// delivered at a resourceVersion (FromUnstructured renders canonical JSON, as EventOf reads a
// delivered *unstructured.Unstructured; proptest/chaintest renders its own pods the same way). A
// Selection is a key (a prefix when recursive) and a predicate. From them:
//
//   - StateAt and Initial: the state at a revision; the initial replay is its selected objects in
//     key order, each ADDED at its own revision (TestChangesByTransition).
//   - Changes and Transition: after a start revision, one event per write that changes what the
//     watch selects: ADDED on entering (creation included), MODIFIED while staying, DELETED with the
//     previous state at the new revision on leaving (deletion included) (TestChangesByTransition).
//   - ExpectStorage and ExpectCache turn a Request (resourceVersion unset, "0" or N;
//     sendInitialEvents; allowWatchBookmarks) into an Expectation: whether the watch replays and ends
//     its replay with the initial-events-end BOOKMARK, the range of start revisions it may pick
//     (floating for the etcd3 storage's list, which runs after Watch returned; within the cache's
//     revision bounds for the cache), whether progress BOOKMARKs may come and may carry the start
//     revision (the storage's, not the cache's), and the ERROR it must (410, 504, 500) or may (a
//     cache's freshness wait that runs out) deliver instead. Request.WithWatchListDefaults is the
//     apiserver's defaulting, which the HTTP layer applies first (TestExpectStartRevisions,
//     TestCompaction).
//   - Check judges delivered Events: for one start in range, a prefix of the replay, the end
//     BOOKMARK and the changes, objects compared exactly; BOOKMARKs only where allowed, never going
//     back, never below a delivered event, never at or past a pending one; or exactly the one
//     ERROR; or, with MayCompactAt, a storage watch's end by a compaction it had not passed. It
//     refuses a missing, duplicated, reordered or extra event, a wrong transition type, a wrong
//     object and a misplaced bookmark with an error wrapping ErrMismatch
//     (TestCheckAcceptsCorrectStreams, TestCheckRejectsWrongStreams, TestCheckStartRange,
//     TestCheckRefusals, TestCompaction). The Verdict says whether the prefix is complete and where a
//     client resumes; Owed counts the events owed, without rendering (TestOwed).
//   - DispatchOf and Dispatch say where a watch cache indexes a watcher (the request's namespace and
//     name, the field selector's where the request has none, or the trigger's value when the
//     predicate names it in IndexFields) and History.Offered counts the writes it then offers to it,
//     after cacher.go Watch and startDispatching (TestDispatchOffers).
//   - History refuses writes out of revision order, a deletion of an absent object and a key
//     written twice in one revision with ErrHistory; a request whose resourceVersion is not a
//     revision is ErrRequest; an event it cannot read is ErrEvent (TestHistoryApply,
//     TestExpectStartRevisions, TestEventOf).
//
// What differs between the tests stays in them: how they drive writes, how they read events
// (EventOf for storage.Interface watches, chaintest's frame reading for HTTP, which checks the
// bookmark's kind and the Status's apiVersion), and the parameters of Storage and Cache.
package kubemodel
