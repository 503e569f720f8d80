// Package storemodel is a deliberately naive model of store.Store — a full copy of the key space for
// every revision, the events of every revision, and leases as a plain map — and a rapid state machine
// that drives the store and the model with the same random operations: puts of values from empty to
// three times the store's value-log chunk size, deletes, txns (nested, with compares and invalid
// shapes, and with a put and a delete from the same key in one branch, in either order, also
// followed by a compaction at its revision and a watch from there), ranges at any revision with
// every option, compactions (also right after a burst, while streams are left full), lease
// grant/revoke/keepalive/expiry on a fake clock (also moved to just past an expiry,
// where a keepalive must wait for the revocation), watch streams with random start revisions,
// filters, prev_kv and progress requests (created on streams whose channel holds 128 events, where
// the create must not wait), more than 512 unsynced watchers at once, cancels, bursts that overflow
// stream channels, and full drains. Run drives the store's periodic work itself
// (ManualTick); RunDriven lets the store's own goroutine do it as well.
//
// It checks that every response equals the model's, and that every watcher's delivered events are
// exactly the model's events for its range from its start revision: in order, without duplicates or
// gaps, whole revisions per response (at most 1000), prev_kv equal to the value at the previous
// revision (or missing only once that revision is compacted), progress notifications never ahead of
// an undelivered event, and a compaction answer only for a watcher whose position was compacted,
// after which nothing but a cancel answer follows. The one event a watcher may miss is a change of
// a key that the same revision changed again, once that revision is the compact revision: history
// then keeps the key's last change there only, as etcd's compaction does, and a watcher created
// after that compaction must miss it. The model shares no code with the store.
package storemodel
