// Package watch is listwatch's mirror of the apiserver's etcd3 storage (k8s.io/apiserver v0.37
// pkg/storage/etcd3: store.go, watcher.go, event.go, errors.go) over a clientv3 client: objects are
// kept as encoded values in etcd and watched through etcd watches turned into apimachinery watch
// events.
//
// # Shared types
//
// The types other listwatch packages build on are stable:
//
//   - ListOptions, GetOptions, DeleteOptions mirror storage.ListOptions/GetOptions/DeleteOptions.
//     ListOptions.ResourceVersion stays a string: "" (consistent/legacy) and "0" (any) parse to the
//     same number but mean different things.
//   - Predicate mirrors storage.SelectionPredicate (Label, Field, GetAttrs, Limit, Continue,
//     AllowWatchBookmarks; Matches, Empty). A nil GetAttrs means DefaultNamespaceScopedAttr (labels
//     plus metadata.name and metadata.namespace); Everything selects everything.
//   - Codec decodes and encodes stored values; UnstructuredJSON (the default) is JSON to and from
//     *unstructured.Unstructured, RuntimeCodec plugs in a scheme's codec. Transformer mirrors
//     value.Transformer (encryption at rest); IdentityTransformer is the default.
//   - Versioner and APIObjectVersioner mirror storage.Versioner and storage.APIObjectVersioner: the
//     resourceVersion is the decimal etcd mod revision; ParseResourceVersion maps "" and "0" to 0 and
//     a non-integer to an InvalidError on field resourceVersion.
//   - StorageError (codes ErrCode*) and its sentinels (ErrKeyNotFound, ErrKeyExists,
//     ErrResourceVersionConflicts, ErrInvalidObj...) mirror storage.StorageError; InterpretXxxError turn
//     them into API errors as pkg/storage/errors does. API-level failures are apierrors.StatusError.
//   - Storage is the etcd3 store: New(client, Config); Get, GetList, Create, GuaranteedUpdate, Delete,
//     Watch, GetCurrentResourceVersion, RequestWatchProgress as upstream, plus Update (replace with the
//     object's resourceVersion as an optimistic-concurrency precondition: ResourceVersionConflicts),
//     Compact and CompactRevision (upstream's compactor, driven by the caller). Storage never closes
//     the client it was given. A write that fails changes nothing; bad arguments are errors, never
//     panics.
//   - EncodeContinue, PrepareContinueToken and AnnotateInitialEventsEndBookmark mirror
//     pkg/storage's helpers of the same names; the watch cache pages and marks bookmarks with them.
//
// The conformance scenarios (ported from pkg/storage/testing) live in package watchtest, which a
// caller runs against any etcd; watchtest/backend starts the in-process store or an etcd process.
//
// # Key layout
//
// Keys passed to Storage methods are apiserver keys such as "/pods/<namespace>/<name>" (cluster
// scoped: "/nodes/<name>") and must lie under Config.ResourcePrefix; PrepareKey rejects "" and "/"
// (ErrEmptyKey), "." and ".." segments and keys outside the resource prefix (ErrInvalidKey). The etcd
// key is Config.Prefix (default "/registry") joined with the key: /registry/pods/<namespace>/<name>.
// A recursive key gets a trailing "/" so that /pods/a never covers /pods/ab.
//
// # Watch
//
// Storage.Watch returns an apimachinery watch.Interface whose events obey these invariants:
//
//   - Key or resourceVersion errors (and ProgressNotify without Config.NewFunc) are returned by Watch
//     itself; everything after that is an event.
//   - The start revision and the initial events follow v0.37 with WatchList on: RV>0 watches events
//     after RV; RV 0 with SendInitialEvents unset (legacy) or true first lists the current state as
//     ADDED events in key order (pages of 10000 pinned to the first page's revision); SendInitialEvents
//     false with RV 0 starts at the current etcd revision. With SendInitialEvents true and
//     AllowWatchBookmarks the initial events end with a BOOKMARK at the list revision (not the highest
//     object revision) annotated k8s.io/initial-events-end: "true".
//   - Watching from RV N is exclusive: every event has a revision > N, events arrive in revision
//     order, and every object carries the revision of its event as resourceVersion; a DELETED object
//     is the last stored state carrying the deletion revision.
//   - Filtering follows the previous value: an update entering the predicate is ADDED, leaving it is
//     DELETED (of the previous object), inside it MODIFIED, outside it nothing. A predicate error
//     counts as no match. An event without its previous value is a 500 ERROR.
//   - BOOKMARK events carry an empty object (Config.NewFunc) with only the revision. They come from
//     etcd progress notifications: periodic ones only for ListOptions.ProgressNotify, and (as
//     upstream) the answers to RequestWatchProgress, which etcd broadcasts to every watch sharing the
//     gRPC stream, that is every watch of the client. etcd answers a progress request only while every
//     watch of the stream has caught up and none starts after the current revision.
//   - The initial list streams through the RangeStream RPC when the server has it (EtcdRangeStream);
//     on Unimplemented it pages instead and does not try again for ten minutes.
//   - Compaction ends the watch with ERROR 410 Expired "The resourceVersion for the provided watch is
//     too old."; a DELETE of a value that no longer transforms with 500 StoreReadError; other
//     failures with 500 InternalError. Cancellation produces no event. At most one ERROR is sent and
//     nothing follows it. As upstream, an ERROR raised on the etcd side (compaction, a missing previous
//     value, a failed initial list) is sent at once: raw events still queued behind it are dropped,
//     those already decoded are delivered first.
//   - Nothing is dropped: both internal buffers (100 raw, 100 decoded) block, pushing back on etcd.
//   - Stop only cancels; ResultChan is closed exactly once, after every goroutine of the watch has
//     exited, and events already buffered may still be read.
//
// # Features
//
// Config.Features mirrors the v0.37 feature gates; the zero value is the v0.37 default (WatchList,
// ConcurrentWatchObjectDecode, EtcdRangeStream and AllowUnsafeMalformedObjectDeletion on) and each
// field turns one off.
package etcd3
