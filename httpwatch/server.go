package httpwatch

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/storage"
)

// Defaults of Config, the apiserver's.
const (
	// DefaultMinRequestTimeout is --min-request-timeout: a watch without timeoutSeconds lasts between
	// one and two times this.
	DefaultMinRequestTimeout = 1800 * time.Second
	// DefaultEventTTL is kube-apiserver's --event-ttl default.
	DefaultEventTTL = time.Hour
	// DefaultMaxRequestBodyBytes is the apiserver's --max-resource-write-bytes default (3 MiB).
	DefaultMaxRequestBodyBytes = 3 * 1024 * 1024
	// requestTimeoutUpperBound bounds every write, as handlers.requestTimeoutUpperBound.
	requestTimeoutUpperBound = 34 * time.Second
)

// Features mirrors the k8s.io/apiserver v0.37 feature gates the handlers read. The zero value is the
// v0.37 default; each field turns a default-on gate off.
type Features struct {
	// DisableWatchList turns WatchList off: no sendInitialEvents defaulting, and sendInitialEvents is
	// refused on watches.
	DisableWatchList bool
	// DisableWatchListCompression never gzips a watch-list stream.
	DisableWatchListCompression bool
	// DisableAPIResponseCompression never gzips a large response.
	DisableAPIResponseCompression bool
}

// ServedResource is a resource and the storage its requests go to.
type ServedResource struct {
	Resource Resource
	Storage  storage.Interface
}

// Config configures a Server.
type Config struct {
	// Resources are the resources to serve; at least one, each group/version/resource once. A group
	// may have several versions (a CRD's from CRDResources).
	Resources []ServedResource
	// MinRequestTimeout is the apiserver's --min-request-timeout. Default DefaultMinRequestTimeout.
	MinRequestTimeout time.Duration
	// MaxRequestBodyBytes bounds request bodies (413 beyond). Default DefaultMaxRequestBodyBytes.
	MaxRequestBodyBytes int64
	// Clock runs watch timeouts and stamps creationTimestamp and deletionTimestamp. Default the real clock.
	Clock clock.WithTicker
	// Jitter returns a number in [0, 1) that spreads default watch timeouts over
	// [MinRequestTimeout, 2·MinRequestTimeout). Default math/rand/v2.Float64.
	Jitter func() float64
	// Logger receives what the apiserver logs with klog. Default slog.Default().
	Logger *slog.Logger
	// Features are the feature gates.
	Features Features
	// EventTTL is the apiserver's --event-ttl: an event (core/v1 or events.k8s.io/v1) is deleted this
	// long after its last create or update, by a lease of the storage. 0 keeps events until they are
	// deleted; kube-apiserver's default is DefaultEventTTL.
	EventTTL time.Duration
	// RequireNamespaces refuses, as the NamespaceLifecycle admission plugin, a create in a namespace
	// that does not exist: 404 NotFound `namespaces "x" not found`. It applies while the core
	// namespaces resource is served. Off, objects may name any namespace.
	RequireNamespaces bool
	// Registerer, if set, receives the metrics of the watches served: apiserver_watch_events_total
	// and apiserver_watch_events_sizes, by group, version and resource.
	Registerer prometheus.Registerer
}

// Server serves the configured resources with the apiserver's REST paths. It is an http.Handler.
type Server struct {
	resources         map[groupVersion]map[string]*resourceHandler
	groups            []string // non-core groups, in the order configured
	minRequestTimeout time.Duration
	maxBodyBytes      int64
	clock             clock.WithTicker
	jitter            func() float64
	logger            *slog.Logger
	features          Features
	requireNamespaces bool
	// eventTTL is Config.EventTTL in seconds, rounded up.
	eventTTL uint64

	openapi *openAPI

	shutdownOnce sync.Once
	shuttingDown chan struct{}
	inflight     inflight
}

type groupVersion struct{ group, version string }

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if len(cfg.Resources) == 0 {
		return nil, fmt.Errorf("%w: no resources", ErrInvalidConfig)
	}
	if cfg.MinRequestTimeout < 0 || cfg.MaxRequestBodyBytes < 0 || cfg.EventTTL < 0 {
		return nil, fmt.Errorf("%w: negative MinRequestTimeout, MaxRequestBodyBytes or EventTTL", ErrInvalidConfig)
	}
	s := &Server{
		resources:         map[groupVersion]map[string]*resourceHandler{},
		minRequestTimeout: cfg.MinRequestTimeout,
		maxBodyBytes:      cfg.MaxRequestBodyBytes,
		clock:             cfg.Clock,
		jitter:            cfg.Jitter,
		logger:            cfg.Logger,
		features:          cfg.Features,
		requireNamespaces: cfg.RequireNamespaces,
		eventTTL:          uint64((cfg.EventTTL + time.Second - 1) / time.Second),
		shuttingDown:      make(chan struct{}),
	}
	if s.minRequestTimeout == 0 {
		s.minRequestTimeout = DefaultMinRequestTimeout
	}
	if s.maxBodyBytes == 0 {
		s.maxBodyBytes = DefaultMaxRequestBodyBytes
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.jitter == nil {
		s.jitter = rand.Float64
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	var metrics *watchMetrics
	if cfg.Registerer != nil {
		var err error
		if metrics, err = newWatchMetrics(cfg.Registerer); err != nil {
			return nil, err
		}
	}
	for _, sr := range cfg.Resources {
		r, err := sr.Resource.withDefaults()
		if err != nil {
			return nil, err
		}
		if sr.Storage == nil {
			return nil, fmt.Errorf("%w: resource %q has no storage", ErrInvalidConfig, r.Resource)
		}
		if r.Group != "" && !slices.Contains(s.groups, r.Group) {
			s.groups = append(s.groups, r.Group)
		}
		gv := groupVersion{r.Group, r.Version}
		if s.resources[gv] == nil {
			s.resources[gv] = map[string]*resourceHandler{}
		}
		if _, dup := s.resources[gv][r.Resource]; dup {
			return nil, fmt.Errorf("%w: resource %q of %q configured twice", ErrInvalidConfig, r.Resource, r.GroupVersion())
		}
		ep := customEndpoint
		if r.typed() {
			ep = typedEndpoint
		}
		s.resources[gv][r.Resource] = &resourceHandler{server: s, res: r, storage: dryRunnableStorage{sr.Storage}, ep: ep, watchEvents: metrics.forResource(r)}
	}
	s.openapi = newOpenAPI(s)
	return s, nil
}

// Shutdown tells every open watch to end now and every later one to end right after its headers, as
// the apiserver's ShuttingDown signal does; other requests are still served. It returns at once and
// may be called more than once. Call it before http.Server.Shutdown, which otherwise waits for
// watches that never end.
func (s *Server) Shutdown() {
	s.shutdownOnce.Do(func() { close(s.shuttingDown) })
}

// Wait blocks until no request is being handled, websocket watches included (http.Server.Shutdown
// does not wait for those: their connections are hijacked), or until ctx ends.
func (s *Server) Wait(ctx context.Context) error { return s.inflight.wait(ctx) }

// ServeHTTP routes a request as the apiserver does: discovery under /api and /apis, resources under
// /api/v1 and /apis/<group>/<version>, a few health paths, and a plain 404 for everything else.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	s.inflight.add()
	defer s.inflight.done()
	// Mirrors filters.WithCacheControl: API responses are never cached.
	if _, ok := w.Header()["Cache-Control"]; !ok {
		w.Header().Set("Cache-Control", "no-cache, private")
	}

	parts := splitPath(req.URL.Path)
	switch {
	case len(parts) == 1 && (parts[0] == "healthz" || parts[0] == "livez" || parts[0] == "readyz"):
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, "ok")
		return
	case len(parts) == 1 && parts[0] == "version":
		s.serveVersion(w, req)
		return
	case len(parts) >= 2 && parts[0] == "openapi":
		s.openapi.serve(w, req, parts)
		return
	case len(parts) == 0 || (parts[0] != "api" && parts[0] != "apis"):
		http.NotFound(w, req)
		return
	}

	var gv groupVersion
	var rest []string
	if parts[0] == "api" {
		switch len(parts) {
		case 1:
			s.serveRootDiscovery(w, req, s.apiVersions(req), true)
			return
		}
		gv, rest = groupVersion{"", parts[1]}, parts[2:]
	} else {
		switch len(parts) {
		case 1:
			s.serveRootDiscovery(w, req, s.apiGroupList(), false)
			return
		case 2:
			if g, ok := s.apiGroup(parts[1]); ok {
				s.serveDiscovery(w, req, g)
				return
			}
			http.NotFound(w, req)
			return
		}
		gv, rest = groupVersion{parts[1], parts[2]}, parts[3:]
	}
	handlers, ok := s.resources[gv]
	if !ok {
		http.NotFound(w, req)
		return
	}
	if len(rest) == 0 {
		s.serveDiscovery(w, req, s.apiResourceList(gv))
		return
	}
	s.serveResource(w, req, handlers, rest)
}

// verb is what a resource request asks for.
type verb int

const (
	verbList  verb = iota // list or watch, as the watch parameter says
	verbWatch             // the deprecated /watch/ path: always a watch
	verbGet
	verbCreate
	verbUpdate
	verbPatch
	verbDelete
	verbDeleteCollection
)

// namespaceSubresources are the subresources of a namespace, which a path below
// /namespaces/<name>/ names instead of a resource.
//
// Mirrors request.namespaceSubresources.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// serveResource routes the path below a group version, as the routes pkg/endpoints/installer.go
// registers: an unknown path is a 404 Status, a known path with another method a 405 Status.
func (s *Server) serveResource(w http.ResponseWriter, req *http.Request, handlers map[string]*resourceHandler, parts []string) {
	// Mirrors request.RequestInfoFactory.NewRequestInfo for the path shapes of the routes.
	watchPrefix := false
	if parts[0] == "watch" {
		watchPrefix = true
		parts = parts[1:]
	}
	var r request
	inNamespace := false
	if len(parts) >= 3 && parts[0] == "namespaces" && !namespaceSubresources[parts[2]] {
		r.namespace, inNamespace = parts[1], true
		parts = parts[2:]
	}
	if len(parts) == 0 {
		s.writeError(w, req, notFoundRoute())
		return
	}
	h, ok := handlers[parts[0]]
	if !ok || (inNamespace && !h.res.Namespaced) || (len(parts) > 3 && h.res.BuiltIn) {
		s.writeError(w, req, notFoundRoute())
		return
	}
	if !h.res.BuiltIn {
		s.serveCustom(w, req, h, r.namespace, inNamespace, watchPrefix, parts)
		return
	}
	named := len(parts) >= 2
	if named && !inNamespace && h.res.Namespaced {
		// Namespaced objects have no cluster-wide item path.
		s.writeError(w, req, notFoundRoute())
		return
	}
	if named {
		r.name = parts[1]
	}
	if r.name == "" && named {
		s.writeError(w, req, notFoundRoute())
		return
	}
	if len(parts) == 3 {
		r.subresource = parts[2]
		if !h.hasSubresource(r.subresource) || watchPrefix {
			s.writeError(w, req, notFoundRoute())
			return
		}
	}
	// The cluster-wide collection of a namespaced resource only lists and watches.
	allNamespaces := h.res.Namespaced && !inNamespace
	switch {
	case watchPrefix:
		if req.Method != http.MethodGet {
			s.writeError(w, req, methodNotAllowed())
			return
		}
		r.verb = verbWatch
	case !named && req.Method == http.MethodGet:
		r.verb = verbList
	case !named && req.Method == http.MethodPost && !allNamespaces:
		r.verb = verbCreate
	case !named && req.Method == http.MethodDelete && !allNamespaces:
		r.verb = verbDeleteCollection
	case named && r.subresource == "finalize":
		if req.Method != http.MethodPut {
			s.writeError(w, req, methodNotAllowed())
			return
		}
		r.verb = verbUpdate
	case named && req.Method == http.MethodGet:
		r.verb = verbGet
	case named && req.Method == http.MethodPut:
		r.verb = verbUpdate
	case named && req.Method == http.MethodPatch:
		if !restfulConsumes(req.Header.Get("Content-Type"), patchRouteConsumes) {
			s.writeError(w, req, unsupportedRouteMediaType())
			return
		}
		r.verb = verbPatch
	case named && r.subresource == "" && req.Method == http.MethodDelete:
		r.verb = verbDelete
	default:
		s.writeError(w, req, methodNotAllowed())
		return
	}
	if produces := routeProduces(r.verb); !restfulAccepts(req.Header.Get("Accept"), produces) {
		s.writeError(w, req, notAcceptableRoute(produces))
		return
	}
	h.serve(w, req, r)
}

// serveCustom routes a custom resource's request by the verb the request's method makes of it, as
// apiextensions-apiserver does: POST creates whatever the path (a name in it is ignored), GET and
// HEAD get or list, DELETE on a collection deletes it; another method is a 405 naming the verb, an
// unknown subresource a 404 naming the object.
//
// Mirrors crdHandler.ServeHTTP, serveResource, serveStatus and serveScale (customresource_handler.go) over
// request.RequestInfoFactory.NewRequestInfo's verbs.
func (s *Server) serveCustom(w http.ResponseWriter, req *http.Request, h *resourceHandler, namespace string, inNamespace, watchPrefix bool, parts []string) {
	r := request{namespace: namespace}
	if len(parts) >= 2 {
		r.name = parts[1]
	}
	if len(parts) >= 3 {
		r.subresource = parts[2]
	}
	verb := requestVerb(req.Method, r.name, watchPrefix)
	if h.res.Namespaced && !inNamespace && verb != "list" && verb != "watch" {
		s.writeError(w, req, notFoundRoute())
		return
	}
	if h.res.DeprecationWarning != "" {
		addWarning(w, h.res.DeprecationWarning)
	}
	gr := h.gr()
	var ok bool
	switch {
	case r.subresource == "status" && h.res.StatusSubresource, r.subresource == "scale" && h.res.Scale != nil:
		r.verb, ok = statusVerbOf[verb]
	case r.subresource == "":
		r.verb, ok = customVerbOf[verb]
	default:
		h.writeError(w, req, apierrors.NewNotFound(gr, r.name))
		return
	}
	if !ok {
		h.writeError(w, req, apierrors.NewMethodNotSupported(gr, verb))
		return
	}
	h.serve(w, req, r)
}

// customVerbOf and statusVerbOf are the verbs a custom resource and its status and scale serve.
var (
	customVerbOf = map[string]verb{"get": verbGet, "list": verbList, "watch": verbWatch, "create": verbCreate,
		"update": verbUpdate, "patch": verbPatch, "delete": verbDelete, "deletecollection": verbDeleteCollection}
	statusVerbOf = map[string]verb{"get": verbGet, "update": verbUpdate, "patch": verbPatch}
)

// requestVerb is the verb of a request's method on a path with or without a name ("" for a
// method without one); a list's watch parameter is the list handler's to read.
//
// Mirrors the verbs of request.RequestInfoFactory.NewRequestInfo.
func requestVerb(method, name string, watchPrefix bool) string {
	verb := map[string]string{"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
	switch {
	case watchPrefix && verb == "get":
		return "watch"
	case watchPrefix:
		return verb
	case verb == "get" && name == "":
		return "list"
	case verb == "delete" && name == "":
		return "deletecollection"
	}
	return verb
}

// notFoundRoute and methodNotAllowed are what go-restful's ServiceError becomes in the apiserver's
// serviceErrorHandler.
func notFoundRoute() error {
	return apierrors.NewGenericServerResponse(http.StatusNotFound, "", schema.GroupResource{}, "", "", 0, false)
}

func methodNotAllowed() error {
	return apierrors.NewGenericServerResponse(http.StatusMethodNotAllowed, "", schema.GroupResource{}, "", "", 0, false)
}

// patchRouteConsumes are the Content-Types the PATCH route of a built-in resource consumes: the
// patch types (CBOR apply only behind a feature gate that is off).
var patchRouteConsumes = []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.StrategicMergePatchType),
	string(types.ApplyYAMLPatchType)}

// restfulConsumes mirrors go-restful's Route.matchesContentType for a route that consumes
// consumes and a method that needs a Content-Type: none is application/octet-stream; each of
// the comma-separated media types is taken without its parameters and matched exactly.
func restfulConsumes(contentType string, consumes []string) bool {
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	for part := range strings.SplitSeq(contentType, ",") {
		mediaType, _, _ := strings.Cut(part, ";")
		if slices.Contains(consumes, strings.Trim(mediaType, " ")) {
			return true
		}
	}
	return false
}

// unsupportedRouteMediaType is go-restful's 415 for a Content-Type no route consumes, as the
// apiserver's serviceErrorHandler answers it: a bare Status quoting go-restful's message, where the
// PATCH handler itself (reached by custom resources) lists the patch types.
func unsupportedRouteMediaType() error {
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "", "415: Unsupported Media Type", 0, false)
}

// routeProduces are the media types the route of a built-in resource's verb produces
// (endpoints/installer.go registerResourceHandlers): the serializers' for every verb, and their
// streaming forms too for the list and watch routes.
func routeProduces(v verb) []string {
	produces := []string{runtime.ContentTypeJSON, runtime.ContentTypeYAML, runtime.ContentTypeProtobuf}
	if v == verbList || v == verbWatch {
		produces = append(produces, runtime.ContentTypeJSON+";stream=watch", runtime.ContentTypeProtobuf+";stream=watch")
	}
	return produces
}

// restfulAccepts mirrors go-restful's Route.matchesAccept: none is */*; each of the
// comma-separated media types is taken without its parameters and is */* or one produces names
// exactly (application/* is not).
func restfulAccepts(accept string, produces []string) bool {
	if accept == "" {
		return true
	}
	for part := range strings.SplitSeq(accept, ",") {
		mediaType, _, _ := strings.Cut(part, ";")
		if mediaType = strings.Trim(mediaType, " "); mediaType == "*/*" || slices.Contains(produces, mediaType) {
			return true
		}
	}
	return false
}

// notAcceptableRoute is go-restful's 406 for an Accept no route produces, as the apiserver's
// serviceErrorHandler answers it: go-restful's message lists what the route produces.
func notAcceptableRoute(produces []string) error {
	return apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schema.GroupResource{}, "",
		"406: Not Acceptable\n\nAvailable representations: "+strings.Join(produces, ", "), 0, false)
}

// splitPath mirrors request.splitPath.
func splitPath(path string) []string {
	path = strings.Trim(path, "/")
	if path == "" {
		return []string{}
	}
	return strings.Split(path, "/")
}

// Discovery documents, minimal: what client-go's discovery client and kubectl get --raw read.

func (s *Server) serveDiscovery(w http.ResponseWriter, req *http.Request, obj runtime.Object) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		s.writeError(w, req, methodNotAllowed())
		return
	}
	s.writeObject(w, req, http.StatusOK, obj)
}

// apiVersions is /api; like the apiserver it names the address the client reached it at.
func (s *Server) apiVersions(req *http.Request) *metav1.APIVersions {
	v := &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{}}
	for gv := range s.resources {
		if gv.group == "" {
			v.Versions = append(v.Versions, gv.version)
		}
	}
	sort.Strings(v.Versions)
	v.ServerAddressByClientCIDRs = []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: req.Host}}
	return v
}

// groupVersionsOf are the versions of a group, the preferred first: by Kubernetes' version order,
// as apiextensions-apiserver sorts a CRD group's and the aggregated discovery sorts versions of the
// same priority.
//
// Mirrors sortGroupDiscoveryByKubeAwareVersion (apiextensions-apiserver
// customresource_discovery_controller.go).
func (s *Server) groupVersionsOf(group string) []metav1.GroupVersionForDiscovery {
	var out []metav1.GroupVersionForDiscovery
	for gv := range s.resources {
		if gv.group == group {
			out = append(out, metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + gv.version, Version: gv.version})
		}
	}
	sort.Slice(out, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(out[i].Version, out[j].Version) > 0 })
	return out
}

func (s *Server) apiGroup(group string) (*metav1.APIGroup, bool) {
	versions := s.groupVersionsOf(group)
	if group == "" || len(versions) == 0 {
		return nil, false
	}
	return &metav1.APIGroup{
		TypeMeta:         metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:             group,
		Versions:         versions,
		PreferredVersion: versions[0],
	}, true
}

func (s *Server) apiGroupList() *metav1.APIGroupList {
	l := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}}
	for _, g := range s.groups {
		grp, _ := s.apiGroup(g)
		l.Groups = append(l.Groups, *grp)
	}
	return l
}

func (s *Server) apiResourceList(gv groupVersion) *metav1.APIResourceList {
	l := &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: schema.GroupVersion{Group: gv.group, Version: gv.version}.String(),
		APIResources: []metav1.APIResource{},
	}
	for _, h := range s.resources[gv] {
		l.APIResources = append(l.APIResources, h.res.apiResources()...)
	}
	sort.Slice(l.APIResources, func(i, j int) bool { return l.APIResources[i].Name < l.APIResources[j].Name })
	return l
}

// serveVersion answers /version with the apiserver line this server mirrors.
func (s *Server) serveVersion(w http.ResponseWriter, req *http.Request) {
	writeRawJSON(w, http.StatusOK, map[string]string{
		"major": "1", "minor": "37", "gitVersion": "v1.37.0-listwatch", "platform": "listwatch",
	})
}

// inflight counts the requests being handled.
type inflight struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n drops to 0
}

func (f *inflight) add() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		f.zero = make(chan struct{})
	}
	f.n++
}

func (f *inflight) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 {
		close(f.zero)
	}
}

func (f *inflight) wait(ctx context.Context) error {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return nil
	}
	zero := f.zero
	f.mu.Unlock()
	select {
	case <-zero:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
