// Package apiserverconf runs k8s.io/apiserver's own storage conformance functions
// (k8s.io/apiserver/pkg/storage/testing, the exported Run* functions of store_tests.go and
// watcher_tests.go) against the apiserver's real etcd3 storage (k8s.io/apiserver/pkg/storage/etcd3)
// on two backends: an embedded etcd v3.7 (interop/internal/etcdtest) and listwatch's store served
// by etcdgrpc in-process. The package has no API: everything is in its tests.
//
// It is a package of its own, apart from package interop, because the apiserver brings process-wide
// state with it (feature gates, the etcd feature-support checker, klog, metrics registries) that
// its tests flip one test at a time; nothing of that reaches interop's other tests.
//
// The suite keeps these rules:
//
//   - Same wiring as upstream. Each function is called as k8s.io/apiserver's
//     pkg/storage/etcd3/store_test.go and watcher_test.go call it: the same codec, scheme, prefix
//     transformer, lease reuse, resource prefix, feature-gate flips, progress-notify interval and
//     compaction helper. Upstream's test-only hooks into the store's fields are rebuilt from
//     outside with the same effect: the transformer handed to etcd3.New delegates to one that the
//     transformer-override methods swap. TestStorageConformance runs every function;
//     TestHarnessCatchesFault shows a fault caught: a child run whose listwatch backend drops the
//     last key of multi-key ranges fails RunTestGetListRecursivePrefix on listwatch, and only
//     there.
//   - Same test on both backends. Every function is one subtest per backend with a fresh server,
//     fresh storage and a fresh etcd feature-support checker, one at a time (feature gates are
//     process-wide). A function is skipped only on both backends at once, with the reason: today
//     only RunTestOptionalWatchBookmarksWithCorrectResourceVersion, which upstream runs over the
//     cacher alone (pkg/storage/cacher/cacher_test.go) (TestStorageConformance).
//   - The storage's etcd feature check (etcd3.New starts it; it asks the endpoint's Status for its
//     version) finds RequestWatchProgress supported on both backends, which the watch cache's
//     consistent reads rely on (TestFeatureSupportCheck).
//   - No leaks. Each subtest owns every watcher the storage hands out and, at cleanup, stops it and
//     waits until its result channel is closed, which the etcd3 watcher does only once its
//     goroutines are done; then it closes the storage, stops the compactor and stops the backend.
//     The package's TestMain runs goleak with no ignore option, after the tests.
package apiserverconf
