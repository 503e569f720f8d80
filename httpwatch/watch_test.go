package httpwatch

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/httpwatch/watchclient"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/store"
)

type watchListOptions = storage.ListOptions

func newTooManyRequests() error {
	return apierrors.NewTooManyRequests("storage is (re)initializing", 3)
}

func newGzipReader(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }

const cmPath = "/api/v1/namespaces/default/configmaps"

// TestWatchListDefaulting covers metainternalversion SetListOptionsDefaults as handlers/get.go
// ListResource applies it: with WatchList on, watch=true with resourceVersion "" or "0" and neither
// sendInitialEvents nor resourceVersionMatch becomes a watch-list (initial ADDED events, then with
// bookmarks the annotated BOOKMARK at the list revision). Any other resourceVersion, or an explicit
// choice, is left alone; with the gate off nothing is defaulted.
func TestWatchListDefaulting(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(cmPath, cmJSON("", "a", ""))
	b := e.mustCreate(cmPath, cmJSON("", "b", ""))
	rev := strconv.FormatInt(e.st.Rev(), 10)
	spy := e.spies["configmaps"]

	for i, rv := range []string{"", "0"} {
		w := e.watch(cmPath + "?watch=true&allowWatchBookmarks=true&resourceVersion=" + rv)
		got := spy.nthWatch(t, i+1).opts
		if got.SendInitialEvents == nil || !*got.SendInitialEvents || got.ResourceVersion != rv {
			t.Errorf("rv %q: storage watch options %+v, want sendInitialEvents=true", rv, got)
		}
		fs := w.expect("ADDED a", "ADDED b", "BOOKMARK")
		if _, m, _ := fs[2].Meta(); m.ResourceVersion != rev || m.Annotations[InitialEventsEndAnnotation] != "true" {
			t.Errorf("rv %q: end bookmark %s, want resourceVersion %s annotated", rv, fs[2].Object, rev)
		}
		w.close()
	}

	// A resourceVersion of an object: only later events.
	w := e.watch(cmPath + "?watch=true&allowWatchBookmarks=true&resourceVersion=" + b.GetResourceVersion())
	if got := spy.nthWatch(t, 3).opts; got.SendInitialEvents != nil {
		t.Errorf("rv %s: sendInitialEvents %v, want unset", b.GetResourceVersion(), *got.SendInitialEvents)
	}
	e.mustCreate(cmPath, cmJSON("", "c", ""))
	w.expect("ADDED c")
	w.close()

	// An explicit sendInitialEvents=false is kept: no initial events.
	w = e.watch(cmPath + "?watch=true&sendInitialEvents=false&resourceVersionMatch=NotOlderThan")
	if got := spy.nthWatch(t, 4).opts; got.SendInitialEvents == nil || *got.SendInitialEvents {
		t.Errorf("explicit sendInitialEvents=false became %+v", got)
	}
	e.mustCreate(cmPath, cmJSON("", "d", ""))
	w.expect("ADDED d")
	w.close()

	// Failure mode: with the WatchList gate off, resourceVersion "" is a legacy watch: the initial
	// events but no end bookmark, and sendInitialEvents is refused.
	off := newEnv(t, func(c *Config) { c.Features.DisableWatchList = true })
	off.mustCreate(cmPath, cmJSON("", "a", ""))
	w = off.watch(cmPath + "?watch=true&allowWatchBookmarks=true")
	if got := off.spies["configmaps"].nthWatch(t, 1).opts; got.SendInitialEvents != nil {
		t.Errorf("gate off: sendInitialEvents defaulted to %v", *got.SendInitialEvents)
	}
	w.expect("ADDED a")
	off.mustCreate(cmPath, cmJSON("", "b", ""))
	w.expect("ADDED b") // no BOOKMARK in between
	r := off.do("GET", cmPath+"?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", "")
	wantStatus(t, r, 422, metav1.StatusReasonInvalid,
		`ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled`)
}

// TestListOptionsValidation covers metainternalversion/validation ValidateListOptions: the 422
// rules of metainternalversion validation, each answered before the storage is asked and with
// nothing changed.
func TestListOptionsValidation(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(cmPath, cmJSON("", "a", ""))
	rev := e.st.Rev()
	const prefix = `ListOptions.meta.k8s.io "" is invalid: `
	cases := []struct {
		query, message string
	}{
		{"watch=true&sendInitialEvents=true",
			prefix + "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"},
		{"watch=true&sendInitialEvents=true&resourceVersionMatch=Exact",
			prefix + `[resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: "Exact": supported values: "NotOlderThan"]`},
		{"watch=true&resourceVersion=5&resourceVersionMatch=NotOlderThan",
			prefix + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"},
		{"watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&continue=abc",
			prefix + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"},
		{"sendInitialEvents=true",
			prefix + "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"},
		{"resourceVersionMatch=NotOlderThan",
			prefix + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"},
		{"resourceVersion=5&resourceVersionMatch=NotOlderThan&continue=abc",
			prefix + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"},
		{"resourceVersion=0&resourceVersionMatch=Exact",
			prefix + `resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"`},
		{"resourceVersion=5&resourceVersionMatch=Newest",
			prefix + `resourceVersionMatch: Unsupported value: "Newest": supported values: "Exact", "NotOlderThan", ""`},
		// The deprecated /watch/ path does not set watch=true, so the list rules apply to it.
	}
	for _, c := range cases {
		r := e.do("GET", cmPath+"?"+c.query, "")
		wantStatus(t, r, 422, metav1.StatusReasonInvalid, c.message)
		if s := r.status(t); s.Details == nil || s.Details.Kind != "ListOptions" || s.Details.Group != "meta.k8s.io" {
			t.Errorf("%s: details %+v", c.query, s.Details)
		}
	}
	r := e.do("GET", "/api/v1/watch/namespaces/default/configmaps?sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=5", "")
	wantStatus(t, r, 422, metav1.StatusReasonInvalid, prefix+"sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list")
	e.unchanged(rev, "refused list options")
	spy := e.spies["configmaps"]
	spy.mu.Lock()
	watches := len(spy.watches)
	spy.mu.Unlock()
	if watches != 0 {
		t.Errorf("the storage was asked for %d watches", watches)
	}
	// Success mode of the same rules: valid combinations reach the storage.
	if r := e.do("GET", cmPath+"?resourceVersion=2&resourceVersionMatch=Exact", ""); r.code != 200 {
		t.Errorf("Exact list: %d %s", r.code, r.body)
	}
	// NotOlderThan a revision the store has not reached: the storage's TooLargeResourceVersion.
	r = e.do("GET", cmPath+"?resourceVersion=99&resourceVersionMatch=NotOlderThan", "")
	wantStatus(t, r, 504, metav1.StatusReasonTimeout, "Timeout: Too large resource version: 99, current: 2")
}

// TestWatchRouting covers the routing of handlers/get.go ListResource: watch=true and the /watch/
// paths watch, a name in the path is a metadata.name selector, and a conflicting explicit selector
// is a 400.
func TestWatchRouting(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{
		cmPath + "?watch=true&resourceVersion=",
		cmPath + "?watch=1&resourceVersion=",
		"/api/v1/watch/namespaces/default/configmaps?resourceVersion=",
		"/api/v1/configmaps?watch=true&resourceVersion=",
		"/api/v1/watch/configmaps?resourceVersion=",
	} {
		w := e.watch(path + strconv.FormatInt(e.st.Rev(), 10))
		name := fmt.Sprintf("x%d", e.st.Rev())
		e.mustCreate(cmPath, cmJSON("", name, ""))
		w.expect("ADDED " + name)
		w.close()
	}
	rv := strconv.FormatInt(e.st.Rev(), 10)

	// /watch/.../<name>: only that object, through a single-key storage watch.
	w := e.watch("/api/v1/watch/namespaces/default/configmaps/only?resourceVersion=" + rv)
	sw := e.spies["configmaps"].nthWatch(t, 6)
	if sw.key != "/configmaps/default/only" || sw.opts.Recursive {
		t.Errorf("named watch went to key %q recursive=%v", sw.key, sw.opts.Recursive)
	}
	if n, ok := sw.opts.Predicate.MatchesSingle(); !ok || n != "only" {
		t.Errorf("named watch predicate %v", sw.opts.Predicate.Field)
	}
	e.mustCreate(cmPath, cmJSON("", "other", ""))
	e.mustCreate(cmPath, cmJSON("", "only", ""))
	w.expect("ADDED only")
	w.close()

	// The same name in an explicit selector is fine; another one is a 400.
	w = e.watch("/api/v1/watch/namespaces/default/configmaps/only?fieldSelector=metadata.name%3Donly")
	w.expect("ADDED only")
	w.close()
	rev := e.st.Rev()
	for _, sel := range []string{"metadata.name%3Dother", "metadata.namespace%3Ddefault"} {
		r := e.do("GET", "/api/v1/watch/namespaces/default/configmaps/only?fieldSelector="+sel, "")
		wantStatus(t, r, 400, metav1.StatusReasonBadRequest, "fieldSelector metadata.name doesn't match requested name")
	}
	e.unchanged(rev, "a refused named watch")

	// A field selector naming a namespace narrows a cluster-wide watch to that namespace's key.
	w = e.watch("/api/v1/configmaps?watch=true&fieldSelector=metadata.namespace%3Dkube-system&resourceVersion=" + strconv.FormatInt(rev, 10))
	sw = e.spies["configmaps"].nthWatch(t, 8)
	if sw.key != "/configmaps/kube-system" || !sw.opts.Recursive {
		t.Errorf("namespace-selector watch went to key %q recursive=%v", sw.key, sw.opts.Recursive)
	}
	e.mustCreate(cmPath, cmJSON("", "not-there", ""))
	e.mustCreate("/api/v1/namespaces/kube-system/configmaps", cmJSON("", "there", ""))
	w.expect("ADDED there")
	w.close()

	// GET on an item with watch=true is a get, as upstream routes it.
	r := e.do("GET", cmPath+"/only?watch=true", "")
	if r.code != 200 || r.object(t).GetName() != "only" {
		t.Errorf("GET item with watch=true: %d %s", r.code, r.body)
	}
}

// TestWatchRequestScope: the storage watch is made on a context carrying the request's scope, as the
// apiserver's request context does: the path's namespace, else the namespace the field selector pins
// (registry.Store.WatchPredicate), and the name of the path or of the field selector when it is a
// path segment (request/requestinfo.go). The watch cache indexes the watcher by it. Failure mode: a
// context without the scope, where the cache registers a watch of one namespace cluster-wide.
func TestWatchRequestScope(t *testing.T) {
	e := newEnv(t)
	rv := "&resourceVersion=" + strconv.FormatInt(e.st.Rev(), 10)
	opened := map[string]int{}
	for _, tc := range []struct {
		resource, path string
		want           storage.RequestScope
	}{
		{"configmaps", cmPath + "?watch=true", storage.RequestScope{Namespace: "default"}},
		{"configmaps", "/api/v1/configmaps?watch=true", storage.RequestScope{}},
		{"configmaps", "/api/v1/watch/namespaces/default/configmaps/only?", storage.RequestScope{Namespace: "default", Name: "only"}},
		{"configmaps", cmPath + "?watch=true&fieldSelector=metadata.name%3Dx", storage.RequestScope{Namespace: "default", Name: "x"}},
		{"configmaps", "/api/v1/configmaps?watch=true&fieldSelector=metadata.namespace%3Dkube-system", storage.RequestScope{Namespace: "kube-system"}},
		{"configmaps", "/api/v1/configmaps?watch=true&fieldSelector=metadata.name%3Dx", storage.RequestScope{Name: "x"}},
		{"configmaps", cmPath + "?watch=true&fieldSelector=metadata.namespace%3Dother", storage.RequestScope{Namespace: "default"}},
		// A name that is not a path segment is not the request's name.
		{"configmaps", "/api/v1/configmaps?watch=true&fieldSelector=metadata.name%3Da%2Fb", storage.RequestScope{}},
		{"pods", "/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dn1", storage.RequestScope{}},
		{"gizmos", "/apis/example.com/v1/gizmos?watch=true&fieldSelector=metadata.name%3Dg", storage.RequestScope{Name: "g"}},
	} {
		w := e.watch(tc.path + rv)
		opened[tc.resource]++
		sw := e.spies[tc.resource].nthWatch(t, opened[tc.resource])
		if got := storage.RequestScopeFrom(sw.ctx); got != tc.want {
			t.Errorf("%s: the storage watch's context has scope %+v, want %+v", tc.path, got, tc.want)
		}
		w.close()
	}
}

func TestWatchTimeoutFunction(t *testing.T) {
	ptr := func(v int64) *int64 { return &v }
	min := 1800 * time.Second
	cases := []struct {
		seconds *int64
		jitter  float64
		want    time.Duration
	}{
		{nil, 0, 1800 * time.Second},
		{nil, 0.5, 2700 * time.Second},
		{ptr(0), 0.25, 2250 * time.Second}, // 0 means the randomized default (handlers/get.go ListResource)
		{ptr(5), 0.5, 5 * time.Second},
		{ptr(-3), 0.5, -3 * time.Second},
	}
	for _, c := range cases {
		if got := watchTimeout(c.seconds, min, func() float64 { return c.jitter }); got != c.want {
			t.Errorf("watchTimeout(%v, jitter %v) = %v, want %v", c.seconds, c.jitter, got, c.want)
		}
	}
}

// TestWatchTimeout covers the timeout of handlers/get.go ListResource: timeoutSeconds ends the
// stream cleanly at that time; 0 or absent means MinRequestTimeout·(1+jitter); the deadline is on
// the storage's context.
func TestWatchTimeout(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		query string
		want  time.Duration
	}{
		{"&timeoutSeconds=10", 10 * time.Second},
		{"&timeoutSeconds=0", 2700 * time.Second},
		{"", 2700 * time.Second},
	} {
		rv := strconv.FormatInt(e.st.Rev(), 10)
		start := time.Now()
		w := e.watch(cmPath + "?watch=true&resourceVersion=" + rv + c.query)
		spy := e.spies["configmaps"]
		spy.mu.Lock()
		sw := spy.watches[len(spy.watches)-1]
		spy.mu.Unlock()
		if left := sw.deadline.Sub(start); left < c.want || left > c.want+testutil.WaitTimeout {
			t.Errorf("%q: storage context deadline %v after the request, want %v", c.query, left, c.want)
		}
		testutil.WaitFor(t, "the watch timer", e.clock.HasWaiters)
		e.clock.Step(c.want - time.Second)
		name := fmt.Sprintf("t%d", e.st.Rev())
		e.mustCreate(cmPath, cmJSON("", name, ""))
		w.expect("ADDED " + name) // still open a second before the end
		e.clock.Step(time.Second)
		w.expectEnd()
		sw.waitStopped(t)
	}
}

// TestWatchErrorBeforeStreaming covers handlers/get.go ListResource: errors of Watch itself are
// ordinary responses with a Status, as the apiserver answers them (a storage InvalidError is no API
// error: 500, no reason).
func TestWatchErrorBeforeStreaming(t *testing.T) {
	e := newEnv(t)
	rev := e.st.Rev()
	r := e.do("GET", cmPath+"?watch=true&resourceVersion=abc", "")
	wantStatus(t, r, 500, "", `resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax`)
	r = e.do("GET", cmPath+"?watch=true&labelSelector=a%3D%3D%3Db", "")
	wantStatus(t, r, 400, metav1.StatusReasonBadRequest, "")
	if s := r.status(t); !strings.Contains(s.Message, "unable to parse requirement") {
		t.Errorf("bad label selector message %q", s.Message)
	}
	r = e.do("GET", cmPath+"?watch=true&fieldSelector=spec.x%3D1", "")
	wantStatus(t, r, 400, metav1.StatusReasonBadRequest, `"spec.x" is not a known field selector: only "metadata.name", "metadata.namespace"`)
	r = e.do("GET", "/apis/example.com/v1/namespaces/default/widgets?watch=true&fieldSelector=spec.x%3D1", "")
	wantStatus(t, r, 400, metav1.StatusReasonBadRequest, "field label not supported: spec.x")
	r = e.do("GET", cmPath+"?watch=true&timeoutSeconds=x", "")
	wantStatus(t, r, 400, metav1.StatusReasonBadRequest, "")
	e.unchanged(rev, "refused watches")

	// A storage that is not ready answers 429 with Retry-After, before any header of a stream.
	busy := &failingWatchStorage{err: newTooManyRequests()}
	api, err := New(Config{Resources: []ServedResource{{Resource: ConfigMaps(), Storage: busy}}, Logger: testutil.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, httptest.NewRequest("GET", cmPath+"?watch=true", nil))
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "3" || !strings.Contains(rec.Body.String(), `"reason":"TooManyRequests"`) {
		t.Errorf("not-ready storage: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}

// TestWatchErrorFrames covers handlers/watch.go WatchServer.HandleHTTP: after the headers, storage
// errors are ERROR frames with a Status, the last frame of the stream.
func TestWatchErrorFrames(t *testing.T) {
	e := newEnv(t)
	a := e.mustCreate(cmPath, cmJSON("", "a", ""))
	e.mustCreate(cmPath, cmJSON("", "b", ""))
	e.mustCreate(cmPath, cmJSON("", "c", ""))
	if _, err := e.st.Compact(e.st.Rev()); err != nil {
		t.Fatal(err)
	}
	w := e.watch(cmPath + "?watch=true&resourceVersion=" + a.GetResourceVersion())
	f := w.expect("ERROR")[0]
	s, err := f.Status()
	if err != nil || s.Code != 410 || s.Reason != metav1.StatusReasonExpired || s.Message != "The resourceVersion for the provided watch is too old." {
		t.Errorf("compacted watch: %v %s", err, f.Object)
	}
	w.expectEnd()

	w = e.watch(cmPath + "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=999999")
	f = w.expect("ERROR")[0]
	s, _ = f.Status()
	if s == nil || s.Code != 504 || s.Reason != metav1.StatusReasonTimeout ||
		s.Message != fmt.Sprintf("Timeout: Too large resource version: 999999, current: %d", e.st.Rev()) {
		t.Errorf("future watch-list: %s", f.Object)
	}
	w.expectEnd()

	// The exact bytes of an ERROR frame, as the watch cache sends them.
	fake := &fakeStorage{size: 10}
	fe := newFakeEnv(t, fake)
	w = fe.watch(cmPath + "?watch=true&resourceVersion=5")
	fake.last(t).Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 5 (9)"})
	const want = `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 5 (9)","reason":"Expired","code":410}}` + "\n"
	if got := string(w.next().line); got != want {
		t.Errorf("ERROR frame\n  %s\nwant\n  %s", got, want)
	}
}

// TestWatchStreamStart covers the start of handlers/watch.go WatchServer.HandleHTTP: 200,
// Content-Type application/json (no stream=watch), chunked, headers flushed before any event.
func TestWatchStreamStart(t *testing.T) {
	e := newEnv(t)
	rv := strconv.FormatInt(e.st.Rev(), 10)
	// e.watch returns once the headers arrived; no event exists yet.
	w := e.watch(cmPath+"?watch=true&resourceVersion="+rv, "Accept", "application/json;stream=watch")
	if w.resp.StatusCode != 200 || w.resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("watch answered %d with Content-Type %q", w.resp.StatusCode, w.resp.Header.Get("Content-Type"))
	}
	if len(w.resp.TransferEncoding) != 1 || w.resp.TransferEncoding[0] != "chunked" {
		t.Errorf("Transfer-Encoding %v, want chunked", w.resp.TransferEncoding)
	}
	select {
	case f := <-w.frames:
		t.Fatalf("a frame before any write: %s", f.line)
	default:
	}
	w.close()

	// Failure mode: a ResponseWriter that cannot flush cannot stream.
	rec := &noFlushWriter{header: http.Header{}}
	e.api.ServeHTTP(rec, httptest.NewRequest("GET", cmPath+"?watch=true&resourceVersion="+rv, nil))
	if rec.code != 500 || !strings.Contains(rec.body.String(), "unable to start watch - can't get http.Flusher") {
		t.Errorf("no flusher: %d %s", rec.code, rec.body.String())
	}
	e.spies["configmaps"].nthWatch(t, 2).waitStopped(t)

	// Failure mode: an Accept header without any of the endpoint's formats is a 406 before the
	// options are read (a built-in kind's route refuses it; handlers.ListResource negotiates as for
	// a list first), and one without a streaming format a 406 before the storage is asked.
	r := e.do("GET", cmPath+"?watch=true&resourceVersionMatch=bogus", "", "Accept", "text/html")
	wantStatus(t, r, 406, metav1.StatusReasonNotAcceptable, "406: Not Acceptable\n\nAvailable representations: application/json, "+
		"application/yaml, application/vnd.kubernetes.protobuf, application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch")
	r = e.do("GET", widgetPath+"?watch=true&resourceVersionMatch=bogus", "", "Accept", "text/html")
	wantStatus(t, r, 406, metav1.StatusReasonNotAcceptable, "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf")
	r = e.do("GET", cmPath+"?watch=true", "", "Accept", "application/yaml")
	if r.code != 406 || !strings.Contains(string(r.body), "application/json;stream=watch") {
		t.Errorf("a watch asked for in YAML: %d %s, want a 406 listing the streaming formats", r.code, r.body)
	}
}

// TestWatchFrameBytes covers the frames of handlers/watch.go WatchServer.HandleHTTP: each frame is
// byte for byte json.Encoder's encoding of a metav1.WatchEvent whose object is the JSON of the
// event object, one line per frame.
func TestWatchFrameBytes(t *testing.T) {
	fake := &fakeStorage{size: 10}
	fe := newFakeEnv(t, fake)
	w := fe.watch(cmPath + "?watch=true&resourceVersion=5")
	fw := fake.last(t)
	obj := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetName(name)
		u.SetNamespace("default")
		u.SetResourceVersion("7")
		u.Object["data"] = map[string]any{"html": "<a href='x'>&amp;</a>", "sep": "a\u2028b", "n": int64(3)}
		return u
	}
	bookmark := &unstructured.Unstructured{}
	bookmark.SetResourceVersion("9") // no kind: the server names it
	events := []watch.Event{
		{Type: watch.Added, Object: obj("a")},
		{Type: watch.Modified, Object: obj("b")},
		{Type: watch.Deleted, Object: obj("c")},
		{Type: watch.Bookmark, Object: bookmark},
	}
	for _, ev := range events {
		fw.Action(ev.Type, ev.Object)
		got := w.next()
		o := ev.Object
		if ev.Type == watch.Bookmark {
			o = ConfigMaps().NewObject()
			o.(*unstructured.Unstructured).SetResourceVersion("9")
		}
		var inner bytes.Buffer
		if err := unstructured.UnstructuredJSONScheme.Encode(o, &inner); err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(&metav1.WatchEvent{Type: string(ev.Type), Object: runtime.RawExtension{Raw: inner.Bytes()}}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.line, want.Bytes()) {
			t.Errorf("%s frame\n  %s\nwant\n  %s", ev.Type, got.line, want.Bytes())
		}
	}
}

// recordingWriter is a ResponseWriter that logs headers, writes and flushes in order.
type recordingWriter struct {
	mu       sync.Mutex
	header   http.Header
	ops      []string
	failFrom int // writes from this one on fail; 0 never
	writes   int
}

func (r *recordingWriter) Header() http.Header { return r.header }
func (r *recordingWriter) WriteHeader(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, fmt.Sprintf("header %d", code))
}
func (r *recordingWriter) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	if r.failFrom > 0 && r.writes >= r.failFrom {
		r.ops = append(r.ops, "failed write")
		return 0, errors.New("connection reset by peer")
	}
	f, err := watchclient.NewDecoder(bytes.NewReader(p)).Decode()
	if err != nil {
		r.ops = append(r.ops, "write "+string(p))
		return len(p), nil
	}
	_, m, _ := f.Meta()
	r.ops = append(r.ops, "write "+string(f.Type)+" "+m.Name)
	return len(p), nil
}
func (r *recordingWriter) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, "flush")
}
func (r *recordingWriter) log() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.ops, "; ")
}

func named(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetName(name)
	u.SetNamespace("default")
	return u
}

// serveFake runs one watch request against a Server over fake storage with a watcher the test
// prepared, and returns a function that ends the request and waits for the handler.
func serveFake(t *testing.T, fw *watch.FakeWatcher, w http.ResponseWriter, query string) (*Server, func()) {
	t.Helper()
	storage := &presetStorage{w: fw}
	api, err := New(Config{Resources: []ServedResource{{Resource: ConfigMaps(), Storage: storage}}, Logger: testutil.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		api.ServeHTTP(w, httptest.NewRequest("GET", cmPath+"?watch=true&resourceVersion=5"+query, nil).WithContext(ctx))
	}()
	return api, func() {
		cancel()
		<-done
	}
}

// TestWatchFlushPolicy covers the loop of handlers/watch.go WatchServer.HandleHTTP: the stream is
// flushed only when no event is waiting, and once more after the initial-events-end bookmark.
func TestWatchFlushPolicy(t *testing.T) {
	fw := watch.NewFakeWithChanSize(10, false)
	for _, n := range []string{"a", "b", "c"} {
		fw.Add(named(n))
	}
	end := named("")
	end.SetAnnotations(map[string]string{InitialEventsEndAnnotation: "true"})
	fw.Action(watch.Bookmark, end)
	fw.Add(named("d"))
	rec := &recordingWriter{header: http.Header{}}
	_, stop := serveFake(t, fw, rec, "")
	expectThenLoneFlush(t, rec, "header 200; flush; write ADDED a; write ADDED b; write ADDED c; write BOOKMARK ; flush; write ADDED d; flush",
		fw.Add, "e", stop)
	if !fw.IsStopped() {
		t.Error("the watcher was not stopped when the request ended")
	}
}

// expectThenLoneFlush waits until rec has logged want, then adds one more event, name, alone and waits
// for its write and flush; after stop the log must be unchanged.
func expectThenLoneFlush(t *testing.T, rec *recordingWriter, want string, add func(runtime.Object), name string, stop func()) {
	t.Helper()
	testutil.WaitFor(t, "the buffered events", func() bool { return rec.log() == want })
	add(named(name))
	want += "; write ADDED " + name + "; flush"
	testutil.WaitFor(t, "a lone event flushed", func() bool { return rec.log() == want })
	stop()
	if got := rec.log(); got != want {
		t.Errorf("writes and flushes\n  %s\nwant\n  %s", got, want)
	}
}

// TestWatchWriteError covers the other end of that loop: a failed write ends the handler, which
// stops the watcher.
func TestWatchWriteError(t *testing.T) {
	fw := watch.NewFakeWithChanSize(10, false)
	fw.Add(named("a"))
	fw.Add(named("b"))
	rec := &recordingWriter{header: http.Header{}, failFrom: 2}
	_, stop := serveFake(t, fw, rec, "")
	testutil.WaitFor(t, "the handler to give up", fw.IsStopped)
	stop()
	if got, want := rec.log(), "header 200; flush; write ADDED a; failed write"; got != want {
		t.Errorf("ops %q, want %q", got, want)
	}
}

// TestWatchEnds covers the end of handlers/watch.go WatchServer.HandleHTTP: the response ends with
// no final frame when the storage closes the watch, the client goes away or the server shuts down;
// each time the storage watch is stopped and its context cancelled. After Shutdown, a new watch
// ends right after its headers.
func TestWatchEnds(t *testing.T) {
	fake := &fakeStorage{size: 10}
	fe := newFakeEnv(t, fake)

	w := fe.watch(cmPath + "?watch=true&resourceVersion=5")
	fw := fake.last(t)
	fw.Add(named("a"))
	w.expect("ADDED a")
	fw.Stop() // the storage ends the watch
	w.expectEnd()

	e := newEnv(t)
	rv := strconv.FormatInt(e.st.Rev(), 10)
	w = e.watch(cmPath + "?watch=true&resourceVersion=" + rv)
	sw := e.spies["configmaps"].nthWatch(t, 1)
	w.cancel() // the client goes away
	sw.waitStopped(t)

	w = e.watch(cmPath + "?watch=true&resourceVersion=" + rv)
	sw = e.spies["configmaps"].nthWatch(t, 2)
	e.api.Shutdown()
	w.expectEnd()
	sw.waitStopped(t)
	w = e.watch(cmPath + "?watch=true&resourceVersion=" + rv)
	w.expectEnd()
	// Other requests are still served during shutdown.
	if r := e.do("GET", cmPath, ""); r.code != 200 {
		t.Errorf("list during shutdown: %d", r.code)
	}
}

// TestWatchCacheableObject: an event object shared by several watchers (the watch cache's
// CachingObject) is framed once for all of them, and every watcher gets the same bytes.
func TestWatchCacheableObject(t *testing.T) {
	fake := &fakeStorage{size: 10}
	fe := newFakeEnv(t, fake)
	var streams []*stream
	for range 3 {
		streams = append(streams, fe.watch(cmPath+"?watch=true&resourceVersion=5"))
	}
	shared := &countingCacheable{Unstructured: named("shared")}
	for i := range streams {
		fake.nth(t, i+1).Modify(shared)
	}
	var first []byte
	for _, s := range streams {
		f := s.next()
		if first == nil {
			first = f.line
		} else if !bytes.Equal(first, f.line) {
			t.Errorf("frames differ:\n  %s\n  %s", first, f.line)
		}
	}
	if n := shared.encodes(); n != 1 {
		t.Errorf("shared object framed %d times, want once", n)
	}
	if !bytes.Contains(first, []byte(`"type":"MODIFIED"`)) {
		t.Errorf("cached frame lost its type: %s", first)
	}
}

// countingCacheable is a CacheableObject that counts the encodings it computes.
type countingCacheable struct {
	*unstructured.Unstructured
	mu    sync.Mutex
	cache map[runtime.Identifier][]byte
	n     int
}

func (c *countingCacheable) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	c.mu.Lock()
	raw, ok := c.cache[id]
	if !ok {
		var buf bytes.Buffer
		if err := encode(c.Unstructured.DeepCopy(), &buf); err != nil {
			c.mu.Unlock()
			return err
		}
		if c.cache == nil {
			c.cache = map[runtime.Identifier][]byte{}
		}
		raw = buf.Bytes()
		c.cache[id] = raw
		c.n++
	}
	c.mu.Unlock()
	_, err := w.Write(raw)
	return err
}
func (c *countingCacheable) GetObject() runtime.Object { return c.Unstructured.DeepCopy() }
func (c *countingCacheable) encodes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
func (c *countingCacheable) DeepCopyObject() runtime.Object { return c }

// TestWatchListGzip: a watch-list to a client accepting gzip is compressed, one gzip member per
// flush; an ordinary watch is not.
func TestWatchListGzip(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(cmPath, cmJSON("", "a", ""))
	req, _ := http.NewRequest("GET", e.url+cmPath+"?watch=true&allowWatchBookmarks=true", nil)
	req.Header.Set("Accept-Encoding", "gzip") // set by hand: the transport then leaves the body compressed
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := e.client.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("watch-list Content-Encoding %q, want gzip", resp.Header.Get("Content-Encoding"))
	}
	gz, err := newGzipReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	w := e.stream(resp, cancel, gz)
	w.expect("ADDED a", "BOOKMARK")
	e.mustCreate(cmPath, cmJSON("", "b", ""))
	w.expect("ADDED b") // a later gzip member
	w.close()

	rv := strconv.FormatInt(e.st.Rev(), 10)
	r, err := e.client.Do(mustRequest(t, "GET", e.url+cmPath+"?watch=true&timeoutSeconds=1&resourceVersion="+rv, "Accept-Encoding", "gzip"))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.Header.Get("Content-Encoding") != "" {
		t.Errorf("an ordinary watch was compressed")
	}
	// Failure mode of the gate: off, a watch-list is plain.
	off := newEnv(t, func(c *Config) { c.Features.DisableWatchListCompression = true })
	r, err = off.client.Do(mustRequest(t, "GET", off.url+cmPath+"?watch=true&allowWatchBookmarks=true&timeoutSeconds=1", "Accept-Encoding", "gzip"))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.Header.Get("Content-Encoding") != "" {
		t.Errorf("compression with the gate off")
	}
}

// TestWatchWebsocket covers handlers/watch.go WatchServer.HandleWS: one text message per event,
// client messages ignored, the socket closed normally when the watch ends; other origins are
// refused.
func TestWatchWebsocket(t *testing.T) {
	e := newEnv(t)
	rv := strconv.FormatInt(e.st.Rev(), 10)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	url := "ws" + strings.TrimPrefix(e.url, "http") + cmPath + "?watch=true&timeoutSeconds=60&resourceVersion=" + rv
	conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: e.client})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("websocket Content-Type %q", ct)
	}
	if err := conn.Write(ctx, websocket.MessageText, []byte("hello, ignored")); err != nil {
		t.Fatal(err)
	}
	e.mustCreate(cmPath, cmJSON("", "a", ""))
	e.mustCreate(cmPath, cmJSON("", "b", ""))
	for _, name := range []string{"a", "b"} {
		typ, msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f, ferr := watchclient.NewDecoder(bytes.NewReader(msg)).Decode()
		if n, _ := nameOf(t, f); typ != websocket.MessageText || ferr != nil || f.Type != watch.Added || n != name || !bytes.HasSuffix(msg, []byte("}\n")) {
			t.Errorf("message %v %q (%v), want one ADDED %s frame", typ, msg, ferr, name)
		}
	}
	testutil.WaitFor(t, "the websocket watch timer", e.clock.HasWaiters)
	e.clock.Step(60 * time.Second)
	_, _, err = conn.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("after the timeout: %v, want a normal closure", err)
	}
	e.spies["configmaps"].nthWatch(t, 1).waitStopped(t)

	// Shutdown ends a websocket watch too.
	url2 := "ws" + strings.TrimPrefix(e.url, "http") + cmPath + "?watch=true&resourceVersion=" + strconv.FormatInt(e.st.Rev(), 10)
	conn2, _, err := websocket.Dial(ctx, url2, &websocket.DialOptions{HTTPClient: e.client})
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.CloseNow()
	e.spies["configmaps"].nthWatch(t, 2)
	e.api.Shutdown()
	if _, _, err := conn2.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("after shutdown: %v, want a normal closure", err)
	}

	// Failure mode: a page of another origin may not read the watch.
	_, resp, err = websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: e.client, HTTPHeader: http.Header{"Origin": {"http://evil.example"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin websocket: %v %v", err, resp)
	}
}

// TestWatchWebsocketPastStorageDeadline covers handlers/watch.go WatchServer.HandleWS: the stream
// lasts until its own timer, started after the handshake, fires; the storage's context, whose
// deadline is timeoutSeconds from the request, may be done before. An event the storage sends at
// its deadline (the watch cache's 504 ERROR for a resourceVersion it did not reach in time, which
// httpdiff's websocket watches compare) is still delivered; the timer then ends the stream.
func TestWatchWebsocketPastStorageDeadline(t *testing.T) {
	fake := &fakeStorage{size: 10}
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	fe := newFakeEnv(t, fake, func(c *Config) { c.Clock = clk })
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	url := "ws" + strings.TrimPrefix(fe.url, "http") + cmPath + "?watch=true&timeoutSeconds=1&resourceVersion=5"
	conn, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: fe.client})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	fw := fake.nth(t, 1)
	fake.mu.Lock()
	storageCtx := fake.ctxs[0]
	fake.mu.Unlock()
	testutil.WaitFor(t, "the storage's deadline", func() bool { return storageCtx.Err() != nil })
	fw.Add(named("late"))
	typ, msg, err := conn.Read(ctx)
	if f, ferr := watchclient.NewDecoder(bytes.NewReader(msg)).Decode(); err != nil || ferr != nil || typ != websocket.MessageText || f.Type != watch.Added {
		t.Fatalf("after the storage's deadline: %v %q (%v, %v), want the ADDED frame", typ, msg, err, ferr)
	}
	// Failure mode: the stream's own timer ends it.
	testutil.WaitFor(t, "the websocket watch timer", clk.HasWaiters)
	clk.Step(time.Second)
	if _, _, err := conn.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("after the timeout: %v, want a normal closure", err)
	}
}

// TestWatchEventsFromWrites: writes through the HTTP API reach every open watch in order, with
// filters applied, including DELETED with the deletion revision.
func TestWatchEventsFromWrites(t *testing.T) {
	e := newEnv(t)
	rv := strconv.FormatInt(e.st.Rev(), 10)
	all := e.watch("/api/v1/configmaps?watch=true&resourceVersion=" + rv)
	labelled := e.watch(cmPath + "?watch=true&labelSelector=app%3Dweb&resourceVersion=" + rv)
	a := e.mustCreate(cmPath, cmJSON("", "a", `"labels":{"app":"web"}`))
	upd := e.do("PUT", cmPath+"/a", cmJSON("default", "a", `"resourceVersion":"`+a.GetResourceVersion()+`","labels":{"app":"db"}`))
	if upd.code != 200 {
		t.Fatalf("update: %d %s", upd.code, upd.body)
	}
	del := e.do("DELETE", cmPath+"/a", "")
	if del.code != 200 {
		t.Fatalf("delete: %d %s", del.code, del.body)
	}
	fs := all.expect("ADDED a", "MODIFIED a", "DELETED a")
	if _, last := nameOf(t, fs[2].Frame); last != strconv.FormatInt(e.st.Rev(), 10) {
		t.Errorf("DELETED carries resourceVersion %s, want the deletion revision %d", last, e.st.Rev())
	}
	// The label filter turns the update that leaves the selector into a DELETED.
	lf := labelled.expect("ADDED a", "DELETED a")
	if _, m, _ := lf[1].Meta(); m.Labels["app"] != "web" {
		t.Errorf("DELETED on leaving the selector carries %v, want the previous object", m.Labels)
	}
}

// ---- test doubles ----

// newFakeEnv serves ConfigMaps from a fakeStorage.
func newFakeEnv(t *testing.T, fake *fakeStorage, opts ...envOption) *env {
	t.Helper()
	e := &env{t: t}
	e.clock = nil
	cfg := Config{Resources: []ServedResource{{Resource: ConfigMaps(), Storage: fake}}, Logger: testutil.DiscardLogger()}
	for _, o := range opts {
		o(&cfg)
	}
	api, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.api = api
	ts := httptest.NewServer(api)
	e.url, e.client = ts.URL, ts.Client()
	e.st = store.New(store.Options{ManualTick: true})
	t.Cleanup(func() {
		api.Shutdown()
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
		defer cancel()
		if err := api.Wait(ctx); err != nil {
			t.Error(err)
		}
		e.st.Close()
	})
	return e
}

func (f *fakeStorage) nth(t *testing.T, n int) *watch.FakeWatcher {
	t.Helper()
	var w *watch.FakeWatcher
	testutil.WaitFor(t, fmt.Sprintf("watch %d", n), func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.watches) >= n {
			w = f.watches[n-1]
			return true
		}
		return false
	})
	return w
}

func (f *fakeStorage) last(t *testing.T) *watch.FakeWatcher {
	f.mu.Lock()
	n := len(f.watches)
	f.mu.Unlock()
	if n == 0 {
		n = 1
	}
	return f.nth(t, n)
}

// presetStorage hands out one prepared watcher.
type presetStorage struct {
	storage.Interface
	w *watch.FakeWatcher
}

func (p *presetStorage) Watch(context.Context, string, watchListOptions) (watch.Interface, error) {
	return p.w, nil
}

// failingWatchStorage refuses every watch.
type failingWatchStorage struct {
	storage.Interface
	err error
}

func (f *failingWatchStorage) Watch(context.Context, string, watchListOptions) (watch.Interface, error) {
	return nil, f.err
}

// noFlushWriter is a ResponseWriter without Flush.
type noFlushWriter struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (n *noFlushWriter) Header() http.Header         { return n.header }
func (n *noFlushWriter) WriteHeader(code int)        { n.code = code }
func (n *noFlushWriter) Write(p []byte) (int, error) { return n.body.Write(p) }

func mustRequest(t *testing.T, method, url string, headers ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

// TestCachedServer runs the list, watch and write paths over the watch cache, as `listwatch serve`
// does: the same answers, events from the cache's history.
func TestCachedServer(t *testing.T) {
	e := newCachedEnv(t)
	a := e.mustCreate(cmPath, cmJSON("", "a", `"labels":{"app":"web"}`))
	testutil.WaitFor(t, "the cache to see a", func() bool {
		return itemNames(t, e.do("GET", cmPath+"?resourceVersion=0", "").list(t)) == "a"
	})
	w := e.watch(cmPath + "?watch=true&allowWatchBookmarks=true")
	fs := w.expect("ADDED a", "BOOKMARK")
	if _, m, _ := fs[1].Meta(); m.Annotations[InitialEventsEndAnnotation] != "true" {
		t.Errorf("end bookmark %s", fs[1].Object)
	}
	labelled := e.watch(cmPath + "?watch=true&labelSelector=app%3Dweb&resourceVersion=" + a.GetResourceVersion())
	upd := e.do("PUT", cmPath+"/a", cmJSON("default", "a", `"resourceVersion":"`+a.GetResourceVersion()+`","labels":{"app":"db"}`))
	if upd.code != 200 {
		t.Fatalf("update: %d %s", upd.code, upd.body)
	}
	if r := e.do("DELETE", cmPath+"/a", ""); r.code != 200 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	w.expect("MODIFIED a", "DELETED a")
	labelled.expect("DELETED a")
	if got := itemNames(t, e.do("GET", cmPath, "").list(t)); got != "" {
		t.Errorf("list after delete: %q", got)
	}
	r := e.do("PUT", cmPath+"/a", cmJSON("default", "a", `"resourceVersion":"`+a.GetResourceVersion()+`"`))
	checkStatus(t, "update after delete", r, 404, metav1.StatusReasonNotFound, `configmaps "a" not found`)
	w.close()
	// A watch from the cache's list revision replays its history.
	old := e.watch(cmPath + "?watch=true&resourceVersion=1")
	old.expect("ADDED a", "MODIFIED a", "DELETED a")
}

// TestOverWatchCache reruns the REST, list and watch tests with a watch cache between the handlers
// and the etcd3 storage: the answers must not change.
func TestOverWatchCache(t *testing.T) {
	overWatchCache = true
	defer func() { overWatchCache = false }()
	for _, c := range []struct {
		name string
		test func(*testing.T)
	}{
		{"List", TestList}, {"Create", TestCreate}, {"Update", TestUpdate}, {"Delete", TestDelete}, {"Get", TestGet},
		{"WatchListDefaulting", TestWatchListDefaulting}, {"WatchRouting", TestWatchRouting},
		{"WatchEventsFromWrites", TestWatchEventsFromWrites}, {"WatchTimeout", TestWatchTimeout},
		{"WatchEnds", TestWatchEnds}, {"WatchWebsocket", TestWatchWebsocket}, {"WatchListGzip", TestWatchListGzip},
	} {
		name, test := c.name, c.test
		t.Run(name, test)
	}
}
