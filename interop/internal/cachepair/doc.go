// Package cachepair builds the two watch caches that interop's tests hold against each other, over
// the same kind of server and with the same configuration: k8s.io/apiserver v0.37's Cacher (behind
// its CacheDelegator, over upstream's etcd3 storage) and listwatch's cache.Cacher (over listwatch's
// etcd3 storage, seen through storageadapter as upstream's storage.Interface), both caching pods of
// the example API (k8s.io/apiserver/pkg/apis/example) wired as upstream's
// pkg/storage/cacher/cacher_test.go testSetup wires its Cacher: etcd prefix /registry, resource
// prefix /pods/, the example/v1 protobuf codec, the identity encrypt-check transformer, GetPodAttrs
// and, when asked, the spec.nodeName trigger and cluster-scoped keys. Both are built with the
// ListFromCacheSnapshot gate's current value (utilfeature.DefaultFeatureGate): upstream's reads it
// itself, listwatch's gets it as cache.Config.DisableListFromCacheSnapshot and
// etcd3.Features.DisableListFromCacheSnapshot.
//
// # API
//
//   - Upstream and Listwatch (also as Builders) build a ready *Cache over a clientv3 client, and
//     Storage listwatch's etcd3 storage alone (to write before a cache exists);
//     Setup says what to change. NewStore and Serve give a listwatch store and an in-process
//     client of it; with a recorder (NewRecorder), the client records the lists it sends as
//     upstream's KubernetesRecorder does (ListRecorder).
//   - Cache.Storage is the cache as upstream's storage.Interface; Relist makes it lose its storage
//     watch with a 410 and waits until it filled itself anew; ObserveCompaction makes a cache with
//     a snapshot compactor see a compaction; CompactEtcd compacts as upstream's tests do.
//   - FreshFeatureChecker gives a test's upstream storages a process-wide etcd feature checker of
//     their own (Upstream and apiserverconf's storages call it).
//   - Faults (every Cache's) fail the reflector's first lists, as upstream's
//     StorageInjectingListErrors, and break its watches. PollClock is the real clock whose
//     compactor-poll timers fire on demand.
//
// # Invariants
//
//   - Both builders wait, as upstream's testSetup does, until the injected list failures are
//     consumed and the cache is ready: one for listwatch's reflector, which lists; none for
//     upstream's, which fills its cache with a watch-list stream while client-go's WatchListClient
//     is on (its default) and so never lists (TestBuildersServe).
//   - Upstream's storage gets a fresh process-wide etcd feature checker, and Upstream returns once it
//     found RequestWatchProgress supported: the CacheDelegator serves consistent lists from the
//     cache, even after an earlier test's check was cut short when its client closed
//     (TestUpstreamAfterCutFeatureCheck).
//   - Relist ends with the cache ready and holding no history from before: a watch from a
//     resourceVersion before the relist is refused with 410 (TestRelist).
//   - A broken watch delivers exactly one ERROR and closes; a stopped one closes; either way the
//     watch under it is stopped and drained, so no goroutine is left (TestBreakableWatch, goleak).
//   - PollClock fires only its poll timers, and FirePollers returns once each poll ran, or fails
//     naming the timer nobody waits on (TestPollClock); ObserveCompaction makes either cache
//     answer an exact list below the compaction with 410: listwatch's etcd3 storage follows
//     compact_rev_key as upstream's compactor does, and its cache's compactor polls on the same
//     PollClock (TestObserveCompaction).
//   - Both builders follow the ListFromCacheSnapshot gate: with it off neither cache has a
//     compactor poll and an exact list below a compaction is etcd's 410 at once
//     (TestBuildersFollowListFromCacheSnapshot).
//   - The recorder notes exactly the lists the storages send, with their start key, revision and
//     limit, under the context's key (TestListRecorder).
package cachepair
