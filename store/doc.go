// Package store is a revisioned in-memory key-value store with the semantics of etcd v3's mvcc store,
// its txn package and its lessor, plus watch streams that behave as etcd's gRPC watch streams do.
//
// It is the reference the rest of listwatch stands on, and it keeps these invariants:
//
//   - Revisions. A fresh store is at revision 1 with compact revision -1; the first write is revision 2.
//     A write that changes something raises the revision by exactly one; its changes get
//     sub-revisions in execution order. Reads, failed requests, no-op deletes, lease grants and
//     compactions never change the revision.
//   - Atomicity. Every request is checked in full before anything is written; a request that fails
//     changes nothing. Every operation is linearizable: the store has one lock and each call takes
//     effect at one point while holding it.
//   - History. Every revision since the last compaction can be read. After Compact(C) a range at C
//     works and one below C fails with ErrCompacted; for each key the newest revision at or below C is
//     kept (a tombstone only if it is at exactly C), so a watch from C sees every event at C.
//   - Watch order. For one watch ID a stream delivers the created answer first, then events in
//     revision order, whole revisions only (a txn is never split, a catch-up batch holds at most 1000
//     revisions), no event twice and none missing, then possibly a compacted answer, after which
//     nothing is sent for the ID except the canceled answer to an explicit Cancel. Progress notifications are never below an event already sent for the ID and never above
//     one still to come.
//   - No dropped events, no blocked writers. A watcher whose stream channel is full keeps its pending
//     response and is retried (etcd's victims); slowness never cancels a watch.
//   - Determinism. Given its clock, the store is deterministic: with Options.ManualTick it runs no
//     goroutine and the caller drives its periodic work with Tick; otherwise one goroutine, stopped
//     by Close, calls Tick when work is due.
//
// Values handed out are copies, except the events and key-values delivered on watch streams, which
// are shared by all the watchers that receive them and must not be modified. Errors are sentinel
// values with etcd's client-facing wording, to be matched with errors.Is: the etcd ones are package
// etcdrules' values, re-exported here under the same names (ErrEmptyKey is etcdrules.ErrEmptyKey),
// which the checker of recorded histories shares without importing the store. A request is checked
// before any state is read with etcdrules' request-shape rules under the store's MaxTxnOps and
// MaxRequestBytes (CheckRequest gives those errors alone); a rejected request changes nothing.
package store
