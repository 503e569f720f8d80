package etcdgrpc_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/listwatch/listwatch/store"
)

// etcd's IDs for a member bootstrapped with the default peer URL and cluster token.
const (
	defaultMemberID  = 0x8e9e05c52164694d
	defaultClusterID = 0xcdf818194e3a8c32
)

func checkHeader(t *testing.T, what string, h *pb.ResponseHeader, rev int64) {
	t.Helper()
	if h.GetClusterId() != defaultClusterID || h.GetMemberId() != defaultMemberID || h.GetRaftTerm() != 2 || h.GetRevision() != rev {
		t.Errorf("%s header = %v, want cluster %x member %x term 2 revision %d", what, h, uint64(defaultClusterID), uint64(defaultMemberID), rev)
	}
}

func TestKVPutGetDelete(t *testing.T) {
	_, cli := newClient(t, store.Options{})
	ctx := testContext(t)

	g, err := cli.Get(ctx, "missing")
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, "empty get", g.Header, 1)

	for i, kv := range [][2]string{{"foo/a", "1"}, {"foo/b", "2"}, {"foo/a", "3"}, {"other", "x"}} {
		p, err := cli.Put(ctx, kv[0], kv[1], clientv3.WithPrevKV())
		if err != nil {
			t.Fatal(err)
		}
		checkHeader(t, "put", p.Header, int64(i+2))
		if i == 2 && (p.PrevKv == nil || string(p.PrevKv.Value) != "1") {
			t.Errorf("put foo/a again: prev_kv = %v, want value 1", p.PrevKv)
		}
	}

	g, err = cli.Get(ctx, "foo/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, "get prefix", g.Header, 5)
	if got := kvString(g.Kvs); got != "foo/a=3@2/4/v2 foo/b=2@3/3/v1" || g.Count != 2 {
		t.Errorf("get foo/ prefix = %q count %d", got, g.Count)
	}

	g, err = cli.Get(ctx, "foo/a", clientv3.WithRev(3))
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, "get at rev 3", g.Header, 5)
	if got := kvString(g.Kvs); got != "foo/a=1@2/2/v1" {
		t.Errorf("get foo/a at rev 3 = %q", got)
	}

	g, err = cli.Get(ctx, "foo/", clientv3.WithPrefix(), clientv3.WithLimit(1), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if err != nil {
		t.Fatal(err)
	}
	if got := kvString(g.Kvs); got != "foo/b=2@3/3/v1" || !g.More || g.Count != 2 {
		t.Errorf("get descending limit 1 = %q more %v count %d", got, g.More, g.Count)
	}

	d, err := cli.Delete(ctx, "foo/", clientv3.WithPrefix(), clientv3.WithPrevKV())
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, "delete", d.Header, 6)
	if d.Deleted != 2 || kvString(d.PrevKvs) != "foo/a=3@2/4/v2 foo/b=2@3/3/v1" {
		t.Errorf("delete = %d %q", d.Deleted, kvString(d.PrevKvs))
	}
	// Deleting nothing keeps the revision.
	d, err = cli.Delete(ctx, "foo/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, "no-op delete", d.Header, 6)
}

func kvString[KV interface {
	GetKey() []byte
	GetValue() []byte
	GetCreateRevision() int64
	GetModRevision() int64
	GetVersion() int64
}](kvs []KV) string {
	var parts []string
	for _, kv := range kvs {
		parts = append(parts, fmt.Sprintf("%s=%s@%d/%d/v%d", kv.GetKey(), kv.GetValue(), kv.GetCreateRevision(), kv.GetModRevision(), kv.GetVersion()))
	}
	return strings.Join(parts, " ")
}

func TestKVTxn(t *testing.T) {
	_, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}

	tr, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value("k"), "=", "v1")).
		Then(clientv3.OpPut("k", "v2"), clientv3.OpGet("k"),
			clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut("nested", "n")}, nil)).
		Else(clientv3.OpDelete("k")).
		Commit()
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, "txn", tr.Header, 3)
	if !tr.Succeeded || len(tr.Responses) != 3 {
		t.Fatalf("txn succeeded=%v with %d responses", tr.Succeeded, len(tr.Responses))
	}
	rr := tr.Responses[1].GetResponseRange()
	if got := kvString(rr.Kvs); got != "k=v2@2/3/v2" {
		t.Errorf("range in txn = %q (sees the txn's own put)", got)
	}
	// Nested headers stay as the store fills them: revision only.
	if h := rr.Header; h.GetRevision() != 3 || h.GetClusterId() != 0 || h.GetMemberId() != 0 || h.GetRaftTerm() != 0 {
		t.Errorf("nested range header = %v, want revision 3 only", h)
	}
	// etcd's newTxnResp gives a nested txn an empty header that nothing fills.
	if h := tr.Responses[2].GetResponseTxn().Header; h == nil || h.GetRevision() != 0 || h.GetClusterId() != 0 {
		t.Errorf("nested txn header = %v, want present and empty", h)
	}

	// A failed compare with a branch that changes nothing keeps the revision.
	tr, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.Version("k"), ">", 5)).Else(clientv3.OpGet("nested")).Commit()
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, "failed txn", tr.Header, 3)
	if tr.Succeeded || kvString(tr.Responses[0].GetResponseRange().Kvs) != "nested=n@3/3/v1" {
		t.Errorf("failed txn: succeeded=%v responses %v", tr.Succeeded, tr.Responses)
	}
}

func TestKVCompact(t *testing.T) {
	_, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	for i := range 4 {
		if _, err := cli.Put(ctx, "k", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := cli.Compact(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, "compact", c.Header, 5)
	if g, err := cli.Get(ctx, "k", clientv3.WithRev(4)); err != nil || string(g.Kvs[0].Value) != "2" {
		t.Errorf("get at the compact revision = %v, %v", g, err)
	}
	if _, err := cli.Get(ctx, "k", clientv3.WithRev(3)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("get below the compact revision: %v, want %v", err, rpctypes.ErrCompacted)
	}
	if _, err := cli.Compact(ctx, 4); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("compact at the compact revision again: %v, want %v", err, rpctypes.ErrCompacted)
	}
	if _, err := cli.Compact(ctx, 6); !errors.Is(err, rpctypes.ErrFutureRev) {
		t.Errorf("compact above the current revision: %v, want %v", err, rpctypes.ErrFutureRev)
	}
}

// TestKVErrors drives each failure through clientv3 and checks it surfaces as the rpctypes error a
// real etcd gives, and that no failure changes the store.
func TestKVErrors(t *testing.T) {
	st, cli := newClient(t, store.Options{}, func(c *clientv3.Config) { c.MaxCallSendMsgSize = 8 << 20 })
	ctx := testContext(t)
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := cli.Put(ctx, "k", "v"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Compact(ctx, 3); err != nil {
		t.Fatal(err)
	}
	rev := st.Rev()

	tooMany := make([]clientv3.Op, 129)
	for i := range tooMany {
		tooMany[i] = clientv3.OpGet(fmt.Sprint(i))
	}
	raw := pb.NewKVClient(cli.ActiveConnection())

	cases := []struct {
		name string
		do   func() error
		want error
	}{
		{"put empty key", func() error { _, err := cli.Put(ctx, "", "v"); return err }, rpctypes.ErrEmptyKey},
		{"get empty key", func() error { _, err := cli.Get(ctx, ""); return err }, rpctypes.ErrEmptyKey},
		{"delete empty key", func() error { _, err := cli.Delete(ctx, ""); return err }, rpctypes.ErrEmptyKey},
		{"txn compare empty key", func() error {
			_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(""), "=", 0)).Commit()
			return err
		}, rpctypes.ErrEmptyKey},
		{"get future revision", func() error { _, err := cli.Get(ctx, "k", clientv3.WithRev(rev+1)); return err }, rpctypes.ErrFutureRev},
		{"get compacted revision", func() error { _, err := cli.Get(ctx, "k", clientv3.WithRev(2)); return err }, rpctypes.ErrCompacted},
		{"txn range compacted revision", func() error {
			_, err := cli.Txn(ctx).Then(clientv3.OpPut("x", "y"), clientv3.OpGet("k", clientv3.WithRev(2))).Commit()
			return err
		}, rpctypes.ErrCompacted},
		{"txn duplicate put", func() error {
			_, err := cli.Txn(ctx).Then(clientv3.OpPut("a", "1"), clientv3.OpPut("a", "2")).Commit()
			return err
		}, rpctypes.ErrDuplicateKey},
		{"txn put in deleted range", func() error {
			_, err := cli.Txn(ctx).Then(clientv3.OpDelete("a", clientv3.WithPrefix()), clientv3.OpPut("ab", "2")).Commit()
			return err
		}, rpctypes.ErrDuplicateKey},
		{"txn too many ops", func() error { _, err := cli.Txn(ctx).Then(tooMany...).Commit(); return err }, rpctypes.ErrTooManyOps},
		{"put too large", func() error { _, err := cli.Put(ctx, "big", string(make([]byte, 1600*1024))); return err }, rpctypes.ErrRequestTooLarge},
		{"put unknown lease", func() error { _, err := cli.Put(ctx, "x", "y", clientv3.WithLease(0x1234)); return err }, rpctypes.ErrLeaseNotFound},
		{"put ignore value on missing key", func() error { _, err := cli.Put(ctx, "missing", "", clientv3.WithIgnoreValue()); return err }, rpctypes.ErrKeyNotFound},
		{"put ignore value with value", func() error { _, err := cli.Put(ctx, "k", "v", clientv3.WithIgnoreValue()); return err }, rpctypes.ErrValueProvided},
		{"put ignore lease with lease", func() error {
			_, err := cli.Put(ctx, "k", "v", clientv3.WithIgnoreLease(), clientv3.WithLease(lease.ID))
			return err
		}, rpctypes.ErrLeaseProvided},
		{"get invalid sort order", func() error {
			_, err := cli.Get(ctx, "k", clientv3.WithSort(clientv3.SortByKey, clientv3.SortOrder(7)))
			return err
		}, rpctypes.ErrInvalidSortOption},
		{"get invalid sort target", func() error {
			_, err := cli.Get(ctx, "k", clientv3.WithSort(clientv3.SortTarget(9), clientv3.SortAscend))
			return err
		}, rpctypes.ErrInvalidSortOption},
		{"txn empty request op", func() error {
			_, err := raw.Txn(ctx, &pb.TxnRequest{Success: []*pb.RequestOp{{}}})
			return rpctypes.Error(err)
		}, rpctypes.ErrKeyNotFound},
	}
	for _, c := range cases {
		err := c.do()
		if !errors.Is(err, c.want) {
			t.Errorf("%s: error %v (%T), want %v", c.name, err, err, c.want)
		}
	}
	if got := st.Rev(); got != rev {
		t.Errorf("revision after failed requests = %d, want %d", got, rev)
	}
	if g, err := cli.Get(ctx, "", clientv3.WithPrefix()); err != nil || g.Count != 1 {
		t.Errorf("keys after failed requests: %v, %v; want only k", g, err)
	}
}

// TestKVRequestSizeLimit checks the gRPC receive limit is MaxRequestBytes + 512 KiB, as etcd's: a
// larger message fails in gRPC before the store sees it.
func TestKVRequestSizeLimit(t *testing.T) {
	st, cli := newClient(t, store.Options{}, func(c *clientv3.Config) { c.MaxCallSendMsgSize = 8 << 20 })
	ctx := testContext(t)
	_, err := cli.Put(ctx, "big", string(make([]byte, 2<<20)))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "received message larger than max") {
		t.Errorf("2 MiB put: %v, want ResourceExhausted from the server's receive limit", err)
	}
	// Just under the gRPC limit, the store's own limit applies.
	_, err = cli.Put(ctx, "big", string(make([]byte, 2<<20-1024)))
	if !errors.Is(err, rpctypes.ErrRequestTooLarge) {
		t.Errorf("2 MiB - 1 KiB put: %v, want %v", err, rpctypes.ErrRequestTooLarge)
	}
	// At the store's limit exactly the request is accepted; the value is under it by the encoding.
	val := bytes.Repeat([]byte("x"), store.DefaultMaxRequestBytes-64)
	if _, err := cli.Put(ctx, "big", string(val)); err != nil {
		t.Errorf("put just under MaxRequestBytes: %v", err)
	}
	if st.Rev() != 2 {
		t.Errorf("revision %d, want 2: only the last put applies", st.Rev())
	}
}

// TestKVReadOnlyTxnSizeLimit: etcd checks MaxRequestBytes only on what it proposes through raft
// (etcdserver/v3_server.go processInternalRaftRequestOnce); a txn of compares and ranges is served
// without raft (v3_server.go Txn), so only the gRPC receive limit bounds it.
func TestKVReadOnlyTxnSizeLimit(t *testing.T) {
	_, cli := newClient(t, store.Options{}, func(c *clientv3.Config) { c.MaxCallSendMsgSize = 8 << 20 })
	ctx := testContext(t)
	mustPut(t, cli, "a", "x")
	big := strings.Repeat("y", store.DefaultMaxRequestBytes+1024)
	isBig := clientv3.Compare(clientv3.Value("a"), "=", big)
	r, err := cli.Txn(ctx).If(isBig).Then(clientv3.OpGet("a")).Else(clientv3.OpGet("a")).Commit()
	if err != nil {
		t.Fatalf("read-only txn over MaxRequestBytes: %v", err)
	}
	if r.Succeeded || len(r.Responses) != 1 || len(r.Responses[0].GetResponseRange().Kvs) != 1 {
		t.Fatalf("read-only txn answer %v", r)
	}
	if _, err := cli.Txn(ctx).If(isBig).Then(clientv3.OpPut("b", "1")).Commit(); !errors.Is(err, rpctypes.ErrRequestTooLarge) {
		t.Errorf("txn that may write, over MaxRequestBytes: %v, want %v", err, rpctypes.ErrRequestTooLarge)
	}
	huge := clientv3.Compare(clientv3.Value("a"), "=", strings.Repeat("y", 2<<20))
	_, err = cli.Txn(ctx).If(huge).Then(clientv3.OpGet("a")).Commit()
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("read-only txn over the gRPC receive limit: %v, want ResourceExhausted", err)
	}
}
