// Package interop holds the tests that hold listwatch to upstream: a differential test that drives
// the same seeded clientv3 workload against a real embedded etcd v3.7 and against listwatch's store
// served by etcdgrpc, a fuzz target (FuzzDifferential) that runs the same workload with the
// fuzzer's bytes choosing the operations, the watch conformance cases run on both, `listwatch check --endpoints` run
// against the embedded etcd (check_test.go: the built command must pass there with both workloads,
// and refuse a member that is not at revision 1), and a benchmark of write plus watch fan-out
// throughput on both.
//
// It is a module of its own (github.com/listwatch/listwatch/interop) so that etcd's server and its
// dependencies never enter the root module. The package has no API: everything is in its tests and
// in internal/etcdtest, which starts the embedded etcd.
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
//     TestHarnessCatchesDifferences shows that an injected one is reported. Compactions wait for
//     etcd's background compaction to finish (physical), so a watch from the compact revision reads
//     the same history on both sides.
//
// Running it: `go test -race ./...` runs the default seeds and replays FuzzDifferential's seed
// corpus (testdata/fuzz/FuzzDifferential); -interop.seed=N runs one seed and -interop.ops=N sets the
// operations per seed. A long run of TestDifferentialEtcdVsListwatch takes its seeds from the
// environment: LISTWATCH_INTEROP_SEEDS lists seeds and inclusive ranges, separated by commas
// (LISTWATCH_INTEROP_SEEDS=1-500, or 3,7,100-120), for example
//
//	LISTWATCH_INTEROP_SEEDS=1-500 go test -run TestDifferentialEtcdVsListwatch -timeout 24h ./
//
// Each seed runs as a subtest on a fresh pair of servers, so a failing seed is named and rerun
// alone with -interop.seed. Fuzzing explores beyond the corpus, one input at a time on a fresh pair:
//
//	go test -run '^$' -fuzz '^FuzzDifferential$' -parallel 1 -fuzzminimizetime 10x ./
//
// (minimizing a new input is capped at 10 runs: each run starts an etcd, and the coverage of its
// goroutines varies from run to run, so the default minute of minimizing would take most of the
// time). The benchmark is `go test -run '^$' -bench PutWatchFanout -benchtime=3000x`.
package interop
