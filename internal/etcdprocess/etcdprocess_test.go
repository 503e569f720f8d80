package etcdprocess

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/listwatch/listwatch/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// mustLaunch is Launch that skips the test without etcd.
func mustLaunch(t *testing.T, members int, flags ...string) *Cluster {
	t.Helper()
	c, err := Launch(members, flags...)
	if errors.Is(err, ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func client(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop(), DialTimeout: testutil.WaitTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestLaunch(t *testing.T) {
	c := mustLaunch(t, 1)
	eps := c.Endpoints()
	if len(eps) != 1 {
		t.Fatalf("endpoints %v, want one", eps)
	}
	// Healthy means serving: the first request succeeds without a retry.
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	cli := client(t, eps[0])
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put right after Launch: %v", err)
	}
	if r, err := cli.Get(ctx, "k"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("get: %v %v", r, err)
	}
	dir := c.dir
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if healthy("http://" + eps[0]) {
		t.Error("etcd still answers after Stop")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("data directory %s after Stop: %v", dir, err)
	}
}

func TestLaunchCluster(t *testing.T) {
	c := mustLaunch(t, 3)
	defer c.Stop()
	eps := c.Endpoints()
	if len(eps) != 3 {
		t.Fatalf("endpoints %v, want three", eps)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	if _, err := client(t, eps[0]).Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	// One cluster: a linearizable read on another member sees the write.
	if r, err := client(t, eps[2]).Get(ctx, "k"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("get on the third member: %v %v", r, err)
	}
	list, err := client(t, eps[1]).MemberList(ctx)
	if err != nil || len(list.Members) != 3 {
		t.Fatalf("member list: %v %v", list, err)
	}
}

func TestLaunchFailure(t *testing.T) {
	if _, err := os.Stat(Binary); err != nil {
		t.Skip(err)
	}
	_, err := Launch(1, "--no-such-flag")
	if err == nil || !strings.Contains(err.Error(), "exited before it was healthy") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("Launch with a bad flag = %v, want an error quoting etcd", err)
	}
	if _, err := Launch(0); err == nil || !strings.Contains(err.Error(), "0 members") {
		t.Errorf("Launch(0) = %v", err)
	}
}

func TestLaunchNotInstalled(t *testing.T) {
	defer func(b string) { Binary = b }(Binary)
	Binary = t.TempDir() + "/etcd"
	if _, err := Launch(1); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Launch without the binary = %v, want ErrNotInstalled", err)
	}
	var sub *testing.T
	ran := t.Run("start", func(t *testing.T) {
		sub = t
		StartCluster(t, 1)
		t.Error("StartCluster returned without etcd")
	})
	if !ran || !sub.Skipped() {
		t.Errorf("StartCluster without etcd: passed %t, skipped %t; want skipped", ran, sub.Skipped())
	}
}
