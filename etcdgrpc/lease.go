package etcdgrpc

import (
	"context"
	"errors"
	"io"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/listwatch/listwatch/store"
)

// leaseServer follows v3rpc/lease.go LeaseServer.
type leaseServer struct {
	pb.UnimplementedLeaseServer
	s *server
}

func (l *leaseServer) LeaseGrant(_ context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	if err := l.s.admit(r); err != nil {
		return nil, err
	}
	resp, err := l.s.st.LeaseGrant(r.ID, r.TTL)
	if err != nil {
		return nil, toGRPCError(err)
	}
	l.s.applied.Add(1)
	return &pb.LeaseGrantResponse{Header: l.s.header(resp.Header), ID: resp.ID, TTL: resp.TTL}, nil
}

func (l *leaseServer) LeaseRevoke(_ context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	if err := l.s.admit(r); err != nil {
		return nil, err
	}
	resp, err := l.s.st.LeaseRevoke(r.ID)
	if err != nil {
		return nil, toGRPCError(err)
	}
	l.s.applied.Add(1)
	return &pb.LeaseRevokeResponse{Header: l.s.header(resp.Header)}, nil
}

// LeaseTimeToLive answers an unknown lease with TTL -1 rather than an error, as v3rpc does; clientv3
// and etcdctl read that as "already expired".
func (l *leaseServer) LeaseTimeToLive(_ context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	resp, err := l.s.st.LeaseTimeToLive(r.ID, r.Keys)
	if errors.Is(err, store.ErrLeaseNotFound) {
		return &pb.LeaseTimeToLiveResponse{Header: l.s.fill(&pb.ResponseHeader{}), ID: r.ID, TTL: -1}, nil
	}
	if err != nil {
		return nil, toGRPCError(err)
	}
	return &pb.LeaseTimeToLiveResponse{
		Header:     l.s.header(resp.Header),
		ID:         resp.ID,
		TTL:        resp.TTL,
		GrantedTTL: resp.GrantedTTL,
		Keys:       resp.Keys,
	}, nil
}

func (l *leaseServer) LeaseLeases(_ context.Context, _ *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	resp, err := l.s.st.LeaseLeases()
	if err != nil {
		return nil, toGRPCError(err)
	}
	out := &pb.LeaseLeasesResponse{Header: l.s.header(resp.Header), Leases: make([]*pb.LeaseStatus, len(resp.Leases))}
	for i, id := range resp.Leases {
		out.Leases[i] = &pb.LeaseStatus{ID: id}
	}
	return out, nil
}

// LeaseKeepAlive follows v3rpc/lease.go leaseKeepAlive. It runs in the handler's goroutine: Recv
// returns once the client ends the stream or its context ends, and a failed Send ends the stream.
func (l *leaseServer) LeaseKeepAlive(stream pb.Lease_LeaseKeepAliveServer) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		// The header is taken before the renewal so that its revision is never above the one at
		// which the renewal happened: a lease revoked at rev 3 must not look renewed at rev 4.
		resp := &pb.LeaseKeepAliveResponse{ID: req.ID, Header: l.s.fill(&pb.ResponseHeader{})}
		// For an expired lease this waits until its revocation deleted its keys, as etcd's
		// LeaseRenew does; the stream's end ends the wait.
		renewed, err := l.s.st.LeaseKeepAlive(stream.Context(), req.ID)
		switch {
		case errors.Is(err, store.ErrLeaseNotFound):
			resp.TTL = 0
		case err != nil:
			return toGRPCError(err)
		default:
			resp.TTL = renewed.TTL
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}
