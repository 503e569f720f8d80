// Package sidebyside holds the benchmarks that run listwatch and the upstream code it mirrors in
// one process, on one workload, and report both figures and their ratio, so that a user choosing
// between them sees the difference in one run. `make bench` runs them and prints the table of
// ratios (internal/benchtable) against the goals of issue 16. The package has no API.
//
// # What is compared
//
//   - store_test.go: listwatch's store against etcd v3.7.3's own mvcc watchable store over a bbolt
//     backend in a temporary directory (mvcc.New, backend.DefaultBackendConfig, lease.FakeLessor, as
//     etcd's kvstore_bench_test.go and watchable_store_bench_test.go build it): puts with no watchers
//     (BenchmarkStorePut); put plus live fan-out to 1, 100, 1000 and 10000 watchers, one stream and
//     reader each (BenchmarkStoreFanout); the catch-up of a watcher starting 20000 revisions back
//     (BenchmarkStoreCatchUp, paced alike on both: 1000 revisions per 100 ms pass); the heap of an
//     idle watcher (BenchmarkStoreWatcherMemory).
//   - cache_test.go: listwatch's cache.Cacher (as chain.New assembles it) against upstream's
//     cacher.Cacher over upstream's etcd3 storage, each over etcdgrpc over its own listwatch store,
//     configured alike (the pods' GetAttrs, a spec.nodeName trigger index): deliveries per second to
//     100, 1000 and 10000 watchers with no selector, with selectors, and indexed by node
//     (BenchmarkCacheDispatch, which also reports each side's ns/delivery); memory per watcher
//     (BenchmarkCacheWatcherMemory) and per cached event (BenchmarkCachedEventMemory). Both sides'
//     indexed watchers name the trigger field in their predicate's IndexFields, as the pod
//     registry's MatchPod (and httpwatch) do; without it neither cache indexes them.
//     SIDEBYSIDE_CACHE_SIDES (listwatch, upstream or both, comma-separated) runs one side alone, to
//     profile it.
//   - http_test.go: listwatch's HTTP API (chain.New) against a real apiextensions-apiserver v0.37.2
//     in process (internal/kubeapiserver), both serving widgets.example.com/v1 over their own
//     listwatch store, 1000 watchers on loopback and one writer at 100 and 300 writes/s
//     (benchwatch.Fanout), with the loopback floor (benchwatch.Floor, moving the same bytes per
//     event) for scale (BenchmarkHTTPFanout). The writes go straight to each server's store, so that both see the
//     same etcd events at the same rate whatever their write path costs. SIDEBYSIDE_HTTP_SIDES
//     (listwatch, upstream or both, comma-separated) runs one server alone, to profile it.
//   - largewatch_test.go: issue 22's large-object watch run (LISTWATCH_LARGEWATCH=1 runs
//     TestLargeWatch; it takes a few minutes, most of them upstream's): each server, as in
//     http_test.go, in a child process of its own (TestLargeWatchServer), two widgets of about
//     1.4 MB created through its API, then 2000 watches from resourceVersion 0 (each reading both
//     initial events) opened at once while the widgets are listed one list after another; the
//     table gives the watches opened (in 15 s and in all), the lists' latencies, and the server's
//     RSS and live heap before, during and after. SIDEBYSIDE_LARGEWATCH_SIDES runs one side.
//   - start_test.go: the Go test API (listwatchtest.New) to the first list of widgets, against
//     embedded etcd plus the apiserver started in process (BenchmarkStart).
//
// # Rules the benchmarks keep
//
//   - A benchmark fails (b.Fatal or b.Error, after logging its figures) when a stream is short, out
//     of order or carries anything but what was written: every reader checks every event it gets
//     against what it must get. None is a timed unit test: figures are only reported.
//   - Throughput figures are the best of SIDEBYSIDE_ROUNDS (default 3) alternating runs of each
//     side: other work on the machine only slows a run down, and alternating keeps a burst of it from
//     falling on one side. The HTTP runs are single, as a dropped watcher or a slow p99 must not be
//     hidden by a better run.
//   - Memory figures are runtime.MemStats deltas after GC (heap, plus goroutine stacks where a side
//     runs a goroutine per watcher), reported with b.ReportMetric; a side's leftover goroutines are
//     waited for before the other side is measured.
//   - Every goroutine and server a benchmark starts is stopped before it returns (TestMain checks
//     with goleak).
package sidebyside
