package etcdgrpc

import (
	"context"
	"fmt"

	"github.com/coreos/go-semver/semver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/version"
)

// defaultQuotaBytes is storage.DefaultQuotaBytes, the backend quota etcd reports when none is set.
const defaultQuotaBytes = 2 * 1024 * 1024 * 1024

// clusterServer answers MemberList with the one member the server is, as v3rpc/member.go
// ClusterServer does for a single-member cluster. Membership changes are Unimplemented.
type clusterServer struct {
	pb.UnimplementedClusterServer
	s *server
}

// MemberList lists the server itself; the header carries no revision, as v3rpc's ClusterServer.header.
func (c *clusterServer) MemberList(context.Context, *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	o := c.s.opts
	return &pb.MemberListResponse{
		Header: &pb.ResponseHeader{ClusterId: o.ClusterID, MemberId: o.MemberID, RaftTerm: o.RaftTerm},
		Members: []*pb.Member{{
			Name:       o.Name,
			ID:         o.MemberID,
			PeerURLs:   append([]string(nil), o.PeerURLs...),
			ClientURLs: append([]string(nil), o.ClientURLs...),
		}},
	}, nil
}

// maintenanceServer implements Status, which `etcdctl endpoint status` and clientv3's version check
// need. The other maintenance RPCs are Unimplemented.
type maintenanceServer struct {
	pb.UnimplementedMaintenanceServer
	s *server
}

// Status follows v3rpc/maintenance.go Status for a member that is its own leader. There is no raft
// log: raft index and applied index count the writes this server applied, and the in-memory store
// has no database file, so its size is 0.
func (m *maintenanceServer) Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	o := m.s.opts
	applied := m.s.applied.Load()
	resp := &pb.StatusResponse{
		Header:           m.s.fill(&pb.ResponseHeader{}),
		Version:          version.Version,
		Leader:           o.MemberID,
		RaftIndex:        applied,
		RaftTerm:         o.RaftTerm,
		RaftAppliedIndex: applied,
		DbSizeQuota:      defaultQuotaBytes,
		DowngradeInfo:    &pb.DowngradeInfo{},
	}
	if v, err := semver.NewVersion(version.Version); err == nil {
		resp.StorageVersion = fmt.Sprintf("%d.%d.0", v.Major, v.Minor)
	}
	return resp, nil
}
