// Package etcdgrpc serves etcd's v3 gRPC API (go.etcd.io/etcd/api/v3/etcdserverpb) over a
// *store.Store, so that etcd's own clients (clientv3, etcdctl) talk to the store as they talk to a
// single-member etcd v3.7 cluster.
//
// Exported API:
//
//   - NewServer(st, opts) returns a *grpc.Server with the KV, Watch, Lease, Maintenance and Cluster
//     services (and grpc.health.v1) registered, configured as etcd configures its gRPC server.
//   - ServeInProcess(st, opts) serves st in-process over a bufconn listener and returns an
//     *InProcess, whose Dial connects any number of real *clientv3.Clients to it, each on a gRPC
//     connection of its own (so with watch streams of its own, as separate clients of one etcd
//     member), and whose Close closes them all and the server; Dial after Close fails with
//     ErrInProcessClosed. NewClient(st, opts, configure...) is ServeInProcess and one Dial: the
//     client plus the function that closes both. (TestInProcessClientsHaveOwnStreams)
//   - NewServerAndHTTP also returns the HTTP handler of etcd's client URL for the same member:
//     /health (etcdhttp's answer; 503 with "ALARM NOSPACE" or "ALARM CORRUPT" while an alarm not
//     named in ?exclude= is on), /version, and /metrics (Prometheus: etcd's metric names read from
//     store.Stats at each scrape, go-grpc-middleware's grpc_server_* metrics, as etcd registers
//     them, and the Go and process collectors). (cmd/listwatch's TestServeMaintenanceWithEtcdctl)
//   - Options describes the member (name, URLs, IDs, raft term) and the request size limit;
//     Options.WithDefaults fills in what etcd would pick, so the store can be given the same member
//     ID for its lease IDs.
//
// Invariants the package keeps, each with the tests that check it:
//
//   - Behaviour is v3rpc's. Each handler converts the request field for field, calls the store and
//     converts the answer back; validation and semantics live in the store, except the checks only
//     RangeStream makes, which are v3rpc's checkRangeStreamRequest. Errors are etcd's own gRPC
//     errors (rpctypes.ErrGRPC*), chosen by matching the store's sentinel errors with errors.Is, so
//     clientv3 turns them into the rpctypes errors a real etcd produces. (TestKVPutGetDelete,
//     TestKVTxn, TestKVCompact, TestKVErrors, TestLease, TestToGRPCErrorFallbacks; interop's
//     TestDifferentialEtcdVsListwatch and FuzzDifferential compare every answer with etcd's)
//
//   - Headers. Every top-level response header carries cluster_id, member_id, raft_term and the
//     revision (the store's, or the current one where the store gives none, as v3rpc's header.fill);
//     member-list headers carry no revision, as etcd's. A RangeStream has one header, on its last
//     chunk, with the member's identity and the stream's own revision, never the live one (v3rpc's
//     fillWithoutRevision). Headers nested in txn responses are left as the store returns them.
//     Watch headers carry the revision the store response reflects, so the compaction answer keeps
//     revision 0. (TestKVPutGetDelete, TestMemberListAndStatus, TestRangeStreamPinnedRevision,
//     TestWatchProtocol, TestWatchCompacted, TestDefaultIDsAreEtcds)
//
//   - Watch order. A watch stream's responses are sent in the order the store stream yields them, so
//     no event for an ID precedes its created answer, no event follows its compaction answer (only
//     the answer to a later cancel may), and nothing follows its cancel answer. A response is
//     fragmented only if its create asked for it, and only as v3rpc's sendFragments splits: when it
//     holds at least two events and encodes to at least MaxRequestBytes+512 KiB; every fragment but
//     the last has fragment=true and holds at least one event. (TestWatchProtocol,
//     TestWatchHistoryPrevKVAndFilters, TestWatchCreatedNotifyAndLiveEvents,
//     TestWatchCancelClosesChannel, TestWatchCompacted, TestWatchRequestProgress,
//     TestWatchRequestProgressAfterBurst (etcd-io/etcd#15220's trigger: no progress notification
//     ahead of a burst's events),
//     TestWatchProgressNotify, TestWatchFragment, TestSendFragmentsMatchesUpstreamCuts,
//     TestSendFragmentsStopsAtSendError)
//
//   - RangeStream is etcd v3.7's EtcdServer.rangeStream over store.Range. The first chunk reads at
//     most 10 keys at the requested revision, or at the current one, which then pins every later
//     chunk; so the chunks merged are exactly a Range at that revision, whatever is written or
//     deleted meanwhile (in key order: with no order and another sort target each chunk is sorted,
//     then cut, on its own, so merged chunks may miss or repeat keys, as upstream's do), and a
//     compaction past it fails the next chunk with ErrCompacted. Each next
//     chunk starts after the last key sent, its limit doubled while a chunk encodes to under half of
//     MaxRequestBytes and halved above twice, never below one key, and capped by what is left of
//     the request's limit. Only the last chunk carries Header (revision: the store's revision when
//     the stream began, even for an explicit revision), More and Count (the keys in the whole range
//     at that revision); the chunks before it carry keys only, at least one each. A count-only
//     request is one chunk. A sort other than etcd's default ordering (ascending by key, or no
//     order with any target, which each chunk then sorts by that target on its own, as upstream),
//     and revision filters, are refused with codes.Unimplemented and upstream's messages, after
//     the empty-key and sort-enum checks; every other error is the one Range gives for the same
//     request. A canceled stream stops before its next chunk. (TestRangeStreamMatchesRange,
//     TestRangeStreamChunkSizes, TestRangeStreamPinnedRevision, TestRangeStreamConcurrentWrites,
//     TestRangeStreamErrors, TestRangeStreamCompactedMidStream, TestRangeStreamCanceled)
//
//   - Size limits. The server accepts messages up to MaxRequestBytes+512 KiB, like etcd, so a larger
//     request fails in gRPC with ResourceExhausted; a smaller write over MaxRequestBytes fails in the
//     store with "etcdserver: request is too large", while a Range or a txn of ranges only, which
//     etcd serves without raft, is bound by the receive limit alone. Sends are unlimited.
//     (TestKVRequestSizeLimit, TestKVReadOnlyTxnSizeLimit)
//
//   - Keepalives. A keepalive of an expired lease is answered (TTL 0, v3rpc's "not found") only once
//     the revocation has deleted the lease's keys, as etcd's lessor waits for it; one still waiting
//     ends with its stream. (TestLeaseKeepAliveOfExpiredLease, TestLeaseKeepAliveStream)
//
//   - Watch control. Created and canceled answers never wait behind a slow stream's events: the
//     store stream keeps room for them apart, as v3rpc's control channel, and the receive loop goes
//     on to the next request as soon as the answer is queued. (store's
//     TestControlAnswersNotQueuedBehindFullChannel and TestWatchFromZeroOnFullStreamIsSynced)
//
//   - No leaks. Each watch or lease-keepalive stream runs in its handler's goroutine plus, for a watch,
//     one send goroutine that the handler stops and waits for; the store watch stream is closed before
//     the handler returns. The server waits for handlers on Stop and GracefulStop, so once either
//     returns no goroutine of this package is left. InProcess.Close (NewClient's close function)
//     closes the clients, then stops the server and waits for it. (goleak in TestMain after every test;
//     TestWatchClientDisconnect, TestWatchAfterClientHalfClose, TestRangeStreamCanceled)
//
//   - Maintenance is v3rpc's for a member that is its own leader. Status reports the store's predicted
//     database sizes (dbSize, dbSizeInUse: store.BaseDBBytes) and the quota, and lists active alarms
//     in Errors. Alarm keeps etcd's alarm store: GET by type or all, ACTIVATE/DEACTIVATE answer the
//     alarm changed. A write that would take the size to QuotaBackendBytes raises NOSPACE and fails
//     with "database space exceeded"; with NOSPACE on, puts, txns that put and lease grants fail
//     that way, deletes and compactions go through, and Defragment then AlarmDisarm recover; with
//     CORRUPT on every write fails with "corrupt cluster". Hash and HashKV are the store's (HashKV
//     with mvcc's revision and compaction rules and errors). MoveLeader succeeds to the member itself
//     and fails with "bad leader transferee" for any other. Snapshot streams the store as an etcd
//     database (package etcdsnap) in 32 KiB chunks with the bytes remaining, then its SHA-256.
//     (TestQuotaAlarmAndRecovery, TestAlarmActions, TestHashKVAndMoveLeader, TestSnapshotStream,
//     TestMemberListAndStatus)
//
// RPCs other than those above (Auth, member changes, downgrade) answer codes.Unimplemented
// (TestUnimplementedRPCs).
package etcdgrpc
