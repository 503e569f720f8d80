// Package httpdiff holds the HTTP-level differential test: a real Kubernetes API server built from
// the upstream libraries (interop/internal/kubeapiserver: k8s.io/apiextensions-apiserver v0.37.2 in
// process, its storage on listwatch's etcd API, the watch cache on) serving widgets.example.com/v1
// (kubeapiserver.WidgetsCRD), and listwatch's chain (chain.New: store, etcd API, etcd3 storage,
// watch cache, HTTP) serving the same resource (httpwatch.Widgets), sent the same seeded requests
// over HTTP. The package has no API: everything is in its tests. The watch pairs (segments,
// resumes, judging and comparing the streams) are interop/internal/diffrun's, shared with
// cacherdiff; the test supplies the servers as its Peers.
//
// The test keeps these rules:
//
//   - Same requests. Creates (named, and with generateName), updates and deletes of widgets in two
//     namespaces, with and without resourceVersion preconditions; writes both servers must refuse
//     (an existing name, an invalid name, a body for another namespace or kind, a body that is not
//     JSON or not sent as JSON, a stale or missing resourceVersion, an absent object, a wrong uid
//     precondition); gets and lists with every resourceVersion (unset, sent empty, 0, current, a
//     write's, future, malformed), resourceVersionMatch (unset, NotOlderThan, Exact, unknown), limit
//     and continue (following each server's tokens for a few pages, sometimes with a
//     resourceVersion), label and field selectors (malformed ones included); watches with every
//     resourceVersion, sendInitialEvents, resourceVersionMatch, allowWatchBookmarks, selectors and
//     sometimes timeoutSeconds, a quarter of them over a websocket (with an Origin, which
//     upstream's handshake requires; each message must be one text frame holding one event and its
//     newline). Before every read both servers are brought to their store's revision by a
//     consistent list of everything (itself compared).
//   - Custom resources with a schema (TestHTTPDifferentialSchema, schema_test.go): both servers
//     also serve sprockets.example.net/v1 (httpwatch/testdata/sprockets.yaml: a schema that prunes,
//     defaults and validates with OpenAPI constraints, an enum, a set, an int-or-string, an embedded
//     resource and a CEL rule; printer columns, one with a JSONPath filter). Creates, merge patches,
//     status patches, server-side applies (forced or not) and deletes are sent with each
//     fieldValidation (unset, Strict, Warn, Ignore) and bodies with unknown fields or one invalid
//     field; lists and objects are read as JSON, Tables (each includeObject) and
//     PartialObjectMetadataList. Upstream reports several OpenAPI errors, several errors of an
//     applied configuration and the conflicts with several managers in the random order of a
//     map's iteration: a body has one problem at most and one manager applies.
//   - The whole surface (TestHTTPDifferentialSurface, surface_test.go): widgets and sprockets sent
//     random requests, each a method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS) on a
//     collection, an object, its status or an unknown subresource, with a Content-Type and an
//     Accept (JSON, YAML, protobuf, Table v1 and v1beta1, PartialObjectMetadata and its list,
//     bogus ones), options valid or not (dryRun, fieldManager, fieldValidation,
//     propagationPolicy, gracePeriodSeconds, orphanDependents, force, limit, continue,
//     resourceVersionMatch, labelSelector, fieldSelector, includeObject, pretty, export; a
//     deletecollection's list options), bodies of every patch type (strategic: 415 for custom
//     resources), DeleteOptions bodies (of other kinds and content types too), hostile bodies
//     (empty, truncated, not an object, deeply nested, not UTF-8, over the 3 MiB limit, another
//     version of the kind) and metadata edge cases (finalizers, duplicate and conflicting
//     ownerReferences, generateName, invalid labels, unknown metadata fields, another namespace,
//     uid and resourceVersion); objects taken through a deletion a finalizer holds (deleted,
//     again, the finalizer removed by a patch, an update or a dryRun); watch-lists read as Table or
//     PartialObjectMetadata up to the bookmark that ends their initial events; once per seed,
//     fixed cases the random ones reach too rarely (deletions whose options change the
//     finalizers, with a resourceVersion precondition or dryRun; deletecollections refused);
//     the scale subresource (scale_test.go): pistons and valves (httpwatch/testdata/pistons.yaml,
//     namespaced with a label selector path and cluster-scoped without, both with
//     subresources.scale) are created with replicas valid, negative, not integers or missing,
//     given status replicas and selectors, deleted, and sent scale GETs (every Accept, Table and
//     PartialObjectMetadata included), PUTs (another kind or apiVersion, an unknown field,
//     negative or string replicas, a stale, current or malformed resourceVersion, a uid, another name,
//     bogus content types) and PATCHes (JSON, merge with a resourceVersion, apply, strategic and
//     bogus types), with dryRun, fieldManager and fieldValidation, and methods it does not serve;
//     the stored objects are listed and compared every few requests. Protobuf answers are decoded (meta.k8s.io
//     types) and compared as JSON. Reads are never served by a cache that may lag
//     (resourceVersion 0 or 1 is not sent), and a protobuf body of a custom resource is not
//     sent to POST or PUT: the apiserver panics decoding it (schemaCoercingDecoder).
//   - Several versions of a CRD (TestHTTPDifferentialVersions, versions_test.go): cogs.example.net
//     served at v1 (storage), v1beta1 and v1alpha1 (deprecated: the default warning and one of its
//     own), each with its own schema (fields the others lack, defaults, a maximum), status
//     subresource or none and printer columns, and v2 unserved. Creates (a body sometimes at
//     another version), gets and lists (JSON, Tables), merge patches, forced applies, updates,
//     status patches and deletes go to a random version, served or not; watch-lists at a random
//     served version are read up to their bookmark; the cogs are listed at each version every few
//     requests, and the group's discovery documents compared once.
//   - A CRD with Webhook conversion (TestHTTPDifferentialWebhookConversion, webhook_test.go):
//     gears.example.org at v1 (stored) and v2, a field renamed by a TLS webhook both servers call
//     by URL with the definition's caBundle; creates, gets and lists at each version, then the
//     webhook answers a Failure and a get and a create at v2 give the same 500s. Messages are
//     compared with an undecodable object's revision=N by its place, as other resourceVersions.
//   - Built-in kinds against kube-apiserver (TestHTTPDifferentialBuiltIn, builtin_test.go): the
//     surface test's requests, fixed cases, finalizer lifecycles and watch-lists sent to built-in
//     kinds (LISTWATCH_HTTPDIFF_BUILTIN_KINDS: configmaps by default; secrets, pods, services,
//     deployments, and events and eventsv1, the two versions of one resource, on the same names
//     so that each reads and writes what the other wrote; a kind with a scale subresource also
//     gets its fixed scale requests, fixedScale), with a real kube-apiserver v1.37.2 (the binary `make kube-apiserver` builds,
//     interop/internal/kubebin) as upstream, over listwatch's etcd API, and listwatch's chain
//     serving httpwatch.BuiltInResources with kube-apiserver's system namespaces. kube-apiserver
//     keeps the compared kinds in a listwatch store of their own (--etcd-servers-overrides) that
//     only the test's requests write, once the objects of those kinds it writes at start are
//     there, and compacts nothing. Without the binary the test skips, saying how to build it. The
//     kinds left out of the default differ by the defaulting and validation of their types, which
//     listwatch does not mirror, and events by their deletions (README).
//   - Same answers. Every response's status code, Content-Type, Retry-After and Warning headers and
//     body (object, list with its metadata and continue token, or Status with its reason, message,
//     details and causes) must be equal once what is each server's own is normalized: uids,
//     creationTimestamp, the times in managedFields (and the entries' order, which depends on
//     them), generated names (by the test's name for them),
//     and resourceVersions: each server's are its own, so each is compared by its place among the
//     test's writes on that server ("w3" is the third write's, "@3" a revision after the third
//     write and before the fourth), in objects, list metadata, decoded continue tokens and the
//     messages that name them (a patched object quoted in a 422 too, its times left out), but for
//     the one a request names itself (its continue token's, its body's), which both servers repeat
//     as the same number whatever its place ("<asked>", the answer's own resourceVersion only:
//     TestAskedResourceVersion). A Table's date columns and a built-in printer's Age (ages of each
//     server's timestamps) are compared as "<age>", a cell that holds no age as it is
//     (TestNormalAges). A write waits first for both servers' caches of its collection
//     (TestCollectionOf: the collection of a path, core group and namespaces included).
//   - Same streams. Each server's watch streams are judged by a model of that server's writes in
//     its own resourceVersions (proptest/kubemodel, with the apiserver's watch-list defaulting):
//     every event exactly as upstream's semantics require, bookmarks never below a delivered event
//     nor at or past a pending one; a stream the server ends (timeoutSeconds) is resumed from the
//     last resourceVersion seen and must deliver exactly the rest or a 410. The normalized streams of
//     both servers, without the bookmarks whose timing is each server's, must be equal.
//   - Upstream's quirks are kept out of the comparison, not papered over: the apiserver answers 429
//     for about 1 s after a CRD is served (kubeapiserver.Start returns after its first 200 list) and
//     sleeps 2 s in the first create after a CRD is Established (a warm-up write on both servers
//     takes it). A deletion's answer carries no resourceVersion; its revision is the store's right
//     after it, as nothing else writes to either store meanwhile. A write of an existing object
//     (schema and surface tests) is sent once both servers' watch caches have seen every write
//     before it (awaitCaches: a list at the store's revision, NotOlderThan): both servers try a
//     write first on their cache's copy of the object (CacheDelegator.GuaranteedUpdate and Delete)
//     and keep that try's warnings, so a status patch with fieldValidation Warn of an object
//     deleted just before warned or not by each server's timing (TestAwaitCaches).
//   - Nothing is steered clear of: every request kind is sent with every resourceVersion, match and
//     limit. A deviation listwatch keeps is compared without the detail that differs:
//     the 415 for a body in an unsupported format lists the media types the server decodes a custom
//     resource from (upstream's would list protobuf, which it then fails to decode), and the
//     storage key a StorageError names is compared without its prefix (upstream keys a custom
//     resource under /registry/<group>/<resource>, listwatch under /registry/<resource>). Not
//     sent: a patch that makes an object another version of its kind (upstream prunes it by no
//     schema and reports its fields unknown in a map's random order; listwatch refuses it).
//
// Running it: `go test ./httpdiff/` runs the default seeds (1, 2 and 20, 150 requests each: the
// seeds.Config of TestHTTPDifferential), TestHTTPDifferentialSchema's (1 and 2, 80 requests
// each; LISTWATCH_HTTPDIFF_SCHEMA_SEEDS and LISTWATCH_HTTPDIFF_SCHEMA_OPS for more) and
// TestHTTPDifferentialSurface's (1 to 3, 250 requests each; LISTWATCH_HTTPDIFF_SURFACE_SEEDS and
// LISTWATCH_HTTPDIFF_SURFACE_OPS). `make httpdiff-cover` runs them with coverage over upstream's
// request path and prints the statements reached per package (README).
// LISTWATCH_HTTPDIFF_SEEDS sets the seeds ("7", "1-100", "3,9-12") and LISTWATCH_HTTPDIFF_OPS the
// requests per seed, for long runs:
//
//	LISTWATCH_HTTPDIFF_SEEDS=1-100 go test -race -run TestHTTPDifferential -timeout 2h ./httpdiff/
//
// Every difference names its seed and prints both answers as a diff; TestHTTPDifferential's log gives
// the counts of what was compared.
package httpdiff
