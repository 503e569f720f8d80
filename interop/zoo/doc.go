// Command zoo runs `listwatch check` against a zoo of real stores and writes the table of what it
// found: per target, each catalogued upstream bug and crash (check/etcd KnownBugs, KnownCrashes)
// found, not found, fixed or another product's, and the unexplained findings. `make zoo` builds the stores and runs it.
//
// The targets: Debian's etcd 3.4.23 (/usr/bin/etcd), etcd releases built from the module proxy on
// either side of the catalogued bugs' fixes, and kine releases over SQLite and over a private
// PostgreSQL cluster, one instance and two over one database. Each store is built by a tiny module
// of its own beside this package (etcd-vX.Y.Z, kine-vX.Y.Z: the store's own command at that
// version), outside the interop module; the driver only runs the binaries. An etcd target is
// started by the check itself (`check --cluster 1 --etcd-binary B --etcd-flag ...`), which can then
// restart it for the scenario that needs a restart (tombstone-after-restart); the driver starts
// the kine targets and passes their endpoints.
//
// # Invariants
//
//   - Every target runs the same check (seed, requests, compaction, progress-notify interval).
//   - A target whose binary or PostgreSQL is missing is listed as SKIP with the reason, one that
//     fails to start or to be checked as ERROR; neither stops the run (TestTable).
//   - The table's cells follow from the check's output alone: a bug the check named is found; a
//     bug the version has and the check did not name is not found; a bug's signature on a version
//     with the fix is flagged (TestParseOutput, TestParseOutputUnexplained, TestCell).
//   - A store process that dies is a CRASH, told by its panic line and first frame: the catalogued
//     crash (check/etcd KnownCrashes) of the target's release is found, not unexplained; any other,
//     or one on a release with the fix, is unexplained; the bugs' cells of a crashed target are
//     not judged (TestOutcomeOfCrash, TestProcessDied).
//   - A kine release with a catalogued crash a probe provokes (KnownCrash.SkipProbe) runs each store
//     again with `check --skip-probe` that probe: its crash cell says probe skipped, its bugs are
//     judged (TestSkipProbeTargets). Kine runs with --compact-interval 0, so that a client's
//     Compact compacts on every release.
//   - The README's table is replaced between its markers and nowhere else (TestSplice).
//   - Every process the driver starts (stores, PostgreSQL) is stopped and waited for before the
//     next target starts.
package main
