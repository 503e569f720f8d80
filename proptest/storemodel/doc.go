// Package storemodel is a deliberately naive model of store.Store — a full copy of the key space for
// every revision, the events of every revision, and leases as a plain map — and a rapid state machine
// that drives the store and the model with the same random operations: puts, deletes, txns (nested,
// with compares and invalid shapes), ranges at any revision with every option, compactions, lease
// grant/revoke/keepalive/expiry on a fake clock, watch streams with random start revisions, filters,
// prev_kv and progress requests, cancels, bursts that overflow stream channels, and full drains.
//
// It checks that every response equals the model's, and that every watcher's delivered events are
// exactly the model's events for its range from its start revision: in order, without duplicates or
// gaps, whole revisions per response (at most 1000), prev_kv equal to the value at the previous
// revision (or missing only once that revision is compacted), progress notifications never ahead of
// an undelivered event, and a compaction answer only for a watcher whose position was compacted,
// after which nothing but a cancel answer follows. The model shares no code with the store.
package storemodel
