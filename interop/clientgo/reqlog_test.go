package clientgo

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/httpwatch/watchclient"
)

// request is one request the server received, with what it answered so far.
type request struct {
	method    string
	path      string
	query     url.Values
	userAgent string
	// contentType is the Content-Type of the request body.
	contentType string

	mu              sync.Mutex
	responseType    string // the Content-Type of the response
	code            int
	contentEncoding string
	body            bytes.Buffer
	done            bool
}

// isWatch reports whether the request asked for a watch (watch=true or watch=1, or a /watch/ path).
func (r *request) isWatch() bool {
	v := r.query.Get("watch")
	return v == "true" || v == "1" || strings.Contains(r.path, "/watch/")
}

// isList reports whether the request is a plain list of a collection: a GET that is no watch, on a
// path of the served resources (not discovery).
func (r *request) isList() bool {
	return r.method == http.MethodGet && !r.isWatch() && !r.isDiscovery() && r.name() == ""
}

func (r *request) isDiscovery() bool {
	segs := strings.Split(strings.Trim(r.path, "/"), "/")
	switch {
	case len(segs) > 0 && segs[0] == "api":
		return len(segs) <= 2
	case len(segs) > 0 && segs[0] == "apis":
		return len(segs) <= 3
	}
	return true
}

// name is the object name of an item path, "" for a collection.
func (r *request) name() string {
	segs := strings.Split(strings.Trim(r.path, "/"), "/")
	// /api/v1[/namespaces/ns]/res[/name], /apis/g/v[/namespaces/ns]/res[/name]
	rest := segs[2:]
	if segs[0] == "apis" {
		rest = segs[3:]
	}
	if len(rest) >= 2 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	if len(rest) == 2 {
		return rest[1]
	}
	return ""
}

// String is the request as a log line: method, path, query and status.
func (r *request) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := fmt.Sprintf("%s %s?%s -> %d", r.method, r.path, r.query.Encode(), r.code)
	if r.contentEncoding != "" {
		s += " (" + r.contentEncoding + ")"
	}
	return s
}

// status is the HTTP status code sent, 0 before the headers.
// response is the response's Content-Type.
func (r *request) response() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.responseType
}

func (r *request) status() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.code
}

func (r *request) encoding() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.contentEncoding
}

func (r *request) finished() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

// plainBody is the body written so far, gunzipped if the response is compressed (a watch-list
// stream is one gzip member per flush; an incomplete last member yields what it decodes to).
func (r *request) plainBody() ([]byte, error) {
	r.mu.Lock()
	data := bytes.Clone(r.body.Bytes())
	enc := r.contentEncoding
	r.mu.Unlock()
	if enc != "gzip" || len(data) == 0 {
		return data, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("gzip stream: %w", err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil && err != io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("gzip stream: %w", err)
	}
	return plain, nil
}

// frames decodes the complete watch frames the server has written so far.
func (r *request) frames() ([]watchclient.Frame, error) {
	data, err := r.plainBody()
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var out []watchclient.Frame
	dec := watchclient.NewDecoder(bytes.NewReader(data))
	for {
		f, err := dec.Decode()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
}

// listResourceVersion is the metadata.resourceVersion of a finished list response.
func (r *request) listResourceVersion(t *testing.T) string {
	t.Helper()
	data, err := r.plainBody()
	if err != nil {
		t.Fatal(err)
	}
	var l metav1.List
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatalf("list response of %s: %v", r, err)
	}
	return l.ResourceVersion
}

// requestLog records every request that passes through it to next.
type requestLog struct {
	next http.Handler
	mu   sync.Mutex
	reqs []*request
}

func newRequestLog(next http.Handler) *requestLog { return &requestLog{next: next} }

func (l *requestLog) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r := &request{method: req.Method, path: req.URL.Path, query: req.URL.Query(), userAgent: req.UserAgent(), contentType: req.Header.Get("Content-Type")}
	l.mu.Lock()
	l.reqs = append(l.reqs, r)
	l.mu.Unlock()
	rec := &recordingWriter{w: w, r: r}
	defer func() {
		r.mu.Lock()
		r.done = true
		if r.code == 0 {
			r.code = http.StatusOK
		}
		r.mu.Unlock()
	}()
	l.next.ServeHTTP(rec, req)
}

// requests returns, in arrival order, the requests whose user agent starts with userAgent ("" for
// all) that keep (nil for all) accepts.
func (l *requestLog) requests(userAgent string, keep func(*request) bool) []*request {
	return l.since(0, userAgent, keep)
}

// mark is the number of requests so far, for since.
func (l *requestLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// since is requests restricted to those that arrived after mark. A request that waited at the gate
// arrived when it reached the log, before it waited.
func (l *requestLog) since(mark int, userAgent string, keep func(*request) bool) []*request {
	l.mu.Lock()
	later := slices.Clone(l.reqs[mark:])
	l.mu.Unlock()
	var out []*request
	for _, r := range later {
		if strings.HasPrefix(r.userAgent, userAgent) && (keep == nil || keep(r)) {
			out = append(out, r)
		}
	}
	return out
}

// describe lists requests one a line, for failure messages.
func describe(reqs []*request) string {
	var b strings.Builder
	for _, r := range reqs {
		b.WriteString("\n  ")
		b.WriteString(r.String())
	}
	return b.String()
}

// recordingWriter copies what the handler writes into its request. It passes Flush on, which the
// watch handler requires.
type recordingWriter struct {
	w http.ResponseWriter
	r *request
}

func (rw *recordingWriter) Header() http.Header { return rw.w.Header() }

func (rw *recordingWriter) WriteHeader(code int) {
	rw.r.mu.Lock()
	if rw.r.code == 0 {
		rw.r.code = code
		rw.r.contentEncoding = rw.w.Header().Get("Content-Encoding")
		rw.r.responseType = rw.w.Header().Get("Content-Type")
	}
	rw.r.mu.Unlock()
	rw.w.WriteHeader(code)
}

func (rw *recordingWriter) Write(p []byte) (int, error) {
	rw.r.mu.Lock()
	if rw.r.code == 0 {
		rw.r.code = http.StatusOK
		rw.r.contentEncoding = rw.w.Header().Get("Content-Encoding")
		rw.r.responseType = rw.w.Header().Get("Content-Type")
	}
	rw.r.body.Write(p)
	rw.r.mu.Unlock()
	return rw.w.Write(p)
}

func (rw *recordingWriter) Flush() {
	if f, ok := rw.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (rw *recordingWriter) Unwrap() http.ResponseWriter { return rw.w }

// watchGate sits in front of the API and lets a test interrupt watches: cut ends every running
// watch request as a server-side timeout would (the stream ends cleanly), and while the gate is
// held new watch requests wait in front of the API until the hold ends or their client goes away.
type watchGate struct {
	next http.Handler

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever running or parked changes
	held    chan struct{} // non-nil while held; closed when the hold ends
	closed  bool
	running map[*runningWatch]struct{}
	parked  []*http.Request
}

func newWatchGate(next http.Handler) *watchGate {
	return &watchGate{next: next, changed: make(chan struct{}), running: map[*runningWatch]struct{}{}}
}

// notifyLocked wakes the waiters of changed.
func (g *watchGate) notifyLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

func (g *watchGate) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query().Get("watch")
	if q != "true" && q != "1" && !strings.Contains(req.URL.Path, "/watch/") {
		g.next.ServeHTTP(w, req)
		return
	}
	g.mu.Lock()
	for g.held != nil && !g.closed {
		held := g.held
		g.parked = append(g.parked, req)
		g.notifyLocked()
		g.mu.Unlock()
		select {
		case <-held:
		case <-req.Context().Done():
		}
		g.mu.Lock()
		for i, p := range g.parked {
			if p == req {
				g.parked = append(g.parked[:i], g.parked[i+1:]...)
				break
			}
		}
		g.notifyLocked()
		if req.Context().Err() != nil {
			g.mu.Unlock()
			return
		}
	}
	ctx, cancel := context.WithCancel(req.Context())
	rw := &runningWatch{cancel: cancel}
	g.running[rw] = struct{}{}
	g.notifyLocked()
	g.mu.Unlock()
	defer func() {
		cancel()
		g.mu.Lock()
		delete(g.running, rw)
		g.notifyLocked()
		g.mu.Unlock()
	}()
	g.next.ServeHTTP(w, req.WithContext(ctx))
}

// runningWatch is a watch request past the gate.
type runningWatch struct{ cancel context.CancelFunc }

// hold makes new watch requests wait until release.
func (g *watchGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held == nil {
		g.held = make(chan struct{})
	}
}

// release lets the waiting watch requests through and ends the hold.
func (g *watchGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
}

// close releases the gate for good.
func (g *watchGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.release()
}

// cut ends every running watch request and waits until their handlers returned. It returns how
// many it ended.
func (g *watchGate) cut(ctx context.Context) (int, error) {
	g.mu.Lock()
	var cut []*runningWatch
	for rw := range g.running {
		rw.cancel()
		cut = append(cut, rw)
	}
	g.mu.Unlock()
	return len(cut), g.waitFor(ctx, func() bool {
		for _, rw := range cut {
			if _, ok := g.running[rw]; ok {
				return false
			}
		}
		return true
	})
}

// parkedQueries returns the queries of the watch requests waiting at the gate.
func (g *watchGate) parkedQueries() []url.Values {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []url.Values
	for _, p := range g.parked {
		out = append(out, p.URL.Query())
	}
	return out
}

// waitFor waits until cond, evaluated under the gate's lock, holds.
func (g *watchGate) waitFor(ctx context.Context, cond func() bool) error {
	for {
		g.mu.Lock()
		ok, changed := cond(), g.changed
		g.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
