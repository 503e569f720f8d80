package httpwatch

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/store"
	"github.com/listwatch/listwatch/watch"
)

// BenchmarkWatchFanout measures the whole path under load: one writer updating configmaps through
// HTTP PUT at a fixed rate (LISTWATCH_BENCH_RATE writes/s, default 300, sent in bursts of
// LISTWATCH_BENCH_BURST back-to-back writes, default 1), and 1000 HTTP watchers
// (LISTWATCH_BENCH_WATCHERS) on loopback reading every event, served from the watch cache over the
// etcd3 storage over the in-process store. Each op is one write; it reports events delivered per
// second, write-to-receipt latency percentiles, CPU time and allocations per delivered event, and how
// many watchers the cache dropped as too slow (those must be 0 for the figures to count).
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
	st := store.New(store.Options{})
	defer st.Close()
	cli, closeClient, err := etcdgrpc.NewClient(st, etcdgrpc.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer closeClient()
	res := ConfigMaps()
	sc := res.StorageConfig()
	sc.Logger = quietLogger()
	s, err := watch.New(cli, sc)
	if err != nil {
		b.Fatal(err)
	}
	var backend Storage = s
	if cached {
		cc := res.CacheConfig(s)
		cc.Logger = quietLogger()
		c, err := cache.New(cc)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Stop()
		if err := c.Wait(context.Background()); err != nil {
			b.Fatal(err)
		}
		backend = c
	}
	api, err := New(Config{Resources: []ServedResource{{Resource: res, Storage: backend}}, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(api)
	defer func() {
		api.Shutdown()
		ts.Close()
		api.Wait(context.Background())
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}}
	defer client.CloseIdleConnections()

	// The objects the writer updates, created before the watches start.
	const objects = 100
	for i := range objects {
		body := fmt.Sprintf(`{"metadata":{"name":"cm-%d"},"data":{"seq":"-1","pad":"%0100d"}}`, i, 0)
		resp, err := client.Post(ts.URL+cmPath, "application/json", bytes.NewBufferString(body))
		if err != nil || resp.StatusCode != http.StatusCreated {
			b.Fatalf("create: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	startRV := strconv.FormatInt(st.Rev(), 10)

	n := b.N
	sent := make([]atomic.Int64, n) // UnixNano of each write's start
	var received atomic.Int64
	var dropped atomic.Int64
	lat := make([][]int32, watchers) // µs, per watcher
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var readers sync.WaitGroup
	ready := make(chan struct{}, watchers)
	for w := range watchers {
		readers.Add(1)
		go func() {
			defer readers.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+cmPath+"?watch=true&resourceVersion="+startRV, nil)
			resp, err := client.Do(req)
			ready <- struct{}{}
			if err != nil {
				dropped.Add(1)
				return
			}
			defer resp.Body.Close()
			lat[w] = make([]int32, 0, n)
			br := bufio.NewReaderSize(resp.Body, 64<<10)
			got := 0
			for got < n {
				line, err := br.ReadSlice('\n')
				if err != nil {
					if ctx.Err() == nil {
						dropped.Add(1) // the cache closed a watcher that fell behind
					}
					return
				}
				seq, ok := frameSeq(line)
				if !ok {
					continue
				}
				now := time.Now().UnixNano()
				lat[w] = append(lat[w], int32((now-sent[seq].Load())/1000))
				got++
				received.Add(1)
			}
		}()
	}
	for range watchers {
		<-ready
	}
	// Every watch is registered once its headers arrived; let the HTTP server settle.
	var ru0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)

	b.ResetTimer()
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := range n {
		if i%burst == 0 {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d)
			}
		}
		body := fmt.Sprintf(`{"metadata":{"name":"cm-%d"},"data":{"seq":"%d","pad":"%0100d"}}`, i%objects, i, 0)
		sent[i].Store(time.Now().UnixNano())
		req, _ := http.NewRequest("PUT", ts.URL+cmPath+"/cm-"+strconv.Itoa(i%objects), bytes.NewBufferString(body))
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("update %d: %v %v", i, err, resp)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	done := make(chan struct{})
	go func() {
		readers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cancel()
		<-done
		b.Fatalf("only %d of %d events delivered", received.Load(), int64(n)*int64(watchers))
	}
	elapsed := time.Since(start)
	b.StopTimer()

	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	events := received.Load()
	if events == 0 {
		b.Fatal("no event delivered")
	}
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	var all []int32
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / 1000 }
	b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(events), "cpu-ns/event")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(events), "allocs/event")
	b.ReportMetric(float64(dropped.Load()), "dropped-watchers")
}

// frameSeq finds the writer's sequence number in a frame: "seq":"<n>".
func frameSeq(line []byte) (int, bool) {
	i := bytes.Index(line, []byte(`"seq":"`))
	if i < 0 {
		return 0, false
	}
	rest := line[i+7:]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(string(rest[:j]))
	return n, err == nil && n >= 0
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
				if err := enc.encode(apiwatch.Event{Type: apiwatch.Modified, Object: c.obj}, io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
