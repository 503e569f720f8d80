# The one test command: every test of the root module and of the interop module, with the race detector.
GO ?= go

.PHONY: test test-root test-interop test-short stress bench bench-packages httpdiff-cover kube-apiserver

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

# httpdiff-cover runs interop/httpdiff's differential (TestHTTPDifferential and
# TestHTTPDifferentialSchema, the default seeds; LISTWATCH_HTTPDIFF_SEEDS and the others choose more)
# with coverage over upstream's request path, and prints the statements it reached per package. The
# profile stays in $(COVER_OUT), the per-function figures in $(COVER_OUT).func. No race detector.
COVER_OUT ?= httpdiff.cover.out
COVER_BIN := $(CURDIR)/.httpdiff-cover.test
COVER_PKGS := k8s.io/apiserver/pkg/endpoints/handlers,k8s.io/apiserver/pkg/endpoints/handlers/negotiation,$\
	k8s.io/apiserver/pkg/endpoints/handlers/responsewriters,k8s.io/apiserver/pkg/registry/generic/registry,$\
	k8s.io/apiextensions-apiserver/pkg/registry/customresource,$\
	k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor,k8s.io/apiserver/pkg/storage/cacher

httpdiff-cover:
	cd interop && $(GO) test -c -cover -coverpkg '$(COVER_PKGS)' -o $(COVER_BIN) ./httpdiff/
	cd interop/httpdiff && $(COVER_BIN) -test.run 'TestHTTPDifferential' -test.timeout 2h \
	  -test.coverprofile $(abspath $(COVER_OUT))
	rm -f $(COVER_BIN)
	cd interop && $(GO) tool cover -func $(abspath $(COVER_OUT)) > $(abspath $(COVER_OUT)).func
	awk -f .ci/coverpkgs.awk $(COVER_OUT)

# kube-apiserver builds k8s.io/kubernetes's cmd/kube-apiserver at the version interop/kube-apiserver
# requires (a module of its own: go.mod names the tool and replaces the staging modules with their
# releases) into $(KUBE_APISERVER), where the tests that run a real kube-apiserver over listwatch's
# etcd API look for it (interop/internal/kubebin; LISTWATCH_KUBE_APISERVER names another). Without
# it they skip. Not part of `make test`: 8.5 minutes on 2 cores with a warm module cache.
# The version is stamped as upstream's release builds stamp it (hack/lib/version.sh), so that
# /version and the binary's feature gates say v1.37.2.
KUBE_APISERVER ?= $(CURDIR)/interop/.cache/kube-apiserver
KUBE_VERSION = $(shell $(GO) list -C interop/kube-apiserver -m -f '{{.Version}}' k8s.io/kubernetes)
KUBE_VERSION_PARTS = $(subst ., ,$(patsubst v%,%,$(KUBE_VERSION)))
KUBE_LDFLAGS = $(foreach v,gitVersion=$(KUBE_VERSION) gitMajor=$(word 1,$(KUBE_VERSION_PARTS)) $\
	gitMinor=$(word 2,$(KUBE_VERSION_PARTS)) gitTreeState=clean,-X k8s.io/component-base/version.$(v))

kube-apiserver: $(KUBE_APISERVER)

$(KUBE_APISERVER): interop/kube-apiserver/go.mod interop/kube-apiserver/go.sum
	$(GO) build -C interop/kube-apiserver -trimpath -ldflags '$(KUBE_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/kube-apiserver

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

# zoo runs `listwatch check` against real stores of several versions (interop/zoo: etcd releases on
# either side of the fixes of the catalogued bugs, Debian's etcd 3.4, kine over SQLite and over
# PostgreSQL, one and two instances) and writes the table of what it found into README.md. The
# stores' commands are two tiny modules, interop/zoo/etcd and interop/zoo/kine, outside the root
# and interop module graphs, with one go.mod per version (vX.Y.Z.mod, -modfile), each built once
# into $(ZOO_BIN) (non-race). It is not part of `make test`. ZOO_TARGETS chooses targets by
# name (default: all), ZOO_FLAGS passes the driver more flags (go run ./zoo -h in interop).
ZOO_BIN ?= $(CURDIR)/interop/zoo/.bin
ZOO_ETCD := v3.5.12 v3.5.13 v3.5.17 v3.5.18 v3.6.0 v3.7.3
ZOO_KINE := v0.14.12 v0.16.5 v0.17.0 v0.17.5
ZOO_STORES := $(addprefix $(ZOO_BIN)/etcd-,$(ZOO_ETCD)) $(addprefix $(ZOO_BIN)/kine-,$(ZOO_KINE))

.PHONY: zoo zoo-build

$(ZOO_BIN)/etcd-%: interop/zoo/etcd/%.mod interop/zoo/etcd/main.go
	$(GO) build -C interop/zoo/etcd -modfile $*.mod -o $@ .

# SQLite's dbstat table, which kine's Status reads (before 0.17), as kine's scripts/build enables it
$(ZOO_BIN)/kine-%: interop/zoo/kine/%.mod interop/zoo/kine/main.go
	CGO_CFLAGS="-DSQLITE_ENABLE_DBSTAT_VTAB=1 -DSQLITE_USE_ALLOCA=1" $(GO) build -C interop/zoo/kine -modfile $*.mod -o $@ .

zoo-build: $(ZOO_STORES)
	$(GO) build -o $(ZOO_BIN)/listwatch ./cmd/listwatch

zoo: zoo-build
	cd interop && $(GO) run ./zoo -bin $(ZOO_BIN) -readme $(CURDIR)/README.md $(ZOO_FLAGS)
