// Package compactor compacts a store in the background with etcd's --auto-compaction-mode and
// --auto-compaction-retention semantics (server/etcdserver/api/v3compactor), so that a long-running
// `listwatch serve` keeps a bounded history.
//
// Invariants, each with the tests that check it:
//
//   - Periodic mode with retention P samples the revision every P/10 (P at most an hour for the
//     sampling and the repeat), compacts first once P has passed, to the revision sampled P ago, and
//     then every min(P, 1h) to the revision sampled P before. (TestPeriodic)
//   - Revision mode with retention N compacts every five minutes to the current revision less N,
//     skipping a revision not above zero or already compacted. (TestRevision)
//   - Flags etcd refuses are errors naming the flag (ErrBadRetention); retention 0 disables.
//     (TestNewRejectsBadSettings)
//   - The goroutine is the Compactor's: Stop stops it and waits. (goleak in TestMain)
package compactor
