// Package clientgo checks listwatch's Kubernetes HTTP API (httpwatch over the watch cache and the
// etcd3 storage on an in-memory store, wired as `listwatch serve` wires it) with the real client
// stack: k8s.io/client-go v0.37's discovery, dynamic and typed clients, dynamic and typed shared
// informers (reflector list-then-watch and the streaming WatchList), and kubectl when one is on
// PATH.
//
// The package has only tests. They run the server with package chain, as `listwatch serve` does, on
// a loopback port behind two test handlers (chain.Config.WrapHandler): a request log that keeps
// every request's query and every frame the server wrote (gzip watch-list streams decoded), and a
// watch gate that can end the running watches and hold new ones, so that a test decides exactly
// when an informer's watch is interrupted and what happens meanwhile.
//
// # What the tests keep
//
//   - Discovery finds the served groups, resources, kinds, scopes and verbs, and a RESTMapper built
//     from it maps Widget to widgets.example.com/v1 (TestDiscovery).
//   - The dynamic client creates, gets, lists (label selector, client-go's pager), updates
//     (optimistic concurrency; unconditional only for built-in types), deletes (preconditions) and
//     watches ConfigMaps and Widgets, with the API errors client-go's apierrors helpers recognise
//     (TestDynamicClient). The typed clientset does the same for ConfigMaps in JSON (TestTypedClient).
//   - Every informer's store converges to what a direct consistent list returns
//     (TestDynamicInformer, and the typed shared informer of TestTypedClient); a label-selected
//     informer sees objects leave and enter its selector, and its requests carry the selector
//     (TestFilteredInformer).
//   - With WatchListClient off the reflector lists (resourceVersion=0) and watches from the list's
//     resourceVersion with allowWatchBookmarks; with it on (client-go v0.37's default) it streams
//     one watch-list (watch, sendInitialEvents and allowWatchBookmarks true, resourceVersionMatch
//     NotOlderThan), gzipped, the initial events end with an annotated BOOKMARK, and no plain list
//     is sent (TestDynamicInformer in both modes, TestTypedClient with the default).
//   - A watch that ends cleanly is resumed from the last resourceVersion without a relist; a resume
//     from a resourceVersion the server no longer has (the watch cache's history window passed it,
//     or etcd compacted it) gets ERROR 410 Expired and the reflector relists
//     (TestInformerRelistsAfterExpiredWatch, both ways, both modes); the clean resume is
//     TestDynamicInformer's.
//   - Periodic bookmarks move the informer's resourceVersion past the resource's own writes, and a
//     watch that then ends resumes from the bookmark's resourceVersion (TestInformerBookmarks).
//   - `kubectl get --raw` of a watch prints the frames the server wrote, byte for byte (skipped
//     when no kubectl is on PATH) (TestKubectlRawWatch).
//   - The generated clientset with its defaults (protobuf bodies and answers, protobuf watch
//     streams) creates, reads, lists, watches, updates, patches (strategic merge), applies (apply
//     configurations, with the 409 and its causes on a conflict), updates the status of and deletes
//     (gracefully for a bound pod, and by collection) the built-in kinds; a typed informer over
//     protobuf converges (TestProtobufClient). Its events.k8s.io/v1 and core/v1 clients see one
//     resource: an event created at the one is watched and listed (by kubectl describe's field
//     selector) at the other, and one without eventTime is a 422 (TestEventVersionsClient).
//   - The metadata client gets, lists and watches PartialObjectMetadata; discovery reads the
//     aggregated document and a RESTMapper maps the built-in kinds and their short names
//     (TestMetadataAndDiscovery).
//   - The real kubectl creates, applies twice (OpenAPI-validated, a three-way strategic merge
//     patch), labels, patches with each patch type, gets as YAML and as a Table, watches (get -w),
//     server-side applies with a conflict, handles a custom resource and deletes (TestKubectl;
//     skipped when no kubectl is on PATH).
//   - Every client-go goroutine is stopped and waited for before a test ends (TestMain runs goleak
//     after the tests, with no ignores).
//
// Tests that need the watch cache's timers (bookmarks, the history window) give it a fake clock;
// their waits step it by one bookmark period per poll, so that what the cache times (a watch-list's
// closing bookmark, a consistent read's progress requests) happens as it would in real time.
//
// client-go's feature gates are process-wide: TestMain replaces them with a wrapper whose
// WatchListClient a test may turn on or off for the informers it starts (the gate is read when a
// reflector is created); every other gate keeps client-go's default. Tests do not run in parallel.
package clientgo
