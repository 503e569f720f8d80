package etcdgrpc

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/coreos/go-semver/semver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/api/v3/version"

	"github.com/listwatch/listwatch/etcdsnap"
)

// Quota, as etcd's server/storage/quota.go has it.
const (
	// DefaultQuotaBytes is storage.DefaultQuotaBytes, the backend quota when none is set.
	DefaultQuotaBytes = 2 * 1024 * 1024 * 1024
	// quota costs: a put's key and value plus kvOverhead; a lease grant leaseOverhead
	kvOverhead    = 256
	leaseOverhead = 64
)

// alarms is etcd's v3alarm.AlarmStore for one member, with the appliers its alarms select
// (apply/uber_applier.go restoreAlarms): NOSPACE caps writes, CORRUPT refuses them.
type alarms struct {
	mu sync.Mutex
	on map[pb.AlarmType]map[uint64]*pb.AlarmMember
}

func (a *alarms) activate(member uint64, at pb.AlarmType) *pb.AlarmMember {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.on == nil {
		a.on = make(map[pb.AlarmType]map[uint64]*pb.AlarmMember)
	}
	if a.on[at] == nil {
		a.on[at] = make(map[uint64]*pb.AlarmMember)
	}
	if m := a.on[at][member]; m != nil {
		return m
	}
	m := &pb.AlarmMember{MemberID: member, Alarm: at}
	a.on[at][member] = m
	return m
}

func (a *alarms) deactivate(member uint64, at pb.AlarmType) *pb.AlarmMember {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.on[at][member]
	if m != nil {
		delete(a.on[at], member)
	}
	return m
}

// get lists the alarms of a type, or all of them for NONE, in a stable order.
func (a *alarms) get(at pb.AlarmType) []*pb.AlarmMember {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*pb.AlarmMember
	for t, ms := range a.on {
		if at != pb.AlarmType_NONE && t != at {
			continue
		}
		for _, m := range ms {
			out = append(out, &pb.AlarmMember{MemberID: m.MemberID, Alarm: m.Alarm})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Alarm != out[j].Alarm {
			return out[i].Alarm < out[j].Alarm
		}
		return out[i].MemberID < out[j].MemberID
	})
	return out
}

func (a *alarms) active(at pb.AlarmType) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.on[at]) > 0
}

// quotaCost is storage.BackendQuota.Cost: what a write adds to the backend, for Put, Txn (the larger
// branch, nested txns included) and LeaseGrant; 0 for anything that writes no key or lease.
func quotaCost(r any) int {
	switch r := r.(type) {
	case *pb.PutRequest:
		return kvOverhead + len(r.Key) + len(r.Value)
	case *pb.TxnRequest:
		branch := func(ops []*pb.RequestOp) (n int) {
			for _, op := range ops {
				if p := op.GetRequestPut(); p != nil {
					n += quotaCost(p)
				} else if t := op.GetRequestTxn(); t != nil {
					n += quotaCost(t)
				}
			}
			return n
		}
		return max(branch(r.Success), branch(r.Failure))
	case *pb.LeaseGrantRequest:
		return leaseOverhead
	}
	return 0
}

// admit is what a write passes before it reaches the store: v3rpc/quota.go's quota check (a write
// that would take the predicted database size to the quota raises NOSPACE and fails with
// ErrGRPCNoSpace), then the appliers the alarms select: with CORRUPT every write fails with
// ErrGRPCCorrupt; with NOSPACE a put, a lease grant or a txn that puts fails with ErrGRPCNoSpace
// (apply/capped.go), while deletes, compactions and revokes go through, so space can be freed.
func (s *server) admit(r any) error {
	cost := quotaCost(r)
	if cost > 0 && s.quota > 0 {
		if size, _ := s.st.Size(); size+int64(cost) >= s.quota {
			s.alarms.activate(s.opts.MemberID, pb.AlarmType_NOSPACE)
			return rpctypes.ErrGRPCNoSpace
		}
	}
	if s.alarms.active(pb.AlarmType_CORRUPT) {
		return rpctypes.ErrGRPCCorrupt
	}
	if cost > 0 && s.alarms.active(pb.AlarmType_NOSPACE) {
		return rpctypes.ErrGRPCNoSpace
	}
	return nil
}

// maintenanceServer follows v3rpc/maintenance.go for a single member that is its own leader.
// Downgrade is Unimplemented.
type maintenanceServer struct {
	pb.UnimplementedMaintenanceServer
	s *server
}

// Alarm follows apply/backend.go applierV3backend.Alarm: GET lists the alarms of a type (all for
// NONE); ACTIVATE of NONE does nothing; ACTIVATE and DEACTIVATE answer the alarm they changed, or
// nothing if there was nothing to change.
func (m *maintenanceServer) Alarm(_ context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	resp := &pb.AlarmResponse{Header: m.s.fill(&pb.ResponseHeader{})}
	switch r.Action {
	case pb.AlarmRequest_GET:
		resp.Alarms = m.s.alarms.get(r.Alarm)
	case pb.AlarmRequest_ACTIVATE:
		if r.Alarm == pb.AlarmType_NONE {
			break
		}
		if a := m.s.alarms.activate(r.MemberID, r.Alarm); a != nil {
			resp.Alarms = []*pb.AlarmMember{{MemberID: a.MemberID, Alarm: a.Alarm}}
		}
		m.s.applied.Add(1)
	case pb.AlarmRequest_DEACTIVATE:
		if a := m.s.alarms.deactivate(r.MemberID, r.Alarm); a != nil {
			resp.Alarms = []*pb.AlarmMember{{MemberID: a.MemberID, Alarm: a.Alarm}}
		}
		m.s.applied.Add(1)
	default:
		// etcd's applier answers nothing for an unknown action, which v3rpc returns as is
		return &pb.AlarmResponse{Header: m.s.fill(&pb.ResponseHeader{})}, nil
	}
	return resp, nil
}

// Defragment gives back the space compaction freed (store.Defragment).
func (m *maintenanceServer) Defragment(context.Context, *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	if err := m.s.st.Defragment(); err != nil {
		return nil, toGRPCError(err)
	}
	return &pb.DefragmentResponse{}, nil
}

// Hash hashes everything the store retains (store.Hash); the header carries the revision hashed.
func (m *maintenanceServer) Hash(context.Context, *pb.HashRequest) (*pb.HashResponse, error) {
	h, rev, err := m.s.st.Hash()
	if err != nil {
		return nil, toGRPCError(err)
	}
	return &pb.HashResponse{Header: m.s.fill(&pb.ResponseHeader{Revision: rev}), Hash: h}, nil
}

// HashKV follows mvcc's hashByRev through store.HashKV: its errors are ErrGRPCCompacted and
// ErrGRPCFutureRev, and the header carries the current revision.
func (m *maintenanceServer) HashKV(_ context.Context, r *pb.HashKVRequest) (*pb.HashKVResponse, error) {
	h, rev, err := m.s.st.HashKV(r.Revision)
	if err != nil {
		return nil, toGRPCError(err)
	}
	return &pb.HashKVResponse{
		Header:          m.s.fill(&pb.ResponseHeader{Revision: rev}),
		Hash:            h.Hash,
		CompactRevision: h.CompactRevision,
		HashRevision:    h.Revision,
	}, nil
}

// MoveLeader follows etcdserver's MoveLeader on a single member: the only transferee is the member
// itself, already the leader, so that succeeds at once; any other ID is ErrGRPCBadLeaderTransferee.
func (m *maintenanceServer) MoveLeader(_ context.Context, r *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	if r.TargetID != m.s.opts.MemberID {
		return nil, rpctypes.ErrGRPCBadLeaderTransferee
	}
	return &pb.MoveLeaderResponse{}, nil
}

// storageVersion is the major.minor.0 of etcd's version, as Status reports it.
func storageVersion() string {
	v, err := semver.NewVersion(version.Version)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d.%d.0", v.Major, v.Minor)
}

// Status follows v3rpc/maintenance.go Status for a member that is its own leader. There is no raft
// log: raft index and applied index count the writes this server applied. The database sizes are
// the store's prediction (store.BaseDBBytes); active alarms are listed in Errors.
func (m *maintenanceServer) Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	o := m.s.opts
	applied := m.s.applied.Load()
	size, inUse := m.s.st.Size()
	resp := &pb.StatusResponse{
		Header:           m.s.fill(&pb.ResponseHeader{}),
		Version:          version.Version,
		Leader:           o.MemberID,
		RaftIndex:        applied,
		RaftTerm:         o.RaftTerm,
		RaftAppliedIndex: applied,
		DbSize:           size,
		DbSizeInUse:      inUse,
		DbSizeQuota:      o.QuotaBackendBytes,
		DowngradeInfo:    &pb.DowngradeInfo{},
		StorageVersion:   storageVersion(),
	}
	if resp.DbSizeQuota == 0 {
		resp.DbSizeQuota = DefaultQuotaBytes
	}
	for _, a := range m.s.alarms.get(pb.AlarmType_NONE) {
		resp.Errors = append(resp.Errors, a.String())
	}
	return resp, nil
}

// Snapshot follows v3rpc/maintenance.go Snapshot: the store's state written as an etcd database
// (etcdsnap), sent in 32 KiB chunks each with the bytes remaining, then its SHA-256; every message
// carries the storage version.
func (m *maintenanceServer) Snapshot(_ *pb.SnapshotRequest, srv pb.Maintenance_SnapshotServer) error {
	snap, err := m.s.st.Snapshot()
	if err != nil {
		return toGRPCError(err)
	}
	f, err := etcdsnap.Create(m.s.opts.SnapshotDir, snap, etcdsnap.Meta{ConsistentIndex: m.s.applied.Load(), Term: m.s.opts.RaftTerm})
	if err != nil {
		return toGRPCError(err)
	}
	defer f.Close()
	ver := storageVersion()
	err = f.Stream(func(blob []byte, remaining int64) error {
		return srv.Send(&pb.SnapshotResponse{RemainingBytes: uint64(remaining), Blob: blob, Version: ver})
	})
	if err != nil {
		return toGRPCError(err)
	}
	return nil
}
