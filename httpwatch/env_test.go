package httpwatch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/httpwatch/watchclient"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/store"
)

// Gizmos is a cluster-scoped custom resource the tests add to the default set.
func Gizmos() Resource {
	return Resource{Group: "example.com", Version: "v1", Resource: "gizmos", Kind: "Gizmo"}
}

// Gadgets is a namespaced custom resource with a status subresource and a printer column.
func Gadgets() Resource {
	return Resource{Group: "example.com", Version: "v1", Resource: "gadgets", Kind: "Gadget", Namespaced: true,
		StatusSubresource: true, Columns: []Column{{Name: "Size", Type: "integer", JSONPath: ".spec.size"}, {Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"}}}
}

// TestChainConfig is what the tests of this package ask of package chain: Resources over a fresh
// in-memory store, each behind a watch cache if Cached, each served through Wrap (if set), with the
// HTTP API configured by API but for its Resources.
type TestChainConfig struct {
	Resources []Resource
	Cached    bool
	// CacheClock drives the watch caches; nil is the real clock.
	CacheClock clock.Clock
	Wrap       func(Resource, storage.Interface) storage.Interface
	API        Config
	// Store is the store to serve; nil: a new one.
	Store *store.Store
}

// TestChain is a started chain: its store, its HTTP API and where it is served. Close stops it all.
type TestChain struct {
	Store *store.Store
	API   *Server
	URL   string
	Close func() error
}

// StartChain starts a chain.Chain. Package chain imports this package, so these internal tests
// cannot import it; chain_test.go, in package httpwatch_test, sets StartChain to chain.New.
var StartChain func(TestChainConfig) (*TestChain, error)

// env is a Server over an in-process store, reached over loopback HTTP.
type env struct {
	t        *testing.T
	st       *store.Store
	storages map[string]storage.Interface // by resource
	spies    map[string]*spyStorage
	api      *Server
	url      string
	clock    *testingclock.FakeClock
	// cacheClock drives the watch caches of newCachedEnvOnFakeClock; nil otherwise.
	cacheClock *testingclock.FakeClock
	client     *http.Client
}

type envOption func(*Config)

// overWatchCache makes newEnv put a watch cache over every storage; TestOverWatchCache sets it while it
// reruns tests (which run one at a time) against the cache.
var overWatchCache = false

// newEnv serves DefaultResources, Gizmos and Gadgets, each over its own *watch.Store wrapped in a
// spyStorage, with a fake clock and a jitter of 0.5.
func newEnv(t *testing.T, opts ...envOption) *env { return newEnvWith(t, overWatchCache, nil, opts...) }

// newCachedEnv is newEnv with a watch cache over each storage, as `listwatch serve` runs.
func newCachedEnv(t *testing.T, opts ...envOption) *env { return newEnvWith(t, true, nil, opts...) }

// newCachedEnvOnFakeClock is newCachedEnv with the watch caches on a fake clock of their own
// (e.cacheClock): their freshness waits and progress requests move only when the test steps it.
func newCachedEnvOnFakeClock(t *testing.T, opts ...envOption) *env {
	return newEnvWith(t, true, testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), opts...)
}

func newEnvWith(t *testing.T, cached bool, cacheClock *testingclock.FakeClock, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t, storages: map[string]storage.Interface{}, spies: map[string]*spyStorage{}, cacheClock: cacheClock}
	e.clock = testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	cfg := Config{Clock: e.clock, Jitter: func() float64 { return 0.5 }, Logger: testutil.DiscardLogger()}
	for _, o := range opts {
		o(&cfg)
	}
	var cc clock.Clock
	if cacheClock != nil {
		cc = cacheClock
	}
	c, err := StartChain(TestChainConfig{
		Resources:  append(DefaultResources(), Gizmos(), Gadgets()),
		Cached:     cached,
		CacheClock: cc,
		API:        cfg,
		Wrap: func(r Resource, s storage.Interface) storage.Interface {
			spy := &spyStorage{Interface: s}
			e.storages[r.Resource] = spy
			e.spies[r.Resource] = spy
			return spy
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.st, e.api, e.url = c.Store, c.API, c.URL
	tr := &http.Transport{}
	e.client = &http.Client{Transport: tr}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// response is a finished HTTP exchange.
type response struct {
	code   int
	header http.Header
	body   []byte
}

func (r response) status(t *testing.T) *metav1.Status {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal(r.body, &s); err != nil || s.Kind != "Status" {
		t.Fatalf("body is not a Status (%v): %s", err, r.body)
	}
	return &s
}

func (r response) object(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(r.body); err != nil {
		t.Fatalf("body is not an object (%v): %s", err, r.body)
	}
	return u
}

func (r response) list(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not JSON (%v): %s", err, r.body)
	}
	return m
}

// do sends a request and reads the whole answer.
func (e *env) do(method, path string, body string, headers ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	resp, err := e.client.Do(req.WithContext(ctx))
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: data}
}

// mustCreate creates an object and returns it as stored.
func (e *env) mustCreate(path, body string) *unstructured.Unstructured {
	e.t.Helper()
	r := e.do("POST", path, body)
	if r.code != http.StatusCreated {
		e.t.Fatalf("POST %s: %d %s", path, r.code, r.body)
	}
	return r.object(e.t)
}

func cmJSON(ns, name string, extra string) string {
	meta := fmt.Sprintf(`"name":%q`, name)
	if ns != "" {
		meta += fmt.Sprintf(`,"namespace":%q`, ns)
	}
	if extra != "" {
		meta += "," + extra
	}
	return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{` + meta + `},"data":{"k":"v"}}`
}

func widgetJSON(name string, extra string) string {
	meta := fmt.Sprintf(`"name":%q`, name)
	if extra != "" {
		meta += "," + extra
	}
	return `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{` + meta + `},"spec":{"size":1}}`
}

// unchanged fails if the store was written since rev.
func (e *env) unchanged(rev int64, what string) {
	e.t.Helper()
	if got := e.st.Rev(); got != rev {
		e.t.Errorf("%s changed the store: revision %d -> %d", what, rev, got)
	}
}

// wantStatus checks an error answer: HTTP code, Status code and reason, and the message.
func wantStatus(t *testing.T, r response, code int, reason metav1.StatusReason, message string) {
	t.Helper()
	if r.code != code {
		t.Errorf("HTTP %d, want %d: %s", r.code, code, r.body)
		return
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	s := r.status(t)
	if s.Status != metav1.StatusFailure || int(s.Code) != code || s.Reason != reason || s.APIVersion != "v1" {
		t.Errorf("Status %+v, want Failure %d %q", s, code, reason)
	}
	if message != "" && s.Message != message {
		t.Errorf("message\n  %q\nwant\n  %q", s.Message, message)
	}
}

// stream is an open watch.
type stream struct {
	t      *testing.T
	resp   *http.Response
	cancel context.CancelFunc
	frames chan rawFrame
	errc   chan error // how the body ended: nil for a clean end after a whole frame
	done   chan struct{}
}

// rawFrame is a decoded frame and the line it came in.
type rawFrame struct {
	watchclient.Frame
	line []byte
}

// watch opens a watch and returns once the response headers arrived.
func (e *env) watch(path string, headers ...string) *stream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	resp := e.openWatch(ctx, cancel, path, headers)
	return e.stream(resp, cancel, resp.Body)
}

// openWatch sends GET path with headers ("name", "value", ...) in ctx and returns the response once
// its headers arrived; anything but a 200 fails the test, after cancel.
func (e *env) openWatch(ctx context.Context, cancel context.CancelFunc, path string, headers []string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+path, nil)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		cancel()
		e.t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		e.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, data)
	}
	return resp
}

func (e *env) stream(resp *http.Response, cancel context.CancelFunc, body io.Reader) *stream {
	s := &stream{t: e.t, resp: resp, cancel: cancel, frames: make(chan rawFrame, 10000),
		errc: make(chan error, 1), done: make(chan struct{})}
	go s.read(body)
	e.t.Cleanup(s.close)
	return s
}

// read takes the body line by line: every line must be exactly one frame.
func (s *stream) read(body io.Reader) {
	defer close(s.done)
	defer close(s.frames)
	br := bufio.NewReader(body)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				err = fmt.Errorf("stream ended inside a frame: %q", line)
			} else if err == io.EOF {
				err = nil
			}
			s.errc <- err
			return
		}
		dec := watchclient.NewDecoder(bytes.NewReader(line))
		f, err := dec.Decode()
		if err == nil {
			if _, end := dec.Decode(); end != io.EOF {
				err = fmt.Errorf("more than one frame in line %q", line)
			}
		}
		if err != nil {
			s.errc <- fmt.Errorf("line %q: %w", line, err)
			return
		}
		s.frames <- rawFrame{Frame: f, line: line}
	}
}

func (s *stream) close() {
	s.cancel()
	s.resp.Body.Close()
	<-s.done
}

// next returns the next frame.
func (s *stream) next() rawFrame {
	s.t.Helper()
	select {
	case f, ok := <-s.frames:
		if !ok {
			s.t.Fatalf("watch ended (%v) while an event was expected", <-s.errc)
		}
		return f
	case <-time.After(testutil.WaitTimeout):
		s.t.Fatal("no watch event")
	}
	return rawFrame{}
}

// expectEnd waits for the stream to end cleanly, with no further frame.
func (s *stream) expectEnd() {
	s.t.Helper()
	select {
	case f, ok := <-s.frames:
		if ok {
			s.t.Fatalf("frame %s %s where the end was expected", f.Type, f.Object)
		}
	case <-time.After(testutil.WaitTimeout):
		s.t.Fatal("watch did not end")
	}
	if err := <-s.errc; err != nil {
		s.t.Fatalf("watch ended with %v, want a clean end", err)
	}
}

// nameOf returns the name and resourceVersion of a frame's object.
func nameOf(t *testing.T, f watchclient.Frame) (string, string) {
	t.Helper()
	_, m, err := f.Meta()
	if err != nil {
		t.Fatal(err)
	}
	return m.Name, m.ResourceVersion
}

// expect reads frames and checks their types and object names ("" skips the name).
func (s *stream) expect(want ...string) []rawFrame {
	s.t.Helper()
	var got []rawFrame
	for _, w := range want {
		typ, name, _ := strings.Cut(w, " ")
		f := s.next()
		got = append(got, f)
		n, _ := nameOf(s.t, f.Frame)
		if string(f.Type) != typ || (name != "" && n != name) {
			s.t.Fatalf("event %s %s (%s), want %s", f.Type, n, f.Object, w)
		}
	}
	return got
}

// spyStorage records what the handlers ask of the storage and what becomes of the watches.
type spyStorage struct {
	storage.Interface
	mu       sync.Mutex
	watches  []*spyWatch
	lastList storage.ListOptions
}

type spyWatch struct {
	key      string
	opts     storage.ListOptions
	ctx      context.Context
	deadline time.Time
	stopped  chan struct{}
	once     sync.Once
}

func (s *spyStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	sw := &spyWatch{key: key, opts: opts, ctx: ctx, stopped: make(chan struct{})}
	sw.deadline, _ = ctx.Deadline()
	s.mu.Lock()
	s.watches = append(s.watches, sw)
	s.mu.Unlock()
	return &spiedWatcher{Interface: w, spy: sw}, nil
}

func (s *spyStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	s.mu.Lock()
	s.lastList = opts
	s.mu.Unlock()
	return s.Interface.GetList(ctx, key, opts, listObj)
}

// nthWatch waits for the n-th watch (1-based) to be opened and returns it.
func (s *spyStorage) nthWatch(t *testing.T, n int) *spyWatch {
	t.Helper()
	var w *spyWatch
	testutil.WaitFor(t, fmt.Sprintf("watch %d to open", n), func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.watches) >= n {
			w = s.watches[n-1]
		}
		return w != nil
	})
	return w
}

type spiedWatcher struct {
	watch.Interface
	spy *spyWatch
}

func (w *spiedWatcher) Stop() {
	w.spy.once.Do(func() { close(w.spy.stopped) })
	w.Interface.Stop()
}

// waitStopped waits until the handler stopped the storage watch and cancelled its context.
func (w *spyWatch) waitStopped(t *testing.T) {
	t.Helper()
	select {
	case <-w.stopped:
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("the storage watch was not stopped")
	}
	select {
	case <-w.ctx.Done():
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("the storage watch's context was not cancelled")
	}
}

// fakeStorage serves watches from channels the test fills.
type fakeStorage struct {
	storage.Interface
	mu      sync.Mutex
	watches []*watch.FakeWatcher
	// ctxs are the contexts the watches were opened with, in order.
	ctxs []context.Context
	size int
}

func (f *fakeStorage) Watch(ctx context.Context, _ string, _ storage.ListOptions) (watch.Interface, error) {
	w := watch.NewFakeWithChanSize(f.size, false)
	f.mu.Lock()
	f.watches = append(f.watches, w)
	f.ctxs = append(f.ctxs, ctx)
	f.mu.Unlock()
	return w, nil
}
