package observe

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/listwatch/listwatch/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWrap counts, times and logs requests with the apiserver's metric names and labels, keeps a
// watch streaming and counted as long-running while it is open, and serves pprof only when asked.
func TestWrap(t *testing.T) {
	release := make(chan struct{})
	next := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch {
		case req.URL.Query().Get("watch") == "true":
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "event\n")
			w.(http.Flusher).Flush()
			<-release
		case strings.HasSuffix(req.URL.Path, "/missing"):
			http.Error(w, "not found", http.StatusNotFound)
		default:
			_, _ = io.WriteString(w, "{}")
		}
	})
	var logs testutil.SyncBuffer
	srv := httptest.NewServer(Wrap(next, Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	get("/api/v1/namespaces/default/configmaps")
	get("/api/v1/namespaces/default/configmaps/missing")
	get("/apis/apps/v1/deployments")
	watch, err := http.Get(srv.URL + "/api/v1/namespaces/default/pods?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(watch.Body).ReadString('\n'); err != nil || line != "event\n" {
		t.Fatalf("the watch did not stream: %q %v", line, err)
	}
	_, metrics := get("/metrics")
	for _, want := range []string{
		`apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 1`,
		`apiserver_request_total{code="404",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="GET",version="v1"} 1`,
		`apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="deployments",scope="cluster",subresource="",verb="LIST",version="v1"} 1`,
		`apiserver_request_duration_seconds_count{component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 1`,
		`apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	close(release)
	watch.Body.Close()
	testutil.WaitFor(t, "the watch to end", func() bool {
		_, m := get("/metrics")
		return strings.Contains(m, `apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 0`)
	})
	// At info level, only the refused request is logged.
	if got := logs.String(); strings.Count(got, "msg=request") != 1 || !strings.Contains(got, "code=404") {
		t.Errorf("logs:\n%s", got)
	}
	if _, body := get("/debug/pprof/"); body != "{}" {
		t.Errorf("pprof served without PProf: %.100s", body)
	}
	on := httptest.NewServer(Wrap(next, Options{PProf: true, Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))}))
	defer on.Close()
	resp, err := http.Get(on.URL + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Errorf("pprof with PProf: %d %.100s", resp.StatusCode, body)
	}
}

// TestParseRequest labels requests as the apiserver's RequestInfoFactory and metrics do.
func TestParseRequest(t *testing.T) {
	for _, c := range []struct{ method, path, contentType, want string }{
		{"GET", "/api/v1/namespaces/n/pods/p", "", "GET //v1/pods/ resource"},
		{"GET", "/api/v1/namespaces/n", "", "GET //v1/namespaces/ resource"},
		{"PUT", "/api/v1/namespaces/n/finalize", "", "PUT //v1/namespaces/finalize resource"},
		{"GET", "/api/v1/namespaces", "", "LIST //v1/namespaces/ cluster"},
		{"PATCH", "/apis/apps/v1/namespaces/n/deployments/d/status", "application/apply-patch+yaml", "APPLY /apps/v1/deployments/status resource"},
		{"DELETE", "/api/v1/namespaces/n/configmaps", "", "DELETE //v1/configmaps/ namespace"},
		{"GET", "/api/v1/watch/namespaces/n/pods", "", "WATCH //v1/pods/ namespace"},
		{"GET", "/openapi/v2", "", "GET ////"},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		req.Header.Set("Content-Type", c.contentType)
		i := parseRequest(req)
		got := strings.TrimSpace(i.verb + " /" + i.group + "/" + i.version + "/" + i.resource + "/" + i.subresource + " " + i.scope)
		if got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.path, got, c.want)
		}
	}
}
