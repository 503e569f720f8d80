package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

func TestCheckListenAddr(t *testing.T) {
	cases := []struct {
		addr   string
		remote bool
		ok     bool
	}{
		{"127.0.0.1:2379", false, true},
		{"127.0.0.2:0", false, true},
		{"[::1]:2379", false, true},
		{"localhost:2379", false, true},
		{"LOCALHOST:2379", false, true},
		{"0.0.0.0:2379", false, false},
		{":2379", false, false},
		{"[::]:2379", false, false},
		{"10.1.2.3:2379", false, false},
		{"example.com:2379", false, false},
		{"0.0.0.0:2379", true, true},
		{":2379", true, true},
		{"example.com:2379", true, true},
		{"127.0.0.1", true, false}, // no port
	}
	for _, c := range cases {
		err := checkListenAddr("etcd-listen", c.addr, c.remote)
		if (err == nil) != c.ok {
			t.Errorf("checkListenAddr(%q, allowRemote=%v) = %v, want ok=%v", c.addr, c.remote, err, c.ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "--etcd-listen ") {
			t.Errorf("error %q does not name the flag", err)
		}
	}
}

// lines is an io.Writer that hands each complete line to a channel, for reading a command's output
// while it runs.
type lines struct {
	mu  sync.Mutex
	buf []byte
	ch  chan string
}

func newLines() *lines { return &lines{ch: make(chan string, 1000)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.ch <- string(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}

// await reads lines until one has the prefix and returns the rest of it.
func await(t *testing.T, ch <-chan string, prefix string) string {
	t.Helper()
	timeout := time.After(testutil.WaitTimeout)
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("output ended before a line starting %q", prefix)
			}
			if rest, found := strings.CutPrefix(l, prefix); found {
				return rest
			}
		case <-timeout:
			t.Fatalf("no line starting %q", prefix)
		}
	}
}

// serveRun is `serve` run in a goroutine of the test by startServe; the test owns it and stops it.
type serveRun struct {
	cancel context.CancelFunc
	done   chan error
	stdout *lines
}

// startServe runs `serve` with args in a goroutine, its output lines on stdout; the test's cleanup
// cancels it if the test ends first.
func startServe(t *testing.T, args []string, stderr io.Writer) *serveRun {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &serveRun{cancel: cancel, done: make(chan error, 1), stdout: newLines()}
	go func() { r.done <- runServe(ctx, args, r.stdout, stderr) }()
	return r
}

// wait waits for serve, once cancelled, to return, and fails the test if it returns an error.
func (r *serveRun) wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("serve returned %v after a requested shutdown", err)
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("serve did not stop")
	}
}

// stop cancels serve and waits for it.
func (r *serveRun) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	r.wait(t)
}

func dialTCP(t *testing.T, addr string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, Logger: zap.NewNop(), DialTimeout: testutil.WaitTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// TestServeInProcess runs `serve` on a free loopback port, uses it over TCP with clientv3, then
// shuts it down while a watch stream is open: the graceful stop gives up after the timeout and the
// open stream is cut.
func TestServeInProcess(t *testing.T) {
	srv := startServe(t, []string{"--etcd-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--shutdown-timeout", "200ms"}, newLines())
	addr := await(t, srv.stdout.ch, "listwatch: serving the etcd API on ")
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("printed address %q", addr)
	}
	cli := dialTCP(t, addr)
	defer cli.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer rcancel()
	if _, err := cli.Put(rctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	ml, err := cli.MemberList(rctx)
	if err != nil || len(ml.Members) != 1 || ml.Members[0].ClientURLs[0] != "http://"+addr {
		t.Fatalf("member list %v, %v; want the listen address advertised", ml, err)
	}
	wch := cli.Watch(rctx, "k", clientv3.WithCreatedNotify())
	if wr := <-wch; !wr.Created {
		t.Fatalf("watch not created: %+v", wr)
	}

	// The open watch stream never ends by itself: serve returns only because the graceful stop gives
	// up after the timeout and cuts it.
	srv.stop(t)
	await(t, srv.stdout.ch, "listwatch: shutting down")
	await(t, srv.stdout.ch, "listwatch: stopped")
	// The port is free again.
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port still taken after shutdown: %v", err)
	}
	lis.Close()
}

func TestServeListenFailure(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"serve", "--etcd-listen", lis.Addr().String()}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "address already in use") || stdout.Len() != 0 {
		t.Errorf("serve on a taken port: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// failingServer is a server whose Serve fails at once.
type failingServer struct{ err error }

func (failingServer) Name() string             { return "failing" }
func (f failingServer) Serve() error           { return f.err }
func (failingServer) Shutdown(context.Context) {}

// TestServeStopsAllWhenOneFails: a server that fails takes the others down and closes the store.
func TestServeStopsAllWhenOneFails(t *testing.T) {
	st := store.New(store.Options{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err = serve(context.Background(), st, []server{
		grpcServer{name: "etcd API", srv: etcdgrpc.NewServer(st, etcdgrpc.Options{}), lis: lis},
		failingServer{boom},
	}, time.Second, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "failing: stopped serving: boom") {
		t.Errorf("serve = %v, want the failure named", err)
	}
	if _, err := st.Put(&store.PutRequest{Key: []byte("k")}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("store after serve returned: %v, want closed", err)
	}
	if c, err := net.Dial("tcp", lis.Addr().String()); err == nil {
		c.Close()
		t.Error("gRPC listener still accepting after serve returned")
	}
}

// downAPI is an API whose Shutdown closes down; startingClient is a client still starting, whose
// Serve fails if the API goes down before the client is told to stop, as the controllers' discovery.
type downAPI struct{ down chan struct{} }

func (downAPI) Name() string               { return "api" }
func (a downAPI) Serve() error             { <-a.down; return nil }
func (a downAPI) Shutdown(context.Context) { close(a.down) }

type startingClient struct {
	apiDown <-chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{} // closed by Serve
}

func (*startingClient) Name() string  { return "client" }
func (*startingClient) clientOfAPIs() {}
func (c *startingClient) Serve() error {
	defer close(c.done)
	select {
	case <-c.apiDown:
		return errors.New("connection refused")
	case <-c.ctx.Done():
		return nil
	}
}

// Shutdown gives an API shut down beside it a moment to go first, as the scheduler may, then
// stops the client and waits for its Serve to return, as the server interface asks.
func (c *startingClient) Shutdown(context.Context) {
	select {
	case <-c.apiDown:
	case <-time.After(50 * time.Millisecond):
	}
	c.cancel()
	<-c.done
}

// TestServeStopsClientsFirst: on a signal, the servers that are clients of the APIs (the
// controllers) stop before the APIs, so a client still starting is not failed by an API gone under
// it, and serve ends without error (TestSIGINT failed once so: discovery's "connection refused").
func TestServeStopsClientsFirst(t *testing.T) {
	for range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		api := downAPI{down: make(chan struct{})}
		cctx, ccancel := context.WithCancel(context.Background())
		client := &startingClient{apiDown: api.down, ctx: cctx, cancel: ccancel, done: make(chan struct{})}
		cancel()
		if err := serve(ctx, store.New(store.Options{}), []server{api, client}, time.Second, io.Discard); err != nil {
			t.Fatalf("serve after its context ended = %v, want nil", err)
		}
	}
}

// scan copies r's lines to a channel that it closes at EOF; the returned channel closes when it is done.
func scan(r io.Reader, ch chan<- string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return done
}

// TestParseControllers reads --controllers as kube-controller-manager does: names, * for all,
// -name to leave one out, nothing for none; an unknown name is refused.
func TestParseControllers(t *testing.T) {
	for in, want := range map[string]string{
		"*":                  "namespace,garbagecollector,kubelet",
		"*,-kubelet":         "namespace,garbagecollector",
		"kubelet,namespace":  "namespace,kubelet",
		"":                   "",
		"garbagecollector, ": "garbagecollector",
	} {
		got, err := parseControllers(in)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("%q: %v %v, want %s", in, got, err, want)
		}
	}
	if _, err := parseControllers("*,replicaset"); err == nil || !strings.Contains(err.Error(), `unknown controller "replicaset"`) {
		t.Errorf("unknown controller: %v", err)
	}
}
