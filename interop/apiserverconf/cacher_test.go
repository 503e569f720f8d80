package apiserverconf

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	k8setcd3 "k8s.io/apiserver/pkg/storage/etcd3"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"github.com/listwatch/listwatch/interop/internal/cachepair"
)

// cacherCase is one conformance function as upstream's pkg/storage/cacher/cacher_test.go runs it
// against its Cacher: the name is upstream's test (and subtest) name, the setup upstream's.
type cacherCase struct {
	name  string
	gates map[featuregate.Feature]bool
	run   func(t *testing.T, b cachepair.Builder)
	// realTime is a function that holds its work to a real-time deadline (a 3 s watch context with
	// a bookmark due 2 s in): under load it can fail on any cache, so it runs without -short only.
	realTime bool
}

// cachePlain wires a function that needs nothing but the cache, built with the setup given (at
// most one; the default otherwise).
func cachePlain(fn func(context.Context, *testing.T, storage.Interface), setup ...cachepair.Setup) func(*testing.T, cachepair.Builder) {
	return func(t *testing.T, b cachepair.Builder) {
		var s cachepair.Setup
		if len(setup) > 0 {
			s = setup[0]
		}
		e := newCacheEnv(t, b, s)
		fn(e.ctx, t, e.store)
	}
}

// cacheTB wires a function that takes a testing.TB.
func cacheTB(fn func(context.Context, testing.TB, storage.Interface)) func(*testing.T, cachepair.Builder) {
	return func(t *testing.T, b cachepair.Builder) {
		e := newCacheEnv(t, b, cachepair.Setup{})
		fn(e.ctx, t, e.store)
	}
}

// cacheWithCreateWrapper wires a function over upstream's createWrapper (testSetupWithEtcdAndCreateWrapper).
func cacheWithCreateWrapper(fn func(context.Context, *testing.T, storage.Interface)) func(*testing.T, cachepair.Builder) {
	return func(t *testing.T, b cachepair.Builder) {
		e := newCacheEnv(t, b, cachepair.Setup{})
		fn(context.TODO(), t, e.withCreateWrapper())
	}
}

// cacheDelivered is cacheWithCreateWrapper with deliveredStore over it (RunWatchSemantics' 150 ms
// per event): a Create returns once the cache serves the object and every watch covering it holds
// its event.
func cacheDelivered(fn func(context.Context, *testing.T, storage.Interface)) func(*testing.T, cachepair.Builder) {
	return func(t *testing.T, b cachepair.Builder) {
		e := newCacheEnv(t, b, cachepair.Setup{})
		fn(context.TODO(), t, deliveredStore(t, e.withCreateWrapper()))
	}
}

func cacherCases() []cacherCase {
	cases := []cacherCase{
		{name: "Create", run: func(t *testing.T, b cachepair.Builder) {
			e := newCacheEnv(t, b, cachepair.Setup{})
			// Upstream's checkStorageInvariants for the cacher is a no-op: creation passes through.
			storagetesting.RunTestCreate(e.ctx, t, e.store, func(context.Context, *testing.T, string) {})
		}},
		{name: "CreateWithTTL", run: cachePlain(storagetesting.RunTestCreateWithTTL)},
		{name: "CreateWithKeyExist", run: cachePlain(storagetesting.RunTestCreateWithKeyExist)},
		{name: "Get", run: cachePlain(storagetesting.RunTestGet)},
		{name: "UnconditionalDelete", run: cachePlain(storagetesting.RunTestUnconditionalDelete)},
		{name: "ConditionalDelete", run: cachePlain(storagetesting.RunTestConditionalDelete)},
		{name: "DeleteWithSuggestion", run: cachePlain(storagetesting.RunTestDeleteWithSuggestion)},
		{name: "DeleteWithSuggestionAndConflict", run: cachePlain(storagetesting.RunTestDeleteWithSuggestionAndConflict)},
		{name: "DeleteWithSuggestionOfDeletedObject", run: cachePlain(storagetesting.RunTestDeleteWithSuggestionOfDeletedObject)},
		{name: "ValidateDeletionWithSuggestion", run: cachePlain(storagetesting.RunTestValidateDeletionWithSuggestion)},
		{name: "ValidateDeletionWithOnlySuggestionValid", run: cachePlain(storagetesting.RunTestValidateDeletionWithOnlySuggestionValid)},
		{name: "DeleteWithConflict", run: cachePlain(storagetesting.RunTestDeleteWithConflict)},
		{name: "DeleteWithConflictAndMissingExpectedTransformOrDecodeError", gates: unsafeDeletion, run: func(t *testing.T, b cachepair.Builder) {
			tr := &failingTransformer{Transformer: identity.NewEncryptCheckTransformer()}
			e := newCacheEnv(t, b, cachepair.Setup{Transformer: tr})
			storagetesting.RunTestDeleteWithConflictAndMissingExpectedTransformOrDecodeError(e.ctx, t, e.store, tr.setFailing)
		}},
		{name: "DeleteWithConflictAndExpectedTransformError", gates: unsafeDeletion, run: func(t *testing.T, b cachepair.Builder) {
			tr := &failingTransformer{Transformer: identity.NewEncryptCheckTransformer()}
			e := newCacheEnv(t, b, cachepair.Setup{Transformer: tr})
			storagetesting.RunTestDeleteExpectedTransformOrDecodeError(e.ctx, t, e.store, tr.setFailing)
		}},
		{name: "DeleteWithConflictAndExpectedDecodeError", gates: unsafeDeletion, run: func(t *testing.T, b cachepair.Builder) {
			// As upstream: the stored bytes are made undecodable on purpose.
			k8setcd3.TestOnlySetFatalOnDecodeError(t, false)
			codec := &failingCodec{Codec: cachepair.Codec}
			e := newCacheEnv(t, b, cachepair.Setup{Codec: codec})
			storagetesting.RunTestDeleteExpectedTransformOrDecodeError(e.ctx, t, e.store, codec.setFailing)
		}},
		{name: "DeleteWithSuggestionAndMissingExpectedTransformOrDecodeError", gates: unsafeDeletion,
			run: cacheTB(storagetesting.RunTestDeleteWithSuggestionAndMissingExpectedTransformOrDecodeError)},
		{name: "PreconditionalDeleteWithSuggestion", run: cachePlain(storagetesting.RunTestPreconditionalDeleteWithSuggestion)},
		{name: "PreconditionalDeleteWithSuggestionPass", run: cachePlain(storagetesting.RunTestPreconditionalDeleteWithOnlySuggestionPass)},
		{name: "ListPaging", run: cachePlain(storagetesting.RunTestListPaging)},
	}
	for _, snapshots := range []bool{true, false} {
		prefix := fmt.Sprintf("Lists/ListFromCacheSnapshot=%v/", snapshots)
		gates := map[featuregate.Feature]bool{features.ListFromCacheSnapshot: snapshots}
		cases = append(cases,
			cacherCase{name: prefix + "List", gates: gates, run: func(t *testing.T, b cachepair.Builder) {
				e := newCacheEnv(t, b, cachepair.Setup{})
				storagetesting.RunTestList(e.ctx, t, e.store, e.compactStore(), true, e.recorder)
			}},
			cacherCase{name: prefix + "ConsistentList", gates: gates, run: func(t *testing.T, b cachepair.Builder) {
				e := newCacheEnv(t, b, cachepair.Setup{})
				storagetesting.RunTestConsistentList(e.ctx, t, e.store, e.increaseRV(), true, true, snapshots)
			}},
			cacherCase{name: prefix + "GetListNonRecursive", gates: gates, run: func(t *testing.T, b cachepair.Builder) {
				e := newCacheEnv(t, b, cachepair.Setup{})
				storagetesting.RunTestGetListNonRecursive(e.ctx, t, e.increaseRV(), e.store)
			}},
		)
	}
	cases = append(cases,
		cacherCase{name: "CompactRevision", gates: map[featuregate.Feature]bool{features.ListFromCacheSnapshot: true}, run: func(t *testing.T, b cachepair.Builder) {
			e := newCacheEnv(t, b, cachepair.Setup{})
			storagetesting.RunTestCompactRevision(e.ctx, t, e.store, e.increaseRV(), e.compactStore())
		}},
		cacherCase{name: "GetListRecursivePrefix", run: cachePlain(storagetesting.RunTestGetListRecursivePrefix)},
		// Upstream's checkStorageCalls for the cacher is a no-op: paging passes through to etcd.
		cacherCase{name: "ListContinuation", run: func(t *testing.T, b cachepair.Builder) {
			e := newCacheEnv(t, b, cachepair.Setup{})
			storagetesting.RunTestListContinuation(e.ctx, t, e.store, noCallsValidation)
		}},
		cacherCase{name: "ListPaginationRareObject", run: func(t *testing.T, b cachepair.Builder) {
			e := newCacheEnv(t, b, cachepair.Setup{})
			storagetesting.RunTestListPaginationRareObject(e.ctx, t, e.store, noCallsValidation)
		}},
		cacherCase{name: "ListContinuationWithFilter", run: func(t *testing.T, b cachepair.Builder) {
			e := newCacheEnv(t, b, cachepair.Setup{})
			storagetesting.RunTestListContinuationWithFilter(e.ctx, t, e.store, noCallsValidation)
		}},
		cacherCase{name: "NamespaceScopedList", run: cachePlain(storagetesting.RunTestNamespaceScopedList, cachepair.Setup{NodeNameTrigger: true})},
		cacherCase{name: "GuaranteedUpdateWithTTL", run: cachePlain(storagetesting.RunTestGuaranteedUpdateWithTTL)},
		cacherCase{name: "GuaranteedUpdateWithConflict", run: cachePlain(storagetesting.RunTestGuaranteedUpdateWithConflict)},
		cacherCase{name: "GuaranteedUpdateWithSuggestionAndConflict", run: cachePlain(storagetesting.RunTestGuaranteedUpdateWithSuggestionAndConflict)},
	)
	for _, sizeBased := range []bool{true, false} {
		cases = append(cases, cacherCase{
			name:  fmt.Sprintf("Stats/SizeBasedListCostEstimate=%v", sizeBased),
			gates: map[featuregate.Feature]bool{features.SizeBasedListCostEstimate: sizeBased},
			run: func(t *testing.T, b cachepair.Builder) {
				e := newCacheEnv(t, b, cachepair.Setup{})
				storagetesting.RunTestStats(e.ctx, t, e.store, cachepair.Codec, identity.NewEncryptCheckTransformer(), sizeBased)
			},
		})
	}
	cases = append(cases,
		cacherCase{name: "KeySchema", run: cachePlain(storagetesting.RunTestKeySchema)},
		cacherCase{name: "Watch/Watch", run: cachePlain(storagetesting.RunTestWatch)},
		cacherCase{name: "Watch/WatchFromZero", run: func(t *testing.T, b cachepair.Builder) {
			e := newCacheEnv(t, b, cachepair.Setup{})
			storagetesting.RunTestWatchFromZero(e.ctx, t, e.store, e.compactWatch())
		}},
		cacherCase{name: "Watch/DeleteTriggerWatch", run: cachePlain(storagetesting.RunTestDeleteTriggerWatch)},
		cacherCase{name: "Watch/WatchFromNonZero", run: cachePlain(storagetesting.RunTestWatchFromNonZero)},
		cacherCase{name: "Watch/DelayedWatchDelivery", run: cachePlain(storagetesting.RunTestDelayedWatchDelivery)},
		cacherCase{name: "Watch/WatcherTimeout", run: cachePlain(storagetesting.RunTestWatcherTimeout)},
		cacherCase{name: "Watch/WatchDeleteEventObjectHaveLatestRV", run: cachePlain(storagetesting.RunTestWatchDeleteEventObjectHaveLatestRV)},
		cacherCase{name: "Watch/WatchInitializationSignal", run: cachePlain(storagetesting.RunTestWatchInitializationSignal)},
		cacherCase{name: "Watch/ClusterScopedWatch", run: cachePlain(storagetesting.RunTestClusterScopedWatch, cachepair.Setup{ClusterScoped: true, NodeNameTrigger: true})},
		cacherCase{name: "Watch/NamespaceScopedWatch", run: cachePlain(storagetesting.RunTestNamespaceScopedWatch, cachepair.Setup{NodeNameTrigger: true})},
		cacherCase{name: "Watch/WatchDispatchBookmarkEvents", realTime: true, run: func(t *testing.T, b cachepair.Builder) {
			e := newCacheEnv(t, b, cachepair.Setup{})
			storagetesting.RunTestWatchDispatchBookmarkEvents(e.ctx, t, e.store, true)
		}},
		cacherCase{name: "Watch/WatchBookmarksWithCorrectResourceVersion", realTime: true, run: cachePlain(storagetesting.RunTestOptionalWatchBookmarksWithCorrectResourceVersion)},
		cacherCase{name: "Watch/SendInitialEventsBackwardCompatibility", run: cachePlain(storagetesting.RunSendInitialEventsBackwardCompatibility)},
		cacherCase{name: "Watch/WatchSemantics", run: cacheDelivered(storagetesting.RunWatchSemantics)},
		cacherCase{name: "Watch/WatchSemanticInitialEventsExtended", run: cacheWithCreateWrapper(storagetesting.RunWatchSemanticInitialEventsExtended)},
		cacherCase{name: "Watch/WatchListMatchSingle", run: cacheWithCreateWrapper(storagetesting.RunWatchListMatchSingle)},
	)
	return cases
}

func noCallsValidation(*testing.T, uint64, uint64) {}

// TestCacherConformance runs every conformance function upstream runs against its Cacher
// (pkg/storage/cacher/cacher_test.go), with upstream's setup, against upstream's Cacher and against
// listwatch's cache, one subtest at a time. A function that passes against upstream's Cacher must
// pass against listwatch's; the README lists the results. With -short only against listwatch's:
// upstream's, the reference, runs in the full suite.
func TestCacherConformance(t *testing.T) {
	for _, c := range cacherCases() {
		t.Run(c.name, func(t *testing.T) {
			for _, b := range cachepair.Builders {
				t.Run(b.Name, func(t *testing.T) {
					if testing.Short() && b.Name != "listwatch" {
						t.Skip("-short: upstream's Cacher, the reference, runs in the full suite")
					}
					if testing.Short() && c.realTime {
						t.Skip("-short: holds to a real-time deadline (a 3 s watch), which load can break; runs in the full suite")
					}
					if len(c.gates) > 0 {
						featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, c.gates)
					}
					c.run(t, b.Build)
				})
			}
		})
	}
}
