# The one test command: every test of the root module and of the interop module, with the race detector.
GO ?= go

.PHONY: test test-root test-interop test-short stress bench bench-packages

test: test-root test-interop

test-root:
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(GO) test -race -timeout 30m ./...

test-interop:
	cd interop && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) test -race -timeout 30m ./...

# test-short is the inner loop: every package's core properties with the -short sizes (README, "Test
# sizes"), without vet or the race detector.
test-short:
	$(GO) test -short ./...
	cd interop && $(GO) test -short ./...

# stress runs the suites with -race while stress-ng oversubscribes the cores (2 x nproc workers): by
# default the -short suites of both modules, 5 runs each, GOMAXPROCS 1, 2, 4 in turn, every failure
# reported with its seeds. STRESS_FLAGS= (empty) runs the full suites; STRESS_RUNS, STRESS_CPU,
# STRESS_COUNT, STRESS_RUN, STRESS_MODULES, STRESS_PKGS and STRESS_HOG choose the rest (.ci/stress).
# It needs stress-ng (Debian's stress-ng package) and says so when it is missing.
stress:
	GO=$(GO) .ci/stress

# bench runs listwatch and the upstream code it mirrors side by side (interop/sidebyside: etcd's mvcc
# store, the apiserver's Cacher, a real apiextensions-apiserver; same process, same workload) and
# prints one table of the ratios against issue 16's goals, with the load before and after. About five
# minutes on 2 cores. The raw output stays in $(BENCH_OUT).
BENCH_OUT ?= bench.out
BENCH_BIN := $(CURDIR)/.sidebyside.test
SIDEBYSIDE = $(BENCH_BIN) -test.run '^$$' -test.timeout 60m

bench:
	cd interop && $(GO) test -c -o $(BENCH_BIN) ./sidebyside/
	cd interop/sidebyside && { \
	  uptime; \
	  $(SIDEBYSIDE) -test.bench 'BenchmarkStorePut$$' -test.benchtime 200000x; \
	  $(SIDEBYSIDE) -test.bench 'BenchmarkStoreFanout/^watchers=1$$' -test.benchtime 20000x; \
	  $(SIDEBYSIDE) -test.bench 'BenchmarkStoreFanout/^watchers=100$$' -test.benchtime 5000x; \
	  $(SIDEBYSIDE) -test.bench 'BenchmarkStoreFanout/^watchers=1000$$' -test.benchtime 1000x; \
	  $(SIDEBYSIDE) -test.bench 'BenchmarkStoreFanout/^watchers=10000$$' -test.benchtime 150x; \
	  $(SIDEBYSIDE) -test.bench 'BenchmarkStore(CatchUp|WatcherMemory)$$' -test.benchtime 1x; \
	  $(SIDEBYSIDE) -test.bench 'BenchmarkCacheDispatch/^watchers=100$$' -test.benchtime 2000x; \
	  $(SIDEBYSIDE) -test.bench 'BenchmarkCacheDispatch/^watchers=1000$$' -test.benchtime 500x; \
	  $(SIDEBYSIDE) -test.bench 'BenchmarkCacheDispatch/^watchers=10000$$' -test.benchtime 100x; \
	  $(SIDEBYSIDE) -test.bench 'BenchmarkCache(WatcherMemory|dEventMemory)$$' -test.benchtime 1x; \
	  $(SIDEBYSIDE) -test.bench 'BenchmarkHTTPFanout/^rate=100$$' -test.benchtime 1000x; \
	  $(SIDEBYSIDE) -test.bench 'BenchmarkHTTPFanout/^rate=300$$' -test.benchtime 3000x; \
	  $(SIDEBYSIDE) -test.bench 'BenchmarkStart$$' -test.benchtime 5x; \
	  uptime; \
	} 2>&1 | tee $(abspath $(BENCH_OUT))
	rm -f $(BENCH_BIN)
	$(GO) run ./internal/benchtable < $(abspath $(BENCH_OUT))

# bench-packages runs every benchmark of the root module's packages on its own.
bench-packages:
	$(GO) test -run '^$$' -bench . -benchmem ./store/ ./watch/ ./cache/ ./httpwatch/ ./listwatchtest/
