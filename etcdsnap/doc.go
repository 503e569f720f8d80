// Package etcdsnap reads and writes etcd's snapshot format: a bbolt database laid out as an etcd
// member's backend (etcd's buckets, revision keys, encoded KeyValues, leases, meta), written and read
// through etcd's own backend, schema and mvcc packages rather than re-derived, followed in a
// snapshot stream by the SHA-256 of the database, as etcd's Maintenance.Snapshot sends it.
//
// Exported API:
//
//   - WriteDB writes a store.Snapshot as an etcd database file; Create writes one to a temporary
//     directory and opens it as a File, whose Stream sends it as etcd's snapshot stream.
//   - Load reads a saved snapshot (database plus SHA-256, or a bare database) into a store.Snapshot,
//     to be given to store.Restore and then compacted to its CompactRevision.
//
// Invariants, each with the tests that check it:
//
//   - Round trip. Load(WriteDB(snap)) gives back snap's records, sub-revisions, tombstones, leases and
//     compact revision, so a store restored from it answers every range and HashKV as the original.
//     (TestRoundTrip)
//   - The stream is etcd's: chunks of 32 KiB with the bytes remaining after each, then the SHA-256 of
//     the database with nothing remaining; Load checks that hash. (TestStreamAndHash)
//   - Etcd accepts what is written: etcdctl 3.4's snapshot restore, and a real etcd started on the
//     restored directory serves the same keys at the same revision (cmd/listwatch's
//     TestServeSnapshotRestoredByEtcd); etcdutl v3.7.3's restore package does too (interop's
//     TestSnapshotRestoredByEtcdutl).
//   - Bad input is an error naming the file and what is wrong (ErrBadFile), never a panic: a file
//     that is no bbolt database, one without etcd's buckets, one whose hash does not match.
//     (TestLoadRejectsBadFiles)
package etcdsnap
