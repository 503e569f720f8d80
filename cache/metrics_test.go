package cache

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
)

// gathered is the value of the metric name whose labels include want; ok is false when there is none.
func gathered(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for k, v := range want {
				if !hasLabel(m, k, v) {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			}
		}
	}
	return 0, false
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}

// TestMetrics: a Cacher with Metrics records the apiserver's watch cache metrics under its
// resource's labels: one initialization, the history's capacity, events received and dispatched,
// the cache's resourceVersion, the initial events sent and the registered watchers (back to 0 once
// they stop). Two Cachers on one registry share the metrics. A Cacher without Metrics records
// nothing.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := NewMetrics(reg); err != nil || again.eventsReceived != m.eventsReceived {
		t.Fatalf("NewMetrics on the same registry: %v; shares the collectors: %t", err, err == nil && again.eventsReceived == m.eventsReceived)
	}
	e := newEnv(t, withMetrics(m), withResource("pods"))
	pods := map[string]string{"group": "", "resource": "pods"}
	expect := func(name string, labels map[string]string, want float64) {
		t.Helper()
		e.waitFor(fmt.Sprintf("%s=%v", name, want), func() bool {
			got, ok := gathered(t, reg, name, labels)
			return ok && got == want
		})
	}
	expect("apiserver_watch_cache_initializations_total", pods, 1)
	expect("watch_cache_capacity", pods, float64(lowerBoundCapacity))
	var created []string
	for i := range 3 {
		created = append(created, ev(watch.Added, e.create(storagetest.Pod("ns", "p"+strconv.Itoa(i)))))
	}
	e.waitProcessed(e.lastRV)
	expect("apiserver_watch_cache_events_received_total", pods, 3)
	expect("apiserver_watch_cache_resource_version", pods, float64(e.cacheRV()))
	if got, _ := gathered(t, reg, "apiserver_watch_cache_events_dispatched_total", pods); got < 3 {
		t.Fatalf("events dispatched %v, want at least the 3 events", got)
	}

	w := e.watch("/pods/", storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything, Recursive: true})
	w.expect(created...)
	kind := map[string]string{"group": "", "version": "v1", "kind": "Pod"}
	expect("apiserver_init_events_total", pods, 3)
	expect("apiserver_registered_watchers", kind, 1)
	w.stop()
	expect("apiserver_registered_watchers", kind, 0)
	for _, name := range []string{"apiserver_terminated_watchers_total", "watch_cache_capacity_increase_total", "watch_cache_capacity_decrease_total"} {
		if got, ok := gathered(t, reg, name, pods); !ok || got != 0 {
			t.Errorf("%s = %v (exposed: %t), want 0", name, got, ok)
		}
	}

	// A second Cacher on the same metrics adds to them under its own labels.
	other := newEnv(t, withMetrics(m), withResource("secrets"))
	other.create(storagetest.Pod("ns", "s"))
	other.waitProcessed(other.lastRV)
	expect("apiserver_watch_cache_events_received_total", map[string]string{"resource": "secrets"}, 1)
	expect("apiserver_watch_cache_events_received_total", pods, 3)

	// Without Metrics, nothing is recorded (and nothing fails).
	plain := newEnv(t, withResource("configmaps"))
	plain.create(storagetest.Pod("ns", "c"))
	plain.waitProcessed(plain.lastRV)
	if _, ok := gathered(t, reg, "apiserver_watch_cache_events_received_total", map[string]string{"resource": "configmaps"}); ok {
		t.Fatal("a Cacher without Metrics recorded")
	}
}

// TestMetricsTerminatedAndCapacity: a watcher closed for not keeping up counts in
// apiserver_terminated_watchers_total, and a history that grows counts an increase.
func TestMetricsTerminatedAndCapacity(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, withFakeClock, withMetrics(m), withResource("pods"))
	pods := map[string]string{"group": "", "resource": "pods"}
	slow, _ := fillSlowWatcher(t, e, storage.ListOptions{Predicate: storage.Everything})
	more := e.create(storagetest.Pod("ns", "overflow"))
	e.eventually("the dispatcher gives up on the slow watcher", func() bool { return e.cacher.lastProcessedRV.Load() >= rvOf(t, more) })
	for {
		if _, ok := slow.next(); !ok {
			break
		}
	}
	if got, _ := gathered(t, reg, "apiserver_terminated_watchers_total", pods); got != 1 {
		t.Fatalf("terminated watchers %v, want 1", got)
	}
	for i := range lowerBoundCapacity {
		e.create(storagetest.Pod("grow", "p"+strconv.Itoa(i)))
	}
	e.waitProcessed(e.lastRV)
	if got, _ := gathered(t, reg, "watch_cache_capacity_increase_total", pods); got < 1 {
		t.Fatalf("capacity increases %v, want at least 1", got)
	}
	if got, _ := gathered(t, reg, "watch_cache_capacity", pods); got <= lowerBoundCapacity {
		t.Fatalf("capacity %v, want above %d", got, lowerBoundCapacity)
	}
}
