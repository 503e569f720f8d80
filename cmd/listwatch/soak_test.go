package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// soakEnv names the variable that runs TestSoak: it writes for minutes, so plain test runs skip it.
const soakEnv = "LISTWATCH_SOAK"

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// rssKiB reads a process's resident set from /proc.
func rssKiB(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return -1
}

// metric reads one unlabelled metric from serve's /metrics.
func metric(url, name string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			v, _ := strconv.ParseFloat(rest, 64)
			return v
		}
	}
	return -1
}

// TestSoak is the soak benchmark of serve with auto-compaction (LISTWATCH_SOAK=1 runs it): a
// constant-rate workload of LISTWATCH_SOAK_WRITES puts (default 1,000,000) of 1 KiB to 100 keys at
// LISTWATCH_SOAK_RATE per second (default 4000), with 10 prefix watchers attached and drained,
// against `serve --auto-compaction-mode periodic --auto-compaction-retention 5s`. It prints the
// serve process's RSS, goroutines, retained revisions (current less compact revision) and predicted
// database size every tenth of the run, and fails if RSS or goroutines in the last half rise more
// than 50% above their highest in the second quarter, after the first compactions.
func TestSoak(t *testing.T) {
	if os.Getenv(soakEnv) == "" {
		t.Skipf("set %s=1 to run the soak benchmark (minutes)", soakEnv)
	}
	writes, rate := envInt("LISTWATCH_SOAK_WRITES", 1_000_000), envInt("LISTWATCH_SOAK_RATE", 4000)
	p := startListwatch(t, "serve", "--etcd-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--shutdown-timeout", "1s",
		"--auto-compaction-mode", "periodic", "--auto-compaction-retention", "5s")
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.addr}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var drained sync.WaitGroup
	for range 10 {
		wch := cli.Watch(ctx, "soak/", clientv3.WithPrefix())
		drained.Add(1)
		go func() {
			defer drained.Done()
			for range wch {
			}
		}()
	}
	defer func() { cancel(); drained.Wait() }()
	metricsURL := "http://" + p.addr + "/metrics"
	val := strings.Repeat("v", 1024)
	type sample struct {
		writes               int
		rssKiB               int64
		goroutines, retained float64
		dbSize               float64
	}
	var samples []sample
	start := time.Now()
	const workers = 8
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate/100))
	defer tick.Stop()
	jobs := make(chan int, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				for j := i; j < i+100; j++ {
					if _, err := cli.Put(ctx, fmt.Sprintf("soak/%02d", j%100), val); err != nil {
						t.Errorf("put %d: %v", j, err)
						return
					}
				}
			}
		}()
	}
	for i := 0; i < writes; i += 100 {
		<-tick.C // 100 puts per tick: a constant rate
		jobs <- i
		if i%(writes/10) == 0 || i+100 >= writes {
			s := sample{writes: i, rssKiB: rssKiB(p.cmd.Process.Pid), goroutines: metric(metricsURL, "go_goroutines"),
				retained: metric(metricsURL, "etcd_debugging_mvcc_current_revision") - metric(metricsURL, "etcd_debugging_mvcc_compact_revision"),
				dbSize:   metric(metricsURL, "etcd_mvcc_db_total_size_in_bytes")}
			samples = append(samples, s)
			t.Logf("%8d writes %6.0fs: RSS %7d KiB, goroutines %4.0f, retained revisions %8.0f, db size %6.1f MB",
				s.writes, time.Since(start).Seconds(), s.rssKiB, s.goroutines, s.retained, s.dbSize/1e6)
		}
	}
	close(jobs)
	wg.Wait()
	n := len(samples)
	var peakRSS, peakG float64
	for _, s := range samples[n/4 : n/2] {
		peakRSS, peakG = max(peakRSS, float64(s.rssKiB)), max(peakG, s.goroutines)
	}
	for _, s := range samples[n/2:] {
		if float64(s.rssKiB) > 1.5*peakRSS || s.goroutines > 1.5*peakG {
			t.Errorf("at %d writes RSS %d KiB, goroutines %.0f: above 1.5x the second quarter's peaks (%.0f KiB, %.0f)", s.writes, s.rssKiB, s.goroutines, peakRSS, peakG)
		}
	}
}
