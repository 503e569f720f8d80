package etcdgrpc

import (
	"encoding/json"
	"net/http"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/version"
	"google.golang.org/grpc"

	"github.com/listwatch/listwatch/store"
)

// healthAnswer is etcdhttp's Health answer.
type healthAnswer struct {
	Health string `json:"health"`
	Reason string `json:"reason"`
}

// healthHandler follows etcdhttp/health.go NewHealthHandler with checkAlarms: GET only; an active
// alarm not named in ?exclude= makes it answer 503 with its reason; the member is always its own
// leader.
func (s *server) healthHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	excluded := map[string]bool{}
	for _, a := range r.URL.Query()["exclude"] {
		excluded[a] = true
	}
	h := healthAnswer{Health: "true"}
	for _, a := range s.alarms.get(pb.AlarmType_NONE) {
		if excluded[a.Alarm.String()] {
			continue
		}
		h.Health, h.Reason = "false", "ALARM "+a.Alarm.String()
		if a.Alarm != pb.AlarmType_NOSPACE && a.Alarm != pb.AlarmType_CORRUPT {
			h.Reason = "ALARM UNKNOWN"
		}
		break
	}
	d, _ := json.Marshal(h)
	if h.Health != "true" {
		http.Error(w, string(d), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
	w.Write(d)
}

// versionHandler follows etcdhttp/version.go: the server's version and the cluster's (major.minor.0).
func versionHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(version.Versions{Server: version.Version, Cluster: storageVersion()})
	w.Write(b)
}

// metrics is a prometheus.Collector that reads the store's Stats at each scrape, under etcd's
// metric names.
type metrics struct {
	st    *store.Store
	descs map[string]*prometheus.Desc
	kinds map[string]prometheus.ValueType
}

// metricDefs are etcd's names (server/storage/mvcc/metrics.go, server/lease/metrics.go,
// server/etcdserver/metrics.go), each with what it reads from store.Stats.
var metricDefs = []struct {
	name, help string
	kind       prometheus.ValueType
	get        func(store.Stats) int64
}{
	{"etcd_mvcc_range_total", "Total number of ranges seen by this member.", prometheus.CounterValue, func(s store.Stats) int64 { return s.Ranges }},
	{"etcd_mvcc_put_total", "Total number of puts seen by this member.", prometheus.CounterValue, func(s store.Stats) int64 { return s.Puts }},
	{"etcd_mvcc_delete_total", "Total number of deletes seen by this member.", prometheus.CounterValue, func(s store.Stats) int64 { return s.Deletes }},
	{"etcd_mvcc_txn_total", "Total number of txns seen by this member.", prometheus.CounterValue, func(s store.Stats) int64 { return s.Txns }},
	{"etcd_debugging_mvcc_keys_total", "Total number of keys.", prometheus.GaugeValue, func(s store.Stats) int64 { return s.Keys }},
	{"etcd_debugging_mvcc_watch_stream_total", "Total number of watch streams.", prometheus.GaugeValue, func(s store.Stats) int64 { return s.WatchStreams }},
	{"etcd_debugging_mvcc_watcher_total", "Total number of watchers.", prometheus.GaugeValue, func(s store.Stats) int64 { return s.Watchers }},
	{"etcd_debugging_mvcc_slow_watcher_total", "Total number of unsynced slow watchers.", prometheus.GaugeValue, func(s store.Stats) int64 { return s.SlowWatchers }},
	{"etcd_debugging_mvcc_current_revision", "The current revision of store.", prometheus.GaugeValue, func(s store.Stats) int64 { return s.Revision }},
	{"etcd_debugging_mvcc_compact_revision", "The revision of the last compaction in store.", prometheus.GaugeValue, func(s store.Stats) int64 { return s.CompactRevision }},
	{"etcd_mvcc_db_total_size_in_bytes", "Total size of the underlying database physically allocated in bytes.", prometheus.GaugeValue, func(s store.Stats) int64 { return s.DBSize }},
	{"etcd_mvcc_db_total_size_in_use_in_bytes", "Total size of the underlying database logically in use in bytes.", prometheus.GaugeValue, func(s store.Stats) int64 { return s.DBSizeInUse }},
	{"etcd_debugging_lease_granted_total", "The total number of granted leases.", prometheus.CounterValue, func(s store.Stats) int64 { return s.LeaseGranted }},
	{"etcd_debugging_lease_revoked_total", "The total number of revoked leases.", prometheus.CounterValue, func(s store.Stats) int64 { return s.LeaseRevoked }},
	{"etcd_debugging_lease_renewed_total", "The number of renewed leases seen by the leader.", prometheus.CounterValue, func(s store.Stats) int64 { return s.LeaseRenewed }},
	{"etcd_debugging_server_lease_expired_total", "The total number of expired leases.", prometheus.CounterValue, func(s store.Stats) int64 { return s.LeaseExpired }},
	{"etcd_server_has_leader", "Whether or not a leader exists. 1 is existence, 0 is not.", prometheus.GaugeValue, func(store.Stats) int64 { return 1 }},
	{"etcd_server_is_leader", "Whether or not this member is a leader. 1 if is, 0 otherwise.", prometheus.GaugeValue, func(store.Stats) int64 { return 1 }},
}

func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range metricDefs {
		ch <- m.descs[d.name]
	}
}

func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	st := m.st.Stats()
	for _, d := range metricDefs {
		ch <- prometheus.MustNewConstMetric(m.descs[d.name], d.kind, float64(d.get(st)))
	}
}

// newRegistry returns a registry with the store's metrics, the gRPC server's (go-grpc-middleware's
// prometheus provider, as etcd uses), etcd_server_version, and the Go and process collectors.
func newRegistry(st *store.Store, grpcMetrics *grpcprom.ServerMetrics) *prometheus.Registry {
	m := &metrics{st: st, descs: map[string]*prometheus.Desc{}}
	for _, d := range metricDefs {
		m.descs[d.name] = prometheus.NewDesc(d.name, d.help, nil, nil)
	}
	ver := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "etcd_server_version", Help: "Which version is running. 1 for 'server_version' label with current version."}, []string{"server_version"})
	ver.WithLabelValues(version.Version).Set(1)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, ver, grpcMetrics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// httpHandler serves etcd's client-URL HTTP endpoints: /health, /version and /metrics.
func (s *server) httpHandler(gs *grpc.Server, grpcMetrics *grpcprom.ServerMetrics) http.Handler {
	grpcMetrics.InitializeMetrics(gs)
	mux := http.NewServeMux()
	mux.HandleFunc("/health", s.healthHandler)
	mux.HandleFunc("/version", versionHandler)
	mux.Handle("/metrics", promhttp.HandlerFor(newRegistry(s.st, grpcMetrics), promhttp.HandlerOpts{}))
	return mux
}
