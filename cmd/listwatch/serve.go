package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/soheilhy/cmux"
	"google.golang.org/grpc"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/chain"
	"github.com/listwatch/listwatch/compactor"
	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/etcdsnap"
	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/store"
)

func init() {
	register(&command{
		name:    "serve",
		summary: "serve the etcd v3 API and the Kubernetes list/watch API from an in-memory store",
		run:     runServe,
	})
}

// Flag defaults. etcd waits about its request timeout for in-flight RPCs before it cuts open watch
// streams (embed/etcd.go stopServers); 5 s is its default request timeout.
const (
	defaultEtcdListen      = "127.0.0.1:2379"
	defaultHTTPListen      = "127.0.0.1:8080"
	defaultShutdownTimeout = 5 * time.Second
)

// runServe is `listwatch serve`: one in-memory store, served as etcd's gRPC API and, over the same
// store, as the apiserver's HTTP API for httpwatch.DefaultResources (each behind a watch cache),
// until SIGINT or SIGTERM.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("listwatch serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	etcdListen := fs.String("etcd-listen", defaultEtcdListen, "`address` (host:port) to serve the etcd v3 gRPC API on")
	httpListen := fs.String("http-listen", defaultHTTPListen, "`address` (host:port) to serve the Kubernetes API (list, watch, get, create, update, delete) on")
	allowRemote := fs.Bool("allow-remote", false, "allow listening on addresses other than loopback; the APIs have no authentication")
	name := fs.String("name", etcdgrpc.DefaultName, "member `name` shown by member list")
	progress := fs.Duration("watch-progress-notify-interval", store.DefaultProgressNotifyInterval,
		"period of progress notifications for watches that ask for them (etcd's flag of the same name; minimum 100ms)")
	shutdownTimeout := fs.Duration("shutdown-timeout", defaultShutdownTimeout,
		"on SIGINT or SIGTERM, how long to let open RPCs finish before cutting them (watch streams never finish by themselves)")
	var crdFiles stringList
	fs.Var(&crdFiles, "crd", "`file` of CustomResourceDefinitions (YAML or JSON) whose resources to serve besides the built-in ones; may repeat")
	compactMode := fs.String("auto-compaction-mode", compactor.ModePeriodic, "etcd's flag: `mode` of auto-compaction, periodic (retention is a duration, or hours) or revision (retention is a number of revisions)")
	compactRetention := fs.String("auto-compaction-retention", "0", "etcd's flag: how much history auto-compaction keeps (periodic: \"30m\", \"1\" for an hour; revision: \"10000\"); 0 disables it")
	quota := fs.Int64("quota-backend-bytes", 0, "etcd's flag: raise the NOSPACE alarm and refuse writes when the predicted database size reaches this many `bytes` (0: etcd's 2 GiB; negative: no quota)")
	fromSnapshot := fs.String("from-snapshot", "", "load an etcd snapshot `file` (etcdctl snapshot save, or a member's snap/db) into the store before serving: its keys, revisions, leases and compaction")
	systemNamespaces := fs.Bool("system-namespaces", false, "create the namespaces kube-apiserver creates at start (default, kube-system, kube-public, kube-node-lease)")
	if err := fs.Parse(args); err != nil {
		return usageError{err: err, reported: true}
	}
	if fs.NArg() > 0 {
		return usageError{err: fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	resources := httpwatch.DefaultResources()
	for _, file := range crdFiles {
		data, err := os.ReadFile(file)
		if err != nil {
			return usageError{err: fmt.Errorf("--crd: %w", err)}
		}
		crds, err := httpwatch.CRDResources(data)
		if err != nil {
			return usageError{err: fmt.Errorf("--crd %s: %w", file, err)}
		}
		resources = append(resources, crds...)
	}
	if err := checkListenAddr("etcd-listen", *etcdListen, *allowRemote); err != nil {
		return usageError{err: err}
	}
	if err := checkListenAddr("http-listen", *httpListen, *allowRemote); err != nil {
		return usageError{err: err}
	}

	st, err := newServeStore(*fromSnapshot, store.Options{ProgressNotifyInterval: *progress})
	if err != nil {
		return usageError{err: fmt.Errorf("--from-snapshot: %w", err)}
	}
	comp, err := compactor.New(*compactMode, *compactRetention, clock.RealClock{}, st)
	if err != nil {
		st.Close()
		return usageError{err: err}
	}
	defer comp.Stop()
	lis, err := net.Listen("tcp", *etcdListen)
	if err != nil {
		st.Close()
		return err
	}
	httpLis, err := net.Listen("tcp", *httpListen)
	if err != nil {
		lis.Close()
		st.Close()
		return err
	}
	opts := etcdgrpc.Options{Name: *name, ClientURLs: []string{"http://" + lis.Addr().String()}, QuotaBackendBytes: *quota}.WithDefaults()
	// The chain waits until every cache has its first list, or ctx ends; it takes httpLis over.
	api, err := chain.New(ctx, chain.Config{Store: st, Etcd: opts, Listener: httpLis, Resources: resources, SystemNamespaces: *systemNamespaces})
	if err != nil {
		lis.Close()
		st.Close()
		return err
	}
	// The etcd line comes last: scripts wait for it to know that both APIs are up.
	fmt.Fprintf(stdout, "listwatch: serving the Kubernetes API on http://%s\n", httpLis.Addr())
	fmt.Fprintf(stdout, "listwatch: serving the etcd API on %s\n", lis.Addr())
	gs, etcdHTTP := etcdgrpc.NewServerAndHTTP(st, opts)
	err = serve(ctx, st, []server{
		newEtcdPort("etcd API", gs, etcdHTTP, lis),
		chainServer{name: "Kubernetes API", c: api},
	}, *shutdownTimeout, stdout)
	fmt.Fprintln(stdout, "listwatch: stopped")
	return err
}

// newServeStore is the store serve runs on: an empty one, or one loaded from an etcd snapshot file
// and compacted to the snapshot's compaction, as an etcd member finishes a scheduled compaction when
// it starts. Lease IDs the store picks follow the default member ID, as serve's etcd options do.
func newServeStore(snapshotFile string, opts store.Options) (*store.Store, error) {
	opts.MemberID = etcdgrpc.Options{}.WithDefaults().MemberID
	if snapshotFile == "" {
		return store.New(opts), nil
	}
	snap, err := etcdsnap.Load(snapshotFile)
	if err != nil {
		return nil, err
	}
	compact := snap.CompactRevision
	snap.CompactRevision = -1
	st, err := store.Restore(opts, snap)
	if err != nil {
		return nil, err
	}
	if compact > 0 {
		if _, err := st.Compact(compact); err != nil && !errors.Is(err, store.ErrCompacted) {
			st.Close()
			return nil, fmt.Errorf("compacting to the snapshot's revision %d: %w", compact, err)
		}
	}
	return st, nil
}

// stringList is a flag that may repeat.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// checkListenAddr refuses a listen address beyond loopback unless allowRemote: an empty host (all
// interfaces), a non-loopback IP, or any host name but localhost.
func checkListenAddr(flagName, addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--%s %q: %w", flagName, addr, err)
	}
	if allowRemote || isLoopback(host) {
		return nil
	}
	shown := host
	if shown == "" {
		shown = "every interface"
	}
	return fmt.Errorf("--%s %s would listen on %s, which is not loopback; the API has no authentication, so pass --allow-remote to serve it beyond this machine", flagName, addr, shown)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if i := strings.IndexByte(host, '%'); i >= 0 { // IPv6 zone
		host = host[:i]
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// server is one listener the serve command runs over the shared store. Serve blocks until the
// server fails or Shutdown stops it; Shutdown stops accepting, lets open requests finish until ctx
// ends, then cuts what is left, and returns once the server is stopped.
type server interface {
	Name() string
	Serve() error
	Shutdown(ctx context.Context)
}

// serve runs servers until ctx ends or one of them fails, then shuts all of them down, giving open
// requests shutdownTimeout to finish, and closes st once every server has stopped. It returns the
// first server failure, or nil after a shutdown asked for by ctx.
func serve(ctx context.Context, st *store.Store, servers []server, shutdownTimeout time.Duration, stdout io.Writer) error {
	defer st.Close()
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(servers))
	var running sync.WaitGroup
	for _, s := range servers {
		running.Add(1)
		go func() {
			defer running.Done()
			results <- result{s.Name(), s.Serve()}
		}()
	}

	var failure error
	select {
	case <-ctx.Done():
		fmt.Fprintln(stdout, "listwatch: shutting down")
	case r := <-results:
		// A server returned by itself: that is a failure even when it reports none.
		failure = fmt.Errorf("%s: stopped serving: %v", r.name, r.err)
		if r.err == nil {
			failure = fmt.Errorf("%s: stopped serving", r.name)
		}
	}

	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	var stopping sync.WaitGroup
	for _, s := range servers {
		stopping.Add(1)
		go func() {
			defer stopping.Done()
			s.Shutdown(shutdownCtx)
		}()
	}
	stopping.Wait()
	running.Wait()
	close(results)
	for r := range results {
		if r.err != nil && failure == nil {
			failure = fmt.Errorf("%s: %w", r.name, r.err)
		}
	}
	return failure
}

// chainServer is the Kubernetes API of a chain (httpwatch.DefaultResources, each behind a watch
// cache, over the in-process etcd client), which serves from chain.New on.
type chainServer struct {
	name string
	c    *chain.Chain
}

func (h chainServer) Name() string { return h.name }

func (h chainServer) Serve() error {
	<-h.c.Done()
	return h.c.Err()
}

// Shutdown is the apiserver's (chain.Chain.Shutdown: watches are told to end, then open requests
// get until ctx to finish before their connections are cut); only then are the caches and the etcd
// client behind the API released. The store is serve's to close.
func (h chainServer) Shutdown(ctx context.Context) {
	_ = h.c.Shutdown(ctx)
	_ = h.c.Close()
}

// grpcServer runs a gRPC server on a listener.
type grpcServer struct {
	name string
	srv  *grpc.Server
	lis  net.Listener
}

func (g grpcServer) Name() string { return g.name }

func (g grpcServer) Serve() error {
	err := g.srv.Serve(g.lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Shutdown follows etcd's embed/etcd.go stopServers: GracefulStop, and Stop if open RPCs such as
// watch streams outlast ctx.
func (g grpcServer) Shutdown(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.srv.GracefulStop()
	}()
	select {
	case <-done:
	case <-ctx.Done():
		g.srv.Stop()
		<-done
	}
}

// etcdPort serves gRPC and etcd's HTTP endpoints on one listener, split as etcd splits an insecure
// client port (embed/serve.go): HTTP/2 connections to gRPC, HTTP/1 to the HTTP handler (cmux).
type etcdPort struct {
	name  string
	mux   cmux.CMux
	grpc  grpcServer
	http  *http.Server
	httpL net.Listener
}

func newEtcdPort(name string, gs *grpc.Server, h http.Handler, lis net.Listener) *etcdPort {
	m := cmux.New(lis)
	grpcL := m.Match(cmux.HTTP2())
	httpL := m.Match(cmux.HTTP1())
	return &etcdPort{
		name:  name,
		mux:   m,
		grpc:  grpcServer{name: name, srv: gs, lis: grpcL},
		http:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		httpL: httpL,
	}
}

func (p *etcdPort) Name() string { return p.name }

// Serve runs the split and both servers until Shutdown; it returns the first failure.
func (p *etcdPort) Serve() error {
	errs := make(chan error, 3)
	// the split's listeners end with cmux's errors once it closes, which Shutdown does
	closed := func(err error) bool {
		return errors.Is(err, http.ErrServerClosed) || errors.Is(err, cmux.ErrListenerClosed) ||
			errors.Is(err, cmux.ErrServerClosed) || errors.Is(err, net.ErrClosed)
	}
	go func() {
		err := p.grpc.Serve()
		if closed(err) {
			err = nil
		}
		errs <- err
	}()
	go func() {
		err := p.http.Serve(p.httpL)
		if closed(err) {
			err = nil
		}
		errs <- err
	}()
	go func() {
		err := p.mux.Serve()
		if errors.Is(err, cmux.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
			err = nil
		}
		errs <- err
	}()
	var first error
	for range 3 {
		if err := <-errs; err != nil && first == nil {
			first = err
			p.mux.Close()
		}
	}
	return first
}

// Shutdown stops the HTTP server and the gRPC server (etcd's stopServers), then the split.
func (p *etcdPort) Shutdown(ctx context.Context) {
	_ = p.http.Shutdown(ctx)
	p.grpc.Shutdown(ctx)
	p.mux.Close()
}
