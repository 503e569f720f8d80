// Package chain assembles the whole list-watch path of listwatch in one process, as `listwatch serve`
// runs it: an in-memory store (package store), served over etcd's v3 gRPC API in-process
// (etcdgrpc.ServeInProcess, over bufconn), the etcd3 storage of each resource (package watch) on a
// clientv3 client of its own, a watch cache over it (package cache; optional per resource) and the
// Kubernetes HTTP API (package httpwatch) on a listener. Tests use it to get a running Kubernetes API in one call. Chain
// is the assembler: httpwatch serves the storage.Interface it is given and builds none; the chain
// builds each from the resource's description.
//
// # API
//
//   - New(ctx, Config) builds and starts a Chain. The zero Config serves httpwatch.DefaultResources
//     (the built-in ConfigMaps, Secrets, Pods, Services, Namespaces, Deployments and both versions
//     of Events, and Widgets), each behind a watch cache but events, which kube-apiserver serves
//     uncached (DefaultUncached; Config.Cached gives them one), over a new store, on a free loopback port; Config.Resources may add
//     custom resources (httpwatch.CRDResources) or replace the set, and SystemNamespaces creates the
//     namespaces kube-apiserver creates at start. Config takes an existing
//     store or options for a new one, the resources and which of them are uncached, the clocks of
//     the store (StoreOptions.Clock), the caches (CacheClock) and the HTTP API (API.Clock), the
//     progress-notify interval (StoreOptions.ProgressNotifyInterval), a logger, a Registerer for the
//     watch caches' and the watches' metrics (cache.NewMetrics, httpwatch Config.Registerer), and
//     three hooks:
//     WrapStorage (between a watch cache and its etcd3 storage), WrapServed (between the HTTP
//     handlers and the cache) and WrapHandler (in front of the HTTP API).
//   - StorageConfig and CacheConfig are the configurations of a resource's etcd3 storage and watch
//     cache: its key prefix and key function, GetAttrs, NewObject for bookmarks, the codec (a CRD
//     version's converts to and from its storage version), the list kind and the trigger index
//     (TestCacheConfigIndexesPodsByNodeName).
//   - Store, Client, Storage, Cacher, API and URL reach the parts (Client is a client of the
//     in-process etcd apart from the storages' own); Storage and Cacher name a resource
//     as its GroupResource prints ("pods", "widgets.example.com"); each version of a CRD has its
//     own storage and cache, as apiextensions-apiserver builds them, a later version named with
//     "/" and its version ("gears.example.net/v1beta1").
//   - Shutdown stops the HTTP API as the apiserver does (watches end first, then requests drain);
//     Close stops everything. Done and Err report when and why the HTTP server stopped serving.
//   - Errors: New fails with errors matching ErrInvalidConfig for a Config it refuses, and with the
//     failing stage's error (wrapped, naming the stage and resource) otherwise.
//
// # Invariants
//
//   - When New returns, every watch cache has its first list and the HTTP API serves lists, watches
//     and writes over the store (TestChainServes, TestChainUncached).
//   - Events, both versions, have no watch cache unless Config.Cached names them: a GET with a
//     malformed resourceVersion is the etcd3 storage's 400, not a watch cache's answer
//     (TestChainEventsUncached).
//   - Each hook sits where its name says and sees every resource (TestChainHooks).
//   - Each etcd3 storage has a clientv3 client of its own, so watch streams of its own, as
//     kube-apiserver's storage factory gives each (storagebackend/factory/etcd3.go
//     newETCD3Storage). etcd answers a RequestProgress only while every watch of its stream has
//     reached its start revision, and an uncached watch-list (events) starts at the current
//     revision plus one; on its own stream it never keeps a watch cache from becoming fresh while
//     nothing is written (TestChainCacheFreshWhileUncachedWatchWaits).
//   - Close stops everything the chain started and waits for it: no goroutine of the HTTP server,
//     its connections, the caches, the etcd clients and server or a store the chain made is left
//     (TestChainCloseLeavesNoGoroutine). It never closes a store given in Config.Store
//     (TestChainKeepsGivenStore). It is idempotent.
//   - Shutdown ends every open watch cleanly (the stream ends without an ERROR frame) before the
//     HTTP server stops, and leaves the storage running until Close (TestChainShutdown).
//   - A failure while assembling releases everything already started, the given listener
//     included, and never the given store (TestChainNewFailureReleases).
//   - With SystemNamespaces, default, kube-system, kube-public and kube-node-lease exist when New
//     returns (kept as they are in a given store) and NamespaceLifecycle is whole (a create in a
//     missing namespace is 404, httpwatch's RequireNamespaces); without it, or without namespaces
//     served, New writes nothing and objects may name any namespace (TestChainSystemNamespaces).
//   - Objects are kept at kube-apiserver's keys, services at /registry/services/specs/ (its
//     SpecialDefaultResourcePrefixes), so a failed precondition names the same key
//     (TestChainServiceKeys).
//   - Err is nil after Shutdown or Close and is the listener's failure when serving failed
//     (TestChainServeFailure).
package chain
