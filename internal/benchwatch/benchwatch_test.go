package benchwatch

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeWatchServer serves /watch as a chunked stream of whatever broadcast sends; break_ may change or
// drop a watcher's frame (the watchers are numbered in the order they connected).
type fakeWatchServer struct {
	srv    *httptest.Server
	mu     sync.Mutex
	chans  []chan string
	break_ func(watcher, seq int, frame string) (string, bool)
}

func newFakeWatchServer(t *testing.T, breakFrame func(watcher, seq int, frame string) (string, bool)) *fakeWatchServer {
	f := &fakeWatchServer{break_: breakFrame}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ch := make(chan string, 1000)
		f.mu.Lock()
		f.chans = append(f.chans, ch)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for frame := range ch {
			if _, err := w.Write([]byte(frame)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(func() {
		f.mu.Lock()
		for _, ch := range f.chans {
			close(ch)
		}
		f.chans = nil
		f.mu.Unlock()
		f.srv.Close()
	})
	return f
}

func (f *fakeWatchServer) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

// write sends update seq (at resourceVersion 100+seq) to every watcher.
func (f *fakeWatchServer) write(seq int) error {
	frame := fmt.Sprintf(`{"type":"MODIFIED","object":{"metadata":{"resourceVersion":"%d"},"spec":{"seq":"%d"}}}`+"\n", 100+seq, seq)
	f.mu.Lock()
	defer f.mu.Unlock()
	for w, ch := range f.chans {
		out, ok := frame, true
		if f.break_ != nil {
			out, ok = f.break_(w, seq, frame)
		}
		if ok {
			ch <- out
		}
	}
	return nil
}

func TestFanoutCountsEveryEvent(t *testing.T) {
	f := newFakeWatchServer(t, nil)
	r, err := Fanout(Config{Addr: f.addr(), Path: "/watch", StartRV: 99, Watchers: 5, Writes: 40, Rate: 10000, Burst: 4, Write: f.write})
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Problem(); p != "" || r.Events != 200 || len(r.Latency) != 200 || len(r.WriteLatency) != 40 {
		t.Fatalf("events %d, latencies %d, write latencies %d, problem %q: want 200 events, 40 writes and no problem",
			r.Events, len(r.Latency), len(r.WriteLatency), p)
	}
	if r.Percentile(0.99) < r.Percentile(0.5) || r.Chunks == 0 {
		t.Fatalf("p50 %v, p99 %v, chunks %d", r.Percentile(0.5), r.Percentile(0.99), r.Chunks)
	}
	// Every frame of the fake server is its template's size (seq below 10, resourceVersion 100-139).
	frame := len(fmt.Sprintf(`{"type":"MODIFIED","object":{"metadata":{"resourceVersion":"%d"},"spec":{"seq":"%d"}}}`+"\n", 100, 0))
	if want := int64(5 * (10*frame + 30*(frame+1))); r.Bytes != want {
		t.Errorf("bytes %d, want %d", r.Bytes, want)
	}
	units := map[string]bool{}
	for _, m := range r.Metrics("x-") {
		units[m.Unit] = true
	}
	for _, u := range []string{"x-events/s", "x-p50-ms", "x-p99-ms", "x-write-p99-ms", "x-cpu-ns/event", "x-allocs/event", "x-events/chunk", "x-bytes/event", "x-failed-watchers"} {
		if !units[u] {
			t.Errorf("no metric %s", u)
		}
	}
}

func TestFanoutReportsBrokenStreams(t *testing.T) {
	f := newFakeWatchServer(t, func(watcher, seq int, frame string) (string, bool) {
		switch {
		case watcher == 1 && seq == 3: // missing
			return "", false
		case watcher == 2 && seq == 5: // another event type
			return strings.Replace(frame, "MODIFIED", "DELETED", 1), true
		case watcher == 3 && seq == 7: // resourceVersion going back
			return strings.Replace(frame, `"resourceVersion":"107"`, `"resourceVersion":"50"`, 1), true
		}
		return frame, true
	})
	r, err := Fanout(Config{Addr: f.addr(), Path: "/watch", StartRV: 99, Watchers: 4, Writes: 10, Rate: 10000, Write: f.write})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Failed) != 3 {
		t.Fatalf("failed watchers %q, want 1, 2 and 3", r.Failed)
	}
	for i, want := range []string{"watcher 1: frame 3: seq 4", "watcher 2: frame 5 is not a MODIFIED event", "watcher 3: frame 7: seq 7, resourceVersion 50"} {
		if !strings.HasPrefix(r.Failed[i], want) {
			t.Errorf("failure %d: %q, want it to start with %q", i, r.Failed[i], want)
		}
	}
	if r.Problem() == "" {
		t.Error("no problem reported")
	}
}

func TestFanoutStreamEndingEarly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
	}))
	defer srv.Close()
	r, err := Fanout(Config{Addr: strings.TrimPrefix(srv.URL, "http://"), Path: "/watch", Watchers: 2, Writes: 3, Rate: 1000,
		Write: func(int) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Failed) != 2 || !strings.Contains(r.Failed[0], "after 0 of 3 events: EOF") {
		t.Fatalf("failed %q: want both watchers ended by EOF", r.Failed)
	}
}

func TestFanoutErrors(t *testing.T) {
	if _, err := Fanout(Config{Watchers: 1, Writes: 1}); !errors.Is(err, ErrConfig) {
		t.Errorf("no rate, no Write: %v, want ErrConfig", err)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	_, err := Fanout(Config{Addr: strings.TrimPrefix(srv.URL, "http://"), Path: "/watch", Watchers: 2, Writes: 1, Rate: 1, Write: func(int) error { return nil }})
	if err == nil || !strings.Contains(err.Error(), "watch 0: watch response 404") {
		t.Errorf("a 404 watch: %v", err)
	}
	f := newFakeWatchServer(t, nil)
	boom := errors.New("boom")
	_, err = Fanout(Config{Addr: f.addr(), Path: "/watch", Watchers: 2, Writes: 5, Rate: 1000, Write: func(i int) error {
		if i == 2 {
			return boom
		}
		return f.write(i)
	}})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "write 2") {
		t.Errorf("a failing write: %v", err)
	}
}

// TestFloor: the floor delivers every frame, of the size asked, with one latency per frame, and
// refuses a size below its frame's skeleton.
func TestFloor(t *testing.T) {
	for i, size := range []int{FloorFrameBytes, 585, len(floorFramePrefix) + len(floorFrameSuffix)} {
		// The last run spaces its flushes a little: each frame still arrives.
		r, err := Floor(FloorConfig{Watchers: 20, Events: 50, Rate: 100000, Burst: 5, FrameBytes: size, FlushInterval: time.Duration(i/2) * time.Millisecond})
		if err != nil {
			t.Fatalf("frames of %d bytes: %v", size, err)
		}
		if r.EventsPerSec <= 0 || r.CPUPerEvent <= 0 || r.FrameBytes != size {
			t.Fatalf("frames of %d bytes: %+v", size, r)
		}
		if len(r.Latency) != 20*50 || r.Latency[0] < 0 || r.Percentile(0.99) < r.Percentile(0.5) {
			t.Fatalf("frames of %d bytes: %d latencies, least %v, p50 %v, p99 %v: want 1000, none negative, p50 up to p99",
				size, len(r.Latency), r.Percentile(0), r.Percentile(0.5), r.Percentile(0.99))
		}
	}
	if _, err := Floor(FloorConfig{Watchers: 0, Events: 1, Rate: 1, Burst: 1, FrameBytes: FloorFrameBytes}); !errors.Is(err, ErrConfig) {
		t.Errorf("no watchers: %v, want ErrConfig", err)
	}
	if _, err := Floor(FloorConfig{Watchers: 1, Events: 1, Rate: 1, Burst: 1, FrameBytes: 10}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "want at least 40") {
		t.Errorf("a 10-byte frame: %v, want ErrConfig", err)
	}
}

func TestParsing(t *testing.T) {
	for line, want := range map[string]int{"1a\r\n": 26, "FF\r\n": 255, "0\r\n": 0} {
		if n, ok := parseChunkSize([]byte(line)); !ok || n != want {
			t.Errorf("parseChunkSize(%q) = %d, %t", line, n, ok)
		}
	}
	for _, bad := range []string{"\r\n", "xyz\r\n", "123456789\r\n"} {
		if _, ok := parseChunkSize([]byte(bad)); ok {
			t.Errorf("parseChunkSize(%q) accepted", bad)
		}
	}
	if n, ok := QuotedIntField([]byte(`{"a":"1","seq":"42","b":"x"}`), `"seq":"`); !ok || n != 42 {
		t.Errorf("seq 42: %d %t", n, ok)
	}
	for _, bad := range []string{`{"seq":"x"}`, `{"seq":"4`, `{"other":"1"}`} {
		if _, ok := QuotedIntField([]byte(bad), `"seq":"`); ok {
			t.Errorf("QuotedIntField(%s) accepted", bad)
		}
	}
}
