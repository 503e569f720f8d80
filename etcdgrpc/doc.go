// Package etcdgrpc serves etcd's v3 gRPC API (go.etcd.io/etcd/api/v3/etcdserverpb) over a
// *store.Store, so that etcd's own clients (clientv3, etcdctl) talk to the store as they talk to a
// single-member etcd v3.7 cluster.
//
// Exported API:
//
//   - NewServer(st, opts) returns a *grpc.Server with the KV, Watch, Lease, Maintenance and Cluster
//     services (and grpc.health.v1) registered, configured as etcd configures its gRPC server.
//   - NewClient(st, opts, configure...) serves st in-process over a bufconn listener and returns a
//     real *clientv3.Client connected to it, plus the function that closes both.
//   - Options describes the member (name, URLs, IDs, raft term) and the request size limit;
//     Options.WithDefaults fills in what etcd would pick, so the store can be given the same member
//     ID for its lease IDs.
//
// Invariants the package keeps:
//
//   - Behaviour is v3rpc's. Each handler converts the request field for field, calls the store and
//     converts the answer back; validation and semantics live in the store. Errors are etcd's own gRPC
//     errors (rpctypes.ErrGRPC*), chosen by matching the store's sentinel errors with errors.Is, so
//     clientv3 turns them into the rpctypes errors a real etcd produces.
//   - Headers. Every top-level response header carries cluster_id, member_id, raft_term and the
//     revision (the store's, or the current one where the store gives none, as v3rpc's header.fill);
//     member-list headers carry no revision, as etcd's. Headers nested in txn responses are left as
//     the store returns them. Watch headers carry the revision the store response reflects, so the
//     compaction answer keeps revision 0.
//   - Watch order. A watch stream's responses are sent in the order the store stream yields them, so
//     no event for an ID precedes its created answer, no event follows its compaction answer (only
//     the answer to a later cancel may), and nothing follows its cancel answer. A response is fragmented only if its create asked for it, and only as
//     v3rpc's sendFragments splits: when it holds at least two events and encodes to at least
//     MaxRequestBytes+512 KiB; every fragment but the last has fragment=true and holds at least one
//     event.
//   - Size limits. The server accepts messages up to MaxRequestBytes+512 KiB, like etcd, so a larger
//     request fails in gRPC with ResourceExhausted; a smaller one over MaxRequestBytes fails in the
//     store with "etcdserver: request is too large". Sends are unlimited.
//   - No leaks. Each watch or lease-keepalive stream runs in its handler's goroutine plus, for a watch,
//     one send goroutine that the handler stops and waits for; the store watch stream is closed before
//     the handler returns. The server waits for handlers on Stop and GracefulStop, so once either
//     returns no goroutine of this package is left. NewClient's close function closes the client, then
//     stops the server and waits for it.
//
// RPCs other than those above (RangeStream, Auth, member changes, alarms, snapshots, hashes,
// defragmentation, downgrade, leader moves) answer codes.Unimplemented.
package etcdgrpc
