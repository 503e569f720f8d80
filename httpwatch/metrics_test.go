package httpwatch

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/testutil"
)

// watchEventsMetric is the configmaps' apiserver_watch_events_total and the count and sum of
// apiserver_watch_events_sizes in reg.
func watchEventsMetric(t *testing.T, reg prometheus.Gatherer) (events float64, sizes *dto.Histogram) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["group"] != "" || labels["version"] != "v1" || labels["resource"] != "configmaps" {
				continue
			}
			switch f.GetName() {
			case "apiserver_watch_events_total":
				events = m.GetCounter().GetValue()
			case "apiserver_watch_events_sizes":
				sizes = m.GetHistogram()
			}
		}
	}
	return events, sizes
}

// TestWatchMetrics: with a Registerer, every event a watch sends counts in
// apiserver_watch_events_total, and its frame's bytes in apiserver_watch_events_sizes, under the
// resource's group, version and resource; two servers may share a registry. Without one nothing
// is registered.
func TestWatchMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	withMetrics := func(c *Config) { c.Registerer = reg }
	e := newCachedEnv(t, withMetrics)
	newCachedEnv(t, withMetrics) // shares the registry
	e.mustCreate(cmPath, cmJSON("default", "a", ""))
	s := e.watch(cmPath + "?watch=true&resourceVersion=0")
	f := s.next()
	if f.Type != watch.Added {
		t.Fatalf("first frame %s", f.line)
	}
	poll := testutil.Poller{Interval: time.Millisecond}
	poll.WaitFor(t, "the event counted", func() bool {
		events, _ := watchEventsMetric(t, reg)
		return events == 1
	})
	_, sizes := watchEventsMetric(t, reg)
	if sizes.GetSampleCount() != 1 || sizes.GetSampleSum() != float64(len(f.line)) {
		t.Fatalf("sizes: %d samples summing to %v, want 1 of %d bytes", sizes.GetSampleCount(), sizes.GetSampleSum(), len(f.line))
	}

	plain := newCachedEnv(t)
	if plain.api.resources[groupVersion{"", "v1"}]["configmaps"].watchEvents != nil {
		t.Fatal("a server without a Registerer records watch metrics")
	}
}

// TestFrameEncoderReleasesLargeBuffers: a watch keeps its scratch buffer between ordinary events,
// but not after a large one: thousands of watches that once sent a large object must not each hold
// its size for as long as they stay open.
func TestFrameEncoderReleasesLargeBuffers(t *testing.T) {
	enc := newFrameEncoder(ConfigMaps())
	small := named("small")
	var out bytes.Buffer
	if err := enc.encode(watch.Event{Type: watch.Added, Object: small}, &out); err != nil {
		t.Fatal(err)
	}
	if enc.buf.Cap() == 0 {
		t.Fatal("the buffer of a small event was dropped: every event would allocate one")
	}
	large := named("large")
	large.Object["data"] = map[string]any{"big": strings.Repeat("x", 1<<20)}
	out.Reset()
	if err := enc.encode(watch.Event{Type: watch.Modified, Object: large}, &out); err != nil {
		t.Fatal(err)
	}
	if out.Len() < 1<<20 || !bytes.HasSuffix(out.Bytes(), []byte("}\n")) {
		t.Fatalf("large frame of %d bytes", out.Len())
	}
	if c := enc.buf.Cap(); c > maxRetainedFrameBuffer {
		t.Fatalf("the watch keeps a %d-byte buffer after a large event", c)
	}
}
