package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
)

// kubeSoakEnv names the variable that runs TestKubeSoak: it writes for minutes, so plain test runs
// skip it.
const kubeSoakEnv = "LISTWATCH_KUBE_SOAK"

// kubeSoakKeys is how many ConfigMaps the soak updates in turn.
const kubeSoakKeys = 100

// TestKubeSoak is the soak of serve through the Kubernetes API (LISTWATCH_KUBE_SOAK=1 runs it):
// `serve --etcd-compaction-interval 10s --pprof` (its address logged, for heap profiles during the
// run), LISTWATCH_KUBE_SOAK_INFORMERS (default 5) client-go
// ConfigMap informers attached (each its own list and watch, as separate controllers hold them),
// and LISTWATCH_KUBE_SOAK_WRITES (default 1,000,000) updates of 100 ConfigMaps of 1 KiB through the
// API, unconditional PUTs from LISTWATCH_KUBE_SOAK_WORKERS (default 8) clients as fast as serve
// answers them (LISTWATCH_KUBE_SOAK_RATE, writes per second, paces them instead). Every twentieth
// of the run it prints the write rate, serve's RSS, live heap and goroutines (from its /metrics),
// the retained revisions (current less compacted, from the etcd port's /metrics) and the watch
// cache's capacity; at the end, the watchers the caches terminated and that every informer holds
// each ConfigMap's last write. It fails if an informer misses a last write, or if RSS, heap or
// goroutines do not level while the watch cache's history keeps one capacity
// (checkKubeSoakLevels); compaction keeps the store's retained revisions at what 10 to 20 s of
// writes leave.
func TestKubeSoak(t *testing.T) {
	if os.Getenv(kubeSoakEnv) == "" {
		t.Skipf("set %s=1 to run the Kubernetes API soak (minutes)", kubeSoakEnv)
	}
	writes, workers := envInt("LISTWATCH_KUBE_SOAK_WRITES", 1_000_000), envInt("LISTWATCH_KUBE_SOAK_WORKERS", 8)
	rate, nInformers := envInt("LISTWATCH_KUBE_SOAK_RATE", 0), envInt("LISTWATCH_KUBE_SOAK_INFORMERS", 5)
	p := startListwatch(t, "serve", "--etcd-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--shutdown-timeout", "1s",
		"--etcd-compaction-interval", "10s", "--system-namespaces", "--pprof")
	t.Logf("serve: Kubernetes API (and /debug/pprof/) on %s, etcd API on %s, pid %d", p.httpURL, p.addr, p.cmd.Process.Pid)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	put := func(method, path string, body []byte) error {
		req, err := http.NewRequest(method, p.httpURL+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s %s: %d %.300s", method, path, resp.StatusCode, out)
		}
		return nil
	}
	pad := strings.Repeat("v", 1024)
	body := func(key, seq int) []byte {
		return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%02d","namespace":"soak"},"data":{"seq":"%d","pad":%q}}`, key, seq, pad)
	}
	if err := put("POST", "/api/v1/namespaces", []byte(`{"metadata":{"name":"soak"}}`)); err != nil {
		t.Fatal(err)
	}
	for k := range kubeSoakKeys {
		if err := put("POST", "/api/v1/namespaces/soak/configmaps", body(k, -1)); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stores []toolscache.Store
	var informersDone sync.WaitGroup
	for range nInformers {
		cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: p.httpURL, QPS: -1})
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("soak"))
		inf := f.Core().V1().ConfigMaps().Informer()
		stores = append(stores, inf.GetStore())
		informersDone.Go(func() { inf.Run(ctx.Done()) })
		if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("an informer never synced")
		}
	}
	defer informersDone.Wait()
	defer cancel()

	type sample struct {
		writes                  int
		elapsed                 time.Duration
		rssKiB                  int64
		heap, goroutines        float64
		retained, cacheCapacity float64
	}
	metricsURL, etcdMetrics := p.httpURL+"/metrics", "http://"+p.addr+"/metrics"
	take := func(n int, elapsed time.Duration) sample {
		return sample{writes: n, elapsed: elapsed, rssKiB: rssKiB(p.cmd.Process.Pid),
			heap: metric(metricsURL, "go_memstats_heap_alloc_bytes"), goroutines: metric(metricsURL, "go_goroutines"),
			retained:      metric(etcdMetrics, "etcd_debugging_mvcc_current_revision") - metric(etcdMetrics, "etcd_debugging_mvcc_compact_revision"),
			cacheCapacity: metric(metricsURL, `watch_cache_capacity{group="",resource="configmaps"}`)}
	}
	var samples []sample
	var done atomic.Int64
	var failed atomic.Bool
	jobs := make(chan int, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				if failed.Load() {
					continue
				}
				if err := put("PUT", fmt.Sprintf("/api/v1/namespaces/soak/configmaps/cm-%02d", i%kubeSoakKeys), body(i%kubeSoakKeys, i)); err != nil {
					t.Errorf("write %d: %v", i, err)
					failed.Store(true)
				}
				done.Add(1)
			}
		})
	}
	var tick <-chan time.Time
	if rate > 0 {
		ticker := time.NewTicker(time.Second / time.Duration(rate))
		defer ticker.Stop()
		tick = ticker.C
	}
	start := time.Now()
	step := max(writes/20, 1)
	for i := range writes {
		if tick != nil {
			<-tick
		}
		jobs <- i
		if i%step == 0 && i > 0 {
			s := take(int(done.Load()), time.Since(start))
			samples = append(samples, s)
			t.Logf("%8d writes %5.0fs (%4.0f/s): RSS %7d KiB, heap %6.1f MB, goroutines %4.0f, retained revisions %7.0f, cache capacity %6.0f",
				s.writes, s.elapsed.Seconds(), float64(s.writes)/s.elapsed.Seconds(), s.rssKiB, s.heap/1e6, s.goroutines, s.retained, s.cacheCapacity)
		}
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	last := take(writes, elapsed)
	samples = append(samples, last)
	t.Logf("%8d writes %5.0fs (%4.0f/s): RSS %7d KiB, heap %6.1f MB, goroutines %4.0f, retained revisions %7.0f, cache capacity %6.0f",
		last.writes, elapsed.Seconds(), float64(writes)/elapsed.Seconds(), last.rssKiB, last.heap/1e6, last.goroutines, last.retained, last.cacheCapacity)
	t.Logf("watchers terminated by the caches: %.0f; compactions seen: compact revision %.0f",
		metric(metricsURL, `apiserver_terminated_watchers_total{group="",resource="configmaps"}`), metric(etcdMetrics, "etcd_debugging_mvcc_compact_revision"))

	// Every informer ends up with each ConfigMap's last write.
	lastSeq := map[string]string{}
	for i := max(writes-kubeSoakKeys, 0); i < writes; i++ {
		lastSeq[fmt.Sprintf("cm-%02d", i%kubeSoakKeys)] = fmt.Sprint(i)
	}
	deadline := time.Now().Add(time.Minute)
	for n, st := range stores {
		for {
			missing := ""
			for name, seq := range lastSeq {
				obj, ok, _ := st.GetByKey("soak/" + name)
				if !ok || obj.(*corev1.ConfigMap).Data["seq"] != seq {
					missing = name
					break
				}
			}
			if missing == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("informer %d never got the last write of %s", n, missing)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	checkKubeSoakLevels(t.Errorf, samples, func(s sample) [4]float64 {
		return [4]float64{s.cacheCapacity, float64(s.rssKiB), s.heap, s.goroutines}
	})
}

// checkKubeSoakLevels judges the soak's samples, each as (watch cache capacity, RSS KiB, heap,
// goroutines). The watch cache's history grows, by design, while it holds less than its window's
// events (a burst of writes doubles it again), up to its upper bound of 102,400 events, and memory
// grows with it: the level is judged over the longest stretch of samples at one capacity, which
// must be at least a quarter of them. Within it, the peaks of its first half are the level and the
// second half must stay within 1.5 times it.
func checkKubeSoakLevels[S any](errorf func(string, ...any), samples []S, values func(S) [4]float64) {
	n := len(samples)
	if n < 4 {
		errorf("%d samples: too few to judge the level", n)
		return
	}
	from, to := 0, 0
	for i := 0; i < n; {
		j := i + 1
		for j < n && values(samples[j])[0] == values(samples[i])[0] {
			j++
		}
		if j-i > to-from {
			from, to = i, j
		}
		i = j
	}
	capacity := values(samples[from])[0]
	if to-from < max(n/4, 2) {
		errorf("the watch cache's capacity stayed at one value for %d samples of %d at most: the run is too short to show a level", to-from, n)
		return
	}
	mid := from + (to-from)/2
	var peak [4]float64
	for _, s := range samples[from:mid] {
		for i, v := range values(s) {
			peak[i] = max(peak[i], v)
		}
	}
	names := [4]string{"", "RSS KiB", "heap bytes", "goroutines"}
	for k, s := range samples[mid:to] {
		for i, v := range values(s) {
			if i > 0 && v > 1.5*peak[i] {
				errorf("sample %d: %s %.0f above 1.5x the level %.0f (samples %d-%d, at cache capacity %.0f)", mid+k, names[i], v, peak[i], from, mid-1, capacity)
			}
		}
	}
}

// TestKubeSoakLevels: the soak's verdict judges the level over the longest stretch at one cache
// capacity (growth before it is the history filling up), fails a rise above 1.5 times the level
// within it, and refuses a run whose capacity never stayed put for a quarter of it.
func TestKubeSoakLevels(t *testing.T) {
	judge := func(samples [][4]float64) []string {
		var errs []string
		checkKubeSoakLevels(func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }, samples, func(s [4]float64) [4]float64 { return s })
		return errs
	}
	growing := [][4]float64{{100, 10, 10, 5}, {200, 20, 20, 5}, {400, 40, 40, 5}}
	level := [][4]float64{{400, 100, 100, 5}, {400, 110, 90, 5}, {400, 120, 100, 5}, {400, 110, 95, 5}, {400, 115, 100, 6}, {400, 120, 110, 5}}
	if errs := judge(append(append([][4]float64{}, growing...), level...)); len(errs) != 0 {
		t.Errorf("a levelled run after the history's growth: %q", errs)
	}
	rising := append(append([][4]float64{}, growing...), level[:4]...)
	rising = append(rising, [4]float64{400, 200, 100, 5}, [4]float64{400, 300, 100, 5})
	if errs := judge(rising); len(errs) != 2 || !strings.Contains(errs[0], "RSS KiB 200") {
		t.Errorf("a rising RSS: %q", errs)
	}
	late := [][4]float64{{100, 1, 1, 1}, {200, 1, 1, 1}, {300, 1, 1, 1}, {400, 1, 1, 1}, {500, 1, 1, 1}, {600, 1, 1, 1}, {700, 1, 1, 1}, {800, 1, 1, 1}}
	if errs := judge(late); len(errs) != 1 || !strings.Contains(errs[0], "too short") {
		t.Errorf("a run still growing: %q", errs)
	}
}
