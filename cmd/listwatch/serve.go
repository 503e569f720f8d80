package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/soheilhy/cmux"
	"google.golang.org/grpc"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/chain"
	"github.com/listwatch/listwatch/compactor"
	"github.com/listwatch/listwatch/controllers"
	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/etcdsnap"
	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/internal/observe"
	"github.com/listwatch/listwatch/store"
	"github.com/listwatch/listwatch/watch"
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

// serveFlags are `listwatch serve`'s flags, parsed and checked.
type serveFlags struct {
	etcdListen, httpListen string
	name                   string
	progress               time.Duration
	shutdownTimeout        time.Duration
	resources              []httpwatch.Resource
	compactMode            string
	compactRetention       string
	quota                  int64
	fromSnapshot           string
	compactionInterval     time.Duration
	eventTTL               time.Duration
	logger                 *slog.Logger
	profiling              bool
	controllers            []string
	systemNamespaces       bool
}

// parseServeFlags reads serve's flags; a usageError names what is wrong.
func parseServeFlags(args []string, stderr io.Writer) (serveFlags, error) {
	var f serveFlags
	fs := flag.NewFlagSet("listwatch serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.etcdListen, "etcd-listen", defaultEtcdListen, "`address` (host:port) to serve the etcd v3 gRPC API on")
	fs.StringVar(&f.httpListen, "http-listen", defaultHTTPListen, "`address` (host:port) to serve the Kubernetes API (list, watch, get, create, update, delete) on")
	allowRemote := fs.Bool("allow-remote", false, "allow listening on addresses other than loopback; the APIs have no authentication")
	fs.StringVar(&f.name, "name", etcdgrpc.DefaultName, "member `name` shown by member list")
	fs.DurationVar(&f.progress, "watch-progress-notify-interval", store.DefaultProgressNotifyInterval,
		"period of progress notifications for watches that ask for them (etcd's flag of the same name; minimum 100ms)")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout,
		"on SIGINT or SIGTERM, how long to let open RPCs finish before cutting them (watch streams never finish by themselves)")
	var crdFiles stringList
	fs.Var(&crdFiles, "crd", "`file` of CustomResourceDefinitions (YAML or JSON) whose resources to serve besides the built-in ones; may repeat")
	fs.StringVar(&f.compactMode, "auto-compaction-mode", compactor.ModePeriodic, "etcd's flag: `mode` of auto-compaction, periodic (retention is a duration, or hours) or revision (retention is a number of revisions)")
	fs.StringVar(&f.compactRetention, "auto-compaction-retention", "0", "etcd's flag: how much history auto-compaction keeps (periodic: \"30m\", \"1\" for an hour; revision: \"10000\"); 0 disables it")
	fs.Int64Var(&f.quota, "quota-backend-bytes", 0, "etcd's flag: raise the NOSPACE alarm and refuse writes when the predicted database size reaches this many `bytes` (0: etcd's 2 GiB; negative: no quota)")
	fs.StringVar(&f.fromSnapshot, "from-snapshot", "", "load an etcd snapshot `file` (etcdctl snapshot save, or a member's snap/db) into the store before serving: its keys, revisions, leases and compaction")
	fs.DurationVar(&f.compactionInterval, "etcd-compaction-interval", watch.DefaultCompactionInterval,
		"how often the Kubernetes API's compactor compacts etcd, at the revision of the interval before, by the compact_rev_key protocol (kube-apiserver's flag of the same name); 0 disables")
	fs.DurationVar(&f.eventTTL, "event-ttl", httpwatch.DefaultEventTTL,
		"how long an event lives after its last write, by a lease (kube-apiserver's flag of the same name); 0 keeps events until deleted")
	logLevel := fs.String("log-level", "info", "`level` of the log on stderr: debug (every request), info (refused requests), warn (failed ones), error")
	fs.BoolVar(&f.profiling, "pprof", false, "serve net/http/pprof under /debug/pprof/ on the Kubernetes API's address (kube-apiserver's --profiling)")
	controllerList := fs.String("controllers", "*", "`list` of the controllers to run, comma-separated: namespace, garbagecollector, kubelet; * for all, -name to leave one out, \"\" for none")
	fs.BoolVar(&f.systemNamespaces, "system-namespaces", false, "create the namespaces kube-apiserver creates at start (default, kube-system, kube-public, kube-node-lease) and refuse, "+
		"as its NamespaceLifecycle admission, a create in a namespace that does not exist and the deletion of default, kube-system and kube-public; without it the store starts empty and objects may name any namespace")
	if err := fs.Parse(args); err != nil {
		return f, usageError{err: err, reported: true}
	}
	if fs.NArg() > 0 {
		return f, usageError{err: fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if f.eventTTL < 0 {
		return f, usageError{err: fmt.Errorf("--event-ttl %v: negative", f.eventTTL)}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return f, usageError{err: fmt.Errorf("--log-level: %w", err)}
	}
	f.logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	var err error
	if f.controllers, err = parseControllers(*controllerList); err != nil {
		return f, usageError{err: fmt.Errorf("--controllers: %w", err)}
	}
	f.resources = httpwatch.DefaultResources()
	for _, file := range crdFiles {
		data, err := os.ReadFile(file)
		if err != nil {
			return f, usageError{err: fmt.Errorf("--crd: %w", err)}
		}
		crds, err := httpwatch.CRDResources(data)
		if err != nil {
			return f, usageError{err: fmt.Errorf("--crd %s: %w", file, err)}
		}
		f.resources = append(f.resources, crds...)
	}
	if err := checkListenAddr("etcd-listen", f.etcdListen, *allowRemote); err != nil {
		return f, usageError{err: err}
	}
	if err := checkListenAddr("http-listen", f.httpListen, *allowRemote); err != nil {
		return f, usageError{err: err}
	}
	return f, nil
}

// runServe is `listwatch serve`: one in-memory store, served as etcd's gRPC API (and etcd's HTTP
// endpoints on the same port) and, over the same store, as the apiserver's HTTP API for
// httpwatch.DefaultResources (each behind a watch cache), until SIGINT or SIGTERM.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	st, err := newServeStore(f.fromSnapshot, store.Options{ProgressNotifyInterval: f.progress})
	if err != nil {
		return usageError{err: fmt.Errorf("--from-snapshot: %w", err)}
	}
	comp, err := compactor.New(f.compactMode, f.compactRetention, clock.RealClock{}, st)
	if err != nil {
		st.Close()
		return usageError{err: err}
	}
	defer comp.Stop()
	lis, err := net.Listen("tcp", f.etcdListen)
	if err != nil {
		st.Close()
		return err
	}
	httpLis, err := net.Listen("tcp", f.httpListen)
	if err != nil {
		lis.Close()
		st.Close()
		return err
	}
	opts := etcdgrpc.Options{Name: f.name, ClientURLs: []string{"http://" + lis.Addr().String()}, QuotaBackendBytes: f.quota}.WithDefaults()
	// The chain waits until every cache has its first list, or ctx ends; it takes httpLis over.
	// One registry behind /metrics: the process, the requests, the watch caches and the watches.
	reg := observe.NewRegistry()
	api, err := chain.New(ctx, chain.Config{Store: st, Etcd: opts, Listener: httpLis, Resources: f.resources, SystemNamespaces: f.systemNamespaces,
		API: httpwatch.Config{EventTTL: f.eventTTL}, Logger: f.logger, Registerer: reg,
		WrapHandler: func(h http.Handler) http.Handler {
			return observe.Wrap(h, observe.Options{Logger: f.logger, PProf: f.profiling, Registry: reg})
		}})
	if err != nil {
		lis.Close()
		st.Close()
		return err
	}
	gs, etcdHTTP := etcdgrpc.NewServerAndHTTP(st, opts)
	servers := []server{
		newEtcdPort("etcd API", gs, etcdHTTP, lis),
		chainServer{name: "Kubernetes API", c: api},
	}
	if len(f.controllers) > 0 {
		cfg := controllers.Config{REST: &rest.Config{Host: api.URL(), QPS: -1}, Names: f.controllers, Logger: f.logger}
		servers = append(servers, newControllersServer(cfg))
	}
	if f.compactionInterval > 0 {
		c := watch.StartCompactor(api.Client(), f.compactionInterval, clock.RealClock{}, f.logger, nil)
		servers = append(servers, backgroundServer{name: "compactor", stop: c.Stop, stopped: make(chan struct{})})
	}
	// The etcd line comes last: scripts wait for it to know that both APIs are up.
	fmt.Fprintf(stdout, "listwatch: serving the Kubernetes API on http://%s\n", httpLis.Addr())
	fmt.Fprintf(stdout, "listwatch: serving the etcd API on %s\n", lis.Addr())
	err = serve(ctx, st, servers, f.shutdownTimeout, stdout)
	fmt.Fprintln(stdout, "listwatch: stopped")
	return err
}

// parseControllers reads --controllers as kube-controller-manager's flag of the same name: names,
// * for all, -name to leave one out.
func parseControllers(list string) ([]string, error) {
	var names []string
	var excluded []string
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
		case n == "*":
			names = append(names, controllers.All...)
		case strings.HasPrefix(n, "-") && slices.Contains(controllers.All, n[1:]):
			excluded = append(excluded, n[1:])
		case slices.Contains(controllers.All, n):
			names = append(names, n)
		default:
			return nil, fmt.Errorf("unknown controller %q (known: %s)", n, strings.Join(controllers.All, ", "))
		}
	}
	var out []string
	for _, n := range controllers.All {
		if slices.Contains(names, n) && !slices.Contains(excluded, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// backgroundServer is work that runs beside the APIs until shutdown (the compactor): its
// Shutdown stops it and waits for it.
type backgroundServer struct {
	name    string
	stop    func()
	stopped chan struct{}
}

func (s backgroundServer) Name() string { return s.name }

func (backgroundServer) clientOfAPIs() {}

func (s backgroundServer) Serve() error {
	<-s.stopped
	return nil
}

func (s backgroundServer) Shutdown(context.Context) {
	s.stop()
	close(s.stopped)
}

// controllersServer runs the controllers beside the APIs, as kube-controller-manager beside
// kube-apiserver: they start once the APIs serve (their informers' first lists take a moment the
// APIs do not wait for), and a failure to start stops serve.
type controllersServer struct {
	cfg    controllers.Config
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func newControllersServer(cfg controllers.Config) *controllersServer {
	ctx, cancel := context.WithCancel(context.Background())
	return &controllersServer{cfg: cfg, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

func (*controllersServer) Name() string { return "controllers" }

func (*controllersServer) clientOfAPIs() {}

func (s *controllersServer) Serve() error {
	defer close(s.done)
	c, err := controllers.Start(s.ctx, s.cfg)
	if err != nil {
		if s.ctx.Err() != nil {
			return nil
		}
		return err
	}
	<-s.ctx.Done()
	c.Stop()
	return nil
}

// Shutdown stops the controllers, or their start, and waits for them.
func (s *controllersServer) Shutdown(context.Context) {
	s.cancel()
	<-s.done
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

// apiClient marks a server that is a client of the others (the controllers, the compactor): serve
// shuts those down before the rest.
type apiClient interface{ clientOfAPIs() }

// serve runs servers until ctx ends or one of them fails, then shuts all of them down, the
// apiClients first, giving open requests shutdownTimeout to finish, and closes st once every server
// has stopped. It returns the first server failure, or nil after a shutdown asked for by ctx.
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
	// The APIs' clients stop first, so none fails for an API that went away under it (the
	// controllers' discovery when a signal comes right after the start).
	var clients, apis []server
	for _, s := range servers {
		if _, ok := s.(apiClient); ok {
			clients = append(clients, s)
		} else {
			apis = append(apis, s)
		}
	}
	for _, group := range [][]server{clients, apis} {
		var stopping sync.WaitGroup
		for _, s := range group {
			stopping.Add(1)
			go func() {
				defer stopping.Done()
				s.Shutdown(shutdownCtx)
			}()
		}
		stopping.Wait()
	}
	running.Wait()
	close(results)
	for r := range results {
		if r.err != nil && failure == nil {
			failure = fmt.Errorf("%s: %w", r.name, r.err)
		}
	}
	return failure
}

// chainServer is the Kubernetes API of a chain (httpwatch.DefaultResources, each over its own
// in-process etcd client and, but for events, behind a watch cache), which serves from chain.New on.
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
