package httpwatch

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/benchwatch"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

// BenchmarkWatchFanout measures the whole path under load: one writer updating configmaps through
// HTTP PUT at a fixed rate (LISTWATCH_BENCH_RATE writes/s, default 300, sent in bursts of
// LISTWATCH_BENCH_BURST back-to-back writes, default 1), and 1000 HTTP watchers
// (LISTWATCH_BENCH_WATCHERS) on loopback reading every event, served from the watch cache over the
// etcd3 storage over the in-process store. Each op is one write; it reports events delivered per
// second, write-to-receipt latency percentiles, CPU time and allocations per delivered event (the
// whole process: server, writer and readers), events per HTTP chunk (how much the "flush only when no
// event is waiting" rule batched), and how many watchers fell short. The readers are minimal clients
// (benchwatch.Stream) but still check that every watcher got every write, in order; if one did not (the
// cache closes a watcher that falls too far behind), the benchmark fails and logs its figures.
//
//	go test -run '^$' -bench WatchFanout -benchtime 3000x ./httpwatch/
func BenchmarkWatchFanout(b *testing.B) {
	watchers := envInt(b, "LISTWATCH_BENCH_WATCHERS", 1000)
	rate := envInt(b, "LISTWATCH_BENCH_RATE", 300)
	burst := envInt(b, "LISTWATCH_BENCH_BURST", 1)
	b.Run(fmt.Sprintf("watchers=%d/rate=%d/burst=%d", watchers, rate, burst), func(b *testing.B) {
		benchmarkFanout(b, watchers, rate, burst, true)
	})
}

// BenchmarkWatchFanoutEtcd3 is the same with every watch served by the etcd3 storage directly (one
// etcd watch and one decode per watcher, no shared serialization), for comparison.
func BenchmarkWatchFanoutEtcd3(b *testing.B) {
	watchers := envInt(b, "LISTWATCH_BENCH_WATCHERS", 100)
	rate := envInt(b, "LISTWATCH_BENCH_RATE", 300)
	burst := envInt(b, "LISTWATCH_BENCH_BURST", 1)
	b.Run(fmt.Sprintf("watchers=%d/rate=%d/burst=%d", watchers, rate, burst), func(b *testing.B) {
		benchmarkFanout(b, watchers, rate, burst, false)
	})
}

// warmUpEvents is how many writes warmUpCache makes: within the watch cache's 75 s history window
// they grow its capacity to 8192 events, which sizes every new watcher's channels at 100 events (one
// second of history, capped), as on a busy resource; a cold cache's 10 would make any backlog of
// more than ten events a slow watcher to close.
const warmUpEvents = 10_000

// warmUpCache rewrites the configmaps' stored values straight in the store, warmUpEvents times, and
// waits until the watch cache has them all.
func warmUpCache(b *testing.B, st *store.Store, client *http.Client, url string) {
	b.Helper()
	kvs, err := st.Range(&store.RangeRequest{Key: []byte("/registry/configmaps/"), RangeEnd: []byte("/registry/configmaps0")})
	if err != nil || len(kvs.Kvs) == 0 {
		b.Fatalf("the configmaps in the store: %v (%d keys)", err, len(kvs.Kvs))
	}
	for i := range warmUpEvents {
		kv := kvs.Kvs[i%len(kvs.Kvs)]
		if _, err := st.Put(&store.PutRequest{Key: kv.Key, Value: kv.Value}); err != nil {
			b.Fatal(err)
		}
	}
	// A list not older than the last write is served by the cache once it has caught up.
	resp, err := client.Get(url + cmPath + "?resourceVersionMatch=NotOlderThan&resourceVersion=" + strconv.FormatInt(st.Rev(), 10))
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("list after the warm-up: %s", resp.Status)
	}
}

func envInt(b *testing.B, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a positive integer", name, v)
		}
		return n
	}
	return def
}

func benchmarkFanout(b *testing.B, watchers, rate, burst int, cached bool) {
	res := ConfigMaps()
	c, err := StartChain(TestChainConfig{Resources: []Resource{res}, Cached: cached, API: Config{Logger: testutil.DiscardLogger()}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	st, url := c.Store, c.URL
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	defer client.CloseIdleConnections()

	// The objects the writer updates, created before the watches start.
	const objects = 100
	for i := range objects {
		body := fmt.Sprintf(`{"metadata":{"name":"cm-%d"},"data":{"seq":"-1","pad":"%0100d"}}`, i, 0)
		resp, err := client.Post(url+cmPath, "application/json", bytes.NewBufferString(body))
		if err != nil || resp.StatusCode != http.StatusCreated {
			b.Fatalf("create: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	if cached {
		warmUpCache(b, st, client, url)
	}
	startRV := st.Rev()
	write := func(i int) error {
		body := fmt.Sprintf(`{"metadata":{"name":"cm-%d"},"data":{"seq":"%d","pad":"%0100d"}}`, i%objects, i, 0)
		req, _ := http.NewRequest("PUT", url+cmPath+"/cm-"+strconv.Itoa(i%objects), bytes.NewBufferString(body))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("update: %s", resp.Status)
		}
		return nil
	}
	b.ResetTimer()
	r, err := benchwatch.Fanout(benchwatch.Config{
		Addr: strings.TrimPrefix(url, "http://"), Path: cmPath + "?watch=true&resourceVersion=" + strconv.FormatInt(startRV, 10),
		StartRV: startRV, Watchers: watchers, Writes: b.N, Rate: rate, Burst: burst, Write: write,
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if r.Events == 0 {
		b.Fatalf("no event delivered: %s", r.Problem())
	}
	metrics := r.Metrics("")
	for _, m := range metrics {
		b.ReportMetric(m.Value, m.Unit)
	}
	// A failed benchmark prints no metrics, so the figures of a failed run go to the log.
	if p := r.Problem(); p != "" {
		var line []string
		for _, m := range metrics {
			line = append(line, fmt.Sprintf("%.4g %s", m.Value, m.Unit))
		}
		b.Logf("figures (not valid): %s", strings.Join(line, "  "))
		b.Error(p)
	}
}

// BenchmarkFrameEncode is the per-watcher cost of framing one event: a plain object is encoded every
// time, a shared CacheableObject (the watch cache's) once for all watchers.
func BenchmarkFrameEncode(b *testing.B) {
	obj := named("cm")
	obj.SetResourceVersion("12345")
	obj.SetLabels(map[string]string{"app": "web", "tier": "frontend"})
	obj.Object["data"] = map[string]any{"pad": fmt.Sprintf("%0200d", 0)}
	for _, c := range []struct {
		name string
		obj  k8sruntime.Object
	}{
		{"plain", obj},
		{"cacheable", &countingCacheable{Unstructured: obj}},
	} {
		b.Run(c.name, func(b *testing.B) {
			enc := newFrameEncoder(ConfigMaps())
			b.ReportAllocs()
			for b.Loop() {
				if err := enc.encode(watch.Event{Type: watch.Modified, Object: c.obj}, io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoopbackFloor is the least any watch server and its clients in this process can spend per
// event per watcher (benchwatch.Floor), for comparison with BenchmarkWatchFanout's cpu-ns/event, with
// the same LISTWATCH_BENCH_WATCHERS, LISTWATCH_BENCH_RATE and LISTWATCH_BENCH_BURST, with frames of
// LISTWATCH_BENCH_FRAME bytes (default benchwatch.FloorFrameBytes; BenchmarkWatchFanout's
// bytes/event is the size that moves the same bytes). It reports the floor's latency too: p50-ms and
// p99-ms. LISTWATCH_BENCH_FLUSH_MS spaces each connection's flushes at least that far apart (default
// 0: flushed whenever no frame waits, as the watch handler and upstream's are), to see what fewer
// write(2)s would give.
//
//	go test -run '^$' -bench LoopbackFloor -benchtime 3000x ./httpwatch/
func BenchmarkLoopbackFloor(b *testing.B) {
	watchers := envInt(b, "LISTWATCH_BENCH_WATCHERS", 1000)
	rate := envInt(b, "LISTWATCH_BENCH_RATE", 300)
	burst := envInt(b, "LISTWATCH_BENCH_BURST", 1)
	frame := envInt(b, "LISTWATCH_BENCH_FRAME", benchwatch.FloorFrameBytes)
	flushMS := envInt(b, "LISTWATCH_BENCH_FLUSH_MS", 0)
	b.Run(fmt.Sprintf("watchers=%d/rate=%d/burst=%d", watchers, rate, burst), func(b *testing.B) {
		r, err := benchwatch.Floor(benchwatch.FloorConfig{Watchers: watchers, Events: b.N, Rate: rate, Burst: burst,
			FrameBytes: frame, FlushInterval: time.Duration(flushMS) * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.EventsPerSec, "events/s")
		b.ReportMetric(float64(r.CPUPerEvent.Nanoseconds()), "cpu-ns/event")
		b.ReportMetric(r.EventsPerWrite, "events/chunk")
		b.ReportMetric(float64(r.Percentile(0.50))/float64(time.Millisecond), "p50-ms")
		b.ReportMetric(float64(r.Percentile(0.99))/float64(time.Millisecond), "p99-ms")
	})
}
