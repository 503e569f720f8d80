// Package watch is the design card's second stage: after the etcd-style store (package store, served
// over etcd's gRPC API by etcdgrpc), before the watch cache (package cache) and the HTTP watch
// (package httpwatch). It mirrors the apiserver's etcd3 storage (k8s.io/apiserver v0.37
// pkg/storage/etcd3: store.go, watcher.go, event.go, errors.go, lease_manager.go) over a clientv3
// client: objects are kept as encoded values in etcd and watched through etcd watches turned into
// apimachinery watch events (imported as apiwatch throughout, never under this package's name). Its
// vocabulary (options, predicates, errors, codecs, keys, continue tokens) is package storage; its
// conformance cases are package storagetest.
//
// # API
//
//   - New(client, Config) returns a *Store, the storage of one resource; it implements
//     storage.Interface (Versioner, Create, Delete, Watch, Get, GetList, GuaranteedUpdate,
//     GetCurrentResourceVersion, RequestWatchProgress, Stats) with the contracts documented there. A Store
//     never closes the client it was given.
//   - Beyond storage.Interface: Update (listwatch's addition: a replace with the object's
//     resourceVersion as an optimistic-concurrency precondition, ResourceVersionConflicts when it is
//     stale), Compact (upstream's compactor, driven by the caller), CompactRevision,
//     StartCompactor and the function Compact (the apiserver's compact loop of an endpoint and one
//     round of its compact_rev_key protocol: of the compactors sharing an etcd, one compacts each
//     interval at the revision seen an interval before; TestCompactor),
//     EnableResourceSizeEstimation (the size estimate a watch cache enables, as upstream's Cacher
//     does with SizeBasedListCostEstimate on), Close, PathPrefix and EtcdKey;
//     ErrMalformedCompactRevision, ErrNilKeysFunc, ErrSizeEstimationEnabled, ErrStoreClosed.
//   - Config gives the key prefixes, the GroupResource for errors, Codec, Transformer, Versioner,
//     NewFunc (the empty object of bookmarks; without it the watches that need one are refused), the
//     lease reuse of TTLs, Clock, Logger and Features.
//
// # Key layout
//
// Keys passed to a Store are apiserver keys such as "/pods/<namespace>/<name>" (cluster scoped:
// "/nodes/<name>") and must lie under Config.ResourcePrefix; storage.PrepareKey rejects "" and "/"
// (ErrEmptyKey), "." and ".." segments and keys outside the resource prefix (ErrInvalidKey). The etcd
// key is Config.Prefix (default "/registry") joined with the key: /registry/pods/<namespace>/<name>.
// A recursive key gets a trailing "/" so that /pods/a never covers /pods/ab. Checked by the
// storagetest case KeySchema (RunTestKeySchema) in TestConformance.
//
// # Invariants
//
// TestConformance plays every storagetest case against a Store on the in-process server
// (internal/storagebackend; internal/storagebackend/watchsuite hands the Store to the suite, which
// imports no storage implementation), and TestPlayFailsOnDeviation checks that the suite's harness
// fails a deviating storage; TestConformanceSerialDecode, TestConformanceRangeStream and TestConformanceWithoutRangeStream play
// them again with concurrent decoding off, with the RangeStream RPC and without it, and
// TestConformanceEtcd (-etcd) against a real etcd process; with -short (or -skip-slow) they skip the
// cases that wait real time (a lease's expiry, a 3 s watch deadline). TestWatchMatchesModel checks
// watches against a model of the history.
//
//   - A write that fails changes nothing; bad arguments are errors, never panics
//     (TestBadArgumentsAreErrors, TestNewValidatesConfig; storagetest WriteErrors, Update).
//   - Reads follow storage.Interface's resourceVersion rules; an RV newer than etcd's revision is the
//     504 of storage.NewTooLargeResourceVersionError (storagetest Get, HugeResourceVersion,
//     ConsistentList, ListPaging, ExactAtCompactedRV, InconsistentContinue). A list with errors on
//     several objects reports them together (TestGetListAggregatesCorruptObjects); the list streams
//     through RangeStream when the server has it and pages alike otherwise
//     (TestGetListStreamsLikePages).
//   - A ttl gives the object a lease, reused across creates as upstream's leaseManager does; the
//     object is deleted when it expires (TestTTLExpiryManualTick, TestLeaseReuse; storagetest
//     CreateWithTTL).
//   - Key or resourceVersion errors, a recursive key without its "/", ProgressNotify or the
//     initial-events-end bookmark without Config.NewFunc, and a failure to read the current revision
//     are returned by Watch itself; everything after that is an event
//     (TestWatchRecursiveKeyNeedsTrailingSlash, TestWatchCurrentRevisionFailure; storagetest
//     WatchArgumentErrors, WatchErrorIncorrectConfiguration).
//   - The start revision and the initial events follow v0.37 with WatchList on: RV>0 watches events
//     after RV; RV 0 with SendInitialEvents unset (legacy) or true first lists the current state as
//     ADDED events in key order (pages of 10000 pinned to the first page's revision); SendInitialEvents
//     false with RV 0 starts at the current etcd revision. With SendInitialEvents true and
//     AllowWatchBookmarks the initial events end with a BOOKMARK at the list revision (not the highest
//     object revision) annotated k8s.io/initial-events-end: "true"; a watch-list from a future RV is
//     one ERROR 504 (TestStartRevisionRules, TestInitialListPagesArePinned,
//     TestInitialListCompactedBetweenPages, TestInitialListEmptyPageWithMore; storagetest
//     WatchSemantics, InitialEventsExtended, WatchListMatchSingle, WatchListTooLargeRV,
//     WatchListGateOff, WatchFromZero).
//   - Watching from RV N is exclusive: every event has a revision > N, events arrive in revision
//     order, and every object carries the revision of its event as resourceVersion; a DELETED object
//     is the last stored state carrying the deletion revision (TestParseEvent; storagetest
//     WatchFromNonZero, WatchFutureRV, DeleteEventObjectHaveLatestRV).
//   - Filtering follows the previous value: an update entering the predicate is ADDED, leaving it is
//     DELETED (of the previous object), inside it MODIFIED, outside it nothing. A predicate error
//     counts as no match. An event without its previous value is a 500 ERROR (TestTransformTransitions,
//     TestPrepareObjsDecodesPreviousOnlyWhenNeeded; storagetest Watch, ClusterScopedWatch,
//     NamespaceScopedWatch).
//   - BOOKMARK events carry an empty object (Config.NewFunc) with only the revision. They come from
//     etcd progress notifications: periodic ones only for ListOptions.ProgressNotify, and (as
//     upstream) the answers to RequestWatchProgress, which etcd broadcasts to every watch sharing the
//     gRPC stream, that is every watch of the client (kube-apiserver, and listwatch's chain, give
//     each resource's Store a client of its own). etcd answers a progress request only while every
//     watch of the stream has caught up and none starts after the current revision. AllowWatchBookmarks
//     alone brings none (TestTransformBookmarks, TestPeriodicProgressNotify,
//     TestWatchChanRequestWatchProgress; storagetest ProgressNotify, ProgressBroadcast,
//     WatchDispatchBookmarkEvents).
//   - The initial list streams through the RangeStream RPC when the server has it (EtcdRangeStream);
//     on Unimplemented it pages instead and does not try again for ten minutes
//     (TestInitialListRangeStream, TestInitialListRangeStreamCompacted, TestConformanceRangeStream,
//     TestConformanceWithoutRangeStream).
//   - Compaction ends the watch with ERROR 410 Expired "The resourceVersion for the provided watch is
//     too old."; a DELETE of a value that no longer transforms with 500 StoreReadError; other
//     failures with 500 InternalError. Cancellation produces no event. At most one ERROR is sent and
//     nothing follows it. As upstream, an ERROR raised on the etcd side (compaction, a missing previous
//     value, a failed initial list) is sent at once: raw events still queued behind it are dropped,
//     those already decoded are delivered first (TestTransformErrorToEvent, TestSendErrorIsFinal,
//     TestIsCancelError, TestCancelContextClosesWithoutEvents, TestRetryAfterSeconds; storagetest
//     WatchCompacted, WatchError, WatchWithUnsafeDelete, ErrorIsBlockingFurtherEvents,
//     WatchContextCancel).
//   - Nothing is dropped: both internal buffers (100 raw, 100 decoded) block, pushing back on etcd;
//     concurrent decoding keeps the order (TestBackPressureFillsBothBuffers,
//     TestConcurrentDecodeIsBoundedAndOrdered; storagetest BackPressure, WatcherTimeout).
//   - Stop only cancels; ResultChan is closed exactly once, after every goroutine of the watch has
//     exited, and events already buffered may still be read (TestStopKeepsBufferedEventsAndClosesOnce;
//     storagetest DelayedWatchDelivery).
//   - CompactRevision is the newest compaction the Store knows of: its own Compact's, and every one a
//     client announced in compact_rev_key (the apiserver's compaction protocol, etcd3/compact.go),
//     which the Store reads a second after New and then watches, as upstream's compactor watch loop
//     does; it never goes down. A failed read or a value that is not a revision is logged
//     (ErrMalformedCompactRevision) and retried a second later, never a panic. Close stops that
//     watch and waits for its goroutine (TestCompactRevisionSeesOtherClients,
//     TestCompactRevisionMalformed; goleak in TestMain). With Features.DisableListFromCacheSnapshot
//     (upstream's NewCompactor runs its watch loop only with ListFromCacheSnapshot) the Store does not
//     follow compact_rev_key and knows only its own Compact's (TestCompactRevisionWithoutSnapshots).
//   - Stats without a size estimate is etcd's count of the keys under the resource prefix and no
//     size, as upstream's with SizeBasedListCostEstimate off (TestStatsCountsKeys). With one
//     (EnableResourceSizeEstimation), the count is that of its KeysFunc and the size the average of
//     the newest values its lists and watches read, by mod revision, so that out-of-order reports and
//     old deletions change nothing; sizes of keys the KeysFunc no longer returns are dropped at each
//     Stats and once a minute (jittered, on Config.Clock) from a goroutine Close stops. A nil
//     KeysFunc, a second estimate and one after Close are refused with their sentinels; a storage or
//     KeysFunc error (a canceled context) is Stats' error (TestStatsSizeEstimate,
//     TestSizeEstimatorOrderAndCleanup, TestEnableResourceSizeEstimationErrors; storagetest Stats).
//   - A watch signals its initialization (storage.WatchInitialized) once it is started, as upstream's
//     watcher.Watch: it cannot tell when it has caught up. A refused watch does not
//     (TestWatchSignalsInitialized).
//
// # Features
//
// Config.Features mirrors the v0.37 feature gates; the zero value is the v0.37 default (WatchList,
// ConcurrentWatchObjectDecode, EtcdRangeStream, AllowUnsafeMalformedObjectDeletion and
// ListFromCacheSnapshot on) and each field turns one off.
package watch
