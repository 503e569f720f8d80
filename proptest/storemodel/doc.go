// Package storemodel is a deliberately naive model of store.Store — a full copy of the key space
// for every revision, the events of every revision, and leases as a plain map — and a rapid state
// machine that drives the store and the model with the same random operations: puts of values from
// empty to three times the store's value-log chunk size, deletes, txns (nested, with compares and
// invalid shapes, and with a put and a delete from the same key in one branch, in either order,
// also followed at once by a compaction at its revision and a watch from there), ranges at any
// revision with every option, compactions (also right after a burst, while streams are left full),
// lease grant/revoke/keepalive/time-to-live/expiry on a fake clock (also moved to just past a
// lease's expiry), watch streams with random start revisions, filters, prev_kv and progress
// requests, more than 512 unsynced watchers at once, cancels, bursts that overflow stream channels,
// and full drains. The model shares no code with the store: it uses the store's request and
// response types and its error values, nothing of its logic.
//
// Run is the property, with the machine doing the store's periodic work (ManualTick); RunDriven is
// the same with the store's own goroutine doing it too, racing with the machine's requests.
// Package proptest's TestStoreMatchesModel and TestStoreMatchesModelDriven run them with
// rapid.Check, and package fuzz's FuzzStoreOps lets a fuzzer's bytes choose the operations of Run
// (its corpus is replayed by `go test ./fuzz/`). All hold the store to the invariants below; every
// one of them is checked on every step. A panic fails the property: rapid turns one on the
// machine's goroutine (which runs the store's periodic work in Run) into a failure it shrinks, and
// one on the store's own goroutine (RunDriven) ends the test binary.
//
// # Invariants
//
//   - Answers. Every response of a put, delete, txn, range, compaction and lease call equals the
//     model's, or both fail with the same error (agree); a range sorted by a target other than the
//     key may order ties any way, as etcd's unstable sort.Sort does (normalizeSort). After every
//     step the store's revision and compact revision are the model's (Check).
//   - Watch creation. A watch from a negative revision fails with ErrCompacted, one whose range end
//     is not above its key with ErrEmptyWatcherRange; the created answer carries the current
//     revision; a watch ID is not reused while its watch lives; a create or a cancel on a stream
//     whose channel holds fewer than 144 responses (128 event responses and 16 control answers, as
//     mvcc's watch channel and v3rpc's control channel) is answered at once, whatever its context
//     (createWatch, Cancel).
//   - Delivery. Every watcher receives exactly the model's events for its range and filters from
//     its start revision: in order, without duplicates or gaps, and all of them once drained
//     (checkPrefix, checkComplete); each equal to the model's (type, key, value, create and mod
//     revision, version, lease; a DELETE only key and mod revision) (checkEvent). The one event a
//     watcher may miss is a change of a key that the same revision changed again, once that
//     revision is the compact revision: compaction keeps the key's last change there only
//     (server/storage/mvcc/kvstore_compaction.go), and a watcher created after that compaction must
//     miss it (droppable, checkPrefix; OverlapThenCompact makes the case).
//   - Responses hold whole revisions: one never starts at or below the previous one's last event,
//     holds at most 1000 revisions (server/storage/mvcc/watcher_group.go watchBatchMaxRevs), and
//     its header revision is at or above its last event (handle).
//   - prev_kv, when asked for, is the key's value at the event's revision - 1, none for an event
//     that creates its key, and missing only once that revision is compacted: etcd reads it when
//     it sends the response and leaves it out on error (server/etcdserver/api/v3rpc/watch.go
//     sendLoop) (checkEvent).
//   - Progress notifications never come ahead of an event still owed up to their revision, never
//     above the current revision, and only to watchers that asked for them or on request, stream-
//     wide (server/storage/mvcc/watchable_store.go progressIfSync) (checkBookmark, handle).
//   - Compaction answers go only to a watcher whose next revision was compacted, at a compaction
//     that happened (watcher_group.go chooseAll); afterwards only the answer to an explicit Cancel
//     may follow (handle); a Cancel is answered (Cancel).
//   - Lease expiry. A keepalive of a lease that expired but is not revoked yet does not answer
//     while the lease's keys exist: it waits for the lease check that revokes it, then fails with
//     ErrLeaseNotFound (server/lease/lessor.go Renew) (LeaseKeepAlive, AdvanceToExpiry).
//
// No test shows this machine failing on a store that breaks one of these invariants: its checks
// are exercised only by a store that keeps them.
package storemodel
