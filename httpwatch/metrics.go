package httpwatch

import (
	"errors"
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/listwatch/listwatch/internal/promreg"
)

// watchMetrics are the apiserver's metrics of what watches send, by their names and labels.
//
// Mirrors k8s.io/apiserver pkg/endpoints/metrics WatchEvents and WatchEventsSizes.
type watchMetrics struct {
	events *prometheus.CounterVec
	sizes  *prometheus.HistogramVec
}

// newWatchMetrics makes the watch metrics and registers them with reg, re-using those of the same
// names reg already holds (several servers may share one registry).
func newWatchMetrics(reg prometheus.Registerer) (*watchMetrics, error) {
	labels := []string{"group", "version", "resource"}
	m := &watchMetrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "apiserver_watch_events_total",
			Help: "Number of events sent in watch clients"}, labels),
		sizes: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "apiserver_watch_events_sizes",
			Help: "Watch event size distribution in bytes",
			// Upstream's buckets: 1 KiB to 128 KiB.
			Buckets: prometheus.ExponentialBuckets(1024, 2.0, 8)}, labels),
	}
	if err := errors.Join(promreg.Register(reg, &m.events), promreg.Register(reg, &m.sizes)); err != nil {
		return nil, fmt.Errorf("%w: registering the watch metrics: %v", ErrInvalidConfig, err)
	}
	return m, nil
}

// forResource resolves one resource's children; nil metrics give nil.
func (m *watchMetrics) forResource(r Resource) *watchEventRecorder {
	if m == nil {
		return nil
	}
	return &watchEventRecorder{count: m.events.WithLabelValues(r.Group, r.Version, r.Resource), size: m.sizes.WithLabelValues(r.Group, r.Version, r.Resource)}
}

// watchEventRecorder counts one resource's watch events and their sizes.
type watchEventRecorder struct {
	count prometheus.Counter
	size  prometheus.Observer
}

// eventWriter counts the bytes of the event being written to w and records the event once it is
// written; with a nil recorder it only passes writes on.
//
// Mirrors handlers.watchEventMetricsRecorder.
type eventWriter struct {
	w        io.Writer
	recorder *watchEventRecorder
	n        int
}

func (e *eventWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	e.n += n
	return n, err
}

// recordEvent reports the event written since the last call.
func (e *eventWriter) recordEvent() {
	if e.recorder != nil {
		e.recorder.count.Inc()
		e.recorder.size.Observe(float64(e.n))
	}
	e.n = 0
}
