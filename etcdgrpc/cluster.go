package etcdgrpc

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

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
