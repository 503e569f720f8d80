package cache

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/internal/promreg"
)

// Metrics are the watch cache's Prometheus metrics, by the apiserver's names and labels, for every
// Cacher configured with them (Config.Metrics); each Cacher records under its resource's labels.
//
// Mirrors k8s.io/apiserver pkg/storage/cacher/metrics/metrics.go; apiserver_registered_watchers
// is the gauge earlier apiservers kept (group, version, kind) of the watchers a cache serves.
type Metrics struct {
	eventsReceived   *prometheus.CounterVec
	eventsDispatched *prometheus.CounterVec
	initEvents       *prometheus.CounterVec
	terminated       *prometheus.CounterVec
	initializations  *prometheus.CounterVec
	resourceVersion  *prometheus.GaugeVec
	capacity         *prometheus.GaugeVec
	capacityIncrease *prometheus.CounterVec
	capacityDecrease *prometheus.CounterVec
	registered       *prometheus.GaugeVec
}

// NewMetrics makes the watch cache's metrics and registers them with reg (re-using those already
// registered there, so that several chains may share one registry).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	gr := []string{"group", "resource"}
	counter := func(namespace, subsystem, name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help}, gr)
	}
	gauge := func(namespace, subsystem, name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help}, gr)
	}
	m := &Metrics{
		eventsReceived:   counter("apiserver", "watch_cache", "events_received_total", "Counter of events received in watch cache broken by resource type."),
		eventsDispatched: counter("apiserver", "watch_cache", "events_dispatched_total", "Counter of events dispatched in watch cache broken by resource type."),
		initEvents:       counter("apiserver", "", "init_events_total", "Counter of init events processed in watch cache broken by resource type."),
		terminated:       counter("apiserver", "", "terminated_watchers_total", "Counter of watchers closed due to unresponsiveness broken by resource type."),
		initializations:  counter("apiserver", "watch_cache", "initializations_total", "Counter of watch cache initializations broken by resource type."),
		resourceVersion: gauge("apiserver", "watch_cache", "resource_version",
			"Current resource version of watch cache broken by resource type. This is truncated to the 15 least significant digits."),
		capacity:         gauge("", "watch_cache", "capacity", "Total capacity of watch cache broken by resource type."),
		capacityIncrease: counter("", "watch_cache", "capacity_increase_total", "Total number of watch cache capacity increase events broken by resource type."),
		capacityDecrease: counter("", "watch_cache", "capacity_decrease_total", "Total number of watch cache capacity decrease events broken by resource type."),
		registered: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "apiserver_registered_watchers",
			Help: "Number of currently registered watchers for a given resources"}, []string{"group", "version", "kind"}),
	}
	err := errors.Join(promreg.Register(reg, &m.eventsReceived), promreg.Register(reg, &m.eventsDispatched), promreg.Register(reg, &m.initEvents),
		promreg.Register(reg, &m.terminated), promreg.Register(reg, &m.initializations), promreg.Register(reg, &m.resourceVersion),
		promreg.Register(reg, &m.capacity), promreg.Register(reg, &m.capacityIncrease), promreg.Register(reg, &m.capacityDecrease), promreg.Register(reg, &m.registered))
	if err != nil {
		return nil, fmt.Errorf("registering the watch cache metrics: %w", err)
	}
	return m, nil
}

// resourceMetrics are one resource's children of Metrics, resolved once. A nil *resourceMetrics
// records nothing.
type resourceMetrics struct {
	eventsReceived, eventsDispatched, initEvents, terminated, initializations prometheus.Counter
	capacityIncrease, capacityDecrease                                        prometheus.Counter
	resourceVersion, capacity, registered                                     prometheus.Gauge
}

func (m *Metrics) forResource(gr schema.GroupResource, kind schema.GroupVersionKind) *resourceMetrics {
	if m == nil {
		return nil
	}
	return &resourceMetrics{
		eventsReceived:   m.eventsReceived.WithLabelValues(gr.Group, gr.Resource),
		eventsDispatched: m.eventsDispatched.WithLabelValues(gr.Group, gr.Resource),
		initEvents:       m.initEvents.WithLabelValues(gr.Group, gr.Resource),
		terminated:       m.terminated.WithLabelValues(gr.Group, gr.Resource),
		initializations:  m.initializations.WithLabelValues(gr.Group, gr.Resource),
		capacityIncrease: m.capacityIncrease.WithLabelValues(gr.Group, gr.Resource),
		capacityDecrease: m.capacityDecrease.WithLabelValues(gr.Group, gr.Resource),
		resourceVersion:  m.resourceVersion.WithLabelValues(gr.Group, gr.Resource),
		capacity:         m.capacity.WithLabelValues(gr.Group, gr.Resource),
		registered:       m.registered.WithLabelValues(kind.Group, kind.Version, kind.Kind),
	}
}

func (m *resourceMetrics) eventReceived() {
	if m != nil {
		m.eventsReceived.Inc()
	}
}

func (m *resourceMetrics) dispatched(n int) {
	if m != nil {
		m.eventsDispatched.Add(float64(n))
	}
}

func (m *resourceMetrics) initEventsSent(n int) {
	if m != nil && n > 0 {
		m.initEvents.Add(float64(n))
	}
}

func (m *resourceMetrics) watcherTerminated() {
	if m != nil {
		m.terminated.Inc()
	}
}

func (m *resourceMetrics) initialized() {
	if m != nil {
		m.initializations.Inc()
	}
}

// setResourceVersion mirrors metrics.RecordResourceVersion: the 15 least significant digits.
func (m *resourceMetrics) setResourceVersion(rv uint64) {
	if m != nil {
		m.resourceVersion.Set(float64(rv % 1_000_000_000_000_000))
	}
}

// capacityChanged mirrors metrics.RecordsWatchCacheCapacityChange.
func (m *resourceMetrics) capacityChanged(old, capacity int) {
	if m == nil {
		return
	}
	m.capacity.Set(float64(capacity))
	if old < capacity {
		m.capacityIncrease.Inc()
	} else {
		m.capacityDecrease.Inc()
	}
}

func (m *resourceMetrics) setCapacity(capacity int) {
	if m != nil {
		m.capacity.Set(float64(capacity))
	}
}

func (m *resourceMetrics) watchersRegistered(n int) {
	if m != nil {
		m.registered.Add(float64(n))
	}
}
