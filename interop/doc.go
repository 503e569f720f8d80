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
// Performance against the same upstream code, side by side in one process, is in the sidebyside
// package (`make bench` prints its table).
//
// Running it: `go test -race ./...` runs the default seeds; -interop.seed=N runs one seed and
// -interop.ops=N sets the operations per seed. The benchmark is
// `go test -run '^$' -bench PutWatchFanout -benchtime=3000x`.
package interop
