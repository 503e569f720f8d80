// Package etcdtest starts real etcd server processes for tests: one member, or a cluster of
// several, with fresh data directories, listening on free loopback ports, killed and removed when
// the test ends.
package etcdprocess

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Binary is the etcd executable Start runs: Debian's etcd-server package installs it there.
var Binary = "/usr/bin/etcd"

// startTimeout bounds the wait for a started etcd to report itself healthy.
const startTimeout = 30 * time.Second

// Start runs Binary with extraFlags (after the ones it sets itself) and returns its client
// endpoint, host:port, once etcd reports itself healthy. It skips the test, saying why, when Binary
// is not installed, and fails it if etcd does not start. The data directory is on /dev/shm when
// there is one (etcd syncs every write; memory makes that cheap).
func Start(t testing.TB, extraFlags ...string) string {
	t.Helper()
	return StartCluster(t, 1, extraFlags...)[0]
}

// StartCluster is Start for a cluster of members etcd processes, bootstrapped together; it returns
// their client endpoints once every member is healthy (a member is healthy once the cluster has a
// leader).
func StartCluster(t testing.TB, members int, extraFlags ...string) []string {
	t.Helper()
	if _, err := os.Stat(Binary); err != nil {
		t.Skipf("no etcd server at %s (%v): install Debian's etcd-server (apt-get install etcd-server) to run the tests against a real etcd", Binary, err)
	}
	// The ports are free when drawn, not when etcd binds them: another process may take one in
	// between, so a cluster whose member exits at once is started again on other ports.
	var failures []string
	for range startAttempts {
		eps, err := startCluster(t, members, extraFlags)
		if err == nil {
			return eps
		}
		failures = append(failures, err.Error())
	}
	t.Fatalf("etcd did not start:\n%s", strings.Join(failures, "\n"))
	return nil
}

const startAttempts = 3

// cluster is a started set of etcd processes.
type cluster struct {
	dir   string
	procs []*process
}

type process struct {
	name   string
	client string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
}

func (c *cluster) stop() {
	for _, p := range c.procs {
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	os.RemoveAll(c.dir)
}

func startCluster(t testing.TB, members int, extraFlags []string) ([]string, error) {
	base := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		base = "/dev/shm"
	}
	dir, err := os.MkdirTemp(base, "listwatch-etcd-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{dir: dir}
	ports := freePorts(t, 2*members)
	var initial []string
	for i := range members {
		initial = append(initial, fmt.Sprintf("etcdtest%d=http://%s", i, ports[2*i+1]))
	}
	for i := range members {
		name, client, peer := fmt.Sprintf("etcdtest%d", i), ports[2*i], ports[2*i+1]
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
		p := &process{name: name, client: client, cmd: exec.Command(Binary, args...), out: &syncBuffer{}, exited: make(chan struct{})}
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		if err := p.cmd.Start(); err != nil {
			c.stop()
			t.Fatalf("start %s: %v", Binary, err)
		}
		go func() {
			_ = p.cmd.Wait()
			close(p.exited)
		}()
		c.procs = append(c.procs, p)
	}
	deadline := time.Now().Add(startTimeout)
	var endpoints []string
	for _, p := range c.procs {
		for !healthy("http://" + p.client) {
			select {
			case <-p.exited:
				c.stop()
				return nil, fmt.Errorf("etcd %s exited before it was healthy: %v\n%s", p.name, p.cmd.ProcessState, p.out.String())
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				c.stop()
				t.Fatalf("etcd %s was not healthy after %v:\n%s", p.name, startTimeout, p.out.String())
			}
		}
		endpoints = append(endpoints, p.client)
	}
	t.Cleanup(c.stop)
	return endpoints, nil
}

// healthy asks etcd's /health endpoint.
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
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var ports []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close() // held until all are drawn, so that none is drawn twice
		ports = append(ports, l.Addr().String())
	}
	return ports
}

// syncBuffer collects the process's output, written from exec's copying goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
