package etcdprocess

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

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

// TestFaults: a killed member restarts on its data and serves what it held; a paused member
// answers nothing until it is resumed.
func TestFaults(t *testing.T) {
	c := mustLaunch(t, 1)
	defer c.Stop()
	ep := c.Endpoints()[0]
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	if _, err := client(t, ep).Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	if healthy("http://" + ep) {
		t.Fatal("a killed member answers")
	}
	if err := c.Restart(0, testutil.WaitTimeout); err != nil {
		t.Fatal(err)
	}
	if r, err := client(t, ep).Get(ctx, "k"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
		t.Fatalf("get after the restart: %v %v", r, err)
	}
	if err := c.Pause(0); err != nil {
		t.Fatal(err)
	}
	if healthy("http://" + ep) {
		t.Fatal("a paused member answers")
	}
	if err := c.Resume(0); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the resumed member to answer", func() bool { return healthy("http://" + ep) })
}

// TestFaultsRefused: what cannot be done to a member is an error: restarting a running one, killing
// or pausing one not running, one out of range, one that does not come back (quoting etcd), and
// anything once the cluster is stopped.
func TestFaultsRefused(t *testing.T) {
	c := mustLaunch(t, 1)
	defer c.Stop()
	wantErr := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s = %v, want an error saying %q", what, err, want)
		}
	}
	wantErr("Restart of a running member", c.Restart(0, testutil.WaitTimeout), "etcd etcd0 is running")
	wantErr("Kill(1)", c.Kill(1), "no member 1 of 1")
	if err := c.Kill(0); err != nil {
		t.Fatal(err)
	}
	wantErr("a second Kill", c.Kill(0), "etcd etcd0 is not running")
	wantErr("Pause of a killed member", c.Pause(0), "etcd etcd0 is not running")
	if err := os.RemoveAll(c.DataDir(0)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.DataDir(0), []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantErr("Restart on a data directory that is a file", c.Restart(0, testutil.WaitTimeout), "etcd etcd0 did not come back after a restart")
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	wantErr("Restart after Stop", c.Restart(0, testutil.WaitTimeout), "the cluster is stopped")
}

// TestWaitStopped: the wait behind Pause returns once every thread of a stopped process is stopped,
// and fails, naming the process, for one that never stops (this test's own).
func TestWaitStopped(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skipf("no /proc: %v", err)
	}
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep command: %v", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := waitStopped(cmd.Process.Pid, testutil.WaitTimeout); err != nil {
		t.Fatal(err)
	}
	if stopped, err := allStopped(fmt.Sprintf("/proc/%d/task", cmd.Process.Pid)); !stopped || err != nil {
		t.Errorf("allStopped of a stopped process = %t, %v", stopped, err)
	}
	err := waitStopped(os.Getpid(), 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("process %d not stopped", os.Getpid())) {
		t.Errorf("waitStopped of a running process = %v, want an error naming it", err)
	}
}
