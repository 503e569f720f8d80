package etcdprocess

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/listwatch/listwatch/internal/testutil"
)

// Binary is the etcd executable Launch runs: Debian's etcd-server package installs it there.
var Binary = "/usr/bin/etcd"

// ErrNotInstalled is returned by Launch when Binary is not there.
var ErrNotInstalled = errors.New("etcdprocess: no etcd server installed")

// errExited is a member that exited before it was healthy: most likely a port another process took
// between freePorts and etcd's bind, so Launch tries again on other ports.
var errExited = errors.New("exited before it was healthy")

// startTimeout bounds the wait for a started etcd to report itself healthy.
const startTimeout = 30 * time.Second

// startAttempts is how many times Launch starts a cluster whose member exits at once.
const startAttempts = 3

// Cluster is a set of running etcd processes, bootstrapped together.
type Cluster struct {
	dir       string
	binary    string
	endpoints []string
	stopOnce  sync.Once
	stopErr   error
	// mu guards procs, whose members Kill and Restart replace, and stopped.
	mu      sync.Mutex
	procs   []*process
	stopped bool
}

type process struct {
	name   string
	client string
	args   []string
	cmd    *exec.Cmd
	out    *testutil.SyncBuffer
	exited chan struct{} // closed by the goroutine that waits for the process
}

// Launch runs members etcd processes of Binary as one new cluster, with extraFlags after the flags it
// sets itself, each with a fresh data directory and free loopback ports, and returns once every
// member reports itself healthy (which needs a leader). The data directories are on /dev/shm when
// there is one: etcd syncs every write, and memory makes that cheap. It returns an error wrapping
// ErrNotInstalled when Binary is missing, and one quoting etcd's output when a member does not start.
func Launch(members int, extraFlags ...string) (*Cluster, error) {
	return LaunchBinary(Binary, members, extraFlags...)
}

// LaunchBinary is Launch with another etcd executable than Binary (an etcd built from another
// release; ErrNotInstalled when there is none at binary).
func LaunchBinary(binary string, members int, extraFlags ...string) (*Cluster, error) {
	if members < 1 {
		return nil, fmt.Errorf("etcdprocess: %d members: want at least one", members)
	}
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotInstalled, err)
	}
	var failures []string
	for range startAttempts {
		c, err := launch(binary, members, extraFlags)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errExited) {
			return nil, err
		}
		failures = append(failures, err.Error())
	}
	return nil, fmt.Errorf("etcdprocess: %s did not start in %d attempts:\n%s", binary, startAttempts, strings.Join(failures, "\n"))
}

// Endpoints are the members' client endpoints, host:port, in member order.
func (c *Cluster) Endpoints() []string { return c.endpoints }

// Stop kills every member, waits for it to exit and removes the data directories. It is idempotent.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.stopped = true
		for _, p := range c.procs {
			if p.cmd != nil {
				_ = p.cmd.Process.Kill()
				<-p.exited
			}
		}
		c.stopErr = os.RemoveAll(c.dir)
	})
	return c.stopErr
}

func launch(binary string, members int, extraFlags []string) (*Cluster, error) {
	base := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		base = "/dev/shm"
	}
	dir, err := os.MkdirTemp(base, "listwatch-etcd-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, binary: binary}
	ports, err := freePorts(2 * members)
	if err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	var initial []string
	for i := range members {
		initial = append(initial, fmt.Sprintf("etcd%d=http://%s", i, ports[2*i+1]))
	}
	for i := range members {
		name, client, peer := fmt.Sprintf("etcd%d", i), ports[2*i], ports[2*i+1]
		args := append([]string{
			"--name", name,
			"--data-dir", filepath.Join(dir, name),
			"--listen-client-urls", "http://" + client,
			"--advertise-client-urls", "http://" + client,
			"--listen-peer-urls", "http://" + peer,
			"--initial-advertise-peer-urls", "http://" + peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--log-level", "error",
			"--logger", "zap",
		}, extraFlags...)
		p := &process{name: name, client: client, args: args}
		if err := c.start(p); err != nil {
			return nil, errors.Join(err, c.Stop())
		}
		c.procs = append(c.procs, p)
	}
	deadline := time.Now().Add(startTimeout)
	for _, p := range c.procs {
		if err := p.waitHealthy(deadline); err != nil {
			return nil, errors.Join(err, c.Stop())
		}
		c.endpoints = append(c.endpoints, p.client)
	}
	return c, nil
}

// start runs p's process with its arguments, and a goroutine that waits for it to exit.
func (c *Cluster) start(p *process) error {
	p.cmd, p.out, p.exited = exec.Command(c.binary, p.args...), &testutil.SyncBuffer{}, make(chan struct{})
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		p.cmd = nil
		return fmt.Errorf("etcdprocess: starting %s: %w", c.binary, err)
	}
	cmd, exited := p.cmd, p.exited
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return nil
}

// waitHealthy waits until p answers /health, failing when it exits first (errExited) or deadline
// passes.
func (p *process) waitHealthy(deadline time.Time) error {
	for !healthy("http://" + p.client) {
		select {
		case <-p.exited:
			return fmt.Errorf("etcd %s %w: %v\n%s", p.name, errExited, p.cmd.ProcessState, p.out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcdprocess: etcd %s was not healthy after %v:\n%s", p.name, startTimeout, p.out.String())
		}
	}
	return nil
}

// Members is the number of members.
func (c *Cluster) Members() int { return len(c.endpoints) }

// DataDir is member i's data directory.
func (c *Cluster) DataDir(i int) string { return filepath.Join(c.dir, c.procs[i].name) }

// member returns member i, or an error when the cluster is stopped or i is out of range; c.mu held.
func (c *Cluster) member(i int) (*process, error) {
	switch {
	case c.stopped:
		return nil, errors.New("etcdprocess: the cluster is stopped")
	case i < 0 || i >= len(c.procs):
		return nil, fmt.Errorf("etcdprocess: no member %d of %d", i, len(c.procs))
	}
	return c.procs[i], nil
}

// running returns member i, or an error when it is not running (see member); c.mu held.
func (c *Cluster) running(i int) (*process, error) {
	p, err := c.member(i)
	if err == nil && p.cmd == nil {
		err = fmt.Errorf("etcdprocess: etcd %s is not running", p.name)
	}
	return p, err
}

// Kill kills member i (SIGKILL, as a crash) and waits for it to exit; Restart brings it back.
func (c *Cluster) Kill(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.running(i)
	if err != nil {
		return err
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	p.cmd = nil
	return nil
}

// Restart starts member i again, killed before, on its data directory and ports, and returns once
// it answers /health (within timeout), or with an error quoting its output.
func (c *Cluster) Restart(i int, timeout time.Duration) error {
	c.mu.Lock()
	p, err := c.member(i)
	if err == nil && p.cmd != nil {
		err = fmt.Errorf("etcdprocess: etcd %s is running", p.name)
	}
	if err == nil {
		err = c.start(p)
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if err := p.waitHealthy(time.Now().Add(timeout)); err != nil {
		return fmt.Errorf("etcd %s did not come back after a restart: %w", p.name, err)
	}
	return nil
}

// Pause stops member i (SIGSTOP) and returns once every thread of it has stopped: it holds its
// connections and answers nothing until Resume. The signal alone returns before a thread running on
// another core stops, which on a loaded machine is long enough for it to answer a request.
func (c *Cluster) Pause(i int) error {
	if err := c.signal(i, syscall.SIGSTOP); err != nil {
		return err
	}
	c.mu.Lock()
	p, err := c.running(i)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return waitStopped(p.cmd.Process.Pid, pauseTimeout)
}

// pauseTimeout bounds the wait for a paused member's threads to stop.
const pauseTimeout = time.Minute

// waitStopped waits until every thread of process pid is stopped, as /proc shows them; where there is
// no /proc it returns at once, the signal sent.
func waitStopped(pid int, timeout time.Duration) error {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	deadline := time.Now().Add(timeout)
	for {
		stopped, err := allStopped(dir)
		if err != nil || stopped {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcdprocess: process %d not stopped %v after SIGSTOP", pid, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// allStopped reports whether every task under dir (/proc/PID/task) is in state T (stopped); an
// error when dir cannot be read.
func allStopped(dir string) (bool, error) {
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			return false, nil // a thread that just ended; look again
		}
		// pid (comm) state ...: comm may hold spaces and parentheses, so the state follows the last ')'
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || stat[i+2] != 'T' {
			return false, nil
		}
	}
	return true, nil
}

// Resume continues member i, paused before (SIGCONT).
func (c *Cluster) Resume(i int) error { return c.signal(i, syscall.SIGCONT) }

func (c *Cluster) signal(i int, sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := c.running(i)
	if err != nil {
		return err
	}
	return p.cmd.Process.Signal(sig)
}

// healthy asks etcd's /health endpoint, which answers true once the member has a leader.
func healthy(url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return false
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	return resp.StatusCode == http.StatusOK && bytes.Contains(body.Bytes(), []byte(`"health":"true"`))
}

// freePorts draws n distinct free loopback ports, host:port.
func freePorts(n int) ([]string, error) {
	var ports []string
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range n {
		// Held until all are drawn, so that none is drawn twice.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		held = append(held, l)
		ports = append(ports, l.Addr().String())
	}
	return ports, nil
}

// Start launches a single member for t and returns its client endpoint, host:port; see StartCluster.
func Start(t testing.TB, extraFlags ...string) string {
	t.Helper()
	return StartCluster(t, 1, extraFlags...)[0]
}

// StartCluster launches a cluster of members for t and returns their client endpoints; the cluster
// is stopped when t ends. It skips t, saying how to install etcd, when Binary is not installed, and
// fails it when etcd does not start.
func StartCluster(t testing.TB, members int, extraFlags ...string) []string {
	t.Helper()
	c, err := Launch(members, extraFlags...)
	if errors.Is(err, ErrNotInstalled) {
		t.Skipf("%v: install Debian's etcd-server (apt-get install etcd-server) to run the tests against a real etcd", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	testutil.CloseAtCleanup(t, "stopping etcd", c.Stop)
	return c.Endpoints()
}
