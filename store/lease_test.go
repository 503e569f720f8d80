package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

func TestLeaseGrantRules(t *testing.T) {
	e := newEnv(t, store.Options{})
	if _, err := e.s.LeaseGrant(1, store.MaxLeaseTTL+1); !errors.Is(err, store.ErrLeaseTTLTooLarge) {
		t.Fatalf("too large TTL: %v", err)
	}
	r, err := e.s.LeaseGrant(1, 1)
	if err != nil || r.ID != 1 || r.TTL != store.DefaultMinLeaseTTL {
		t.Fatalf("short TTL is raised to the minimum: %+v, %v", r, err)
	}
	if _, err := e.s.LeaseGrant(1, 10); !errors.Is(err, store.ErrLeaseExists) {
		t.Fatalf("duplicate ID: %v", err)
	}
	a, _ := e.s.LeaseGrant(0, 10)
	b, _ := e.s.LeaseGrant(0, 10)
	if a.ID <= 0 || b.ID <= 0 || a.ID == b.ID {
		t.Fatalf("chosen IDs must be positive and distinct: %d %d", a.ID, b.ID)
	}
	if e.s.Rev() != 1 {
		t.Fatalf("grants changed the revision")
	}
}

func TestLeaseExpiryRevokesKeysInOneRevision(t *testing.T) {
	e := newEnv(t, store.Options{})
	l, _ := e.s.LeaseGrant(0, 5)
	for _, k := range []string{"b", "a"} {
		if _, err := e.s.Put(&store.PutRequest{Key: []byte(k), Lease: l.ID}); err != nil {
			t.Fatal(err)
		}
	}
	e.put("c", "no lease") // 4
	ttl, err := e.s.LeaseTimeToLive(l.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	want := &store.LeaseTimeToLiveResponse{Header: store.Header{Revision: 4}, ID: l.ID, TTL: 5, GrantedTTL: 5, Keys: [][]byte{[]byte("a"), []byte("b")}}
	if diff := cmp.Diff(want, ttl); diff != "" {
		t.Fatalf("time to live (-want +got):\n%s", diff)
	}
	e.step(3500 * time.Millisecond)
	if ttl, _ := e.s.LeaseTimeToLive(l.ID, false); ttl.TTL != 1 {
		t.Fatalf("remaining TTL is truncated to whole seconds: %d", ttl.TTL)
	}
	if ka, err := e.s.LeaseKeepAlive(context.Background(), l.ID); err != nil || ka.TTL != 5 {
		t.Fatalf("keepalive: %+v, %v", ka, err)
	}
	e.step(4 * time.Second)
	if e.get("a", 0) == nil {
		t.Fatal("the keepalive did not extend the lease")
	}
	e.step(2 * time.Second)
	if got := e.s.Rev(); got != 5 {
		t.Fatalf("expiry must delete both keys in one revision: revision %d", got)
	}
	if e.get("a", 0) != nil || e.get("b", 0) != nil || e.get("c", 0) == nil {
		t.Fatal("expiry deleted the wrong keys")
	}
	if _, err := e.s.LeaseTimeToLive(l.ID, false); !errors.Is(err, store.ErrLeaseNotFound) {
		t.Fatalf("expired lease: %v", err)
	}
	if _, err := e.s.LeaseKeepAlive(context.Background(), l.ID); !errors.Is(err, store.ErrLeaseNotFound) {
		t.Fatalf("keepalive of an expired lease: %v", err)
	}
}

// TestLeaseKeepAliveWaitsForRevocation: etcd never renews an expired lease, and its lessor waits
// for the revocation to finish before it answers "not found" (lease/lessor.go Renew), so a client
// told that its lease is gone never still sees the lease's keys. TimeToLive does not wait
// (etcdserver/v3_server.go leaseTimeToLive): until the revocation it reports the lease, its keys
// included, with the remaining time truncated towards zero.
func TestLeaseKeepAliveWaitsForRevocation(t *testing.T) {
	e := newEnv(t, store.Options{LeaseCheckInterval: time.Hour})
	l, _ := e.s.LeaseGrant(0, 2)
	if _, err := e.s.Put(&store.PutRequest{Key: []byte("k"), Lease: l.ID}); err != nil { // 2
		t.Fatal(err)
	}
	e.step(2300 * time.Millisecond) // expired; the first lease check is an hour away
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.s.LeaseKeepAlive(ctx, l.ID); !errors.Is(err, context.Canceled) {
		t.Fatalf("keepalive of an expired lease whose keys still exist: %v; want it to wait for the revocation (here: until its context ends)", err)
	}
	ttl, err := e.s.LeaseTimeToLive(l.ID, true)
	if err != nil {
		t.Fatalf("time to live of an expired, unrevoked lease: %v", err)
	}
	want := &store.LeaseTimeToLiveResponse{Header: store.Header{Revision: 2}, ID: l.ID, TTL: 0, GrantedTTL: 2, Keys: [][]byte{[]byte("k")}}
	if diff := cmp.Diff(want, ttl); diff != "" {
		t.Fatalf("time to live of an expired, unrevoked lease (-want +got):\n%s", diff)
	}
	type result struct {
		err  error
		keys int64
	}
	done := make(chan result, 1)
	go func() {
		_, err := e.s.LeaseKeepAlive(context.Background(), l.ID)
		r, _ := e.s.Range(&store.RangeRequest{Key: []byte("k"), CountOnly: true})
		done <- result{err, r.Count}
	}()
	e.step(time.Hour) // the lease check revokes it
	select {
	case r := <-done:
		if !errors.Is(r.err, store.ErrLeaseNotFound) || r.keys != 0 {
			t.Fatalf("keepalive answered %v with %d of the lease's keys left; want not found once they are deleted", r.err, r.keys)
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("keepalive still waiting after the revocation")
	}
}

func TestLeaseRevokeWithoutKeysKeepsRevision(t *testing.T) {
	e := newEnv(t, store.Options{})
	l, _ := e.s.LeaseGrant(0, 60)
	if _, err := e.s.LeaseRevoke(l.ID); err != nil || e.s.Rev() != 1 {
		t.Fatalf("revoke of an empty lease: rev %d, %v", e.s.Rev(), err)
	}
	if _, err := e.s.LeaseRevoke(l.ID); !errors.Is(err, store.ErrLeaseNotFound) {
		t.Fatalf("second revoke: %v", err)
	}
}

func TestLeaseDetachOnDeleteAndRebind(t *testing.T) {
	e := newEnv(t, store.Options{})
	l1, _ := e.s.LeaseGrant(0, 60)
	l2, _ := e.s.LeaseGrant(0, 60)
	if _, err := e.s.Put(&store.PutRequest{Key: []byte("a"), Lease: l1.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Put(&store.PutRequest{Key: []byte("a"), Lease: l2.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Put(&store.PutRequest{Key: []byte("b"), Lease: l1.ID}); err != nil {
		t.Fatal(err)
	}
	e.del("b", "")
	if _, err := e.s.LeaseRevoke(l1.ID); err != nil {
		t.Fatal(err)
	}
	if e.get("a", 0) == nil || e.s.Rev() != 5 {
		t.Fatalf("revoking the old lease touched a key moved to another lease (rev %d)", e.s.Rev())
	}
	ls, _ := e.s.LeaseLeases()
	if diff := cmp.Diff([]int64{l2.ID}, ls.Leases); diff != "" {
		t.Fatalf("leases (-want +got):\n%s", diff)
	}
}

func TestLeasesSoonestExpiryFirst(t *testing.T) {
	e := newEnv(t, store.Options{})
	e.s.LeaseGrant(10, 100)
	e.s.LeaseGrant(20, 5)
	e.s.LeaseGrant(30, 50)
	ls, _ := e.s.LeaseLeases()
	if diff := cmp.Diff([]int64{20, 30, 10}, ls.Leases); diff != "" {
		t.Fatalf("order (-want +got):\n%s", diff)
	}
}
