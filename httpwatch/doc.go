// Package httpwatch serves resources over HTTP the way k8s.io/apiserver v0.37 does: the REST paths of
// pkg/endpoints (installer.go, request/requestinfo.go), the list/watch choice of handlers/get.go, the
// watch stream of handlers/watch.go, the writes of handlers/create.go, update.go, patch.go and
// delete.go over the generic registry (registry/generic/registry/store.go), content negotiation
// (handlers/negotiation), Status errors as handlers/responsewriters writes them, the field manager of
// k8s.io/apimachinery util/managedfields, discovery (legacy and aggregated) and the OpenAPI v2 and
// v3 documents. Objects are unstructured JSON in storage; a built-in kind (package builtin) goes
// through its k8s.io/api Go type on the way in and, for protobuf, on the way out.
//
// The files follow upstream's: handlers.go holds the request handlers (pkg/endpoints/handlers
// get.go, create.go, update.go, delete.go), patch.go PATCH, fieldmanager.go managedFields and
// server-side apply, registry.go the registry they call (pkg/registry/generic/registry/store.go with
// the rest package's Before* checks), dryrun.go the dry-run storage (registry/generic/registry/dryrun.go),
// watch.go the watch stream (handlers/watch.go), negotiate.go, codec.go and responses.go content
// negotiation and encodings, transform.go Table and PartialObjectMetadata (handlers/response.go),
// builtins.go the built-in resources and their strategies, crd.go resources from
// CustomResourceDefinitions, versions.go their versions and the conversion between them, customresource.go a custom resource's schema at work (pruning,
// defaulting and validation by apiextensions-apiserver's packages), discovery.go aggregated discovery, openapi.go the OpenAPI documents,
// server.go the paths and legacy discovery.
//
// # API
//
//   - Resource describes a served resource: group, version, plural, kind, scope, short names,
//     categories, the status and scale subresources, Table columns, a custom resource's OpenAPI schema, and the
//     registry behaviours that differ between built-in types and custom resources. ConfigMaps,
//     Secrets, Pods, Services, Namespaces, Events, Deployments and EventsV1 (BuiltInResources) are
//     the built-in kinds with their real scopes, names and strategies; events have their field
//     labels (involvedObject.*, source, ...; regarding.* for events.k8s.io/v1) and printer columns,
//     so that `kubectl describe` finds an object's events (TestEvents, TestEventsTable); the two
//     versions are one resource stored once at core/v1 under /registry/events, EventsV1's storage
//     codec converting as upstream's conversion (an event reads at the other version with every
//     field mapped and writes back unchanged, each version's watch sees the other's writes:
//     TestEventVersionsRoundTrip, TestEventVersionsWatch) and stores it in core/v1's bytes (a write
//     at either version that changes nothing is no write: TestEventVersionsNoOpWrite); a write at
//     one version drops the managers that wrote at the other, as upstream's field manager
//     (TestEventVersionsManagedFields); events are validated as upstream's event validation
//     (legacy checks at core/v1, strict ones with the metadata at events.k8s.io/v1, the generic
//     metadata checks after them and only if they pass, 422s naming core's kind:
//     TestEventVersionsValidation); a built-in kind's BOOKMARK carries its typed zero object, as
//     the internal type's zero converts (a deployment's spec.replicas 0), and as Table the row its
//     printer gives that object (a deployment's Selector "", a service's Type "")
//     (TestEventBookmarkObject, TestBuiltInBookmarkTable) and a create's managedFields leave out the fields it holds at their
//     zero value, as upstream compares with the typed new object (TestEventManagedFieldsOfZeroFields);
//     a server-side apply of a built-in kind answers and stores the object as its Go type encodes
//     it, and a value the type cannot hold is the field manager's 500 (TestEventApplyTypedForm);
//     with Config.EventTTL each create and
//     update of an event gives it a lease of that TTL, and nothing else gets one (TestEventTTL); Widgets is an example custom resource;
//     DefaultResources is what `listwatch serve` serves. CRDResource and CRDResources make the
//     resources of a CustomResourceDefinition given as YAML, JSON or a Go value, one per served
//     version (ErrInvalidCRD for anything else). Resource.ResourcePrefix, KeyFunc, GetAttrs, NewObject, NewListObject and
//     TriggerValue are what an assembler (chain.StorageConfig, chain.CacheConfig) configures the
//     resource's storage and watch cache with. Pods are served as the kube-apiserver
//     serves them: the watch cache's trigger is spec.nodeName and every pod list and watch names it
//     in the predicate's IndexFields (as the pod registry's MatchPod), so a kubelet's watch
//     (fieldSelector spec.nodeName=X) is offered only X's pods (TestPodsIndexedByNodeName).
//   - Each ServedResource names its storage, a storage.Interface the caller built: the etcd3 storage
//     (*watch.Store) or the watch cache over it (*cache.Cacher), as package chain assembles them;
//     httpwatch imports no storage implementation. The handlers use Get, GetList, Watch, Create,
//     GuaranteedUpdate, Delete and Versioner, and map the storage errors to API errors as
//     pkg/storage/errors does.
//   - New(Config) returns a Server, an http.Handler; Config.Registerer receives the watch metrics and
//     Config.RequireNamespaces makes NamespaceLifecycle refuse creates in missing namespaces. Server.Create creates an object as a POST
//     would, without HTTP (seeding). Server.Shutdown ends every watch (the apiserver's ShuttingDown
//     signal); Server.Wait waits until no handler runs, websocket watches included.
//   - ParseListOptions is the list/watch query parsing on its own. Package watchclient reads a watch
//     stream as client-go does.
//
// # Paths
//
// /api and /apis/<group>/<version> hold the resources: /namespaces/<ns>/<resource>[/<name>[/status]]
// for namespaced ones (plus the cluster-wide /<resource> collection, list and watch only),
// /<resource>[/<name>[/status]] for cluster-scoped ones (namespaces: also /namespaces/<name>/finalize),
// and the deprecated /watch/ forms. GET on a collection lists, or watches with watch=true; POST
// creates and DELETE deletes the collection; GET, PUT, PATCH and DELETE on an item get, update,
// patch and delete it; GET, PUT and PATCH on /status do so for the status. /api, /api/v1, /apis,
// /apis/<group> and /apis/<group>/<version> are discovery documents (/api and /apis also the
// aggregated apidiscovery.k8s.io/v2 and v2beta1 documents); /openapi/v2, /openapi/v3 and
// /openapi/v3/<api/v1 or apis/group/version> the OpenAPI documents; /version, /healthz, /livez and
// /readyz answer too. An unknown path below a served group version is a 404 Status, a known path
// with another method a 405 Status, any other path a plain "404 page not found", as the apiserver's
// go-restful container and NotFoundHandler answer (TestRouting, TestDiscovery, TestNegotiation).
// A built-in kind's route, as go-restful's in kube-apiserver, then refuses a PATCH whose
// Content-Type names no patch type (415) and an Accept none of whose media types, without
// parameters, it produces (406, application/* too), both with go-restful's message, before any
// handler (TestPatch, TestNegotiation, TestWatchStreamStart; interop/httpdiff
// TestHTTPDifferentialBuiltIn against a real kube-apiserver).
// A custom resource's requests go by the verb their method makes, as apiextensions-apiserver's
// crdHandler routes them: POST creates whatever the path, HEAD is GET, another method is a 405
// naming the verb, an unknown subresource (or /status without one) a 404 naming the object, PUT and
// PATCH of the collection a 400 "name must be provided" (TestCustomResourceRoutes).
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
//   - The storage's context carries the request's scope (storage.WithRequestScope), as the
//     apiserver's request context does: the path's namespace, else the one the field selector pins
//     (registry.Store.WatchPredicate), and the metadata.name the field selector pins when it is a path
//     segment (request/requestinfo.go). The watch cache indexes a watcher by it
//     (TestWatchRequestScope).
//   - Lists over the watch cache answer as upstream's with ListFromCacheSnapshot: a list at an exact
//     resourceVersion (Exact, or with a limit) and its continue pages hold the state at that
//     revision; one at a revision beyond etcd's is, after the cache's 3 s, a 504 Timeout "Too large
//     resource version" with Retry-After 1 (TestListExactFromWatchCache).
//   - Content negotiation is the apiserver's: a built-in kind speaks JSON, YAML and protobuf
//     (application/vnd.kubernetes.protobuf, watches as length-prefixed WatchEvents with
//     ;stream=watch), a custom resource JSON and YAML, and protobuf only for conversions and errors
//     (a custom resource asked for in protobuf is a 406 written in protobuf); the Accept header's
//     first acceptable clause (by q-value) wins, as=Table and as=PartialObjectMetadata(List)
//     convert, anything else is a 406 listing the endpoint's media types, before a list's options
//     are read; a body in another format is a 415 listing them; a built-in kind's body of another
//     kind or version is refused as kube-apiserver's codec refuses it (TestCreate). Errors are
//     Statuses in the negotiated format (raw JSON when none is acceptable). TestNegotiation,
//     TestProtobuf, TestYAML, TestTable, TestPartialObjectMetadata, TestWatchStreamStart,
//     TestCustomResourceProtobuf and TestListNegotiatesFirst check it.
//   - Writes drop an owner reference equal to an earlier one with upstream's warning
//     (TestDuplicateOwnerReferences); a custom resource's managedFields type its metadata as
//     ObjectMeta even without a schema (TestSchemalessManagedFields); an update of a custom
//     resource checks its metadata in upstream's two passes, each cause twice
//     (TestCustomResourceUpdateValidation); undecodable bodies are worded as upstream's
//     (TestDecodeErrorsAsUpstream), a custom resource's without kind as its lenient decoder's
//     with fieldValidation Ignore (TestCreate).
//   - A built-in kind's body passes through its Go type: fields it lacks are dropped, and with
//     fieldValidation Strict they (and duplicate fields) are a 400 naming them, with Warn (the
//     default) a 299 Warning header each (TestFieldValidation).
//   - A custom resource with a schema is served as apiextensions-apiserver serves it, by its
//     packages (pkg/apiserver/schema and its pruning, defaulting, objectmeta and listtype packages,
//     pkg/apiserver/validation, schema/cel): a body, a patched object, an applied one and a seeded
//     one (Server.Create) lose the fields the schema does not know (x-kubernetes-preserve-unknown-fields
//     keeps them; x-kubernetes-embedded-resource objects get their metadata coerced), get the
//     schema's defaults, and are validated on create and update (OpenAPI v3 constraints, int-or-string,
//     list types, embedded resources' metadata, x-kubernetes-validations CEL rules, ratcheting
//     unchanged values on update; a status update by the status schema) with a 422 listing
//     upstream's field errors. The unknown fields are reported as fieldValidation says: Strict a 400
//     (a 422 for a patch) naming them with the duplicate ones, Warn a warning each (once, however
//     often a patch is applied again after a conflict: TestPatchWarningsOncePerRetry), Ignore nothing
//     (TestCustomResourcePruningAndDefaults, TestCustomResourceValidation). Server-side apply merges
//     by the types apiextensions' OpenAPI builder makes of the CRD (pkg/controller/openapi/builder),
//     as upstream's field manager does, an applied configuration's whole numbers int64 as
//     apimachinery's yaml decodes them (TestCustomResourceApply); the applied object keeps its
//     nulls until validated, as upstream's, so a set list whose last items an apply gave up
//     (null) is a 422 (TestCustomResourceApplyNull). A CRD whose schema is not
//     structural or whose printer column does not parse is ErrInvalidCRD (TestCRDSchemaRefused).
//   - A CRD with several versions is served as apiextensions-apiserver serves it (versions.go):
//     CRDResources validates it by apiextensions' ValidateCustomResourceDefinition (its 422 message,
//     wrapped in ErrInvalidCRD: one storage version, unique names, a schema per served version,
//     every stored version still in spec.versions, a Webhook conversion's https URL and review
//     versions; a webhook named by service is refused, as the server has no cluster to resolve it:
//     TestCRDVersionsRefused, TestCRDStorageVersionChange) and gives one
//     Resource per served version, each with its own schema, subresources, columns and selectable
//     fields. The versions share the key prefix; each has its own etcd3 storage and watch cache
//     whose codec (Resource.StorageCodec) encodes writes at the storage version and decodes what is
//     stored (at whichever version) to its own, as the CRD handler's storage codec: the stored
//     version's schema prunes and defaults, apiextensions' conversion package converts (strategy
//     None, or Webhook through its webhook converter and k8s.io/apiserver's webhook client: the
//     ConversionReview at the first known conversionReviewVersions, to clientConfig.url trusting
//     caBundle; labels and annotations the webhook sets kept, the rest of metadata restored:
//     TestCRDWebhookConversion), the target version's schema prunes. A failing webhook (down,
//     untrusted, an HTTP error, a Failure result, too few objects, another UID, a changed UID or
//     name) fails the conversion with the converter's error, which is a read's undecodable-object
//     500 (GET InternalError, list StorageReadError, watch an ERROR event) and a write's plain 500
//     (TestCRDWebhookConversionFailures). A body at another version of the definition is
//     refused, as upstream's handlers refuse it. Gets, lists, watches and write answers are at the version asked
//     for (TestCRDVersions); an unserved version is a 404 (TestCRDVersionUnserved); a deprecated
//     version's every answer carries its Warning (Resource.DeprecationWarning: deprecationWarning,
//     or upstream's default text); Resource.StoredVersions are status.storedVersions, the file's
//     with the storage version added;
//     discovery lists a group's versions by Kubernetes' version order, the first preferred, and a
//     CRD's resource with upstream's verbs and the storage version's hash.
//     interop/httpdiff's TestHTTPDifferentialSchema compares all of it with the real
//     apiextensions-apiserver.
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
//     (TestWatchCacheableObject). A watch keeps its scratch buffer between events only up to 64 KiB:
//     after a larger event it lets it go, so that thousands of watches that once sent a large
//     object do not each hold its size (TestFrameEncoderReleasesLargeBuffers).
//   - With Config.Registerer, every event a watch writes counts in apiserver_watch_events_total and
//     its frame's bytes in apiserver_watch_events_sizes (upstream's buckets), by group, version and
//     resource; servers may share a registry (TestWatchMetrics).
//   - Over a websocket (same-origin or no Origin), each frame is one text message; client messages
//     are read and dropped; the socket is closed with a normal closure when the watch ends
//     (TestWatchWebsocket). Its timer starts after the handshake and the storage's deadline does
//     not end it: an event the storage sends at that deadline (the watch cache's 504 ERROR) still
//     goes out (TestWatchWebsocketPastStorageDeadline).
//   - Writes go through the storage (etcd transactions), so every watch sees them. A rejected write changes
//     nothing: decode, kind, apiVersion, name, namespace and metadata problems are found before
//     storage is called; resourceVersion and UID preconditions are checked inside GuaranteedUpdate and
//     Delete. POST of an existing name is 409 AlreadyExists; PUT with a stale resourceVersion is 409
//     Conflict "the object has been modified; ..."; PUT without one is an unconditional update only
//     for resources that allow it, else 422. DELETE honours preconditions, and an object with
//     finalizers is only marked with a deletionTimestamp until an update removes them. dryRun=All
//     checks without writing. TestCreate, TestUpdate, TestDelete, TestGet and TestWatchEventsFromWrites
//     check it; TestOverWatchCache and TestCachedServer play them again over the watch cache.
//   - PATCH applies a JSON patch, a JSON merge patch, a strategic merge patch (built-in kinds only;
//     415 for custom resources, as upstream) or an apply configuration to the stored object in each
//     try of a storage update; a patched object that changes its name or namespace, a failed test
//     operation or a malformed patch is refused with the apiserver's status and stores nothing
//     (TestPatch, FuzzPatch); a custom resource patched into another group or version has its
//     namespace and name checked before its API version, in upstream's order
//     (TestCustomResourcePatchToAnotherKind).
//   - Every create, update and patch records its manager (fieldManager, else the user agent's
//     first word) in managedFields. Server-side apply creates a missing object (201; through the
//     status subresource a 404, TestStatusSubresource), merges the
//     configuration by the kind's structured-merge-diff schema (builtin's, a CRD's schema, or deduced
//     for a schemaless custom resource), removes the fields its manager stops applying, and refuses
//     a field another manager owns with 409 Conflict, one FieldManagerConflict cause per field, unless
//     force=true; fieldManager is required (TestApply, TestCRDResources).
//   - With a status subresource, an update of the resource keeps the stored status and an update of
//     the status keeps everything else (a custom resource's metadata too, a deployment's labels, a
//     pod's owner references: TestPodStatusUpdate);
//     a new object's status is the strategy's (a pod Pending, a namespace Active, a deployment
//     empty, others none), so that a status update that changes nothing writes nothing;
//     metadata.generation counts the spec changes of custom resources and deployments, and a
//     deployment's annotation changes (TestStatusSubresource, TestDeploymentStatusUpdate,
//     TestDeploymentGeneration).
//   - A custom resource with Resource.Scale (a CRD's subresources.scale) serves <plural>/scale:
//     GET, PUT and PATCH (JSON, merge, apply) of an autoscaling/v1 Scale read from its replicas and
//     selector paths; a write through it sets the spec replicas alone and is an update of the
//     resource (its resourceVersion a precondition, a MODIFIED event, the Scale's managers moved
//     onto the resource's replicas); every write of the resource refuses replicas that are not a
//     non-negative int32; discovery lists <plural>/scale as autoscaling/v1 Scale
//     (TestScaleSubresource); a resource without one, a missing object, missing or invalid
//     replicas, a stale resourceVersion, a body of another kind or format are refused as upstream
//     refuses them, writing nothing; a CRD whose scale paths are not under .spec or .status is
//     ErrInvalidCRD (TestScaleSubresourceErrors).
//   - Deployments serve deployments/scale as kube-apiserver's ScaleREST: an autoscaling/v1 Scale of
//     spec.replicas (0 when unset: nothing defaults it), status.replicas and spec.selector in its
//     string form, in JSON, YAML, protobuf and as the printers' Scale Table; PUT and PATCH (JSON,
//     merge, strategic merge, apply) set spec.replicas alone as an update of the deployment (the
//     Scale's managers moved as for custom resources, typed by a deduced schema: builtin's has no
//     Scale); discovery lists it before deployments/status, as the installer's sorted paths
//     (TestBuiltInScaleSubresource, TestDiscovery). A missing object (404 deployments.apps), negative
//     replicas (422 Scale.autoscaling), a stale resourceVersion or another UID (409; a patch's UID
//     on deployments/scale.apps), a body of another kind (400, the legacy scheme's conversion
//     error), a selector that does not convert (400), DELETE and POST (405) are refused, writing
//     nothing (TestBuiltInScaleSubresourceErrors); interop/httpdiff's fixed scale requests compare
//     them with kube-apiserver (TestHTTPDifferentialBuiltIn, LISTWATCH_HTTPDIFF_BUILTIN_KINDS=deployments).
//   - A pod bound to a node is deleted gracefully: marked with deletionTimestamp and
//     deletionGracePeriodSeconds (the request's, else spec.terminationGracePeriodSeconds, else 30 s),
//     shortened by a shorter period, deleted by a zero one; an unbound or finished pod is deleted at
//     once (TestGracefulDeletion). A namespace gets the kubernetes finalizer; deleting it marks it
//     Terminating until its finalize subresource clears spec.finalizers (TestNamespaces); a create
//     in a Terminating namespace is 403 Forbidden with the NamespaceTerminating cause, as the
//     NamespaceLifecycle admission plugin (TestNamespaceLifecycleAdmission). With
//     Config.RequireNamespaces the plugin is whole: a create (POST, or a create on update such as
//     server-side apply) in a namespace that does not exist is 404 NotFound `namespaces "x" not
//     found`, and default, kube-system and kube-public may not be deleted (403); updates and
//     deletes of namespaced objects are never refused (TestNamespaceLifecycleMissingNamespace). A delete's
//     propagation marks the object for a garbage collector as the generic registry store does:
//     Foreground with the foregroundDeletion finalizer, Orphan or orphanDependents=true with the
//     orphan finalizer, kept with its deletionTimestamp until they go; events take none, and a
//     delete strips those two from an event whatever the options, so that one holding only them is
//     deleted (TestDeletePropagation, TestEventDeleteDropsGCFinalizers). package controllers plays the controllers that remove them. A
//     delete whose options remove the last finalizer deletes the object as stored, in one write,
//     and, as upstream, fails a resourceVersion precondition (TestDeleteRemovingLastFinalizer).
//   - Size limits are kube-apiserver's over etcd: a body over MaxRequestBodyBytes is 413, a
//     ConfigMap's or Secret's data over 1 MiB is 422 (validation's TooLong), an object over
//     etcd's request limit is etcd's error, 500 as the apiserver passes it on (TestSizeLimits).
//     deletecollection deletes the selected objects one by one as DELETE would and answers with the
//     list of them; with a limit it deletes one page and answers with it as listed, continue token
//     included (TestDeleteCollection).
//   - Table conversion uses the built-in printers' columns (ConfigMap: Data, Age; Pod: Ready, Status,
//     Restarts, Age...), or JSONPath columns (a CRD's additionalPrinterColumns, Age by default)
//     through apiextensions' tableconvertor with client-go's jsonpath (filters such as
//     [?(@.type=="Ready")], upstream's cell types and default descriptions; dates as ages by the
//     server's clock), rows whose object is its metadata, the object or nothing as includeObject
//     says; in a watch only the first event carries the columns (TestTable, TestCustomResourceTable).
//     A deployment's Selector is its whole label selector, a service's External-IP as its type
//     gives it (TestBuiltInPrinterCells).
//     PartialObjectMetadataList items carry their kind and apiVersion, none is a null list, and a
//     single custom resource asked for as one is upstream's 500 "content is not a list" (its
//     unstructured object passes for a list until its items are read) (TestCustomResourceTable).
//   - /openapi/v3 lists one document per served group version and /openapi/v2 is one document (JSON,
//     or gnostic protobuf); every operation names its kind and action, PATCH its patch types, writes
//     take fieldValidation; schemas carry the patch strategies and list types kubectl apply reads
//     (TestOpenAPI, and the real kubectl in interop/clientgo TestKubectl).
//   - No goroutine outlives its request: a websocket watch's reader and shutdown watcher are stopped
//     and waited for before the handler returns (TestWatchWebsocket, TestWatchEnds; TestMain's goleak).
//
// # Deviations
//
// No admission beyond NamespaceLifecycle (without Config.RequireNamespaces objects may name a
// namespace that does not exist), no authentication or authorization, no controllers
// in the server (package controllers runs them as clients: without them a deleted namespace keeps
// its objects and stays Terminating until finalized), no defaulting of built-in kinds (k8s.io/api
// ships no defaulting functions) and no type-specific validation beyond ObjectMeta (and TypeMeta
// for custom resources) and the data size of ConfigMaps and Secrets; a custom resource's objects are pruned and defaulted when written, not
// when read (upstream does both, which differs only for objects put into storage by other means),
// and an applied object is defaulted before its validation; no cluster IP allocation
// for services; one version per group (a CRD's storage version); no CBOR; the
// OpenAPI schemas of built-in kinds have their types, descriptions, patch strategies and list types
// but no defaults or required fields. A built-in kind mismatch in a JSON body is reported as "no
// kind … is registered" rather than as a conversion failure.
package httpwatch
