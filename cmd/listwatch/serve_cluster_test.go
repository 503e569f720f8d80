package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/listwatch/listwatch/internal/testutil"
)

// TestServeAsCluster runs `serve` with its defaults as a local cluster is used: a namespace with
// content and a pod bound to a node are deleted for good (the controllers run), an object's
// events are found by the field selector kubectl describe uses, /metrics counts the requests, and
// the refused request is one line of the log.
func TestServeAsCluster(t *testing.T) {
	var stderr testutil.SyncBuffer
	srv := startServe(t, []string{"--etcd-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, &stderr)
	base := await(t, srv.stdout.ch, "listwatch: serving the Kubernetes API on ")
	await(t, srv.stdout.ch, "listwatch: serving the etcd API on ")
	must := func(method, path, body string, want int) {
		t.Helper()
		if code, out := httpDo(t, method, base+path, body); code != want {
			t.Fatalf("%s %s: %d %s", method, path, code, out)
		}
	}
	must("POST", "/api/v1/namespaces", `{"metadata":{"name":"x"}}`, http.StatusCreated)
	must("POST", "/api/v1/namespaces/x/configmaps", `{"metadata":{"name":"c"}}`, http.StatusCreated)
	must("POST", "/api/v1/namespaces/x/pods", `{"metadata":{"name":"p"},"spec":{"nodeName":"n1","containers":[{"name":"c","image":"i"}]}}`, http.StatusCreated)
	must("DELETE", "/api/v1/namespaces/x", "", http.StatusOK)
	poll := testutil.Poller{Interval: 10 * time.Millisecond}
	poll.WaitFor(t, "namespace x gone", func() bool {
		code, _ := httpDo(t, "GET", base+"/api/v1/namespaces/x", "")
		return code == http.StatusNotFound
	})

	must("POST", "/api/v1/namespaces/default/pods", `{"metadata":{"name":"p"},"spec":{"nodeName":"n1","containers":[{"name":"c","image":"i"}]}}`, http.StatusCreated)
	must("DELETE", "/api/v1/namespaces/default/pods/p", "", http.StatusOK)
	poll.WaitFor(t, "the bound pod gone", func() bool {
		code, _ := httpDo(t, "GET", base+"/api/v1/namespaces/default/pods/p", "")
		return code == http.StatusNotFound
	})

	must("POST", "/api/v1/namespaces/default/events", `{"metadata":{"name":"e"},"involvedObject":{"kind":"Pod","name":"p","namespace":"default","uid":"u"},"reason":"R"}`, http.StatusCreated)
	if code, body := httpDo(t, "GET", base+"/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dp,involvedObject.namespace%3Ddefault,involvedObject.kind%3DPod,involvedObject.uid%3Du", ""); code != http.StatusOK || !strings.Contains(string(body), `"reason": "R"`) && !strings.Contains(string(body), `"reason":"R"`) {
		t.Errorf("events of the pod: %d %s", code, body)
	}

	code, metrics := httpDo(t, "GET", base+"/metrics", "")
	if code != http.StatusOK || !strings.Contains(string(metrics), `apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="namespaces",scope="cluster",subresource="",verb="POST",version="v1"} 1`) {
		t.Errorf("/metrics: %d %.2000s", code, metrics)
	}
	// The watch caches' metrics, and those of the watches the controllers' informers keep open.
	for _, want := range []string{
		`apiserver_watch_cache_events_received_total{group="",resource="configmaps"} 2`,
		`apiserver_watch_cache_events_dispatched_total{group="",resource="configmaps"} `,
		`apiserver_watch_cache_initializations_total{group="",resource="configmaps"} 1`,
		`apiserver_watch_cache_resource_version{group="",resource="configmaps"} `,
		`watch_cache_capacity{group="",resource="configmaps"} 100`,
		`apiserver_init_events_total{group="",resource="namespaces"} `,
		`apiserver_terminated_watchers_total{group="",resource="namespaces"} 0`,
		`watch_cache_capacity_increase_total{group="",resource="configmaps"} 0`,
		`watch_cache_capacity_decrease_total{group="",resource="configmaps"} 0`,
		`apiserver_registered_watchers{group="",kind="Namespace",version="v1"} `,
		`apiserver_watch_events_total{group="",resource="namespaces",version="v1"} `,
		`apiserver_watch_events_sizes_bucket{group="",resource="namespaces",version="v1",le="1024"} `,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if got := stderr.String(); !strings.Contains(got, "msg=request verb=GET uri=/api/v1/namespaces/x code=404") {
		t.Errorf("the log has no line for the refused GET:\n%s", got)
	}
	srv.stop(t)
}
