package listwatchtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/chain"
	"github.com/listwatch/listwatch/controllers"
	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/store"
	"github.com/listwatch/listwatch/watch"
)

// Sentinel errors callers can match with errors.Is.
var (
	// ErrInvalidOption is wrapped by the errors of New and Start for options they refuse.
	ErrInvalidOption = errors.New("listwatchtest: invalid option")
	// ErrUnknownResource is wrapped by the errors of the methods given a resource the environment
	// does not serve.
	ErrUnknownResource = errors.New("listwatchtest: resource not served")
	// ErrNoWatchCache is wrapped by Relist's error for a resource served without a watch cache.
	ErrNoWatchCache = errors.New("listwatchtest: resource has no watch cache")
	// ErrNoKubernetesAPI is wrapped by the errors of the Kubernetes methods of an etcd-only
	// environment (EtcdOnly).
	ErrNoKubernetesAPI = errors.New("listwatchtest: no Kubernetes API in this environment")
	// ErrClosed is wrapped by the errors of the methods of a closed environment.
	ErrClosed = errors.New("listwatchtest: environment closed")
)

// Option configures an environment.
type Option func(*options) error

type options struct {
	controllers      bool
	controllerNames  []string
	resources        []httpwatch.Resource
	resourcesSet     bool
	crds             []httpwatch.Resource
	objects          []runtime.Object
	scheme           *runtime.Scheme
	etcdOnly         bool
	noWatchCache     bool
	progressInterval time.Duration
	logger           *slog.Logger
}

// WithResources serves exactly these resources in place of httpwatch.DefaultResources.
func WithResources(resources ...httpwatch.Resource) Option {
	return func(o *options) error {
		if len(resources) == 0 {
			return fmt.Errorf("%w: WithResources with no resource", ErrInvalidOption)
		}
		o.resources = append(o.resources, resources...)
		o.resourcesSet = true
		return nil
	}
}

// WithCRDs serves, besides the other resources, the custom resources CustomResourceDefinitions
// define, and lists them in discovery. Each definition is YAML or JSON ([]byte or string; a YAML
// stream may hold several, separated by ---) or a Go value that encodes to one, such as a
// *k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.CustomResourceDefinition. Every served
// version is served, with its scope, names, status subresource, printer columns, selectable fields
// and schema, converted to and from the storage version, as httpwatch.CRDResources reads them.
func WithCRDs(defs ...any) Option {
	return func(o *options) error {
		for i, def := range defs {
			var rs []httpwatch.Resource
			var err error
			switch d := def.(type) {
			case []byte:
				rs, err = httpwatch.CRDResources(d)
			case string:
				rs, err = httpwatch.CRDResources([]byte(d))
			default:
				data, merr := json.Marshal(def)
				if merr != nil {
					err = fmt.Errorf("%w: %v", httpwatch.ErrInvalidCRD, merr)
					break
				}
				rs, err = httpwatch.CRDResources(data)
			}
			if err != nil {
				return fmt.Errorf("%w: WithCRDs definition %d: %w", ErrInvalidOption, i, err)
			}
			o.crds = append(o.crds, rs...)
		}
		return nil
	}
}

// WithCRDFiles is WithCRDs for files of YAML or JSON definitions, as a controller's
// config/crd/bases directory holds them.
func WithCRDFiles(paths ...string) Option {
	return func(o *options) error {
		for _, path := range paths {
			data, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("%w: WithCRDFiles: %w", ErrInvalidOption, err)
			}
			rs, err := httpwatch.CRDResources(data)
			if err != nil {
				return fmt.Errorf("%w: WithCRDFiles %s: %w", ErrInvalidOption, path, err)
			}
			o.crds = append(o.crds, rs...)
		}
		return nil
	}
}

// WithObjects creates these objects, typed or unstructured, through the Kubernetes API before New
// returns, in order, as Env.Seed does.
func WithObjects(objs ...runtime.Object) Option {
	return func(o *options) error {
		o.objects = append(o.objects, objs...)
		return nil
	}
}

// WithScheme names the kinds of typed objects given to Seed and WithObjects that carry no
// apiVersion and kind. Default client-go's scheme (k8s.io/client-go/kubernetes/scheme), which knows
// the built-in types; a controller's scheme knows its custom types too.
func WithScheme(s *runtime.Scheme) Option {
	return func(o *options) error {
		if s == nil {
			return fmt.Errorf("%w: WithScheme(nil)", ErrInvalidOption)
		}
		o.scheme = s
		return nil
	}
}

// WithControllers runs controllers against the Kubernetes API, as kube-controller-manager and
// the kubelets would: the namespace controller, the garbage collector and the kubelets'
// confirmation of a bound pod's graceful deletion (package controllers), or only those named
// (controllers.Namespace, GarbageCollector, Kubelet). Default: none, as envtest.
func WithControllers(names ...string) Option {
	return func(o *options) error {
		for _, n := range names {
			if !slices.Contains(controllers.All, n) {
				return fmt.Errorf("%w: WithControllers: unknown controller %q (known: %v)", ErrInvalidOption, n, controllers.All)
			}
		}
		o.controllers = true
		o.controllerNames = names
		if len(names) == 0 {
			o.controllerNames = nil
		}
		return nil
	}
}

// EtcdOnly starts the etcd API alone, without the Kubernetes API.
func EtcdOnly() Option {
	return func(o *options) error {
		o.etcdOnly = true
		return nil
	}
}

// WithoutWatchCache serves every resource straight from its etcd3 storage, as the apiserver with
// --watch-cache=false.
func WithoutWatchCache() Option {
	return func(o *options) error {
		o.noWatchCache = true
		return nil
	}
}

// WithProgressNotifyInterval sets the store's progress-notify period, etcd's
// --experimental-watch-progress-notify-interval (default 10 minutes, minimum 100 ms), on the
// environment's Clock.
func WithProgressNotifyInterval(d time.Duration) Option {
	return func(o *options) error {
		if d < store.MinProgressNotifyInterval {
			return fmt.Errorf("%w: progress-notify interval %v is below etcd's minimum %v", ErrInvalidOption, d, store.MinProgressNotifyInterval)
		}
		o.progressInterval = d
		return nil
	}
}

// WithLogger receives what the store, storage, caches and HTTP API log. Default: nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: WithLogger(nil)", ErrInvalidOption)
		}
		o.logger = l
		return nil
	}
}

// Env is a running environment: an in-memory etcd-semantics store served over etcd's v3 gRPC API
// on a loopback port and, unless EtcdOnly, the Kubernetes API over it (etcd3 storage, watch caches,
// HTTP API) on another.
type Env struct {
	opts     options
	clock    *Clock
	store    *store.Store
	endpoint string
	stopEtcd func() error
	chain    *chain.Chain // nil with EtcdOnly
	config   *rest.Config // nil with EtcdOnly
	// controllers run with WithControllers; nil otherwise.
	controllers *controllers.Controllers

	served    map[string]*watchSet // the HTTP API's watches, by resource name
	reflector map[string]*watchSet // the watch caches' own watches, by resource name

	etcdOnce   sync.Once
	etcdClient *clientv3.Client
	etcdErr    error

	dynOnce sync.Once
	dyn     *dynamic.DynamicClient
	dynErr  error

	kubeconfigOnce sync.Once
	kubeconfigDir  string
	kubeconfig     string
	kubeconfigErr  error

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
}

// Start starts an environment for a test with New and closes it at the test's cleanup. A failure
// to start, or to close, fails the test.
func Start(tb testing.TB, opts ...Option) *Env {
	tb.Helper()
	e, err := New(tb.Context(), opts...)
	if err != nil {
		tb.Fatalf("listwatchtest: %v", err)
	}
	testutil.CloseAtCleanup(tb, "listwatchtest", e.Close)
	return e
}

// New starts an environment and returns once the etcd API answers on its port and the Kubernetes
// API serves every resource from a filled watch cache, with the WithObjects objects created.
// Close stops it. ctx bounds the start only.
func New(ctx context.Context, opts ...Option) (*Env, error) {
	o := options{}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.etcdOnly && (o.resourcesSet || len(o.crds) > 0 || len(o.objects) > 0 || o.noWatchCache || o.controllers) {
		return nil, fmt.Errorf("%w: EtcdOnly with Kubernetes options (resources, CRDs, objects or the watch cache)", ErrInvalidOption)
	}
	if o.scheme == nil {
		o.scheme = scheme.Scheme
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if !o.resourcesSet {
		o.resources = httpwatch.DefaultResources()
	}
	o.resources = append(o.resources, o.crds...)
	e := &Env{
		opts:      o,
		clock:     NewClock(),
		served:    map[string]*watchSet{},
		reflector: map[string]*watchSet{},
		closed:    make(chan struct{}),
	}
	if err := e.start(ctx); err != nil {
		return nil, errors.Join(err, e.release())
	}
	return e, nil
}

// start brings the parts up in order, recording each in e as soon as it exists so that release
// can stop it.
func (e *Env) start(ctx context.Context) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listwatchtest: listening for the etcd API: %w", err)
	}
	e.endpoint = "http://" + lis.Addr().String()
	// As `listwatch serve`: the member advertises its real URL, and the store takes its ID for the
	// lease IDs it picks.
	etcdOpts := etcdgrpc.Options{ClientURLs: []string{e.endpoint}}.WithDefaults()
	e.store = store.New(store.Options{Clock: e.clock, MemberID: etcdOpts.MemberID, ProgressNotifyInterval: e.opts.progressInterval})
	srv := etcdgrpc.NewServer(e.store, etcdOpts)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	e.stopEtcd = sync.OnceValue(func() error {
		// Stop, not GracefulStop: open watch streams would hold a graceful stop forever.
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("listwatchtest: the etcd API: %w", err)
		}
		return nil
	})
	if e.opts.etcdOnly {
		return nil
	}

	for _, r := range e.opts.resources {
		name := r.GroupResource().String()
		e.served[name], e.reflector[name] = newWatchSet(), newWatchSet()
	}
	e.chain, err = chain.New(ctx, chain.Config{
		Store:             e.store,
		Etcd:              etcdOpts,
		Resources:         e.opts.resources,
		DisableWatchCache: e.opts.noWatchCache,
		CacheClock:        e.clock,
		API:               httpwatch.Config{Clock: e.clock},
		Logger:            e.opts.logger,
		WrapStorage: func(r httpwatch.Resource, s *watch.Store) storage.Interface {
			return faultStorage{Interface: s, set: e.reflector[r.GroupResource().String()]}
		},
		WrapServed: func(r httpwatch.Resource, s storage.Interface) storage.Interface {
			return faultStorage{Interface: s, set: e.served[r.GroupResource().String()]}
		},
	})
	if err != nil {
		return fmt.Errorf("listwatchtest: %w", err)
	}
	// QPS -1: no client-side rate limit, which would only slow tests down (client-go's default is 5
	// requests a second).
	e.config = &rest.Config{Host: e.chain.URL(), QPS: -1}
	if e.opts.controllers {
		e.controllers, err = controllers.Start(ctx, controllers.Config{
			REST: rest.CopyConfig(e.config), Names: e.opts.controllerNames, Clock: e.clock, Logger: e.opts.logger})
		if err != nil {
			return fmt.Errorf("listwatchtest: %w", err)
		}
	}
	if len(e.opts.objects) > 0 {
		if err := e.Seed(ctx, e.opts.objects...); err != nil {
			return err
		}
	}
	return nil
}

// release stops what start started, the Kubernetes API first, the store last.
func (e *Env) release() error {
	var errs []error
	if e.controllers != nil {
		e.controllers.Stop()
	}
	if e.etcdClient != nil {
		if err := e.etcdClient.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("listwatchtest: closing the etcd client: %w", err))
		}
	}
	if e.chain != nil {
		if err := e.chain.Close(); err != nil {
			errs = append(errs, fmt.Errorf("listwatchtest: %w", err))
		}
	}
	if e.stopEtcd != nil {
		if err := e.stopEtcd(); err != nil {
			errs = append(errs, err)
		}
	}
	if e.store != nil {
		if err := e.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("listwatchtest: closing the store: %w", err))
		}
	}
	if e.kubeconfigDir != "" {
		if err := os.RemoveAll(e.kubeconfigDir); err != nil {
			errs = append(errs, fmt.Errorf("listwatchtest: removing the kubeconfig: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Close stops everything the environment started and waits for it: the etcd client it made, every
// watch and connection of the Kubernetes API, the etcd API and the store. It is idempotent.
func (e *Env) Close() error {
	e.closeOnce.Do(func() {
		close(e.closed)
		// Taken so that no lazy client or file is being made while the parts are released.
		e.etcdOnce.Do(func() { e.etcdErr = ErrClosed })
		e.kubeconfigOnce.Do(func() { e.kubeconfigErr = ErrClosed })
		e.closeErr = e.release()
	})
	return e.closeErr
}

func (e *Env) isClosed() bool {
	select {
	case <-e.closed:
		return true
	default:
		return false
	}
}

// Clock is the environment's clock.
func (e *Env) Clock() *Clock { return e.clock }

// Endpoint is the etcd API's client URL, http://127.0.0.1:<port>.
func (e *Env) Endpoint() string { return e.endpoint }

// Etcd returns an etcd client connected to Endpoint, made at the first call and closed by Close;
// the caller must not close it.
func (e *Env) Etcd() (*clientv3.Client, error) {
	if e.isClosed() {
		return nil, ErrClosed
	}
	e.etcdOnce.Do(func() {
		e.etcdClient, e.etcdErr = clientv3.New(clientv3.Config{Endpoints: []string{e.endpoint}, Logger: zap.NewNop()})
		if e.etcdErr != nil {
			e.etcdErr = fmt.Errorf("listwatchtest: the etcd client: %w", e.etcdErr)
		}
	})
	return e.etcdClient, e.etcdErr
}

// URL is the Kubernetes API's base URL, http://127.0.0.1:<port>; "" with EtcdOnly.
func (e *Env) URL() string {
	if e.chain == nil {
		return ""
	}
	return e.chain.URL()
}

// Config returns a new client configuration for the Kubernetes API: plain HTTP, no credentials, no
// client-side rate limit. Nil with EtcdOnly.
func (e *Env) Config() *rest.Config {
	if e.config == nil {
		return nil
	}
	return rest.CopyConfig(e.config)
}

// Kubeconfig returns the path of a kubeconfig file for the Kubernetes API, written at the first
// call and removed by Close, for tools such as kubectl.
func (e *Env) Kubeconfig() (string, error) {
	if e.chain == nil {
		return "", ErrNoKubernetesAPI
	}
	if e.isClosed() {
		return "", ErrClosed
	}
	e.kubeconfigOnce.Do(func() {
		e.kubeconfigDir, e.kubeconfigErr = os.MkdirTemp("", "listwatchtest-")
		if e.kubeconfigErr != nil {
			return
		}
		path := filepath.Join(e.kubeconfigDir, "kubeconfig")
		if e.kubeconfigErr = os.WriteFile(path, []byte(kubeconfigFor(e.URL())), 0o600); e.kubeconfigErr == nil {
			e.kubeconfig = path
		}
	})
	return e.kubeconfig, e.kubeconfigErr
}

// kubeconfigFor is a kubeconfig with one cluster at url and a user without credentials.
func kubeconfigFor(url string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: listwatch
  cluster:
    server: %q
users:
- name: listwatch
  user: {}
contexts:
- name: listwatch
  context:
    cluster: listwatch
    user: listwatch
current-context: listwatch
`, url)
}

// Chain is the Kubernetes API's assembly (its store, etcd3 storages, watch caches and HTTP
// server), for what the methods of Env do not reach; nil with EtcdOnly.
func (e *Env) Chain() *chain.Chain { return e.chain }

// Store is the store behind both APIs.
func (e *Env) Store() *store.Store { return e.store }
