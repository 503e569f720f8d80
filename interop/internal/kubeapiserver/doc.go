// Package kubeapiserver runs a real Kubernetes API server, built from the upstream libraries at
// v0.37.2, in the test process: k8s.io/apiextensions-apiserver's server (pkg/apiserver, the one
// kube-apiserver chains first) on k8s.io/apiserver's GenericAPIServer, serving the
// CustomResourceDefinitions the caller gives over the etcd the caller chooses, so that tests and
// benchmarks can hold listwatch's HTTP API to the real thing serving the same resource.
//
// # API
//
//   - Start(ctx, Options) starts a server and returns once it is ready; Server.URL is its base URL
//     (http://127.0.0.1:<port>), Server.RESTConfig a client configuration for it, Server.Stop stops
//     it. StartT does the same for a test, stopping it at cleanup.
//   - Options: EtcdEndpoints (required), EtcdPrefix (default /registry, as kube-apiserver), CRDs,
//     DisableWatchCache (--watch-cache=false; the watch cache is on by default), Token (a bearer
//     token every request must carry; unset, every request is served as a superuser),
//     DisableOpenAPI, Timeout (of Start, default 30 s).
//   - The etcd: EmbeddedEtcd(tb) starts a fresh embedded etcd v3.7.3 (internal/etcdtest);
//     ListwatchEtcd(tb) and ServeEtcdAPI(store, options) serve listwatch's store through its etcd
//     API (etcdgrpc.NewServer) on a loopback port; or any endpoint.
//   - CRDFor(httpwatch.Resource) is the CRD that serves a listwatch custom resource with the same
//     group, version, names, scope and selectable fields; WidgetsCRD() is httpwatch.Widgets()'s.
//   - GoleakOptions() are the goleak options a TestMain of a package that starts servers needs;
//     VerifyTestMain(m, extra...) is that TestMain, with upstream's klog lines discarded.
//   - Errors wrap ErrInvalidOptions, ErrEtcdUnavailable, ErrNotReady or ErrServer.
//
// # What runs
//
// The server is assembled as the apiextensions options package (pkg/cmd/server/options Config) and
// its test server (pkg/cmd/server/testing StartTestServer) assemble it, and run by upstream's own
// GenericAPIServer.PrepareRun and RunWithContext, so its handler chain, storage (etcd3 storage
// under the Cacher unless the watch cache is off), CRD controllers (naming, establishing,
// finalizer, non-structural schema, API approval, discovery, OpenAPI v2 and v3), post-start hooks,
// health checks and shutdown sequence are upstream's. The feature gates are the process's
// k8s.io/apiserver DefaultFeatureGate, untouched: v0.37's defaults (WatchList,
// ConsistentListFromCache, ListFromCacheSnapshot, ...) unless a test of the same process changed
// them. What differs from StartTestServer, and why:
//
//   - Plain HTTP/1.1 on 127.0.0.1, no TLS: the upstream handler is served by an http.Server of this
//     package with upstream's settings; the secure port RunWithContext wants is given a listener
//     that never accepts (listener.go), so no certificate is made and no handshake costs time. Its
//     log still says "Serving securely" on the plain port.
//   - No delegated authentication or authorization (they need a kube-apiserver): a static token
//     (Options.Token) or everyone as system:unsecured in system:masters, and an always-allow
//     authorizer; the loopback token of the server's own controllers is upstream's.
//   - No admission plugins (the defaults read Namespaces or call webhooks), no priority and
//     fairness (max-in-flight instead, as with it off), no core informers (a conversion webhook's
//     service resolves to its cluster DNS name).
//   - Root discovery: apiextensions turns /apis off because kube-apiserver's aggregator serves it;
//     here it is on, the aggregated form (client-go's and kubectl's default) lists every CRD, and
//     Start adds its CRDs' groups to the unaggregated list (CRDs created later through the API are
//     in the aggregated list only).
//   - healthz.LogHealthz is left out of /healthz, /livez and /readyz: its first check starts a
//     process-wide goroutine that never ends.
//   - CRDs are stored as apiextensions.k8s.io/v1 JSON; custom resources, as in kube-apiserver, at
//     <prefix>/<group>/<resource>/<namespace>/<name>.
//
// # Invariants, and the tests that check them
//
//   - Start returns only when /readyz is 200 and every CRD is Established, listed (200 from the
//     watch cache when it is on) and in aggregated discovery (TestOverEmbeddedEtcd,
//     TestOverListwatchEtcd, TestDiscoveryAndOpenAPI). Objects created with client-go's dynamic
//     client are listed and watched (ADDED from resourceVersion 0, MODIFIED from a list's), over
//     embedded etcd with and without the watch cache and over listwatch's etcd API, where they
//     land at kube-apiserver's keys (same tests). Each option does what it says: TestToken (401
//     without the token), TestWatchCacheOption (a watch cache is initialized only when on),
//     TestDiscoveryAndOpenAPI (OpenAPI v3 describes the CRDs; 404 when off), TestSelectableField.
//   - Failures are errors, never a hang or an exit: an etcd that is not there fails Start with
//     ErrEtcdUnavailable naming the endpoint within Options.Timeout (TestStartFailsWithoutEtcd);
//     bad options with ErrInvalidOptions (TestStartRefusesBadOptions); a CRD the server refuses
//     with ErrInvalidOptions and the server's reason, the server stopped
//     (TestStartFailsOnRefusedCRD). Upstream's runPostStartHook exits the process when a hook
//     fails, and its crd-informer-synced hook fails when the server stops before the CRD informer
//     synced; Stop therefore first waits (up to 30 s) for that hook, and, should it never finish,
//     returns an error and leaves the server running rather than end the process
//     (TestStartFailsOnRefusedCRD stops a server that had not finished starting).
//   - Stop ends every goroutine the server started, open watches included, and closes the port
//     (TestStopEndsOpenWatches); every test's package ends with goleak finding nothing but the
//     goroutine GoleakOptions ignores: waitUntilFreshLocked.func2 of the watch cache, which each
//     read that waits for a resourceVersion starts and which ends by itself within 3 s
//     (leaks.go says why it cannot be stopped).
//
// # Start time
//
// BenchmarkStart, on this 2-core machine, quiet: from Start to a first answered list of widgets
// about 130–140 ms over listwatch's etcd API (whose start is 0.2 ms), about 140 ms over embedded
// etcd, plus 70–80 ms to start that etcd: 210–220 ms in all. Each start is about 120 ms or about
// 220 ms, rarely between: the CRD informers' WaitForCacheSync and the crd-informer-synced hook
// poll every 100 ms. Of the rest, building the server is about 17 ms; OpenAPI and the watch cache
// cost a few ms each.
//
// # Things a caller should know
//
//   - A create of a custom resource within 2 s of its CRD becoming Established sleeps 2 s in
//     upstream's crdHandler.serveResource (kept for HA servers); the first create after Start
//     usually does.
//   - klog is process-wide and the server logs its life through it; a TestMain may silence it with
//     klog.SetLogger(logr.Discard()), as this package's does.
//   - Several servers may run in one process, on one etcd under different EtcdPrefix values or on
//     several; upstream keeps some process-wide state (metrics registries, the storage monitor
//     getter of the etcd options, the etcd feature-support checker).
package kubeapiserver
