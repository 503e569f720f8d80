package etcdgrpc_test

import (
	"testing"

	"go.etcd.io/etcd/api/v3/version"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/store"
)

func TestMemberListAndStatus(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	opts := etcdgrpc.Options{Name: "lw", ClientURLs: []string{"http://127.0.0.1:2379"}}
	cli, closeFn, err := etcdgrpc.NewClient(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	ctx := testContext(t)

	ml, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ml.Members) != 1 {
		t.Fatalf("members %v", ml.Members)
	}
	m := ml.Members[0]
	if m.ID != defaultMemberID || m.Name != "lw" || len(m.PeerURLs) != 1 || m.PeerURLs[0] != "http://localhost:2380" ||
		len(m.ClientURLs) != 1 || m.ClientURLs[0] != "http://127.0.0.1:2379" || m.IsLearner {
		t.Errorf("member %v", m)
	}
	// etcd's member-list header has no revision.
	if h := ml.Header; h.ClusterId != defaultClusterID || h.MemberId != defaultMemberID || h.RaftTerm != 2 || h.Revision != 0 {
		t.Errorf("member list header %v", h)
	}

	s, err := cli.Status(ctx, "bufconn")
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, "status", s.Header, 1)
	if s.Version != version.Version || s.Leader != defaultMemberID || s.RaftTerm != 2 || s.IsLearner || len(s.Errors) != 0 || s.RaftIndex != 0 {
		t.Errorf("status %+v", s)
	}
	mustPut(t, cli, "a", "1")
	if _, err := cli.Txn(ctx).Then(clientv3.OpGet("a")).Commit(); err != nil { // read-only: no proposal
		t.Fatal(err)
	}
	if _, err := cli.Grant(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if s, err := cli.Status(ctx, "bufconn"); err != nil || s.RaftIndex != 2 || s.RaftAppliedIndex != 2 || s.Header.Revision != 2 {
		t.Errorf("status after a put and a grant: %+v, %v; want raft index 2", s, err)
	}
}

func TestUnimplementedRPCs(t *testing.T) {
	_, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	if _, err := cli.Downgrade(ctx, clientv3.DowngradeValidate, "3.6.0"); status.Code(err) != codes.Unimplemented {
		t.Errorf("downgrade: %v, want Unimplemented", err)
	}
	if _, err := cli.MemberAdd(ctx, []string{"http://x:2380"}); status.Code(err) != codes.Unimplemented {
		t.Errorf("member add: %v, want Unimplemented", err)
	}
	if _, err := cli.AuthStatus(ctx); status.Code(err) != codes.Unimplemented {
		t.Errorf("auth status: %v, want Unimplemented", err)
	}
}
