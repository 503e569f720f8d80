package observe

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Options configure Wrap.
type Options struct {
	// Logger receives one line per request: at debug level for answered ones, at info level for
	// refused ones (4xx) and at warn level for failed ones (5xx). Default slog.Default().
	Logger *slog.Logger
	// PProf serves net/http/pprof under /debug/pprof/, as kube-apiserver's --profiling.
	PProf bool
	// Registry holds the metrics served at /metrics. Default NewRegistry().
	Registry *prometheus.Registry
}

// metrics are the apiserver's request metrics (k8s.io/apiserver pkg/endpoints/metrics), by their
// names and labels.
type metrics struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	longRunning *prometheus.GaugeVec
}

// requestLabels are the labels of apiserver_request_total and its duration, as upstream.
var requestLabels = []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"}

func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
		}, append(append([]string{}, requestLabels...), "code")),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "apiserver_request_duration_seconds",
			Help: "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
			// Upstream's buckets.
			Buckets: []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60},
		}, requestLabels),
		longRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_longrunning_requests",
			Help: "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component"}),
	}
	reg.MustRegister(m.requests, m.duration, m.longRunning)
	return m
}

// NewRegistry returns a registry with the Go and process collectors, which Wrap serves at /metrics
// when Options.Registry is nil; a server that registers more metrics (the watch caches') passes it
// to both.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Wrap returns next behind the apiserver's observability: /metrics (Prometheus text, the
// apiserver's request metric names), /debug/pprof/ when asked, and a log line and the metrics of
// every other request.
func Wrap(next http.Handler, opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registry == nil {
		opts.Registry = NewRegistry()
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{}))
	if opts.PProf {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.Handle("/", &instrumented{next: next, m: newMetrics(opts.Registry), logger: opts.Logger})
	return mux
}

// instrumented counts, times and logs the requests it passes to next.
type instrumented struct {
	next   http.Handler
	m      *metrics
	logger *slog.Logger
}

func (h *instrumented) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	info := parseRequest(req)
	start := time.Now()
	rw := &statusWriter{ResponseWriter: w}
	labels := prometheus.Labels{"verb": info.verb, "dry_run": info.dryRun, "group": info.group, "version": info.version,
		"resource": info.resource, "subresource": info.subresource, "scope": info.scope, "component": "apiserver"}
	longRunning := info.verb == "WATCH"
	if longRunning {
		g := h.m.longRunning.With(prometheus.Labels{"verb": info.verb, "group": info.group, "version": info.version,
			"resource": info.resource, "subresource": info.subresource, "scope": info.scope, "component": "apiserver"})
		g.Inc()
		defer g.Dec()
	}
	h.next.ServeHTTP(rw, req)
	code := rw.code
	if code == 0 {
		code = http.StatusOK
	}
	elapsed := time.Since(start)
	counterLabels := prometheus.Labels{"code": strconv.Itoa(code)}
	for k, v := range labels {
		counterLabels[k] = v
	}
	h.m.requests.With(counterLabels).Inc()
	if !longRunning {
		h.m.duration.With(labels).Observe(elapsed.Seconds())
	}
	level := slog.LevelDebug
	switch {
	case code >= 500:
		level = slog.LevelWarn
	case code >= 400:
		level = slog.LevelInfo
	}
	h.logger.Log(req.Context(), level, "request", "verb", info.verb, "uri", req.URL.RequestURI(),
		"code", code, "latency", elapsed, "userAgent", req.UserAgent(), "remote", req.RemoteAddr)
}

// statusWriter records the status code of a response and passes flushes on, which watches need.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes a flush on; a watch needs one after every event.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestInfo is what the metrics label a request with.
type requestInfo struct {
	verb, dryRun, group, version, resource, subresource, scope string
}

// parseRequest mirrors the apiserver's RequestInfoFactory and its metrics' canonicalVerb and
// CleanScope: the group, version, resource and subresource of a resource path, the scope
// (resource, namespace or cluster), and the verb as the metrics name it (GET, LIST, WATCH, POST,
// PUT, PATCH, APPLY, DELETE). Other paths are labelled with their method alone.
func parseRequest(req *http.Request) requestInfo {
	info := requestInfo{verb: strings.ToUpper(req.Method)}
	if len(req.URL.Query()["dryRun"]) > 0 {
		info.dryRun = "All"
	}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		info.version, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		info.group, info.version, parts = parts[1], parts[2], parts[3:]
	default:
		return info
	}
	watching := req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1"
	if parts[0] == "watch" {
		watching, parts = true, parts[1:]
	}
	namespace := ""
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if len(parts) == 2 || (len(parts) >= 3 && (parts[2] == "status" || parts[2] == "finalize")) {
			// A namespace itself: /namespaces/<name>[/status|finalize].
			parts = append([]string{"namespaces"}, parts[1:]...)
		} else {
			namespace, parts = parts[1], parts[2:]
		}
	}
	if len(parts) == 0 {
		return info
	}
	info.resource = parts[0]
	name := ""
	if len(parts) >= 2 {
		name = parts[1]
	}
	if len(parts) >= 3 {
		info.subresource = parts[2]
	}
	collection := name == ""
	switch {
	case name != "":
		info.scope = "resource"
	case namespace != "":
		info.scope = "namespace"
	default:
		info.scope = "cluster"
	}
	switch {
	case info.verb == "GET" && watching:
		info.verb = "WATCH"
	case info.verb == "GET" && collection:
		info.verb = "LIST"
	case info.verb == "PATCH" && req.Header.Get("Content-Type") == "application/apply-patch+yaml":
		info.verb = "APPLY"
	}
	return info
}
