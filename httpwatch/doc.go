// Package httpwatch serves resources over HTTP the way k8s.io/apiserver v0.37 does: the REST paths of
// pkg/endpoints (installer.go, request/requestinfo.go), the list/watch choice of handlers/get.go, the
// watch stream of handlers/watch.go, the writes of handlers/create.go, update.go and delete.go over
// the generic registry (registry/generic/registry/store.go), and Status errors as
// handlers/responsewriters writes them. Objects are unstructured JSON; wire types come from
// k8s.io/apimachinery (metav1.WatchEvent framing, metav1.Status via apierrors, metav1.ListOptions
// through the meta.k8s.io parameter codec, label and field selectors).
//
// The files follow upstream's: handlers.go holds the request handlers (pkg/endpoints/handlers
// get.go, create.go, update.go, delete.go), registry.go the registry they call
// (pkg/registry/generic/registry/store.go with the rest package's Before* checks), dryrun.go the
// dry-run storage (registry/generic/registry/dryrun.go), watch.go the watch stream
// (handlers/watch.go), server.go the paths and discovery.
//
// # API
//
//   - Resource describes a served resource (group, version, plural, kind, scope, and the registry
//     behaviours that differ between built-in types and custom resources); ConfigMaps, Pods, Widgets
//     and DefaultResources are the ones `listwatch serve` uses. Resource.StorageConfig configures its
//     etcd3 storage (etcd3.New) and Resource.CacheConfig a watch cache over it (cache.New): key
//     prefix /registry/<resource>, GetAttrs for field selectors, typed bookmarks, trigger index.
//   - Each ServedResource names its storage, a storage.Interface: the etcd3 storage (*etcd3.Store) or
//     the watch cache over it (*cache.Cacher). The handlers use Get, GetList, Watch, Create,
//     GuaranteedUpdate, Delete and Versioner, and map the storage errors to API errors as
//     pkg/storage/errors does.
//   - New(Config) returns a Server, an http.Handler. Server.Shutdown ends every watch (the apiserver's
//     ShuttingDown signal); Server.Wait waits until no handler runs, websocket watches included.
//   - ParseListOptions is the list/watch query parsing on its own. Package watchclient reads a watch
//     stream as client-go does.
//
// # Paths
//
// /api and /apis/<group>/<version> hold the resources: /namespaces/<ns>/<resource>[/<name>] for
// namespaced ones (plus the cluster-wide /<resource> collection, list and watch only),
// /<resource>[/<name>] for cluster-scoped ones, and the deprecated /watch/ forms. GET on a collection
// lists, or watches with watch=true; GET, PUT and DELETE on an item get, update and delete; POST on a
// collection creates. /api, /api/v1, /apis, /apis/<group> and /apis/<group>/<version> are discovery
// documents; /version, /healthz, /livez and /readyz answer too. An unknown path below a served group
// version is a 404 Status, a known path with another method a 405 Status, any other path a plain
// "404 page not found", as the apiserver's go-restful container and NotFoundHandler answer
// (TestRouting, TestDiscovery, TestNegotiation).
//
// # Invariants
//
//   - Query parsing is the apiserver's: meta.k8s.io/v1 parameter conversion (400 BadRequest on a bad
//     value or selector), WatchList defaulting (watch=true with resourceVersion "" or "0" and neither
//     sendInitialEvents nor resourceVersionMatch becomes sendInitialEvents=true,
//     resourceVersionMatch=NotOlderThan), metainternalversion validation (422 Invalid on ListOptions),
//     the resource's field labels (400), and a path name as a metadata.name selector (400 if the
//     explicit selector disagrees). A namespace or name the field selector pins narrows the storage key.
//     TestWatchListDefaulting, TestListOptionsValidation, TestWatchRouting and TestList check it.
//   - Errors before a watch stream starts are ordinary responses with a Status body and its code
//     (Retry-After when the Status asks for a retry); errors that are not API errors become 500 with an
//     empty reason, as responsewriters.ErrorToAPIStatus. After the headers, errors are ERROR frames
//     from the storage; the server adds none. TestWatchErrorBeforeStreaming, TestErrorToAPIStatus and
//     TestWatchErrorFrames check it.
//   - A watch lasts timeoutSeconds, or MinRequestTimeout·(1+Jitter()) when that is absent or 0; the
//     deadline is on the context given to the storage's Watch (TestWatchTimeoutFunction,
//     TestWatchTimeout). The HTTP stream answers 200 with
//     Content-Type application/json and Transfer-Encoding chunked, flushed before the first event;
//     every event is one frame, {"type":…,"object":…} and a newline, byte for byte json.Encoder's
//     encoding of a metav1.WatchEvent; the stream is flushed only when no further event is waiting,
//     and once more after the initial-events-end bookmark. Waiting includes events the watch cache
//     has queued for the watch but not yet passed on (its Backlog): the handler yields once to let
//     them through and writes them in the same flush (TestWatchWritesBackloggedEventsTogether), and
//     flushes if none comes (TestWatchFlushesWhenBacklogIsFiltered). A watch-list to a client accepting gzip is
//     compressed, one gzip member per flush. The stream ends, without a final frame, when the
//     storage closes the watch, the timeout passes, the client disconnects or Shutdown is called;
//     then the storage watch is stopped and its context cancelled. TestWatchStreamStart,
//     TestWatchFrameBytes, TestWatchFlushPolicy, TestWatchWriteError, TestWatchListGzip and
//     TestWatchEnds check it.
//   - An event object that implements runtime.CacheableObject (the watch cache's) is framed once per
//     event type for every watcher sharing it; other objects are framed per watcher
//     (TestWatchCacheableObject).
//   - Over a websocket (same-origin or no Origin), each frame is one text message; client messages
//     are read and dropped; the socket is closed with a normal closure when the watch ends
//     (TestWatchWebsocket).
//   - Writes go through the storage (etcd transactions), so every watch sees them. A rejected write changes
//     nothing: decode, kind, apiVersion, name, namespace and metadata problems are found before
//     storage is called; resourceVersion and UID preconditions are checked inside GuaranteedUpdate and
//     Delete. POST of an existing name is 409 AlreadyExists; PUT with a stale resourceVersion is 409
//     Conflict "the object has been modified; ..."; PUT without one is an unconditional update only
//     for resources that allow it, else 422. DELETE honours preconditions, and an object with
//     finalizers is only marked with a deletionTimestamp until an update removes them. dryRun=All
//     checks without writing. TestCreate, TestUpdate, TestDelete, TestGet and TestWatchEventsFromWrites
//     check it; TestOverWatchCache and TestCachedServer play them again over the watch cache.
//   - No goroutine outlives its request: a websocket watch's reader and shutdown watcher are stopped
//     and waited for before the handler returns (TestWatchWebsocket, TestWatchEnds; TestMain's goleak).
//
// # Deviations
//
// JSON only (no protobuf, CBOR, YAML, Table or PartialObjectMetadata: such Accept clauses are
// skipped, 406 if nothing else is acceptable); no PATCH, deletecollection, subresources,
// managedFields, admission, authentication or authorization; no graceful deletion and no garbage
// collector (propagationPolicy adds no finalizers); type-specific validation is limited to ObjectMeta
// (and TypeMeta for custom resources); a built-in kind mismatch is reported as "no kind … is
// registered" rather than as a conversion failure.
package httpwatch
