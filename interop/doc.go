// Package interop holds the tests that hold listwatch to upstream: a differential test that drives
// the same seeded clientv3 workload against a real embedded etcd v3.7 and against listwatch's store
// served by etcdgrpc, the watch conformance cases run on both, `listwatch check --endpoints` run
// against the embedded etcd (check_test.go: the built command must pass there with both workloads,
// and refuse a member that is not at revision 1), and a benchmark of write plus watch fan-out
// throughput on both.
//
// It is a module of its own (github.com/listwatch/listwatch/interop) so that etcd's server and its
// dependencies never enter the root module. The package has no API: everything is in its tests, in
// internal/etcdtest, which starts the embedded etcd, and in internal/kubeapiserver, which runs a
// real apiextensions-apiserver in process over either etcd.
//
// The differential test keeps these rules:
//
//   - Same requests. Both sides get the same requests in the same order, one at a time; the
//     workload steers by the reference side's answers only (workload_test.go).
//   - Same answers. Every response and every watch's events are compared field by field after
//     removing only what identifies a member (cluster and member IDs, raft term) and mapping lease IDs,
//     which each server picks, to the workload's names for them. The full list, and what of a watch
//     stream is compared, is documented at cmpOptions and watchOutcome.
//   - Nothing timing-dependent in the workload: see the comment at the top of workload_test.go. The
//     same workload against two embedded etcds (TestHarnessEtcdVsEtcd) finds no difference, and
//     TestHarnessCatchesDifferences shows that an injected one is reported.
//
// Running it: `go test -race ./...` runs the default seeds; -interop.seed=N runs one seed and
// -interop.ops=N sets the operations per seed. The benchmark is
// `go test -run '^$' -bench PutWatchFanout -benchtime=3000x`.
//
// The other packages of the module hold listwatch to upstream at the higher stages:
//
//   - apiserverconf: k8s.io/apiserver's storage conformance functions against upstream's etcd3
//     storage on embedded etcd and on listwatch, and against upstream's Cacher and listwatch's
//     cache (the functions upstream's cacher_test.go runs).
//   - cacherdiff: upstream's Cacher and listwatch's cache, over one listwatch store, fed the same
//     seeded history and requests; every answer and every watch stream compared.
//   - httpdiff: a real apiextensions-apiserver and listwatch's chain serving the same custom
//     resource, sent the same seeded requests over HTTP; every answer and stream compared.
//   - clientgo: client-go, informers and kubectl against listwatch's HTTP API.
//
// The two seeded differentials run a default seed set in `make test`; long runs take their seeds
// and size from the environment:
//
//	LISTWATCH_CACHERDIFF_SEEDS=1-200 [LISTWATCH_CACHERDIFF_OPS=250] go test -race -timeout 3h -run TestCacherDifferential ./cacherdiff/
//	LISTWATCH_HTTPDIFF_SEEDS=1-100 [LISTWATCH_HTTPDIFF_OPS=150] go test -race -timeout 3h -run TestHTTPDifferential ./httpdiff/
//
// A seed list is "N", "N-M" or a comma-separated list of them (internal/seeds); every difference a
// run reports names its seed, and each test's log ends with the counts of what it compared.
package interop
