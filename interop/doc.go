// Package interop holds the tests that hold listwatch to upstream code: etcd v3.7.3 embedded,
// k8s.io/apiserver, apiextensions-apiserver and client-go v0.37.2, and kine v0.17.5.
//
// It is a module of its own (github.com/listwatch/listwatch/interop) so that etcd's server and the
// apiserver's dependencies never enter the root module. The package has no API: everything is in
// its tests, in internal/etcdtest, which starts the embedded etcd, and in internal/kubeapiserver,
// which runs a real apiextensions-apiserver in process over either etcd (each has its own doc and
// tests). The packages beside it are listed at the end.
//
// # What the tests hold
//
//   - Same answers as etcd. TestDifferentialEtcdVsListwatch drives the same seeded clientv3
//     workload against an embedded etcd and against listwatch's store served by etcdgrpc, and
//     requires every response and every watch stream (clientv3 and raw gRPC) to be equal, field by
//     field, after removing only what identifies a member (cluster and member IDs, raft term) and
//     mapping lease IDs, which each server picks, to the workload's names for them; the full list,
//     and what of a watch stream is compared, is documented at cmpOptions and watchOutcome.
//   - Same maintenance answers. TestDifferentialMaintenance runs the same history on both sides and
//     compares HashKV at every revision before and after a compaction (error, compact and hash
//     revisions, and the hash itself: listwatch hashes etcd's key-bucket encoding, and keeps the hash
//     each compaction computes, as etcd does), the Alarm answers and the effect of NOSPACE on a put
//     and a delete, MoveLeader to the member and elsewhere, and Defragment with Status's sizes by
//     their relations (in use at most the size, never larger after defragment, the quota).
//     The seeded workload also asks HashKV after each compaction, at the compact revision, above it
//     and at 0, and compares all but the hash (which covers lease IDs each server picks).
//     TestSnapshotRestoredByEtcdutl restores listwatch's snapshot stream with etcdutl's snapshot
//     package (v3.7.3) and starts an embedded etcd on it: same keys, revision and compaction.
//   - The fuzzer's operations. FuzzDifferential runs the same workload with the fuzzer's bytes as
//     its random source, so they choose every operation and argument, and holds the two sides to
//     the same comparisons; its corpus (testdata/fuzz/FuzzDifferential, with the inputs that found
//     differences) is replayed by `go test`.
//   - Same requests. Both sides get the same requests in the same order, one at a time; the
//     workload steers by the reference side's answers only (workload_test.go).
//   - Nothing timing-dependent is compared: see the comment at the top of workload_test.go. The
//     same workload against two embedded etcds finds no difference (TestHarnessEtcdVsEtcd), and an
//     injected one is reported: an extra write, a dropped clientv3 or raw watch event
//     (TestHarnessCatchesDifferences). Compactions wait for etcd's background compaction to finish
//     (physical), so a watch from the compact revision reads the same history on both sides.
//   - What timing decides (how events are batched, how many progress notifications come) is checked
//     on each side alone for the promises etcd keeps whatever the timing (etcd's
//     tests/robustness/validate/watch.go: ordered, unique, atomic, bookmarkable, no event below the
//     start revision, nothing after the final response, the created notification first); each
//     broken promise is named (TestCheckWatchCatchesBrokenPromises).
//   - Watch conformance. Every case of package storage/storagetest gives the transcript it wants on
//     embedded etcd and on listwatch, with concurrent and with serial watch object decoding, and
//     the lists really go through the RangeStream RPC on both, in as many calls and chunks
//     (TestWatchConformanceEtcdVsListwatch).
//   - The checker against etcd and kine. `listwatch check --endpoints` passes against embedded etcd
//     v3.7.3 with both workloads, every scenario passing, every guarantee covered and everything
//     exercised, and again on the member already written to (TestCheckCommandAgainstEmbeddedEtcd);
//     it fails against Debian's etcd 3.4.23 with the known bugs of that version and nothing
//     unexplained (TestCheckCommandAgainstEtcd34, skipped without /usr/bin/etcd); against kine
//     v0.17.5 over SQLite, in process (internal/kinetest), it runs to completion and fails, naming
//     the operations kine refuses, the prev_kv it sends unasked, the events a watch from a compacted
//     revision gets and the RequestProgress it leaves unanswered (TestCheckCommandAgainstKine).
//     Both workloads and some scenarios recorded against embedded etcd 3.7.3 pass, and are the
//     valid histories check/etcd's TestMutationsAtEveryPosition mutates
//     (TestRecordEmbeddedEtcdHistories; -update-recorded rewrites them).
//   - The Kubernetes checker against the apiserver. check/kube's workload and checker (`listwatch
//     check --kube`) report no violation against the upstream apiextensions-apiserver over embedded
//     etcd and over listwatch's etcd API (TestKubeCheckUpstreamAPIServer), nor against listwatch's
//     own HTTP API (TestKubeCheckListwatch).
//   - No leaks. TestMain runs goleak with internal/kubeapiserver's GoleakOptions (which ignore only
//     an upstream watch cache timer goroutine that ends by itself within 3 s) and
//     internal/kinetest's (kine's TTL loop, which ends with kine's context).
//
// BenchmarkPutWatchFanout measures put plus watch fan-out throughput of embedded etcd and of
// listwatch with the same workload in the same run.
//
// Performance against the same upstream code, side by side in one process, is in the sidebyside
// package (`make bench` prints its table).
//
// Running it: `go test -race ./...` runs the default seeds and replays FuzzDifferential's seed
// corpus; -interop.seed=N runs one seed and -interop.ops=N sets the operations per seed. A long run
// of TestDifferentialEtcdVsListwatch takes its seeds from the environment: LISTWATCH_INTEROP_SEEDS
// lists seeds and inclusive ranges, separated by commas (1-500, or 3,7,100-120), for example
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
//
// The other packages of the module hold listwatch to upstream at the higher stages:
//
//   - apiserverconf: k8s.io/apiserver's storage conformance functions against upstream's etcd3
//     storage on embedded etcd and on listwatch, and against upstream's Cacher and listwatch's
//     cache (the functions upstream's cacher_test.go runs).
//   - cacherdiff: upstream's Cacher and listwatch's cache, over one listwatch store, fed the same
//     seeded history and requests; every answer and every watch stream compared.
//   - httpdiff: a real apiextensions-apiserver and listwatch's chain serving the same custom
//     resource, sent the same seeded requests over HTTP; every answer and stream compared. For
//     built-in kinds, a real kube-apiserver v1.37.2 over listwatch's etcd API (internal/kubebin,
//     the binary `make kube-apiserver` builds from the module kube-apiserver/), skipped without it.
//   - clientgo: client-go, informers and kubectl against listwatch's HTTP API.
//   - goapi: controller-runtime, a protobuf clientset and kubectl against the Go test API
//     (package listwatchtest), and against a real cluster named by LISTWATCH_KUBECONFIG.
//   - report: the HTML report of a real failing run against etcd 3.4.23 opened in chromium
//     (chromedp): it loads without a JavaScript error, shows the verdict and the first violation,
//     whose link highlights its watch response in view; the key filter and zoom work. It skips
//     without /usr/bin/chromium; LISTWATCH_REPORT_SCREENSHOTS=dir saves screenshots of each step.
//   - sidebyside: benchmarks of listwatch against etcd's mvcc store, upstream's Cacher and a real
//     apiextensions-apiserver in one process, with the same workload; `make bench` tabulates them.
//
// The two seeded differentials run a default seed set in `make test`; long runs take their seeds
// and size from the environment:
//
//	LISTWATCH_CACHERDIFF_SEEDS=1-200 [LISTWATCH_CACHERDIFF_OPS=250] go test -race -timeout 3h -run TestCacherDifferential ./cacherdiff/
//	LISTWATCH_HTTPDIFF_SEEDS=1-100 [LISTWATCH_HTTPDIFF_OPS=150] go test -race -timeout 3h -run TestHTTPDifferential ./httpdiff/
//
// A seed list is "N", "N-M" or a comma-separated list of them (internal/seeds); every difference a
// run reports names its seed, and each test's log ends with the counts of what it compared. Both
// run their watch pairs (segments, resumes, judging, comparing) on one runner, internal/diffrun.
package interop
