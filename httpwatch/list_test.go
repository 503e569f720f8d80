package httpwatch

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/internal/testutil"
)

func items(t *testing.T, l map[string]any) []map[string]any {
	t.Helper()
	raw, ok := l["items"].([]any)
	if !ok {
		t.Fatalf("list without items: %v", l)
	}
	var out []map[string]any
	for _, i := range raw {
		out = append(out, i.(map[string]any))
	}
	return out
}

func itemNames(t *testing.T, l map[string]any) string {
	t.Helper()
	var names []string
	for _, i := range items(t, l) {
		names = append(names, i["metadata"].(map[string]any)["name"].(string))
	}
	return strings.Join(names, ",")
}

func TestList(t *testing.T) {
	e := newEnv(t)
	empty := e.do("GET", cmPath, "")
	if empty.code != 200 || !strings.Contains(string(empty.body), `"items":[]`) {
		t.Errorf("empty list: %d %s", empty.code, empty.body)
	}
	for i, n := range []string{"a", "b", "c", "d"} {
		e.mustCreate(cmPath, cmJSON("", n, fmt.Sprintf(`"labels":{"i":"%d","even":"%v"}`, i, i%2 == 0)))
	}
	e.mustCreate("/api/v1/namespaces/other/configmaps", cmJSON("", "o", ""))
	e.mustCreate(widgetPath, widgetJSON("w", ""))
	rev := strconv.FormatInt(e.st.Rev(), 10)

	l := e.do("GET", cmPath, "").list(t)
	meta := l["metadata"].(map[string]any)
	if l["kind"] != "ConfigMapList" || l["apiVersion"] != "v1" || meta["resourceVersion"] != rev || itemNames(t, l) != "a,b,c,d" {
		t.Errorf("list %v", l)
	}
	if _, ok := meta["continue"]; ok {
		t.Errorf("a built-in list carries an empty continue: %v", meta)
	}
	// Built-in list items carry no apiVersion and kind; custom resource items do.
	if it := items(t, l)[0]; it["kind"] != nil || it["apiVersion"] != nil {
		t.Errorf("built-in list item with type: %v", it)
	}
	wl := e.do("GET", widgetPath, "").list(t)
	if it := items(t, wl)[0]; it["kind"] != "Widget" || it["apiVersion"] != "example.com/v1" || wl["kind"] != "WidgetList" {
		t.Errorf("custom resource list %v", wl)
	}

	if got := itemNames(t, e.do("GET", "/api/v1/configmaps", "").list(t)); got != "a,b,c,d,o" {
		t.Errorf("all namespaces: %s", got)
	}
	if got := itemNames(t, e.do("GET", cmPath+"?labelSelector=even%3Dtrue", "").list(t)); got != "a,c" {
		t.Errorf("label selector: %s", got)
	}
	if got := itemNames(t, e.do("GET", cmPath+"?labelSelector="+url.QueryEscape("i in (1,3),even!=true"), "").list(t)); got != "b,d" {
		t.Errorf("set-based label selector: %s", got)
	}
	if got := itemNames(t, e.do("GET", "/api/v1/configmaps?fieldSelector=metadata.namespace%3Dother", "").list(t)); got != "o" {
		t.Errorf("namespace field selector: %s", got)
	}
	if got := itemNames(t, e.do("GET", cmPath+"?fieldSelector=metadata.name%21%3Db", "").list(t)); got != "a,c,d" {
		t.Errorf("field selector: %s", got)
	}
	// metadata.name reads one key.
	if got := itemNames(t, e.do("GET", cmPath+"?fieldSelector=metadata.name%3Dc", "").list(t)); got != "c" {
		t.Errorf("name selector: %s", got)
	}
	e.spies["configmaps"].mu.Lock()
	last := e.spies["configmaps"].lastList
	e.spies["configmaps"].mu.Unlock()
	if last.Recursive {
		t.Errorf("a metadata.name list was recursive")
	}

	// Paging: limit and continue.
	p1 := e.do("GET", cmPath+"?limit=3", "").list(t)
	cont, _ := p1["metadata"].(map[string]any)["continue"].(string)
	if itemNames(t, p1) != "a,b,c" || cont == "" || p1["metadata"].(map[string]any)["remainingItemCount"] != float64(1) {
		t.Errorf("first page %v", p1)
	}
	e.mustCreate(cmPath, cmJSON("", "e", "")) // after the first page: not in the second
	p2 := e.do("GET", cmPath+"?limit=3&continue="+url.QueryEscape(cont), "").list(t)
	if itemNames(t, p2) != "d" || p2["metadata"].(map[string]any)["resourceVersion"] != rev {
		t.Errorf("second page %v", p2)
	}
	// Exact reads the past.
	if got := itemNames(t, e.do("GET", cmPath+"?resourceVersion="+rev+"&resourceVersionMatch=Exact", "").list(t)); got != "a,b,c,d" {
		t.Errorf("exact list: %s", got)
	}

	rv := e.st.Rev()
	for _, c := range []struct {
		name, query string
		code        int
		reason      metav1.StatusReason
		message     string
	}{
		{"bad label selector", "labelSelector=" + url.QueryEscape("a in (b"), 400, metav1.StatusReasonBadRequest, "unable to parse requirement: …"},
		{"bad field selector", "fieldSelector=" + url.QueryEscape("a"), 400, metav1.StatusReasonBadRequest, "invalid selector: 'a'; can't understand 'a'"},
		{"unknown field label", "fieldSelector=data.k%3Dv", 400, metav1.StatusReasonBadRequest, `"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"`},
		{"bad limit", "limit=x", 400, metav1.StatusReasonBadRequest, ""},
		{"bad resourceVersion", "resourceVersion=abc", 400, metav1.StatusReasonBadRequest, `invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax`},
		{"bad continue", "continue=xyz", 400, metav1.StatusReasonBadRequest, "invalid continue token: …"},
		{"continue with resourceVersion", "continue=" + url.QueryEscape(cont) + "&resourceVersion=5", 400, metav1.StatusReasonBadRequest, "specifying resource version is not allowed when using continue"},
	} {
		checkStatus(t, c.name, e.do("GET", cmPath+"?"+c.query, ""), c.code, c.reason, c.message)
	}
	e.unchanged(rv, "refused lists")

	// Pods select on their own fields.
	e.mustCreate("/api/v1/namespaces/default/pods", `{"metadata":{"name":"p1"},"spec":{"nodeName":"n1","hostNetwork":true}}`)
	e.mustCreate("/api/v1/namespaces/default/pods", `{"metadata":{"name":"p2"},"spec":{"nodeName":"n2"}}`)
	// A new pod is Pending; its status is set through the status subresource.
	if r := e.do("PATCH", "/api/v1/namespaces/default/pods/p1/status", `{"status":{"phase":"Running"}}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Fatalf("patching p1's status: %d %s", r.code, r.body)
	}
	if got := itemNames(t, e.do("GET", "/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName%3Dn2", "").list(t)); got != "p2" {
		t.Errorf("pods on n2: %s", got)
	}
	if got := itemNames(t, e.do("GET", "/api/v1/pods?fieldSelector="+url.QueryEscape("status.phase=Running,spec.hostNetwork=true"), "").list(t)); got != "p1" {
		t.Errorf("running pods: %s", got)
	}
	checkStatus(t, "pod field", e.do("GET", "/api/v1/pods?fieldSelector=spec.x%3D1", ""), 400, metav1.StatusReasonBadRequest, "field label not supported: spec.x")

	// Services select on spec.clusterIP and spec.type, and refuse other fields as pods do.
	e.mustCreate("/api/v1/namespaces/default/services", `{"metadata":{"name":"s1"},"spec":{"type":"NodePort","ports":[{"port":80}]}}`)
	e.mustCreate("/api/v1/namespaces/default/services", `{"metadata":{"name":"s2"},"spec":{"ports":[{"port":80}]}}`)
	if got := itemNames(t, e.do("GET", "/api/v1/services?fieldSelector=spec.type%3DNodePort", "").list(t)); got != "s1" {
		t.Errorf("NodePort services: %s", got)
	}
	checkStatus(t, "service field", e.do("GET", "/api/v1/services?fieldSelector=spec.size%3D1", ""), 400, metav1.StatusReasonBadRequest,
		"field label not supported: spec.size")
}

// TestListCompression: a response over 128 KiB is gzipped for a client that accepts it, and not for
// one that does not.
func TestListCompression(t *testing.T) {
	e := newEnv(t)
	big := strings.Repeat("x", 50000)
	for i := range 4 {
		e.mustCreate(cmPath, fmt.Sprintf(`{"metadata":{"name":"c%d"},"data":{"k":%q}}`, i, big))
	}
	resp, err := e.client.Do(mustRequest(t, "GET", e.url+cmPath, "Accept-Encoding", "gzip"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("big list Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	gz, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(gz)
	if err != nil || !strings.Contains(string(data), `"kind":"ConfigMapList"`) {
		t.Errorf("decompressed list: %v %.100s", err, data)
	}
	if r := e.do("GET", cmPath+"?limit=1", "", "Accept-Encoding", "gzip"); r.header.Get("Content-Encoding") != "" {
		t.Errorf("a small response was compressed")
	}
	req := mustRequest(t, "GET", e.url+cmPath)
	req.Header.Set("Accept-Encoding", "identity")
	plain, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	plain.Body.Close()
	if plain.Header.Get("Content-Encoding") != "" || plain.StatusCode != http.StatusOK {
		t.Errorf("identity client got %q", plain.Header.Get("Content-Encoding"))
	}
}

// doStepping sends a request whose answer may wait on the watch caches' fake clock, stepping it by
// 10 ms until the answer comes.
func (e *env) doStepping(method, path string) response {
	e.t.Helper()
	done := make(chan response, 1)
	go func() { done <- e.do(method, path, "") }()
	var r response
	p := testutil.Poller{Step: func() { e.cacheClock.Step(10 * time.Millisecond) }}
	p.WaitFor(e.t, method+" "+path, func() bool {
		select {
		case r = <-done:
			return true
		default:
			return false
		}
	})
	return r
}

// TestListExactFromWatchCache: over the watch cache, a list at an exact resourceVersion (Exact, or a
// resourceVersion with a limit, and the next page of its continue token) is the state at that
// revision with it as the list's resourceVersion, answered from the cache's snapshot; one at a
// revision beyond etcd's waits 3 s of the cache's clock, then is 504 Timeout "Too large resource
// version" with Retry-After 1, the cache's revision and the ResourceVersionTooLarge cause
// (watch_cache.go waitAndListExactRV and waitUntilFreshLocked, written as responsewriters does).
func TestListExactFromWatchCache(t *testing.T) {
	e := newCachedEnvOnFakeClock(t)
	e.mustCreate(cmPath, cmJSON("", "a", ""))
	e.mustCreate(cmPath, cmJSON("", "b", ""))
	rv := e.st.Rev()
	e.mustCreate(cmPath, cmJSON("", "c", ""))
	e.do("DELETE", cmPath+"/a", "")
	at := strconv.FormatInt(rv, 10)
	for _, q := range []string{"?resourceVersionMatch=Exact&resourceVersion=" + at, "?limit=5&resourceVersion=" + at} {
		l := e.doStepping("GET", cmPath+q).list(t)
		if got := l["metadata"].(map[string]any)["resourceVersion"]; got != at || itemNames(t, l) != "a,b" {
			t.Errorf("%s: %s at %v", q, itemNames(t, l), got)
		}
	}
	l := e.doStepping("GET", cmPath+"?limit=1&resourceVersionMatch=Exact&resourceVersion="+at).list(t)
	token, _ := l["metadata"].(map[string]any)["continue"].(string)
	if itemNames(t, l) != "a" || token == "" {
		t.Fatalf("first page at %s: %s continue %q", at, itemNames(t, l), token)
	}
	l = e.doStepping("GET", cmPath+"?limit=1&continue="+url.QueryEscape(token)).list(t)
	if got := l["metadata"].(map[string]any)["resourceVersion"]; got != at || itemNames(t, l) != "b" {
		t.Errorf("second page: %s at %v", itemNames(t, l), got)
	}

	future := e.st.Rev() + 5
	r := e.doStepping("GET", cmPath+"?resourceVersionMatch=Exact&resourceVersion="+strconv.FormatInt(future, 10))
	wantStatus(t, r, http.StatusGatewayTimeout, metav1.StatusReasonTimeout,
		fmt.Sprintf("Timeout: Too large resource version: %d, current: %d", future, e.st.Rev()))
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	if s := r.status(t); s.Details == nil || s.Details.RetryAfterSeconds != 1 || len(s.Details.Causes) != 1 ||
		s.Details.Causes[0].Type != metav1.CauseTypeResourceVersionTooLarge {
		t.Errorf("Status details %+v", s.Details)
	}
}
