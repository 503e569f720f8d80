// Package storageadapter presents a listwatch storage.Interface (github.com/listwatch/listwatch/storage:
// the etcd3 storage, the watch cache) as k8s.io/apiserver v0.37's pkg/storage Interface, so that
// upstream's own code — the conformance functions of pkg/storage/testing, and the same random
// requests a differential test sends upstream's Cacher — can drive listwatch's storages unchanged.
//
// # API
//
//   - New(s, Options) returns *Storage, an upstream storage.Interface over s. Options.CompactRevision
//     answers CompactRevision (default: s's own method when it has one).
//   - RequestScopeOf carries the apiserver's request scope into listwatch's RequestScope, and
//     WatchInitializedSignalOf API Priority and Fairness's watch initialization signal into
//     listwatch's (storage.WithWatchInitializedSignal); Watch applies both.
//   - Stats is the adapted storage's; EnableResourceSizeEstimation is the adapted storage's when it
//     has one (*watch.Store), else ErrNotSupported.
//   - ListOptions, Predicate and Preconditions convert upstream's arguments; ToUpstreamError and
//     ToListwatchError convert errors each way; Transformer turns an upstream value.Transformer into
//     listwatch's storage.Transformer. Objects are not converted: both sides hold the same
//     runtime.Objects, encoded by the codec the caller gives listwatch's etcd3 storage
//     (storage.RuntimeCodec of the test's scheme codec).
//   - ErrNotSupported is returned by EnableResourceSizeEstimation over a storage without a size
//     estimate and for upstream options listwatch has no counterpart for (a shard selector).
//
// # Invariants
//
//   - Every argument reaches listwatch unchanged in meaning: each field of upstream's ListOptions,
//     SelectionPredicate, GetOptions, DeleteOptions, Preconditions and ResponseMeta that selects or
//     constrains something is carried over, and one that listwatch cannot honour is refused with
//     ErrNotSupported, never dropped (TestListOptionsCarryEveryField, TestShardSelectorRefused).
//   - Every listwatch storage error becomes the upstream error the same failure gives upstream, with
//     its code, key, resourceVersion and message, so that upstream's Is* functions (which do not
//     unwrap) answer alike, also for a wrapped listwatch error; the callbacks' upstream errors reach
//     listwatch as its own, as do preconditions and the update's response meta; other errors pass
//     unchanged (TestErrorConversion, TestCallbacksConverted).
//   - Watch events are passed as the storage sends them: listwatch's CachingObject is a
//     runtime.CacheableObject, which upstream's tests unwrap as they unwrap upstream's cachingObject
//     (TestWatchPassesEvents). A watch's context carries the namespace and name of the apiserver's
//     request context (request.WithNamespace, RequestInfo.Name), where upstream's Cacher.Watch reads
//     a watcher's scope, as listwatch's storage.RequestScope (RequestScopeOf,
//     TestWatchCarriesRequestScope). It also carries API Priority and Fairness's initialization
//     signal, called once when listwatch's storage signals, together with a listwatch signal the
//     context already held (TestWatchCarriesInitializationSignal).
//   - Stats and its errors, and EnableResourceSizeEstimation, reach the adapted storage
//     (TestStatsAndSizeEstimation).
//   - A transformer sees the storage key as its authenticated data, as under upstream's etcd3 store
//     (TestTransformer); ReadinessCheck follows a Ready method (TestReadinessAndCompactRevision).
package storageadapter
