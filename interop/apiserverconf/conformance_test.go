package apiserverconf

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"github.com/listwatch/listwatch/internal/testutil"
)

// conformanceCase is one upstream conformance function, wired as upstream's etcd3 tests wire it
// (pkg/storage/etcd3/store_test.go and watcher_test.go; the name is upstream's subtest or test
// name). run builds the storage with newEnv and calls the function.
type conformanceCase struct {
	name string
	// gates are set for the subtest before the storage is built: some are read by etcd3.New and
	// etcd3.NewCompactor.
	gates map[featuregate.Feature]bool
	// skip, when set, skips the case on both backends and says why.
	skip string
	run  func(t *testing.T, b backend)
}

// plain wires a function that needs nothing but the storage.
func plain(fn func(context.Context, *testing.T, storage.Interface)) func(*testing.T, backend) {
	return func(t *testing.T, b backend) {
		e := newEnv(t, b)
		fn(e.ctx, t, e.store)
	}
}

// delivered wires a function over deliveredStore: each Create returns once its event is in the
// result channel of every watch that covers it (RunWatchSemantics' 150 ms per event).
func delivered(fn func(context.Context, *testing.T, storage.Interface)) func(*testing.T, backend) {
	return func(t *testing.T, b backend) {
		e := newEnv(t, b)
		fn(e.ctx, t, deliveredStore(t, e.store))
	}
}

// withEnv runs fn with a fresh env of the backend.
func withEnv(fn func(*testing.T, *env)) func(*testing.T, backend) {
	return func(t *testing.T, b backend) { fn(t, newEnv(t, b)) }
}

// plainTB wires a function that takes a testing.TB.
func plainTB(fn func(context.Context, testing.TB, storage.Interface)) func(*testing.T, backend) {
	return func(t *testing.T, b backend) {
		e := newEnv(t, b)
		fn(e.ctx, t, e.store)
	}
}

// withPrefixStore wires a function that swaps the prefix transformer.
func withPrefixStore(fn func(context.Context, *testing.T, storagetesting.InterfaceWithPrefixTransformer)) func(*testing.T, backend) {
	return func(t *testing.T, b backend) {
		e := newEnv(t, b)
		fn(e.ctx, t, e.withPrefixTransformer())
	}
}

var unsafeDeletion = map[featuregate.Feature]bool{features.AllowUnsafeMalformedObjectDeletion: true}

// checkStreamReads checks, after a list function ran with EtcdRangeStream set to rangeStream, which
// path the storage took, as upstream's TestList and TestConsistentList do: with the gate off it never
// asks for a stream; with it on it streams, since both backends serve RangeStream.
func checkStreamReads(t *testing.T, e *env, rangeStream bool) {
	t.Helper()
	streams := e.kv.GetStreamReadsAndReset()
	switch {
	case !rangeStream && streams > 0:
		t.Errorf("%d RangeStream reads with EtcdRangeStream off, want none", streams)
	case rangeStream && streams == 0:
		t.Errorf("no RangeStream reads with EtcdRangeStream on")
	}
}

func storeCases() []conformanceCase {
	cases := []conformanceCase{
		{name: "Create", run: withEnv(func(t *testing.T, e *env) {
			storagetesting.RunTestCreate(e.ctx, t, e.store, e.keyValidation())
		})},
		{name: "CreateWithTTL", run: plain(storagetesting.RunTestCreateWithTTL)},
		{name: "CreateWithKeyExist", run: plain(storagetesting.RunTestCreateWithKeyExist)},
		{name: "Get", run: plain(storagetesting.RunTestGet)},
		{name: "UnconditionalDelete", run: plain(storagetesting.RunTestUnconditionalDelete)},
		{name: "ConditionalDelete", run: plain(storagetesting.RunTestConditionalDelete)},
		{name: "DeleteWithSuggestion", run: plain(storagetesting.RunTestDeleteWithSuggestion)},
		{name: "DeleteWithSuggestionAndConflict", run: plain(storagetesting.RunTestDeleteWithSuggestionAndConflict)},
		{name: "DeleteWithSuggestionOfDeletedObject", run: plain(storagetesting.RunTestDeleteWithSuggestionOfDeletedObject)},
		{name: "ValidateDeletionWithSuggestion", run: plain(storagetesting.RunTestValidateDeletionWithSuggestion)},
		{name: "ValidateDeletionWithOnlySuggestionValid", run: plain(storagetesting.RunTestValidateDeletionWithOnlySuggestionValid)},
		{name: "DeleteWithConflict", run: plain(storagetesting.RunTestDeleteWithConflict)},
		{name: "DeleteWithConflictAndMissingExpectedTransformOrDecodeError", gates: unsafeDeletion, run: func(t *testing.T, b backend) {
			codec := newFailingCodec()
			e := newEnv(t, b, withCodec(codec))
			storagetesting.RunTestDeleteWithConflictAndMissingExpectedTransformOrDecodeError(e.ctx, t, e.store, codec.setFailing)
		}},
		{name: "DeleteWithConflictAndExpectedTransformError", gates: unsafeDeletion, run: withEnv(func(t *testing.T, e *env) {
			storagetesting.RunTestDeleteExpectedTransformOrDecodeError(e.ctx, t, e.store, e.transformer.setFailingReads())
		})},
		{name: "DeleteWithConflictAndExpectedDecodeError", gates: unsafeDeletion, run: func(t *testing.T, b backend) {
			codec := newFailingCodec()
			e := newEnv(t, b, withCodec(codec))
			storagetesting.RunTestDeleteExpectedTransformOrDecodeError(e.ctx, t, e.store, codec.setFailing)
		}},
		{name: "DeleteWithSuggestionAndMissingExpectedTransformOrDecodeFailure", gates: unsafeDeletion,
			run: plainTB(storagetesting.RunTestDeleteWithSuggestionAndMissingExpectedTransformOrDecodeError)},
		{name: "PreconditionalDeleteWithSuggestion", run: plain(storagetesting.RunTestPreconditionalDeleteWithSuggestion)},
		{name: "PreconditionalDeleteWithSuggestionPass", run: plain(storagetesting.RunTestPreconditionalDeleteWithOnlySuggestionPass)},
		{name: "ListPaging", run: plain(storagetesting.RunTestListPaging)},
		{name: "GetListNonRecursive", run: withEnv(func(t *testing.T, e *env) {
			storagetesting.RunTestGetListNonRecursive(e.ctx, t, e.increaseRV(), e.store)
		})},
		{name: "GetListRecursivePrefix", run: plain(storagetesting.RunTestGetListRecursivePrefix)},
		{name: "KeySchema", run: plain(storagetesting.RunTestKeySchema)},
		{name: "GetListWithErrorAggregation", gates: unsafeDeletion, run: withEnv(func(t *testing.T, e *env) {
			storagetesting.RunTestGetListWithErrorAggregation(e.ctx, t, e.withTransformerOverride(e.unsafeDeletionStore()), corruptObjectError(t))
		})},
		{name: "GetListWithoutErrorAggregation", gates: map[featuregate.Feature]bool{features.AllowUnsafeMalformedObjectDeletion: false}, run: withEnv(func(t *testing.T, e *env) {
			storagetesting.RunTestGetListWithoutErrorAggregation(e.ctx, t, e.withTransformerOverride(e.store), corruptObjectError(t))
		})},
		{name: "GuaranteedUpdate", run: withEnv(func(t *testing.T, e *env) {
			storagetesting.RunTestGuaranteedUpdate(e.ctx, t, e.withPrefixTransformer(), e.keyValidation())
		})},
		{name: "GuaranteedUpdateWithTTL", run: plain(storagetesting.RunTestGuaranteedUpdateWithTTL)},
		{name: "GuaranteedUpdateChecksStoredData", run: withPrefixStore(storagetesting.RunTestGuaranteedUpdateChecksStoredData)},
		{name: "GuaranteedUpdateWithConflict", run: plain(storagetesting.RunTestGuaranteedUpdateWithConflict)},
		{name: "GuaranteedUpdateWithSuggestionAndConflict", run: plain(storagetesting.RunTestGuaranteedUpdateWithSuggestionAndConflict)},
		{name: "TransformationFailure", run: withPrefixStore(storagetesting.RunTestTransformationFailure)},
	}
	for _, rangeStream := range []bool{false, true} {
		gates := map[featuregate.Feature]bool{features.EtcdRangeStream: rangeStream}
		cases = append(cases,
			conformanceCase{name: fmt.Sprintf("List/rangeStream=%v", rangeStream), gates: gates, run: func(t *testing.T, b backend) {
				e := newEnv(t, b)
				storagetesting.RunTestList(e.ctx, t, e.store, e.compaction(), false, e.lists)
				checkStreamReads(t, e, rangeStream)
			}},
			conformanceCase{name: fmt.Sprintf("ConsistentList/rangeStream=%v", rangeStream), gates: gates, run: func(t *testing.T, b backend) {
				e := newEnv(t, b)
				storagetesting.RunTestConsistentList(e.ctx, t, e.store, e.increaseRV(), false, true, false)
				checkStreamReads(t, e, rangeStream)
			}},
		)
	}
	cases = append(cases,
		// The compactor watches compact_rev_key only with ListFromCacheSnapshot, and the function
		// needs the storage to see a compaction done by someone else.
		conformanceCase{name: "CompactRevision", gates: map[featuregate.Feature]bool{features.ListFromCacheSnapshot: true}, run: withEnv(func(t *testing.T, e *env) {
			storagetesting.RunTestCompactRevision(e.ctx, t, e.store, e.increaseRV(), e.compaction())
		})},
		conformanceCase{name: "ListContinuation", run: withEnv(func(t *testing.T, e *env) {
			storagetesting.RunTestListContinuation(e.ctx, t, e.store, e.callsValidation())
		})},
		// ListFromCacheSnapshot adds a read of compact_rev_key that the call count does not expect.
		conformanceCase{name: "ListPaginationRareObject", gates: map[featuregate.Feature]bool{features.ListFromCacheSnapshot: false}, run: withEnv(func(t *testing.T, e *env) {
			storagetesting.RunTestListPaginationRareObject(e.ctx, t, e.store, e.callsValidation())
		})},
		conformanceCase{name: "ListContinuationWithFilter", run: withEnv(func(t *testing.T, e *env) {
			storagetesting.RunTestListContinuationWithFilter(e.ctx, t, e.store, e.callsValidation())
		})},
		conformanceCase{name: "NamespaceScopedList", run: plain(storagetesting.RunTestNamespaceScopedList)},
		conformanceCase{name: "ListInconsistentContinuation", run: withEnv(func(t *testing.T, e *env) {
			storagetesting.RunTestListInconsistentContinuation(e.ctx, t, e.store, e.compaction())
		})},
		conformanceCase{name: "ListResourceVersionMatch", run: withPrefixStore(storagetesting.RunTestListResourceVersionMatch)},
	)
	for _, sizeBased := range []bool{true, false} {
		cases = append(cases, conformanceCase{name: fmt.Sprintf("Stats/SizeBasedListCostEstimate=%v", sizeBased), run: func(t *testing.T, b backend) {
			e := newEnv(t, b)
			if sizeBased {
				if err := e.raw.EnableResourceSizeEstimation(e.keys); err != nil {
					t.Fatal(err)
				}
			}
			storagetesting.RunTestStats(e.ctx, t, e.store, e.codec, e.transformer, sizeBased)
		}})
	}
	return cases
}

func watchCases() []conformanceCase {
	cases := []conformanceCase{
		{name: "Watch", run: plain(storagetesting.RunTestWatch)},
		{name: "ClusterScopedWatch", run: plain(storagetesting.RunTestClusterScopedWatch)},
		{name: "NamespaceScopedWatch", run: plain(storagetesting.RunTestNamespaceScopedWatch)},
		{name: "DeleteTriggerWatch", run: plain(storagetesting.RunTestDeleteTriggerWatch)},
		{name: "WatchFromZero", run: withEnv(func(t *testing.T, e *env) {
			storagetesting.RunTestWatchFromZero(e.ctx, t, e.store, e.compaction())
		})},
		{name: "WatchFromNonZero", run: plain(storagetesting.RunTestWatchFromNonZero)},
		{name: "DelayedWatchDelivery", run: plain(storagetesting.RunTestDelayedWatchDelivery)},
		{name: "WatchError", run: withPrefixStore(storagetesting.RunTestWatchError)},
		{name: "WatchContextCancel", run: plain(storagetesting.RunTestWatchContextCancel)},
		{name: "WatcherTimeout", run: plain(storagetesting.RunTestWatcherTimeout)},
		{name: "WatchDeleteEventObjectHaveLatestRV", run: plain(storagetesting.RunTestWatchDeleteEventObjectHaveLatestRV)},
		{name: "WatchInitializationSignal", run: plain(storagetesting.RunTestWatchInitializationSignal)},
		{name: "ProgressNotify", run: func(t *testing.T, b backend) {
			e := newEnv(t, b, withProgressNotify(progressNotifyInterval))
			storagetesting.RunOptionalTestProgressNotify(e.ctx, t, e.store, e.increaseRV())
		}},
		{name: "WatchWithUnsafeDelete", gates: unsafeDeletion, run: withEnv(func(t *testing.T, e *env) {
			storagetesting.RunTestWatchWithUnsafeDelete(e.ctx, t, e.withTransformerOverride(e.store), corruptObjectError(t))
		})},
		// The etcd3 storage turns progress notifications into bookmarks only for watches that ask
		// for ProgressNotify, so AllowWatchBookmarks alone gets none: upstream passes false.
		{name: "WatchDispatchBookmarkEvents", run: func(t *testing.T, b backend) {
			e := newEnv(t, b, withProgressNotify(progressNotifyInterval))
			storagetesting.RunTestWatchDispatchBookmarkEvents(e.ctx, t, e.store, false)
		}},
		{name: "SendInitialEventsBackwardCompatibility", run: plain(storagetesting.RunSendInitialEventsBackwardCompatibility)},
	}
	for _, rangeStream := range []bool{false, true} {
		prefix := fmt.Sprintf("RangeStream=%v/", rangeStream)
		gates := map[featuregate.Feature]bool{features.EtcdRangeStream: rangeStream}
		concurrentDecode := map[featuregate.Feature]bool{features.EtcdRangeStream: rangeStream, features.ConcurrentWatchObjectDecode: true}
		cases = append(cases,
			conformanceCase{name: prefix + "WatchSemantics", gates: gates, run: delivered(storagetesting.RunWatchSemantics)},
			conformanceCase{name: prefix + "WatchSemanticsWithConcurrentDecode", gates: concurrentDecode, run: delivered(storagetesting.RunWatchSemantics)},
			conformanceCase{name: prefix + "WatchSemanticInitialEventsExtended", gates: gates, run: plain(storagetesting.RunWatchSemanticInitialEventsExtended)},
			conformanceCase{name: prefix + "WatchListMatchSingle", gates: gates, run: plain(storagetesting.RunWatchListMatchSingle)},
		)
	}
	cases = append(cases,
		conformanceCase{name: "WatchErrorEventIsBlockingFurtherEvent", run: withPrefixStore(storagetesting.RunWatchErrorIsBlockingFurtherEvents)},
		// Bookmarks without ProgressNotify come from the watch cache, not from the etcd3 storage:
		// upstream runs this one only over the cacher (pkg/storage/cacher/cacher_test.go). Over
		// the bare storage it fails alike on both backends ("we did not received a bookmark event").
		conformanceCase{name: "OptionalWatchBookmarksWithCorrectResourceVersion",
			skip: "needs the watch cache (cacher) layer: the etcd3 storage sends bookmarks only to ProgressNotify watches; upstream runs it only in pkg/storage/cacher",
			run:  plain(storagetesting.RunTestOptionalWatchBookmarksWithCorrectResourceVersion)},
	)
	return cases
}

// TestStorageConformance runs every case on every backend, one subtest at a time. With -short only
// on listwatch: the reference, embedded etcd, runs in the full suite.
func TestStorageConformance(t *testing.T) {
	for _, c := range append(storeCases(), watchCases()...) {
		t.Run(c.name, func(t *testing.T) {
			for _, b := range backends {
				t.Run(b.name, func(t *testing.T) {
					if c.skip != "" {
						t.Skip(c.skip)
					}
					if testing.Short() && b.name != "listwatch" {
						t.Skip("-short: the reference backend runs in the full suite")
					}
					if len(c.gates) > 0 {
						featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, c.gates)
					}
					c.run(t, b)
				})
			}
		})
	}
}

// TestFeatureSupportCheck checks that the storage's etcd feature check, which etcd3.New starts and
// which asks the endpoint's Status for its version, finds RequestWatchProgress supported on both
// backends: the watch cache relies on it for consistent reads.
func TestFeatureSupportCheck(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			newEnv(t, b)
			testutil.WaitFor(t, "RequestWatchProgress to be found supported", func() bool {
				return etcdfeature.DefaultFeatureSupportChecker.Supports(storage.RequestWatchProgress)
			})
		})
	}
}
