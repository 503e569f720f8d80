package sidebyside

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The large-object watch workload of issue 22: many watches from resourceVersion 0 open at once
// while two large objects are stored, so that every watch starts by receiving both.
const (
	// largeWatchEnv runs TestLargeWatch; it takes minutes and most of the machine.
	largeWatchEnv = "LISTWATCH_LARGEWATCH"
	// largeWatchServeEnv tells the child process which server TestLargeWatchServer runs.
	largeWatchServeEnv = "LISTWATCH_LARGEWATCH_SERVE"
	// largeObjects are stored before the watches open.
	largeObjects = 2
	// largePad is each object's spec.pad: with its metadata the object is about 1.4 MB, under etcd's
	// 1.5 MiB request limit, so both servers store it through their own create path.
	largePad = 1_400_000
	// largeOpenDeadline bounds how long the watches get to open.
	largeOpenDeadline = 10 * time.Minute
)

// largeWatchStats is what the server's child process reports of itself.
type largeWatchStats struct {
	HeapAlloc  uint64 `json:"heapAlloc"`
	HeapSys    uint64 `json:"heapSys"`
	StackInuse uint64 `json:"stackInuse"`
	Goroutines int    `json:"goroutines"`
}

// largeWatchResult is one side's figures.
type largeWatchResult struct {
	watches, opened, openedIn15s int
	allOpenedAfter               time.Duration
	idleList                     time.Duration
	lists                        []time.Duration
	rssStart, rssPeak, rssOpen   int64 // KiB
	rssClosed, rssClosedLater    int64 // KiB
	heapOpen, heapClosed         uint64
	failures                     []string
}

// TestLargeWatch is the large-object watch run of issue 22, side by side: LISTWATCH_LARGEWATCH=1
// runs it. For listwatch's chain (chain.New) and for upstream's apiextensions-apiserver v0.37.2 in
// process (internal/kubeapiserver), each serving widgets.example.com/v1 over its own listwatch store
// in a child process of its own (so that each RSS is its server's alone), two widgets of about
// 1.4 MB are created through the API, then LISTWATCH_LARGEWATCH_WATCHES (default 2000) watches
// from resourceVersion 0 open at once from this process, each reading the two initial ADDED
// events. Meanwhile the widgets are listed, one list after another. Reported per side: how many
// watches opened (in the first 15 s, and in all), the time until the last opened, the latency of a
// list on the idle server and of the lists made while the watches opened, and the server's RSS
// (at start, at its peak, with every watch open, after every watch closed and a GC, and 10 s later)
// and live heap (with the watches open, and after they closed). SIDEBYSIDE_LARGEWATCH_SIDES runs
// one side alone. It fails if listwatch does not open every watch; upstream's figures are only
// reported.
func TestLargeWatch(t *testing.T) {
	if os.Getenv(largeWatchEnv) == "" {
		t.Skipf("set %s=1 to run the large-object watch run (minutes)", largeWatchEnv)
	}
	watches := 2000
	if n, err := strconv.Atoi(os.Getenv("LISTWATCH_LARGEWATCH_WATCHES")); err == nil && n > 0 {
		watches = n
	}
	results := map[string]*largeWatchResult{}
	sides := sidesFrom(t, "SIDEBYSIDE_LARGEWATCH_SIDES")
	for _, side := range sides {
		r := runLargeWatch(t, side, watches)
		results[side] = r
		t.Logf("%s done: %d/%d watches opened", side, r.opened, r.watches)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-44s", "")
	for _, side := range sides {
		fmt.Fprintf(&b, "%18s", side)
	}
	row := func(name string, f func(r *largeWatchResult) string) {
		fmt.Fprintf(&b, "\n%-44s", name)
		for _, side := range sides {
			fmt.Fprintf(&b, "%18s", f(results[side]))
		}
	}
	mb := func(kib int64) string { return fmt.Sprintf("%.0f MB", float64(kib)*1024/1e6) }
	row("watches opened / started", func(r *largeWatchResult) string { return fmt.Sprintf("%d/%d", r.opened, r.watches) })
	row("opened in the first 15 s", func(r *largeWatchResult) string { return strconv.Itoa(r.openedIn15s) })
	row("last watch opened after", func(r *largeWatchResult) string { return r.allOpenedAfter.Round(10 * time.Millisecond).String() })
	row("list on the idle server", func(r *largeWatchResult) string { return r.idleList.Round(time.Millisecond).String() })
	row("first list while the watches open", func(r *largeWatchResult) string { return durationAt(r.lists, 0) })
	row("slowest list while the watches open", func(r *largeWatchResult) string {
		if len(r.lists) == 0 {
			return "-"
		}
		return slices.Max(r.lists).Round(time.Millisecond).String()
	})
	row("lists made while the watches open", func(r *largeWatchResult) string { return strconv.Itoa(len(r.lists)) })
	row("RSS at start", func(r *largeWatchResult) string { return mb(r.rssStart) })
	row("RSS peak", func(r *largeWatchResult) string { return mb(r.rssPeak) })
	row("RSS with every watch open", func(r *largeWatchResult) string { return mb(r.rssOpen) })
	row("live heap with every watch open", func(r *largeWatchResult) string { return fmt.Sprintf("%.0f MB", float64(r.heapOpen)/1e6) })
	row("RSS after the watches closed (GC)", func(r *largeWatchResult) string { return mb(r.rssClosed) })
	row("RSS 10 s later", func(r *largeWatchResult) string { return mb(r.rssClosedLater) })
	row("live heap after the watches closed", func(r *largeWatchResult) string { return fmt.Sprintf("%.0f MB", float64(r.heapClosed)/1e6) })
	t.Log(b.String())
	for _, side := range sides {
		if r := results[side]; len(r.failures) > 0 {
			t.Logf("%s: %d failures, first: %s", side, len(r.failures), r.failures[0])
		}
	}
	if r, ok := results["listwatch"]; ok && r.opened != r.watches {
		t.Errorf("listwatch opened %d of %d watches", r.opened, r.watches)
	}
}

func durationAt(ds []time.Duration, i int) string {
	if i >= len(ds) {
		return "-"
	}
	return ds[i].Round(time.Millisecond).String()
}

// largeWatchServer is the child process serving one side.
type largeWatchServer struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	url    string
	stats  string
	client *http.Client // for the stats
}

// startLargeWatchServer runs TestLargeWatchServer for side in a child process and waits for it to
// say where it serves.
func startLargeWatchServer(t *testing.T, side string) *largeWatchServer {
	cmd := exec.Command(os.Args[0], "-test.run=^TestLargeWatchServer$", "-test.count=1")
	cmd.Env = append(os.Environ(), largeWatchServeEnv+"="+side, largeWatchEnv+"=")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &largeWatchServer{cmd: cmd, stdin: stdin, client: &http.Client{Transport: &http.Transport{}}}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "LARGEWATCH "); ok {
			for _, f := range strings.Fields(rest) {
				if v, ok := strings.CutPrefix(f, "url="); ok {
					s.url = v
				}
				if v, ok := strings.CutPrefix(f, "stats="); ok {
					s.stats = v
				}
			}
			break
		}
	}
	if s.url == "" {
		s.stop(t)
		t.Fatalf("%s: the server process never said where it serves", side)
	}
	// The rest of its output (the test's verdict) is drained so that it never blocks on it.
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return s
}

// stop closes the child's stdin, which ends its test, and waits for it.
func (s *largeWatchServer) stop(t *testing.T) {
	s.client.CloseIdleConnections()
	s.stdin.Close()
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("the server process: %v", err)
	}
}

// rss is the child's resident set in KiB.
func (s *largeWatchServer) rss() int64 { return procRSSKiB(s.cmd.Process.Pid) }

// procRSSKiB reads a process's resident set from /proc, in KiB; -1 if unreadable.
func procRSSKiB(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return -1
}

// readStats asks the child for its heap and goroutines, after a GC.
func (s *largeWatchServer) readStats(t *testing.T) largeWatchStats {
	var st largeWatchStats
	resp, err := s.client.Get(s.stats + "?gc=1")
	if err != nil {
		t.Errorf("stats: %v", err)
		return st
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Errorf("stats: %v", err)
	}
	return st
}

// runLargeWatch runs the workload against one side.
func runLargeWatch(t *testing.T, side string, watches int) *largeWatchResult {
	s := startLargeWatchServer(t, side)
	defer s.stop(t)
	r := &largeWatchResult{watches: watches}
	listClient := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer listClient.CloseIdleConnections()
	list := func() (time.Duration, error) {
		start := time.Now()
		code, body, err := do(listClient, "GET", s.url+widgetsPath, nil)
		if err == nil && (code != http.StatusOK || bytes.Count(body, []byte(`"kind":"Widget"`)) != largeObjects) {
			err = fmt.Errorf("list: %d %.200s", code, body)
		}
		return time.Since(start), err
	}
	var err error
	if r.idleList, err = list(); err != nil {
		t.Fatalf("%s: %v", side, err)
	}
	baseline := s.readStats(t)
	r.rssStart = s.rss()

	// The RSS sampler keeps the peak until the watches are closed.
	var peak atomic.Int64
	peak.Store(r.rssStart)
	samplerDone := make(chan struct{})
	stopSampler := make(chan struct{})
	go func() {
		defer close(samplerDone)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampler:
				return
			case <-tick.C:
				if v := s.rss(); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	tr := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: -1, ReadBufferSize: 32 << 10,
		DialContext: (&net.Dialer{Timeout: time.Minute}).DialContext}
	client := &http.Client{Transport: tr}
	// settled counts the watches that opened or failed; allOpened closes when every watch did one.
	var opened, settled atomic.Int64
	allOpened := make(chan struct{})
	settle := func() {
		if settled.Add(1) == int64(watches) {
			close(allOpened)
		}
	}
	var failMu sync.Mutex
	fail := func(msg string) {
		failMu.Lock()
		defer failMu.Unlock()
		r.failures = append(r.failures, msg)
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i := range watches {
		wg.Go(func() {
			isOpen := false
			err := readLargeWatch(ctx, client, s.url+widgetsPath+"?watch=true&resourceVersion=0", func() {
				isOpen = true
				opened.Add(1)
				settle()
			})
			if err != nil && ctx.Err() == nil {
				fail(fmt.Sprintf("watch %d: %v", i, err))
			}
			if !isOpen && ctx.Err() == nil {
				settle()
			}
		})
	}
	// Lists, one after another, while the watches open.
	listsDone := make(chan struct{})
	go func() {
		defer close(listsDone)
		for {
			select {
			case <-allOpened:
				return
			case <-ctx.Done():
				return
			default:
			}
			d, err := list()
			if err != nil {
				fail(fmt.Sprintf("list while the watches open: %v", err))
				return
			}
			r.lists = append(r.lists, d)
		}
	}()
	deadline := time.NewTimer(largeOpenDeadline)
	mark := time.NewTimer(15 * time.Second)
	for waiting := true; waiting; {
		select {
		case <-mark.C:
			r.openedIn15s = int(opened.Load())
		case <-allOpened:
			waiting = false
		case <-deadline.C:
			waiting = false
		}
	}
	r.allOpenedAfter = time.Since(start)
	if mark.Stop() {
		r.openedIn15s = int(opened.Load())
	}
	deadline.Stop()
	r.opened = int(opened.Load())
	<-listsDone
	r.rssOpen = s.rss()
	r.heapOpen = s.readStats(t).HeapAlloc

	cancel()
	wg.Wait()
	tr.CloseIdleConnections()
	close(stopSampler)
	<-samplerDone
	r.rssPeak = peak.Load()
	// The server's watch handlers end once it sees the connections close.
	end := time.Now().Add(time.Minute)
	closed := s.readStats(t)
	for closed.Goroutines > baseline.Goroutines+20 && time.Now().Before(end) {
		time.Sleep(100 * time.Millisecond)
		closed = s.readStats(t)
	}
	r.heapClosed = closed.HeapAlloc
	r.rssClosed = s.rss()
	time.Sleep(10 * time.Second)
	r.rssClosedLater = s.rss()
	return r
}

// readLargeWatch opens a watch and reads it: opened is called once both initial events arrived
// (two frames, each ending with a newline, which JSON never holds inside a frame); it then reads
// until ctx ends.
func readLargeWatch(ctx context.Context, client *http.Client, url string, opened func()) error {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return fmt.Errorf("%d %s", resp.StatusCode, body)
	}
	buf := make([]byte, 32<<10)
	frames := 0
	for {
		n, err := resp.Body.Read(buf)
		if frames < largeObjects {
			frames += bytes.Count(buf[:n], []byte{'\n'})
			if frames >= largeObjects {
				opened()
			}
		}
		if err != nil {
			if frames < largeObjects {
				return fmt.Errorf("the watch ended after %d of %d initial events: %w", frames, largeObjects, err)
			}
			return nil
		}
	}
}

// TestLargeWatchServer is the server process of TestLargeWatch: it serves the side
// LISTWATCH_LARGEWATCH_SERVE names, creates the large widgets, prints where it serves and its stats
// endpoint, and stops once its stdin closes.
func TestLargeWatchServer(t *testing.T) {
	side := os.Getenv(largeWatchServeEnv)
	if side == "" {
		t.Skip("the server process of TestLargeWatch")
	}
	start, ok := apiServers[side]
	if !ok {
		t.Fatalf("%s=%q: unknown side", largeWatchServeEnv, side)
	}
	s := start(t)
	defer s.stop()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	pad := strings.Repeat("x", largePad)
	deadline := time.Now().Add(time.Minute)
	for i := range largeObjects {
		body := fmt.Appendf(nil, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"large-%d","namespace":"ns"},"spec":{"seq":"0","pad":%q}}`, i, pad)
		for {
			code, out, err := do(client, "POST", s.url+widgetsPath, body)
			if err == nil && code == http.StatusCreated {
				break
			}
			// Upstream answers 429 for a moment after its CRD is served.
			if time.Now().After(deadline) || (err == nil && code != http.StatusTooManyRequests) {
				t.Fatalf("%s: create widget %d: %v %d %.300s", side, i, err, code, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(serveLargeWatchStats)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	fmt.Printf("LARGEWATCH url=%s stats=http://%s/stats\n", s.url, lis.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := srv.Close(); err != nil {
		t.Error(err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Error(err)
	}
}

// serveLargeWatchStats answers the process's heap and goroutines, after a GC when asked (?gc=1).
func serveLargeWatchStats(w http.ResponseWriter, req *http.Request) {
	// Only a collection: what the runtime then gives back to the system, by itself, is part of the
	// figures.
	if req.URL.Query().Get("gc") == "1" {
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(largeWatchStats{HeapAlloc: m.HeapAlloc, HeapSys: m.HeapSys, StackInuse: m.StackInuse, Goroutines: runtime.NumGoroutine()})
}
