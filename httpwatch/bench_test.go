package httpwatch

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

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
// (see watchStream) but still check that every watcher got every write, in order; if one did not (the
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
	st, url, addr := c.Store, c.URL, strings.TrimPrefix(c.URL, "http://")
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

	n := b.N
	sent := make([]atomic.Int64, n) // UnixNano of each write's start
	streams := make([]*watchStream, watchers)
	for w := range streams {
		ws, err := openWatch(addr, cmPath+"?watch=true&resourceVersion="+strconv.FormatInt(startRV, 10), n)
		if err != nil {
			for _, ws := range streams[:w] {
				ws.conn.Close()
			}
			b.Fatalf("watch %d: %v", w, err)
		}
		streams[w] = ws
	}
	var readers sync.WaitGroup
	for _, ws := range streams {
		readers.Add(1)
		go func() {
			defer readers.Done()
			ws.readAll(startRV, sent)
		}()
	}
	// Every watch is registered once its headers arrived.
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
		req, _ := http.NewRequest("PUT", url+cmPath+"/cm-"+strconv.Itoa(i%objects), bytes.NewBufferString(body))
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			for _, ws := range streams {
				ws.conn.Close()
			}
			readers.Wait()
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
	timedOut := false
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		timedOut = true
		for _, ws := range streams {
			ws.conn.Close()
		}
		<-done
	}
	elapsed := time.Since(start)
	b.StopTimer()

	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	for _, ws := range streams {
		ws.conn.Close()
	}
	var events, chunks int64
	var all []int32
	var failed []string
	for w, ws := range streams {
		events += int64(ws.got)
		chunks += ws.chunks
		all = append(all, ws.latency...)
		if ws.err != nil {
			failed = append(failed, fmt.Sprintf("watcher %d: %v", w, ws.err))
		}
	}
	if events == 0 {
		b.Fatalf("no event delivered: %v", failed)
	}
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	slices.Sort(all)
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / 1000 }
	metrics := []struct {
		v    float64
		unit string
	}{
		{float64(events) / elapsed.Seconds(), "events/s"},
		{pct(0.50), "p50-ms"},
		{pct(0.99), "p99-ms"},
		{float64(cpu.Nanoseconds()) / float64(events), "cpu-ns/event"},
		{float64(ms1.Mallocs-ms0.Mallocs) / float64(events), "allocs/event"},
		{float64(events) / float64(max(chunks, 1)), "events/chunk"},
		{float64(len(failed)), "failed-watchers"},
	}
	for _, m := range metrics {
		b.ReportMetric(m.v, m.unit)
	}
	// A failed benchmark prints no metrics, so the figures of a failed run go to the log.
	if timedOut || len(failed) > 0 {
		var line []string
		for _, m := range metrics {
			line = append(line, fmt.Sprintf("%.4g %s", m.v, m.unit))
		}
		b.Logf("figures (not valid): %s", strings.Join(line, "  "))
		if timedOut {
			b.Errorf("only %d of %d events delivered within 2m", events, int64(n)*int64(watchers))
		}
		for i, f := range failed {
			if i == 3 {
				b.Errorf("... and %d more failed watchers", len(failed)-i)
				break
			}
			b.Errorf("%s", f)
		}
	}
}

// watchStream is the benchmark's client for one watch: a raw loopback connection and the least any
// client must do per frame (undo the chunking, split on newlines, read the two fields checked), so
// that the readers, which share the server's cores, cost what a minimal real client costs. It still
// checks that the watch delivers every write, in order, and nothing else.
type watchStream struct {
	conn    net.Conn
	br      *bufio.Reader
	pending []byte // received frame bytes not yet split off
	off     int    // start of the unsplit part of pending

	got     int     // frames received, which are writes 0..got-1 in order
	chunks  int64   // HTTP chunks read
	latency []int32 // µs from each write's start to its frame's receipt
	err     error   // why the stream fell short of every write
}

// openWatch sends the watch request on a new connection and reads the response's headers.
func openWatch(addr, path string, events int) (*watchStream, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 32<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !slices.Equal(resp.TransferEncoding, []string{"chunked"}) {
		conn.Close()
		return nil, fmt.Errorf("watch response %s, transfer encoding %v", resp.Status, resp.TransferEncoding)
	}
	// The body is read from br directly, chunk by chunk.
	return &watchStream{conn: conn, br: br, pending: make([]byte, 0, 32<<10), latency: make([]int32, 0, events)}, nil
}

// readAll reads frames until every write of sent arrived, the stream ends or a frame is wrong.
func (s *watchStream) readAll(startRV int64, sent []atomic.Int64) {
	lastRV := startRV
	for s.got < len(sent) {
		frame, err := s.next()
		if err != nil {
			s.err = fmt.Errorf("after %d of %d events: %w", s.got, len(sent), err)
			return
		}
		now := time.Now().UnixNano()
		if !bytes.HasPrefix(frame, []byte(`{"type":"MODIFIED","object":{`)) {
			s.err = fmt.Errorf("frame %d is not a MODIFIED event: %.80s", s.got, frame)
			return
		}
		seq, ok1 := quotedIntField(frame, `"seq":"`)
		rv, ok2 := quotedIntField(frame, `"resourceVersion":"`)
		if !ok1 || !ok2 || seq != int64(s.got) || rv <= lastRV {
			s.err = fmt.Errorf("frame %d: seq %d, resourceVersion %d after %d: want seq %d, resourceVersion above the last", s.got, seq, rv, lastRV, s.got)
			return
		}
		lastRV = rv
		s.latency = append(s.latency, int32((now-sent[seq].Load())/1000))
		s.got++
	}
}

// next returns the next frame without its newline; it is valid until the next call.
func (s *watchStream) next() ([]byte, error) {
	for {
		if i := bytes.IndexByte(s.pending[s.off:], '\n'); i >= 0 {
			frame := s.pending[s.off : s.off+i]
			s.off += i + 1
			return frame, nil
		}
		s.pending = append(s.pending[:0], s.pending[s.off:]...)
		s.off = 0
		if err := s.readChunk(); err != nil {
			return nil, err
		}
	}
}

// readChunk appends the data of the next HTTP chunk to pending.
func (s *watchStream) readChunk() error {
	line, err := s.br.ReadSlice('\n')
	if err != nil {
		return err
	}
	size, ok := parseChunkSize(line)
	if !ok {
		return fmt.Errorf("bad chunk size line %q", line)
	}
	if size == 0 {
		return io.EOF // the server ended the watch
	}
	s.chunks++
	for size > 0 {
		n := min(size, s.br.Size())
		p, err := s.br.Peek(n)
		if err != nil {
			return err
		}
		s.pending = append(s.pending, p...)
		s.br.Discard(n)
		size -= n
	}
	crlf, err := s.br.Peek(2)
	if err != nil {
		return err
	}
	if crlf[0] != '\r' || crlf[1] != '\n' {
		return fmt.Errorf("chunk not followed by CRLF: %q", crlf)
	}
	s.br.Discard(2)
	return nil
}

// parseChunkSize reads the hexadecimal size of a chunk-size line ending in CRLF.
func parseChunkSize(line []byte) (int, bool) {
	line = bytes.TrimSuffix(line, []byte("\r\n"))
	if len(line) == 0 || len(line) > 8 {
		return 0, false
	}
	n := 0
	for _, c := range line {
		switch {
		case '0' <= c && c <= '9':
			n = n<<4 | int(c-'0')
		case 'a' <= c && c <= 'f':
			n = n<<4 | int(c-'a'+10)
		case 'A' <= c && c <= 'F':
			n = n<<4 | int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

// quotedIntField reads the decimal string value that follows the first occurrence of key, which ends
// with the opening quote.
func quotedIntField(frame []byte, key string) (int64, bool) {
	i := bytes.Index(frame, []byte(key))
	if i < 0 {
		return 0, false
	}
	rest := frame[i+len(key):]
	var n int64
	j := 0
	for ; j < len(rest) && '0' <= rest[j] && rest[j] <= '9'; j++ {
		n = n*10 + int64(rest[j]-'0')
	}
	return n, j > 0 && j < len(rest) && rest[j] == '"'
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
// event per watcher, for comparison with BenchmarkWatchFanout's cpu-ns/event: for each of
// LISTWATCH_BENCH_WATCHERS loopback TCP connections, a writer goroutine woken by a channel send per
// event writes the event's frame, flushing (one write(2)) only when no event is waiting, as the watch
// handler does, and a reader goroutine reads the frames; events go out at LISTWATCH_BENCH_RATE per
// second in bursts of LISTWATCH_BENCH_BURST. There is no HTTP, no cache and no encoding.
//
//	go test -run '^$' -bench LoopbackFloor -benchtime 3000x ./httpwatch/
func BenchmarkLoopbackFloor(b *testing.B) {
	watchers := envInt(b, "LISTWATCH_BENCH_WATCHERS", 1000)
	rate := envInt(b, "LISTWATCH_BENCH_RATE", 300)
	burst := envInt(b, "LISTWATCH_BENCH_BURST", 1)
	b.Run(fmt.Sprintf("watchers=%d/rate=%d/burst=%d", watchers, rate, burst), func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		frame := []byte(`{"type":"MODIFIED","object":{` + fmt.Sprintf(`"pad":"%0300d"`, 0) + "}}\n")
		n := b.N
		events := make([]chan []byte, watchers)
		var wg sync.WaitGroup
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		received := make([]int, watchers)
		for w := range watchers {
			client, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			server, err := ln.Accept()
			if err != nil {
				client.Close()
				b.Fatal(err)
			}
			conns = append(conns, client, server)
			events[w] = make(chan []byte, 100)
			wg.Add(2)
			go func() {
				defer wg.Done()
				bw := bufio.NewWriterSize(server, 4<<10)
				ch := events[w]
				for f := range ch {
					bw.Write(f)
					if len(ch) == 0 {
						if bw.Flush() != nil {
							return
						}
					}
				}
			}()
			go func() {
				defer wg.Done()
				buf := make([]byte, 32<<10)
				want := n * len(frame)
				for got := 0; got < want; {
					k, err := client.Read(buf)
					if err != nil {
						return
					}
					got += k
					received[w] = got / len(frame)
				}
			}()
		}
		var ru0 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		b.ResetTimer()
		start := time.Now()
		interval := time.Second / time.Duration(rate)
		for i := range n {
			if i%burst == 0 {
				if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
					time.Sleep(d)
				}
			}
			for _, ch := range events {
				ch <- frame
			}
		}
		for _, ch := range events {
			close(ch)
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		var ru1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		total := 0
		for _, r := range received {
			total += r
		}
		if total != n*watchers {
			b.Fatalf("%d of %d frames received", total, n*watchers)
		}
		cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
		b.ReportMetric(float64(total)/elapsed.Seconds(), "events/s")
		b.ReportMetric(float64(cpu)/float64(total), "cpu-ns/event")
	})
}
