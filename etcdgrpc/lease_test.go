package etcdgrpc_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

func TestLease(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	st, cli := newClient(t, store.Options{Clock: clock, ManualTick: true})
	ctx := testContext(t)

	g, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, "grant", g.ResponseHeader, 1)
	if g.TTL != 60 || g.ID == 0 {
		t.Fatalf("grant = %+v", g)
	}
	short, err := cli.Grant(ctx, 1)
	if err != nil || short.TTL != 2 {
		t.Fatalf("grant 1s = %+v, %v; want raised to the 2 s minimum", short, err)
	}
	mustPut(t, cli, "l/b", "1", clientv3.WithLease(g.ID)) // 2
	mustPut(t, cli, "l/a", "1", clientv3.WithLease(g.ID)) // 3
	mustPut(t, cli, "plain", "1")                         // 4

	clock.Step(10 * time.Second)
	ttl, err := cli.TimeToLive(ctx, g.ID, clientv3.WithAttachedKeys())
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, "timetolive", ttl.ResponseHeader, 4)
	if ttl.TTL != 50 || ttl.GrantedTTL != 60 || len(ttl.Keys) != 2 || string(ttl.Keys[0]) != "l/a" || string(ttl.Keys[1]) != "l/b" {
		t.Errorf("timetolive = %+v", ttl)
	}

	ka, err := cli.KeepAliveOnce(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, "keepalive", ka.ResponseHeader, 4)
	if ka.TTL != 60 || ka.ID != g.ID {
		t.Errorf("keepalive = %+v", ka)
	}
	if ttl, err := cli.TimeToLive(ctx, g.ID); err != nil || ttl.TTL != 60 {
		t.Errorf("timetolive after keepalive = %+v, %v; want 60", ttl, err)
	}

	ls, err := cli.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Soonest expiry first.
	if len(ls.Leases) != 2 || ls.Leases[0].ID != short.ID || ls.Leases[1].ID != g.ID {
		t.Errorf("leases = %+v", ls.Leases)
	}

	wch := cli.Watch(ctx, "l/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if wr, _ := next(t, wch); !wr.Created {
		t.Fatal("watch not created")
	}
	awaitRequestedProgress(t, cli, wch) // synced: the manually ticked store would not catch it up
	r, err := cli.Revoke(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkHeader(t, "revoke", r.Header, 5)
	// One revision deletes the lease's keys in key order.
	evs, resps := collect(t, wch, 2)
	if evString(evs) != "DELETE l/a=@5, DELETE l/b=@5" || len(resps) != 1 {
		t.Errorf("revoke events %s in %d responses", evString(evs), len(resps))
	}
	if gr, err := cli.Get(ctx, "", clientv3.WithPrefix()); err != nil || gr.Count != 1 {
		t.Errorf("keys after revoke: %v, %v", gr, err)
	}

	// Unknown leases: etcd answers TimeToLive with TTL -1 and KeepAlive with TTL 0, which clientv3
	// reports as ErrLeaseNotFound; Revoke fails outright.
	if ttl, err := cli.TimeToLive(ctx, g.ID); err != nil || ttl.TTL != -1 || ttl.ID != g.ID {
		t.Errorf("timetolive of a revoked lease = %+v, %v; want TTL -1", ttl, err)
	} else {
		checkHeader(t, "timetolive not found", ttl.ResponseHeader, 5)
	}
	if _, err := cli.KeepAliveOnce(ctx, g.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Errorf("keepalive of a revoked lease: %v, want %v", err, rpctypes.ErrLeaseNotFound)
	}
	if _, err := cli.Revoke(ctx, g.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Errorf("revoke of a revoked lease: %v, want %v", err, rpctypes.ErrLeaseNotFound)
	}
	if _, err := cli.Grant(ctx, 9000000001); !errors.Is(err, rpctypes.ErrLeaseTTLTooLarge) {
		t.Errorf("grant over the max TTL: %v, want %v", err, rpctypes.ErrLeaseTTLTooLarge)
	}
	raw := pb.NewLeaseClient(cli.ActiveConnection())
	if _, err := raw.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: int64(short.ID), TTL: 5}); !errors.Is(rpctypes.Error(err), rpctypes.ErrLeaseExist) {
		t.Errorf("grant of an existing ID: %v, want %v", err, rpctypes.ErrLeaseExist)
	}
	if lg, err := raw.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: 0x1234, TTL: 5}); err != nil || lg.ID != 0x1234 {
		t.Errorf("grant with a chosen ID = %v, %v", lg, err)
	}
	if st.Rev() != 5 {
		t.Errorf("revision %d, want 5: grants and failures change none", st.Rev())
	}
}

// TestLeaseKeepAliveStream checks the raw stream: answers in order, TTL 0 for an unknown lease, the
// header taken before the renewal.
func TestLeaseKeepAliveStream(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	_, cli := newClient(t, store.Options{Clock: clock, ManualTick: true})
	ctx := testContext(t)
	g, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, cli, "k", "v")
	stream, err := pb.NewLeaseClient(cli.ActiveConnection()).LeaseKeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{int64(g.ID), 0x999, int64(g.ID)} {
		if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []struct{ id, ttl int64 }{{int64(g.ID), 30}, {0x999, 0}, {int64(g.ID), 30}} {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.ID != want.id || r.TTL != want.ttl {
			t.Errorf("answer %d = ID %x TTL %d, want ID %x TTL %d", i, r.ID, r.TTL, want.id, want.ttl)
		}
		checkHeader(t, "keepalive", r.Header, 2)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err == nil {
		t.Error("stream still open after the client closed its side")
	}

	// clientv3's KeepAlive loop gets its first answer at once.
	kch, err := cli.KeepAlive(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-kch:
		if r == nil || r.TTL != 30 {
			t.Errorf("first keepalive = %+v", r)
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("no keepalive answer")
	}
}

// TestLeaseKeepAliveOfExpiredLease: the answer to a keepalive of an expired lease (TTL 0, v3rpc's
// "not found") comes only once the revocation has deleted the lease's keys, since etcd's lessor
// waits for it (lease/lessor.go Renew); a keepalive still waiting ends with its stream. The
// revocation runs only once the keepalive has answered or is seen waiting for it, so that an
// answer that does not wait is always caught with the keys still there.
func TestLeaseKeepAliveOfExpiredLease(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	st, cli := newClient(t, store.Options{Clock: clock, ManualTick: true, LeaseCheckInterval: time.Hour})
	ctx := testContext(t)
	g, err := cli.Grant(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, cli, "k", "v", clientv3.WithLease(g.ID))
	clock.Step(3 * time.Second) // expired; the first lease check is an hour away
	st.Tick()
	stream, err := pb.NewLeaseClient(cli.ActiveConnection()).LeaseKeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(g.ID)}); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		ttl  int64
		keys int64
		err  error
	}
	answers := make(chan answer, 1)
	go func() {
		r, err := stream.Recv()
		if err != nil {
			answers <- answer{err: err}
			return
		}
		gr, err := cli.Get(ctx, "k", clientv3.WithCountOnly())
		if err != nil {
			answers <- answer{err: err}
			return
		}
		answers <- answer{ttl: r.TTL, keys: gr.Count}
	}()
	var early *answer
	testutil.WaitFor(t, "the keepalive answered or waiting for the revocation", func() bool {
		select {
		case a := <-answers:
			early = &a
			return true
		default:
			return keepAliveWaiting()
		}
	})
	if early != nil {
		t.Fatalf("keepalive of an expired lease answered before its revocation: TTL %d with %d of its keys left (%v)", early.ttl, early.keys, early.err)
	}
	clock.Step(time.Hour)
	st.Tick()
	select {
	case a := <-answers:
		if a.err != nil || a.ttl != 0 || a.keys != 0 {
			t.Fatalf("keepalive of an expired lease: TTL %d with %d of its keys left (%v); want TTL 0 once they are gone", a.ttl, a.keys, a.err)
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("no answer after the revocation")
	}

	// A keepalive that waits for a revocation ends when its stream does.
	g2, err := cli.Grant(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	clock.Step(3 * time.Second)
	sctx, cancel := context.WithCancel(ctx)
	stream2, err := pb.NewLeaseClient(cli.ActiveConnection()).LeaseKeepAlive(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream2.Send(&pb.LeaseKeepAliveRequest{ID: int64(g2.ID)}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the second keepalive waiting for the revocation", keepAliveWaiting)
	cancel()
	if r, err := stream2.Recv(); err == nil {
		t.Fatalf("answer %v though the lease was never revoked", r)
	}
}

// keepAliveWaiting reports whether a goroutine is parked in store.LeaseKeepAlive's wait for a
// revocation: the one place where that call selects.
func keepAliveWaiting() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, " [select") && strings.Contains(g, "store.(*Store).LeaseKeepAlive(") {
			return true
		}
	}
	return false
}
