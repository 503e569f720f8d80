package etcdgrpc

import (
	"context"
	"crypto/sha1"
	"encoding/binary"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/listwatch/listwatch/store"
)

// Defaults a single-member etcd v3.7 started with no flags would use.
const (
	DefaultName         = "default"
	DefaultPeerURL      = "http://localhost:2380"
	DefaultClusterToken = "etcd-cluster"
	// DefaultRaftTerm is the term a fresh single-member cluster reports: it bootstraps at term 1 and
	// elects itself at term 2.
	DefaultRaftTerm = 2
	// GRPCOverheadBytes is what etcd adds to MaxRequestBytes for the gRPC receive limit and the watch
	// fragmentation threshold (embed/config.go grpcOverheadBytes).
	GRPCOverheadBytes = 512 * 1024
)

// etcd's server keepalive defaults (embed/config.go DefaultGRPCKeepAlive*). Without the 5 s
// enforcement minimum, gRPC's 5 min default would send GOAWAY to clients such as etcdctl that ping
// idle watch connections every 10 s.
const (
	keepAliveMinTime  = 5 * time.Second
	keepAliveInterval = 2 * time.Hour
	keepAliveTimeout  = 20 * time.Second
)

// Options describe the member the server presents and its request size limit. The zero value is a
// member named "default" with etcd's default peer URL, bootstrapped with etcd's default cluster token.
type Options struct {
	// Name is the member name in member lists. Default "default".
	Name string
	// PeerURLs are the member's peer URLs; with ClusterToken they determine the default MemberID.
	// Default ["http://localhost:2380"].
	PeerURLs []string
	// ClientURLs are the member's advertised client URLs. Default none.
	ClientURLs []string
	// ClusterToken is etcd's --initial-cluster-token. Default "etcd-cluster".
	ClusterToken string
	// MemberID is the member ID. Default: computed from PeerURLs and ClusterToken as etcd does when
	// it bootstraps a new cluster.
	MemberID uint64
	// ClusterID is the cluster ID. Default: computed from MemberID as etcd does.
	ClusterID uint64
	// RaftTerm is the term every header reports. Default 2.
	RaftTerm uint64
	// MaxRequestBytes must equal the store's Options.MaxRequestBytes: the server accepts messages up
	// to this plus GRPCOverheadBytes, and fragments watch responses from that size. Default
	// store.DefaultMaxRequestBytes. RangeStream also aims its chunks at this size.
	MaxRequestBytes int
	// QuotaBackendBytes is etcd's --quota-backend-bytes: writes that would take the store's
	// predicted database size (store.Store.Size) to it raise the NOSPACE alarm and fail. 0 means
	// DefaultQuotaBytes; a negative quota is none.
	QuotaBackendBytes int64
	// SnapshotDir is where Snapshot writes its temporary database; "" is the system's temporary
	// directory.
	SnapshotDir string

	// hooks are set only by this package's tests.
	hooks *testHooks
}

// testHooks let this package's tests act at fixed points inside a handler, where etcd's own tests
// use gofail failpoints.
type testHooks struct {
	// beforeRangeStreamChunk runs before each chunk of a RangeStream is read, numbered from 0,
	// with the stream's context (etcd's beforeRangeStreamChunk failpoint).
	beforeRangeStreamChunk func(ctx context.Context, chunk int)
}

// WithDefaults returns o with every unset field set to its default, member and cluster IDs included.
func (o Options) WithDefaults() Options {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if len(o.PeerURLs) == 0 {
		o.PeerURLs = []string{DefaultPeerURL}
	}
	if o.ClusterToken == "" {
		o.ClusterToken = DefaultClusterToken
	}
	if o.MemberID == 0 {
		o.MemberID = memberID(o.PeerURLs, o.ClusterToken)
	}
	if o.ClusterID == 0 {
		o.ClusterID = clusterID([]uint64{o.MemberID})
	}
	if o.RaftTerm == 0 {
		o.RaftTerm = DefaultRaftTerm
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = store.DefaultMaxRequestBytes
	}
	return o
}

// memberID follows membership/member.go computeMemberID for a bootstrapping member (no timestamp):
// the first 8 bytes of the SHA-1 of the sorted peer URLs joined, then the cluster token.
func memberID(peerURLs []string, token string) uint64 {
	urls := append([]string(nil), peerURLs...)
	sort.Strings(urls)
	sum := sha1.Sum([]byte(strings.Join(urls, "") + token))
	return binary.BigEndian.Uint64(sum[:8])
}

// clusterID follows membership/cluster.go genID: the first 8 bytes of the SHA-1 of the sorted member
// IDs, each 8 bytes big-endian.
func clusterID(members []uint64) uint64 {
	ids := append([]uint64(nil), members...)
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	b := make([]byte, 8*len(ids))
	for i, id := range ids {
		binary.BigEndian.PutUint64(b[8*i:], id)
	}
	sum := sha1.Sum(b)
	return binary.BigEndian.Uint64(sum[:8])
}

// server is the state the services share.
type server struct {
	st   *store.Store
	opts Options
	// quota is the effective quota in bytes, 0 for none
	quota  int64
	alarms alarms
	// applied counts the writes the store accepted through this server: the raft index a
	// single-member etcd would report, less its bootstrap entries.
	applied atomic.Uint64
}

// NewServer returns a gRPC server that serves etcd's KV, Watch, Lease, Maintenance and Cluster
// services over st, configured as etcd's v3rpc.Server: receive limit MaxRequestBytes+512 KiB, no send
// limit, etcd's keepalive policy. Stop and GracefulStop wait for every handler to return. The caller
// owns st and closes it after stopping the server.
func NewServer(st *store.Store, opts Options) *grpc.Server {
	gs, _ := NewServerAndHTTP(st, opts)
	return gs
}

// NewServerAndHTTP returns NewServer's gRPC server and the HTTP handler of etcd's client URL over
// the same member: /health (false while an alarm is on), /version and /metrics (etcd's metric names,
// read from the store's Stats, and the gRPC server's metrics). etcd serves both on one port; the
// caller splits a listener between them (cmux, as etcd does).
func NewServerAndHTTP(st *store.Store, opts Options) (*grpc.Server, http.Handler) {
	s := &server{st: st, opts: opts.WithDefaults()}
	s.quota = s.opts.QuotaBackendBytes
	if s.quota == 0 {
		s.quota = DefaultQuotaBytes
	}
	if s.quota < 0 {
		s.quota = 0
	}
	grpcMetrics := grpcprom.NewServerMetrics()
	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(s.opts.MaxRequestBytes+GRPCOverheadBytes),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepAliveMinTime}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: keepAliveInterval, Timeout: keepAliveTimeout}),
		grpc.WaitForHandlers(true),
		grpc.ChainUnaryInterceptor(grpcMetrics.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(grpcMetrics.StreamServerInterceptor()),
	)
	pb.RegisterKVServer(gs, &kvServer{s: s})
	pb.RegisterWatchServer(gs, &watchServer{s: s})
	pb.RegisterLeaseServer(gs, &leaseServer{s: s})
	pb.RegisterClusterServer(gs, &clusterServer{s: s})
	pb.RegisterMaintenanceServer(gs, &maintenanceServer{s: s})
	healthpb.RegisterHealthServer(gs, health.NewServer())
	return gs, s.httpHandler(gs, grpcMetrics)
}

// fill follows v3rpc/header.go header.fill: the member's identity and term, and the current
// revision if the response carries none.
func (s *server) fill(h *pb.ResponseHeader) *pb.ResponseHeader {
	s.fillWithoutRevision(h)
	if h.Revision == 0 {
		h.Revision = s.st.Rev()
	}
	return h
}

// fillWithoutRevision follows v3rpc/header.go header.fillWithoutRevision: streams set the revision
// themselves, so a missing one shows as zero rather than as the live revision.
func (s *server) fillWithoutRevision(h *pb.ResponseHeader) {
	h.ClusterId = s.opts.ClusterID
	h.MemberId = s.opts.MemberID
	h.RaftTerm = s.opts.RaftTerm
}

// header returns a filled header for a store response revision.
func (s *server) header(h store.Header) *pb.ResponseHeader {
	return s.fill(&pb.ResponseHeader{Revision: h.Revision})
}

// watchHeader follows v3rpc/watch.go newResponseHeader: the revision is the watch response's own,
// zero included.
func (s *server) watchHeader(rev int64) *pb.ResponseHeader {
	return &pb.ResponseHeader{
		ClusterId: s.opts.ClusterID,
		MemberId:  s.opts.MemberID,
		Revision:  rev,
		RaftTerm:  s.opts.RaftTerm,
	}
}
