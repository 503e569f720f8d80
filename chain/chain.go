package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/store"
	"github.com/listwatch/listwatch/watch"
)

// ErrInvalidConfig is wrapped by the errors of New for a Config it refuses before starting anything.
var ErrInvalidConfig = errors.New("chain: invalid config")

// Config configures a Chain. The zero value is the chain `listwatch serve` runs: a new in-memory
// store, httpwatch.DefaultResources each behind a watch cache but those of DefaultUncached (events,
// as kube-apiserver), the real clocks, slog.Default(), on a
// free loopback port.
type Config struct {
	// Store is an existing store to serve. The chain never closes it; the caller closes it after
	// Close. Nil: the chain makes one from StoreOptions and closes it in Close.
	Store *store.Store
	// StoreOptions configure the store the chain makes: its clock, its progress-notify interval (etcd's
	// --experimental-watch-progress-notify-interval), its sync interval. Must be zero with Store.
	StoreOptions store.Options
	// Etcd configures the in-process etcd server the clients talk to (member name and ID, request
	// limits).
	Etcd etcdgrpc.Options

	// Resources are the resources served. Default httpwatch.DefaultResources().
	Resources []httpwatch.Resource
	// Uncached names resources, as their GroupResource prints ("pods", "widgets.example.com"), that
	// are served straight from their etcd3 storage, as the apiserver's --watch-cache-sizes=<name>#0.
	// Those of DefaultUncached are uncached unless Cached names them.
	Uncached []string
	// Cached names resources of DefaultUncached that get a watch cache all the same, as
	// --watch-cache-sizes=events#100 gives one to events.
	Cached []string
	// DisableWatchCache serves every resource without a watch cache, as --watch-cache=false.
	DisableWatchCache bool
	// CacheClock drives every watch cache. Default the real clock.
	CacheClock clock.Clock
	// API configures the HTTP API: its clock (watch timeouts, timestamps), jitter, request limits and
	// features. Its Resources must be empty: the chain fills them in.
	API httpwatch.Config
	// Logger receives what the etcd3 storage, the watch caches and (unless API.Logger is set) the HTTP
	// API log. Default slog.Default().
	Logger *slog.Logger
	// Listener is where the HTTP API is served. The chain takes it over: it closes it in Close, and in
	// New when New fails, as http.Server.Serve does. Default a new listener on a free loopback port.
	Listener net.Listener

	// SystemNamespaces creates, when core namespaces are served, the namespaces kube-apiserver's
	// system namespaces controller creates: default, kube-system, kube-public and kube-node-lease
	// (those a given store already has are kept), and makes the NamespaceLifecycle admission whole
	// (API.RequireNamespaces): a create in a namespace that does not exist is 404 NotFound. Off,
	// nothing is written before the first request and objects may name any namespace, unless
	// API.RequireNamespaces is set.
	SystemNamespaces bool

	// WrapStorage, if set, returns what stands in for a resource's etcd3 storage: what its watch cache
	// lists and watches, or what the HTTP handlers use when it has none. A test gates or counts the
	// reflector's calls with it. The chain does not close what it returns.
	WrapStorage func(httpwatch.Resource, *watch.Store) storage.Interface
	// WrapServed, if set, returns what the HTTP handlers of a resource use in place of its watch cache
	// (or its storage, when it has no cache).
	WrapServed func(httpwatch.Resource, storage.Interface) storage.Interface
	// WrapHandler, if set, returns the handler served in place of the HTTP API, such as a request log
	// in front of it.
	WrapHandler func(http.Handler) http.Handler

	// Registerer, if set, receives the metrics of the watch caches (cache.NewMetrics: the
	// apiserver's apiserver_watch_cache_* and related names) and, unless API.Registerer is set, of
	// the HTTP API's watches (apiserver_watch_events_total, apiserver_watch_events_sizes).
	Registerer prometheus.Registerer
}

// Timeouts of the HTTP server, as `listwatch serve` has always used them.
const (
	// readHeaderTimeout bounds how long a client may take to send its request headers.
	readHeaderTimeout = 30 * time.Second
	// handlerGrace bounds the wait for handlers after their connections were closed.
	handlerGrace = 10 * time.Second
)

// Chain is the list-watch path over one store: an in-process etcd, the etcd3 storage of each resource
// on a client of its own, a watch cache over it (unless uncached) and the HTTP API, served on a
// listener.
type Chain struct {
	store      *store.Store
	ownsStore  bool
	etcd       *etcdgrpc.InProcess
	client     *clientv3.Client
	storages   map[string]*watch.Store
	cachers    map[string]*cache.Cacher
	api        *httpwatch.Server
	lis        net.Listener
	url        string
	srv        *http.Server
	conns      sync.WaitGroup // one per connection the server tracks
	served     chan struct{}  // closed when srv.Serve returned
	serveErr   error          // why srv.Serve returned; nil after Shutdown or Close
	closeOnce  sync.Once
	closeErr   error
	shutdownMu sync.Mutex
}

// New assembles and starts a chain: it waits until every watch cache has its first list, or ctx
// ends, and serves the HTTP API before it returns. When it fails, it stops everything it had
// started, and the error says which stage failed.
func New(ctx context.Context, cfg Config) (*Chain, error) {
	lis := cfg.Listener
	if err := cfg.validate(); err != nil {
		if lis != nil {
			lis.Close()
		}
		return nil, err
	}
	if lis == nil {
		var err error
		if lis, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("chain: listening for the HTTP API: %w", err)
		}
	}
	c := &Chain{lis: lis, storages: map[string]*watch.Store{}, cachers: map[string]*cache.Cacher{}, served: make(chan struct{})}
	if err := c.assemble(ctx, cfg); err != nil {
		// Nothing is served yet: releasing the parts is all there is to undo.
		lis.Close()
		return nil, errors.Join(err, c.release())
	}
	c.serve()
	return c, nil
}

func (cfg *Config) validate() error {
	if cfg.Store != nil && cfg.StoreOptions != (store.Options{}) {
		return fmt.Errorf("%w: both Store and StoreOptions set; options apply only to a store the chain makes", ErrInvalidConfig)
	}
	if len(cfg.API.Resources) > 0 {
		return fmt.Errorf("%w: API.Resources set; the chain serves Resources", ErrInvalidConfig)
	}
	if len(cfg.Resources) == 0 {
		cfg.Resources = httpwatch.DefaultResources()
	}
	for _, name := range cfg.Uncached {
		if !slices.ContainsFunc(cfg.Resources, func(r httpwatch.Resource) bool { return r.GroupResource().String() == name }) {
			return fmt.Errorf("%w: Uncached names %q, which is not a served resource", ErrInvalidConfig, name)
		}
	}
	for _, name := range cfg.Cached {
		if !slices.Contains(DefaultUncached(), name) || slices.Contains(cfg.Uncached, name) {
			return fmt.Errorf("%w: Cached names %q, which is not uncached by default or is named in Uncached too", ErrInvalidConfig, name)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return nil
}

// DefaultUncached are the resources kube-apiserver serves without a watch cache unless
// --watch-cache-sizes gives them one: both versions of events, one resource whose objects are
// many, short-lived and rarely read back.
//
// Mirrors kubeapiserver.DefaultWatchCacheSizes (k8s.io/kubernetes pkg/kubeapiserver/default_storage_factory_builder.go).
func DefaultUncached() []string {
	return []string{"events", "events.events.k8s.io"}
}

// cached reports whether the resource named gets a watch cache.
func (cfg *Config) cached(name string) bool {
	if cfg.DisableWatchCache || slices.Contains(cfg.Uncached, name) {
		return false
	}
	return !slices.Contains(DefaultUncached(), name) || slices.Contains(cfg.Cached, name)
}

// assemble builds the stages in order, recording each in c as soon as it exists so that release
// can stop it.
func (c *Chain) assemble(ctx context.Context, cfg Config) error {
	c.store = cfg.Store
	if c.store == nil {
		c.store, c.ownsStore = store.New(cfg.StoreOptions), true
	}
	c.etcd = etcdgrpc.ServeInProcess(c.store, cfg.Etcd)
	var err error
	if c.client, err = c.etcd.Dial(); err != nil {
		return fmt.Errorf("chain: starting the in-process etcd client: %w", err)
	}
	apiCfg := cfg.API
	if apiCfg.Logger == nil {
		apiCfg.Logger = cfg.Logger
	}
	if apiCfg.Registerer == nil {
		apiCfg.Registerer = cfg.Registerer
	}
	if cfg.SystemNamespaces {
		apiCfg.RequireNamespaces = true
	}
	var metrics *cache.Metrics
	if cfg.Registerer != nil {
		if metrics, err = cache.NewMetrics(cfg.Registerer); err != nil {
			return fmt.Errorf("chain: %w", err)
		}
	}
	names := partNames(cfg.Resources)
	for i, r := range cfg.Resources {
		name := r.GroupResource().String()
		sc := StorageConfig(r)
		sc.Logger = cfg.Logger
		// Mirrors storagebackend/factory/etcd3.go newETCD3Storage: a client, so watch streams, per storage.
		cli, err := c.etcd.Dial()
		if err != nil {
			return fmt.Errorf("chain: the etcd client of %s: %w", name, err)
		}
		s, err := watch.New(cli, sc)
		if err != nil {
			return fmt.Errorf("chain: the etcd3 storage of %s: %w", name, err)
		}
		c.storages[names[i]] = s
		var under storage.Interface = s
		if cfg.WrapStorage != nil {
			under = cfg.WrapStorage(r, s)
		}
		var served storage.Interface = under
		if cfg.cached(name) {
			cc := CacheConfig(r, under)
			cc.Clock = cfg.CacheClock
			cc.Logger = cfg.Logger
			cc.Metrics = metrics
			cacher, err := cache.New(cc)
			if err != nil {
				return fmt.Errorf("chain: the watch cache of %s: %w", name, err)
			}
			c.cachers[names[i]] = cacher
			served = cacher
		}
		if cfg.WrapServed != nil {
			served = cfg.WrapServed(r, served)
		}
		apiCfg.Resources = append(apiCfg.Resources, httpwatch.ServedResource{Resource: r, Storage: served})
	}
	// The caches fill concurrently; waiting for each in turn waits for the slowest.
	for _, name := range names {
		if cacher := c.cachers[name]; cacher != nil {
			if err := cacher.Wait(ctx); err != nil {
				return fmt.Errorf("chain: the watch cache of %s never became ready: %w", name, err)
			}
		}
	}
	if c.api, err = httpwatch.New(apiCfg); err != nil {
		return fmt.Errorf("chain: the HTTP API: %w", err)
	}
	if cfg.SystemNamespaces {
		if err := c.createSystemNamespaces(ctx, cfg.Resources); err != nil {
			return err
		}
	}
	var h http.Handler = c.api
	if cfg.WrapHandler != nil {
		h = cfg.WrapHandler(h)
	}
	c.srv = &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, ConnState: c.trackConn}
	c.url = "http://" + c.lis.Addr().String()
	return nil
}

// partNames are the names Storage and Cacher know the resources' parts by: the GroupResource as it
// prints, and for a later version of the same resource (a CRD's, each with its own storage and
// watch cache, as apiextensions-apiserver builds them) that name, "/" and the version.
func partNames(resources []httpwatch.Resource) []string {
	names := make([]string, len(resources))
	seen := map[string]bool{}
	for i, r := range resources {
		names[i] = r.GroupResource().String()
		if seen[names[i]] {
			names[i] += "/" + r.Version
		}
		seen[r.GroupResource().String()] = true
	}
	return names
}

// systemNamespaces are the namespaces kube-apiserver creates at start (pkg/controlplane's system
// namespaces controller).
var systemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// createSystemNamespaces creates the system namespaces when core namespaces are served; those a
// given store already has are kept.
func (c *Chain) createSystemNamespaces(ctx context.Context, resources []httpwatch.Resource) error {
	if !slices.ContainsFunc(resources, func(r httpwatch.Resource) bool {
		return r.BuiltIn && r.Group == "" && r.Resource == "namespaces" && !r.Namespaced
	}) {
		return nil
	}
	for _, name := range systemNamespaces {
		ns := &unstructured.Unstructured{}
		ns.SetAPIVersion("v1")
		ns.SetKind("Namespace")
		ns.SetName(name)
		if _, err := c.api.Create(ctx, schema.GroupResource{Resource: "namespaces"}, ns, "kube-apiserver"); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("chain: creating the namespace %s: %w", name, err)
		}
	}
	return nil
}

// trackConn counts the server's connections so that Close can wait for their goroutines: each is
// new once and then ends once, closed or hijacked (a hijacked one belongs to its handler, which
// httpwatch.Server.Wait waits for).
func (c *Chain) trackConn(_ net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		c.conns.Add(1)
	case http.StateClosed, http.StateHijacked:
		c.conns.Done()
	}
}

func (c *Chain) serve() {
	go func() {
		defer close(c.served)
		if err := c.srv.Serve(c.lis); !errors.Is(err, http.ErrServerClosed) {
			c.serveErr = err
		}
	}()
}

// release stops the parts behind the HTTP server, last built first: the caches, the etcd clients and
// server, and the store if the chain made it.
func (c *Chain) release() error {
	var errs []error
	for _, cacher := range c.cachers {
		cacher.Stop()
	}
	for _, s := range c.storages {
		s.Close()
	}
	if c.etcd != nil {
		if err := c.etcd.Close(); err != nil {
			errs = append(errs, fmt.Errorf("chain: closing the etcd clients: %w", err))
		}
	}
	if c.ownsStore {
		if err := c.store.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
			errs = append(errs, fmt.Errorf("chain: closing the store: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Store is the store the chain serves.
func (c *Chain) Store() *store.Store { return c.store }

// Client is a client of the chain's in-process etcd. Each etcd3 storage has a client of its own, as
// kube-apiserver gives each, so this one's watches and RequestProgress share no stream with theirs.
func (c *Chain) Client() *clientv3.Client { return c.client }

// Storage is the etcd3 storage of a resource, named as its GroupResource prints ("pods",
// "widgets.example.com"; a CRD version after the first of its resource as "things.example.org/v2");
// nil if the chain does not serve it.
func (c *Chain) Storage(resource string) *watch.Store { return c.storages[resource] }

// Cacher is the watch cache of a resource, named as for Storage; nil if the resource is uncached or
// not served.
func (c *Chain) Cacher(resource string) *cache.Cacher { return c.cachers[resource] }

// API is the HTTP API (without WrapHandler's wrapping).
func (c *Chain) API() *httpwatch.Server { return c.api }

// URL is the HTTP API's base URL, http://host:port.
func (c *Chain) URL() string { return c.url }

// Done is closed once the HTTP server has stopped serving: after Shutdown or Close, or when its
// listener failed.
func (c *Chain) Done() <-chan struct{} { return c.served }

// Err, once Done is closed, is why the HTTP server stopped: nil after Shutdown or Close, else the
// listener's failure.
func (c *Chain) Err() error {
	select {
	case <-c.served:
		return c.serveErr
	default:
		return nil
	}
}

// Shutdown stops the HTTP API as the apiserver does: every watch is told to end first (watches never
// end by themselves, so http.Server.Shutdown would wait for them until ctx), then open requests
// get until ctx to finish before their connections are cut, then the handlers, websocket watches
// included, are waited for. The storage behind the API keeps running until Close. It returns an
// error if requests had to be cut or handlers outlived their connections.
//
// Follows the order of k8s.io/apiserver pkg/server/genericapiserver.go RunWithContext: the
// ShuttingDown signal (on which handlers/watch.go serveWatch ends its watch) comes first, then the
// server stops accepting and in-flight requests drain.
func (c *Chain) Shutdown(ctx context.Context) error {
	c.shutdownMu.Lock()
	defer c.shutdownMu.Unlock()
	c.api.Shutdown()
	var errs []error
	if err := c.srv.Shutdown(ctx); err != nil {
		c.srv.Close()
		errs = append(errs, fmt.Errorf("chain: requests still open when the HTTP server's shutdown ended (%w); their connections were cut", err))
	}
	// Once the connections are gone, the handlers still running end promptly.
	waitCtx, cancel := context.WithTimeout(context.Background(), handlerGrace)
	defer cancel()
	if err := c.api.Wait(waitCtx); err != nil {
		errs = append(errs, fmt.Errorf("chain: handlers still running %v after their connections were closed: %w", handlerGrace, err))
	}
	<-c.served
	return errors.Join(errs...)
}

// Close stops everything the chain started and waits for it: every watch is told to end, every
// connection is cut, the handlers are waited for, then the watch caches, the etcd clients and
// server and, if the chain made it, the store are stopped. It never closes a store given in
// Config.Store. It is idempotent and may follow Shutdown.
func (c *Chain) Close() error {
	c.closeOnce.Do(func() {
		c.shutdownMu.Lock()
		defer c.shutdownMu.Unlock()
		var errs []error
		c.api.Shutdown()
		c.srv.Close()
		<-c.served
		ctx, cancel := context.WithTimeout(context.Background(), handlerGrace)
		err := c.api.Wait(ctx)
		cancel()
		if err != nil {
			// A handler that outlives its connection holds its connection's goroutine too.
			errs = append(errs, fmt.Errorf("chain: handlers still running %v after their connections were closed: %w", handlerGrace, err))
		} else {
			c.conns.Wait()
		}
		errs = append(errs, c.release())
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}
