package kubeapiserver

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	noopoteltrace "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	extensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apiextensions-apiserver/pkg/cmd/server/options"
	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apiserver/pkg/util/openapi"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Defaults of Options.
const (
	// DefaultEtcdPrefix is kube-apiserver's --etcd-prefix: custom resources are kept at
	// /registry/<group>/<resource>/<namespace>/<name>, CRDs at
	// /registry/apiextensions.k8s.io/customresourcedefinitions/<name>.
	DefaultEtcdPrefix = "/registry"
	// DefaultTimeout bounds Start.
	DefaultTimeout = 30 * time.Second
)

// Sentinel errors; every error Start returns wraps one of them.
var (
	// ErrInvalidOptions: the Options are unusable (no etcd endpoint, a CRD without a name, ...).
	ErrInvalidOptions = errors.New("kubeapiserver: invalid options")
	// ErrEtcdUnavailable: no etcd endpoint answered a read within the timeout.
	ErrEtcdUnavailable = errors.New("kubeapiserver: etcd unavailable")
	// ErrNotReady: the server did not become ready, or a CRD was refused or never served, within
	// the timeout.
	ErrNotReady = errors.New("kubeapiserver: server not ready")
	// ErrServer: the upstream server could not be built or failed while running.
	ErrServer = errors.New("kubeapiserver: server failed")
)

// Options configure a server. Only EtcdEndpoints is required.
type Options struct {
	// EtcdEndpoints are the client URLs of the etcd to store in (--etcd-servers), such as
	// "http://127.0.0.1:2379": an embedded etcd's or listwatch's etcd API (ServeEtcdAPI).
	EtcdEndpoints []string
	// EtcdPrefix is the key prefix of every object (--etcd-prefix); default DefaultEtcdPrefix.
	// Several servers may share one etcd under different prefixes.
	EtcdPrefix string
	// CRDs are created, in order, once the server is up; Start returns after each is Established and
	// a list of its resource (in all namespaces) answered 200.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// DisableWatchCache serves every resource from etcd directly, as --watch-cache=false does;
	// by default lists and watches are served by the watch cache (the Cacher).
	DisableWatchCache bool
	// Token, if set, is a bearer token every request must carry (else 401); RESTConfig carries it.
	// Unset, every request is served as user system:unsecured in group system:masters.
	Token string
	// DisableOpenAPI leaves out /openapi/v2 and /openapi/v3 (and the controllers that publish the
	// CRDs' schemas there).
	DisableOpenAPI bool
	// Timeout bounds Start: reaching etcd, the server's readiness and the CRDs being served;
	// default DefaultTimeout.
	Timeout time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if len(o.EtcdEndpoints) == 0 {
		return o, fmt.Errorf("%w: no etcd endpoint", ErrInvalidOptions)
	}
	for _, e := range o.EtcdEndpoints {
		if e == "" {
			return o, fmt.Errorf("%w: empty etcd endpoint", ErrInvalidOptions)
		}
	}
	if o.EtcdPrefix == "" {
		o.EtcdPrefix = DefaultEtcdPrefix
	}
	if !strings.HasPrefix(o.EtcdPrefix, "/") {
		return o, fmt.Errorf("%w: etcd prefix %q does not start with /", ErrInvalidOptions, o.EtcdPrefix)
	}
	for i, crd := range o.CRDs {
		if crd == nil || crd.Name == "" {
			return o, fmt.Errorf("%w: CRD %d has no name", ErrInvalidOptions, i)
		}
		if len(crd.Spec.Versions) == 0 {
			return o, fmt.Errorf("%w: CRD %q has no version", ErrInvalidOptions, crd.Name)
		}
	}
	if o.Timeout < 0 {
		return o, fmt.Errorf("%w: negative timeout %v", ErrInvalidOptions, o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	return o, nil
}

// Server is a running apiextensions-apiserver. Its methods are safe for concurrent use.
type Server struct {
	url    string
	config *rest.Config

	cancel   context.CancelFunc
	runDone  chan struct{} // closed when RunWithContext returned
	runErr   error         // set before runDone is closed
	idle     *idleListener
	http     *http.Server
	served   chan error    // the plain server's Serve result
	httpDone chan struct{} // closed when the plain server's shutdown finished
	stopOnce sync.Once
	stopErr  error
	// hooksDone is set once /readyz answered 200: every post-start hook has returned.
	hooksDone bool

	discovery   interface{ AddGroup(metav1.APIGroup) }
	discoveryMu sync.Mutex
	groups      map[string]*metav1.APIGroup // the CRD groups added to discovery
}

// URL is the server's base URL, http://127.0.0.1:<port>.
func (s *Server) URL() string { return s.url }

// RESTConfig returns a new client configuration for the server: its URL, the token if Options.Token
// is set, and no client-side rate limit.
func (s *Server) RESTConfig() *rest.Config { return rest.CopyConfig(s.config) }

// Start builds the server over the etcd at opts.EtcdEndpoints, serves it on a fresh 127.0.0.1 port,
// creates opts.CRDs and returns once it is ready and each CRD's resource lists. Stop stops it. On
// error nothing it started is left running, but for one case no valid Options reach: if upstream
// refuses to build the server, the etcd health checks it had already started wait for a drain
// signal that only a run server gives.
func Start(ctx context.Context, opts Options) (*Server, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	// The upstream storage would wait 20 s for an etcd that is not there and then fail with a
	// message that names no endpoint; one read first gives a clear error within the timeout.
	if err := probeEtcd(ctx, o.EtcdEndpoints); err != nil {
		return nil, err
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%w: listen: %v", ErrServer, err)
	}
	s := &Server{url: "http://" + lis.Addr().String()}
	s.config = &rest.Config{Host: s.url, BearerToken: o.Token, QPS: -1}

	prepared, err := build(o, lis.Addr(), s)
	if err != nil {
		lis.Close()
		return nil, err
	}
	s.run(prepared, lis)

	if err := s.waitReady(ctx, o); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

// build assembles the apiextensions-apiserver as its options package (pkg/cmd/server/options
// CustomResourceDefinitionsServerOptions.Config) and kube-apiserver's extensions server do, less
// what needs a kube-apiserver next to it (delegated authentication and authorization, admission
// plugins that read Namespaces or webhooks, priority and fairness, the core informers) and less
// TLS; it sets s.idle.
func build(o Options, addr net.Addr, s *Server) (*genericPrepared, error) {
	fail := func(what string, err error) (*genericPrepared, error) {
		return nil, fmt.Errorf("%w: %s: %v", ErrServer, what, err)
	}
	rc := genericapiserver.NewRecommendedConfig(extensionsapiserver.Codecs)
	rc.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	rc.FeatureGate = utilfeature.DefaultFeatureGate
	// healthz.LogHealthz starts a process-wide goroutine that never stops at its first check;
	// ping is the rest of the default set.
	rc.HealthzChecks = []healthz.HealthChecker{healthz.PingHealthz}
	rc.LivezChecks = []healthz.HealthChecker{healthz.PingHealthz}
	rc.ReadyzChecks = []healthz.HealthChecker{healthz.PingHealthz}
	rc.ExternalAddress = addr.String()
	s.idle = newIdleListener(addr)
	rc.SecureServing = &genericapiserver.SecureServingInfo{Listener: s.idle}

	// The loopback configuration is the one the server's own controllers (CRD naming, establishing,
	// finalizing) use; as upstream's SecureServingInfo.NewLoopbackClientConfig, a random token that
	// Config.Complete (AuthorizeClientBearerToken) maps to system:apiserver in system:masters.
	loopbackToken, err := randomToken()
	if err != nil {
		return fail("loopback token", err)
	}
	rc.LoopbackClientConfig = &rest.Config{
		Host:          s.url,
		BearerToken:   loopbackToken,
		QPS:           50,
		Burst:         100,
		ContentConfig: rest.ContentConfig{ContentType: runtime.ContentTypeProtobuf},
	}
	rc.Authentication.Authenticator = userAuthenticator(o.Token)
	rc.Authorization.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()
	rc.AdmissionControl = admission.NewChainHandler()
	rc.MergedResourceConfig = extensionsapiserver.DefaultAPIResourceConfigSource()

	codec := extensionsapiserver.Codecs.LegacyCodec(apiextensionsv1.SchemeGroupVersion)
	etcd := genericoptions.NewEtcdOptions(storagebackend.NewDefaultConfig(o.EtcdPrefix, codec))
	etcd.StorageConfig.Transport.ServerList = o.EtcdEndpoints
	etcd.EnableWatchCache = !o.DisableWatchCache
	if err := etcd.ApplyTo(&rc.Config); err != nil {
		return fail("etcd options", err)
	}

	// The v3 configuration is needed even unserved: the server builds the type converter of
	// managedFields (server-side apply) from it. The v2 one is what the CRD OpenAPI controllers,
	// v2 and v3 alike, wait for (apiextensions apiserver.go New).
	defs := openapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(generatedopenapi.GetOpenAPIDefinitions)
	rc.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(defs, openapinamer.NewDefinitionNamer(extensionsapiserver.Scheme, scheme.Scheme))
	if o.DisableOpenAPI {
		rc.SkipOpenAPIInstallation = true
	} else {
		rc.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(defs, openapinamer.NewDefinitionNamer(extensionsapiserver.Scheme))
	}

	cfg := &extensionsapiserver.Config{
		GenericConfig: rc,
		ExtraConfig: extensionsapiserver.ExtraConfig{
			CRDRESTOptionsGetter: options.NewCRDRESTOptionsGetter(*etcd, rc.ResourceTransformers, rc.StorageObjectCountTracker),
			// Conversion webhooks are the only users; with no Services to resolve, a webhook's
			// service resolves to its cluster DNS name, as outside a cluster.
			ServiceResolver:     webhook.NewDefaultServiceResolver(),
			AuthResolverWrapper: webhook.NewDefaultAuthenticationInfoResolverWrapper(nil, nil, rc.LoopbackClientConfig, noopoteltrace.NewTracerProvider()),
		},
	}
	completed := cfg.Complete()
	// The apiextensions server turns root discovery off because kube-apiserver's aggregator serves
	// /apis; alone, it must serve /apis itself for clients to discover the CRDs.
	completed.GenericConfig.EnableDiscovery = true
	server, err := completed.New(genericapiserver.NewEmptyDelegate())
	if err != nil {
		return fail("new", err)
	}
	prepared := server.GenericAPIServer.PrepareRun()
	return &genericPrepared{run: prepared.RunWithContext, handler: server.GenericAPIServer.Handler, discovery: server.GenericAPIServer.DiscoveryGroupManager}, nil
}

// genericPrepared is what run needs of upstream's prepared server.
type genericPrepared struct {
	run       func(context.Context) error
	handler   http.Handler
	discovery interface{ AddGroup(metav1.APIGroup) }
}

// userAuthenticator authenticates the requests of everyone but the server's own controllers.
func userAuthenticator(token string) authenticator.Request {
	if token == "" {
		return genericapiserver.InsecureSuperuser{}
	}
	return authenticatorfactory.NewFromTokens(map[string]*user.DefaultInfo{
		token: {Name: "listwatch-test", Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}},
	}, nil)
}

// run starts the upstream server's run loop and the plain HTTP server in front of its handler.
func (s *Server) run(p *genericPrepared, lis net.Listener) {
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.runDone = make(chan struct{})
	go func() {
		defer close(s.runDone)
		s.runErr = p.run(runCtx)
	}()

	// Settings of upstream's secure server (pkg/server/secure_serving.go Serve) that apply to
	// plain HTTP/1.1.
	s.http = &http.Server{
		Handler:           p.handler,
		MaxHeaderBytes:    1 << 20,
		IdleTimeout:       90 * time.Second,
		ReadHeaderTimeout: 32 * time.Second,
	}
	s.served = make(chan error, 1)
	go func() { s.served <- s.http.Serve(lis) }()

	// Stop accepting when upstream's server does, then wait for the requests in flight; watches
	// end when RunWithContext destroys the storage behind them.
	s.httpDone = make(chan struct{})
	go func() {
		defer close(s.httpDone)
		<-s.idle.closed
		_ = s.http.Shutdown(context.Background())
	}()
	s.discovery = p.discovery
}

// Stop shuts the server down as kube-apiserver does on SIGTERM (pre-shutdown hooks, stop accepting,
// drain, destroy the storage), closes what is left of client connections, and returns once every
// goroutine the server started has returned; it is idempotent.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		if !s.hooksDone {
			if err := s.waitCRDInformerSynced(); err != nil {
				s.stopErr = err
				return
			}
		}
		s.cancel()
		<-s.runDone
		// RunWithContext closes the idle listener on its way; if it failed before, nothing did.
		s.idle.Close()
		// A connection whose reader stopped reading can hold a handler in a write forever.
		select {
		case <-s.httpDone:
		case <-time.After(shutdownGrace):
			s.http.Close()
			<-s.httpDone
		}
		if err := <-s.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.stopErr = errors.Join(s.stopErr, fmt.Errorf("%w: serving: %v", ErrServer, err))
		}
		if s.runErr != nil {
			s.stopErr = errors.Join(s.stopErr, fmt.Errorf("%w: run: %v", ErrServer, s.runErr))
		}
	})
	return s.stopErr
}

// shutdownGrace bounds how long Stop waits for client connections after the storage is gone.
const shutdownGrace = 5 * time.Second

// pollInterval is how often Start re-checks readiness.
const pollInterval = 5 * time.Millisecond

// waitReady creates the CRDs, waits for each to be Established, listed and discovered, then for
// /readyz.
func (s *Server) waitReady(ctx context.Context, o Options) error {
	crds, err := clientset.NewForConfig(s.RESTConfig())
	if err != nil {
		return fmt.Errorf("%w: client: %v", ErrServer, err)
	}
	r := &readiness{s: s, ctx: ctx, crds: crds, rc: crds.Discovery().RESTClient()}
	// The CRDs are created while the post-start hooks run: the apiextensions group is served from
	// the moment the handler is.
	for _, crd := range o.CRDs {
		if err := r.poll("create CRD "+crd.Name, r.create(crd)); err != nil {
			return err
		}
	}
	for _, crd := range o.CRDs {
		if err := r.serving(crd); err != nil {
			return err
		}
	}
	// Last, as it takes longest: the crd-informer-synced hook, until which a 404 is a 503, checks
	// its informer every 100 ms.
	err = r.poll("readyz", r.readyz)
	if err == nil {
		s.hooksDone = true
	}
	return err
}

// readiness is waitReady's client of the server, and what was still missing at the last poll.
type readiness struct {
	s    *Server
	ctx  context.Context
	crds *clientset.Clientset
	rc   rest.Interface
	// lastErr says what was still missing when the time ran out.
	lastErr error
}

// poll checks cond every pollInterval until it holds or fails, the context ends or the server
// stops.
func (r *readiness) poll(what string, cond func() (bool, error)) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		done, err := cond()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-r.ctx.Done():
			return fmt.Errorf("%w: %s: %v (last: %v)", ErrNotReady, what, r.ctx.Err(), r.lastErr)
		case <-r.s.runDone:
			return fmt.Errorf("%w: %s: the server stopped: %v", ErrServer, what, r.s.runErr)
		case <-ticker.C:
		}
	}
}

// create is the condition that creates the CRD: refused as invalid or existing is an error.
func (r *readiness) create(crd *apiextensionsv1.CustomResourceDefinition) func() (bool, error) {
	return func() (bool, error) {
		_, err := r.crds.ApiextensionsV1().CustomResourceDefinitions().Create(r.ctx, crd, metav1.CreateOptions{})
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsInvalid(err) || apierrors.IsAlreadyExists(err) || apierrors.IsBadRequest(err):
			return false, fmt.Errorf("%w: CRD %q refused: %v", ErrInvalidOptions, crd.Name, err)
		}
		r.lastErr = err
		return false, nil
	}
}

// serving waits until the CRD is Established, its resource lists and discovery names it.
func (r *readiness) serving(crd *apiextensionsv1.CustomResourceDefinition) error {
	if err := r.poll("CRD "+crd.Name+" established", r.established(crd)); err != nil {
		return err
	}
	r.s.addDiscoveryGroup(crd)
	gv := schema.GroupVersion{Group: crd.Spec.Group, Version: servedVersion(crd)}
	err := r.poll("first list of "+crd.Name, func() (bool, error) {
		// The handler serves a CRD once its own informer saw it Established, a moment after
		// the client did: until then the path is a 404. Then, until the resource's watch cache
		// has its first list from etcd, a list is a 429 with Retry-After 1 s (Cacher.GetList),
		// which a client-go client would sleep through: this one does not retry.
		path := "/apis/" + gv.String() + "/" + crd.Spec.Names.Plural
		if err := r.rc.Get().AbsPath(path).MaxRetries(0).Do(r.ctx).Error(); err != nil {
			r.lastErr = err
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	// client-go and kubectl map kinds to resources from the aggregated discovery document,
	// which the discovery controller fills on its own schedule.
	return r.poll("discovery of "+crd.Name, func() (bool, error) {
		ok, err := discovered(r.ctx, r.rc, gv, crd.Spec.Names.Plural)
		r.lastErr = err
		return ok, nil
	})
}

// established is the condition that the CRD is Established; names not accepted is an error.
func (r *readiness) established(crd *apiextensionsv1.CustomResourceDefinition) func() (bool, error) {
	return func() (bool, error) {
		got, err := r.crds.ApiextensionsV1().CustomResourceDefinitions().Get(r.ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			r.lastErr = err
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse {
				return false, fmt.Errorf("%w: CRD %q names not accepted: %s", ErrInvalidOptions, crd.Name, c.Message)
			}
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		r.lastErr = fmt.Errorf("conditions %v", got.Status.Conditions)
		return false, nil
	}
}

// readyz is the condition that /readyz answers 200.
func (r *readiness) readyz() (bool, error) {
	status := 0
	res := r.rc.Get().AbsPath("/readyz").Do(r.ctx).StatusCode(&status)
	if status == http.StatusOK {
		return true, nil
	}
	r.lastErr = fmt.Errorf("/readyz: %d: %v", status, res.Error())
	return false, nil
}

// crdInformerSyncedHook is the one post-start hook of the server that fails when the server stops
// before it is done, and upstream's runPostStartHook (pkg/server/hooks.go) exits the process with
// klog.Fatalf when a hook fails.
const crdInformerSyncedHook = "crd-informer-synced"

// waitCRDInformerSynced waits, for at most DefaultTimeout, until the crd-informer-synced hook has
// returned, so that stopping the server cannot end the process.
func (s *Server) waitCRDInformerSynced() error {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	cli, err := rest.RESTClientFor(s.hookConfig())
	if err != nil {
		return fmt.Errorf("%w: client: %v", ErrServer, err)
	}
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		status := 0
		cli.Get().AbsPath("/readyz/poststarthook/" + crdInformerSyncedHook).Do(ctx).StatusCode(&status)
		if status == http.StatusOK {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: not stopped: the post-start hook %s did not finish in %v, and stopping the server before it does exits the process", ErrServer, crdInformerSyncedHook, DefaultTimeout)
		case <-s.runDone:
			return nil
		case <-ticker.C:
		}
	}
}

// hookConfig is a client configuration for the health endpoints, which need no API group.
func (s *Server) hookConfig() *rest.Config {
	cfg := s.RESTConfig()
	cfg.GroupVersion = &schema.GroupVersion{}
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return cfg
}

// aggregatedDiscovery is the Accept header of client-go's aggregated discovery request.
const aggregatedDiscovery = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// discovered says whether the aggregated /apis document lists resource in gv.
func discovered(ctx context.Context, rc rest.Interface, gv schema.GroupVersion, resource string) (bool, error) {
	body, err := rc.Get().AbsPath("/apis").SetHeader("Accept", aggregatedDiscovery).Do(ctx).Raw()
	if err != nil {
		return false, err
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(body, &list); err != nil {
		return false, fmt.Errorf("aggregated discovery: %v", err)
	}
	for _, g := range list.Items {
		if g.Name != gv.Group {
			continue
		}
		for _, v := range g.Versions {
			if v.Version != gv.Version {
				continue
			}
			for _, r := range v.Resources {
				if r.Resource == resource {
					return true, nil
				}
			}
		}
	}
	return false, fmt.Errorf("aggregated discovery does not list %s %s yet", gv, resource)
}

// addDiscoveryGroup lists the CRD's group in the unaggregated /apis. The aggregated form, which
// client-go and kubectl ask for first, lists every CRD from the apiextensions discovery controller;
// the unaggregated root list is the aggregator's in kube-apiserver, so alone the server would list
// only apiextensions.k8s.io there. Groups of CRDs created later through the API are not added.
func (s *Server) addDiscoveryGroup(crd *apiextensionsv1.CustomResourceDefinition) {
	s.discoveryMu.Lock()
	defer s.discoveryMu.Unlock()
	g := s.groups[crd.Spec.Group]
	if g == nil {
		if s.groups == nil {
			s.groups = map[string]*metav1.APIGroup{}
		}
		g = &metav1.APIGroup{Name: crd.Spec.Group}
		s.groups[crd.Spec.Group] = g
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served || hasVersion(g.Versions, v.Name) {
			continue
		}
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: crd.Spec.Group + "/" + v.Name, Version: v.Name})
	}
	g.PreferredVersion = metav1.GroupVersionForDiscovery{GroupVersion: crd.Spec.Group + "/" + servedVersion(crd), Version: servedVersion(crd)}
	s.discovery.AddGroup(*g)
}

func hasVersion(vs []metav1.GroupVersionForDiscovery, v string) bool {
	for _, x := range vs {
		if x.Version == v {
			return true
		}
	}
	return false
}

// servedVersion is the CRD's storage version if served, else its first served one.
func servedVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Served && v.Storage {
			return v.Name
		}
	}
	for _, v := range crd.Spec.Versions {
		if v.Served {
			return v.Name
		}
	}
	return crd.Spec.Versions[0].Name
}

// probeEtcd reads one key from the endpoints, so that an etcd that is not there fails Start with
// an error naming it.
func probeEtcd(ctx context.Context, endpoints []string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop(), DialTimeout: time.Second})
	if err != nil {
		return fmt.Errorf("%w: %v: %v", ErrEtcdUnavailable, endpoints, err)
	}
	_, err = cli.Get(ctx, "/", clientv3.WithCountOnly(), clientv3.WithSerializable())
	cerr := cli.Close()
	if err != nil {
		return fmt.Errorf("%w: %v: %v", ErrEtcdUnavailable, endpoints, err)
	}
	if cerr != nil && !errors.Is(cerr, context.Canceled) {
		return fmt.Errorf("%w: %v: closing the probe client: %v", ErrEtcdUnavailable, endpoints, cerr)
	}
	return nil
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
