// Package store is a revisioned in-memory key-value store with the semantics of etcd v3's mvcc store,
// its txn package and its lessor, plus watch streams that behave as etcd's gRPC watch streams do.
//
// It is the reference the rest of listwatch stands on, and it keeps these invariants (each names the
// tests that check it; proptest's TestStoreMatchesModel and TestStoreMatchesModelDriven check them
// all against a naive model):
//
//   - Revisions. A fresh store is at revision 1 with compact revision -1; the first write is revision 2.
//     A write that changes something raises the revision by exactly one; its changes get
//     sub-revisions in execution order. Reads, failed requests, no-op deletes, lease grants and
//     compactions never change the revision. (TestFreshStoreRevisions, TestNoOpWritesKeepRevision,
//     TestPutGenerations)
//   - Atomicity. Every request is checked in full before anything is written; a request that fails
//     changes nothing. Every operation is linearizable: the store has one lock and each call takes
//     effect at one point while holding it. (TestTxnFailedCheckChangesNothing, TestCheckRequest)
//   - Request size. Writes (Put, DeleteRange, Compact, a txn with anything but ranges) larger than
//     Options.MaxRequestBytes fail with ErrRequestTooLarge, as etcd refuses what it would propose
//     through raft; Range and a txn of ranges only have no size limit here, as in etcd, which serves
//     them without raft. (TestReadOnlyTxnNotBoundByRequestSize, TestCheckRequest)
//   - History. Every revision since the last compaction can be read. After Compact(C) a range at C
//     works and one below C fails with ErrCompacted; for each key the newest revision at or below C is
//     kept (a tombstone only if it is at exactly C), and the history a watch reads from C holds, of
//     each key, its last change at C: a txn that put a key and then deleted it leaves the DELETE
//     alone there, as etcd's compaction does. (TestCompactionRules,
//     TestTombstoneAtCompactRevisionIsWatchable, TestCompactionAtPutThenDeleteRevision,
//     TestTxnDeleteThenPutSameKeyFromKeyQuirk)
//   - Watch order. For one watch ID a stream delivers the created answer first, then events in
//     revision order, whole revisions only (a txn is never split, a catch-up batch holds at most 1000
//     revisions), no event twice and none missing, then possibly a compacted answer, after which
//     nothing is sent for the ID except the canceled answer to an explicit Cancel. Progress
//     notifications are never below an event already sent for the ID and never above one still to
//     come. (TestWatchCatchUpBatchesWholeRevisions, TestCatchUpNeverSplitsARevision,
//     TestCompactedWatcherIsCanceled, TestCancelAndClose, TestRequestProgressOnlyWhenAllSynced;
//     etcd-io/etcd#15220's trigger, a burst of writes beyond the channel then at once a
//     RequestProgress: TestRequestProgressAfterBurst). A RequestProgress is answered once every
//     watcher of the stream is synced, also one from the past that caught up without an event
//     (etcd-io/etcd#17507: TestRequestProgressAfterQuietCatchUp).
//   - Registration. Watch registers the watcher before its created answer goes out, as mvcc does
//     before v3rpc answers: a watch from revision 0 is synced at once, even on a stream whose channel
//     is full, and owes exactly what is written after the revision its created answer reports; like
//     any synced watcher, a compaction cancels it only if it falls behind afterwards (a victim that
//     returns to unsynced below the compact revision, as in etcd). (TestWatchFromZeroOnFullStreamIsSynced,
//     TestWatchFromZeroSeesOnlyLaterWrites)
//   - Control answers. A stream's channel holds 128 event, progress and compaction responses (mvcc's
//     watch channel) and 16 more created and canceled answers (v3rpc's control channel), so Watch and
//     Cancel answer at once on a stream whose reader has fallen behind; only when the 16 are taken
//     too does a call wait, for the store's periodic work to find room. (TestControlAnswersNotQueuedBehindFullChannel,
//     TestWatchWaitsOnlyWhenControlRoomIsFull)
//   - No dropped events, no blocked writers. A watcher whose stream channel is full keeps its pending
//     response and is retried (etcd's victims); slowness alone never cancels a watch (only a
//     compaction past a watcher that is behind does).
//     (TestSlowStreamNeitherDropsNorBlocks)
//   - Fair catch-up. Each catch-up pass takes at most 512 unsynced watchers, and successive passes take
//     them in turn, so watchers whose answers a full stream cannot take hold no other back.
//     (TestUnsyncedWatchersServedFairly)
//   - Progress. Each stream's progress ticker runs from the stream's start with its own jittered
//     period; a progress_notify watcher that got no events since the last tick gets a notification
//     at the next tick if it is synced, also when it is the stream's first such watcher.
//     (TestProgressNotifyPeriodic, TestProgressTickerKeepsStreamPhase)
//   - Leases. An expired lease is never renewed: LeaseKeepAlive waits until its revocation deleted its
//     keys and then answers ErrLeaseNotFound, so "not found" never comes while the keys exist;
//     LeaseTimeToLive reports the lease, keys included, with no time left until then.
//     (TestLeaseKeepAliveWaitsForRevocation, TestLeaseExpiryRevokesKeysInOneRevision)
//   - Periodic work in steps. The periodic work holds the store's lock for one step at a time — one
//     catch-up pass, one batch of victims, one lease revocation, one stream's progress tick — so a
//     request waits for at most one step, as with etcd's loops. (TestTickReleasesLockBetweenPasses,
//     TestPeriodicWorkReleasesLockBetweenSteps; BenchmarkLatencyDuringCatchUp measures it)
//   - Determinism. Given its clock, the store is deterministic: with Options.ManualTick it runs no
//     goroutine and the caller drives its periodic work with Tick; otherwise one goroutine, stopped
//     by Close, calls Tick when work is due. (TestDriverGoroutineCatchesUp, TestStoreCloseClosesStreams)
//   - Size and maintenance. Size predicts etcd's database size: BaseDBBytes plus, per retained
//     revision, its key and value bytes and RecordOverheadBytes; compaction lowers the size in use,
//     Defragment lowers the size to it. HashKV follows mvcc's hashByRev rules and encoding (equal
//     histories compacted at the same revision hash alike above it; later writes leave a revision's
//     hash; at a compact revision it answers the hash the compaction kept, as etcd's hash storage),
//     with ErrCompacted and ErrFutureRev. Snapshot copies what is retained and Restore rebuilds a
//     store from it that answers every range and HashKV as the original. (TestSizeModel,
//     TestHashKVFollowsEtcdRules, TestSnapshotRestoreRoundTrip, TestRestoreRejectsBadSnapshot,
//     TestStatsCounts)
//
// Values handed out are copies, except the events and key-values delivered on watch streams, which
// are shared by all the watchers that receive them and must not be modified. Errors are sentinel
// values with etcd's client-facing wording, to be matched with errors.Is: the etcd ones are package
// etcdrules' values, re-exported here under the same names (ErrEmptyKey is etcdrules.ErrEmptyKey),
// which the checker of recorded histories shares without importing the store. A request is checked
// before any state is read with etcdrules' request-shape rules under the store's MaxTxnOps and
// MaxRequestBytes (CheckRequest gives those errors alone); a rejected request changes nothing. The
// request and response types, KeyValue and Event are etcdrules' with byte slices, aliased here
// (RangeRequest is etcdrules.RangeRequest[[]byte]); their enums and values are etcdrules'
// (etcdrules.SortAscend, etcdrules.EventDelete).
package store
