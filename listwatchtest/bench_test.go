package listwatchtest_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/listwatch/listwatch/listwatchtest"
)

// BenchmarkStart measures what a test waits for before its first request is answered: New (a
// store, its etcd API on a port, the etcd3 storage and a filled watch cache of every default
// resource, the HTTP API on a port) and a first list of ConfigMaps over HTTP. ms/start is that
// time; ms/close is Close's. envtest, which starts real etcd and kube-apiserver binaries, takes
// 5–7 s per start in published reports; interop/internal/kubeapiserver's BenchmarkStart measures
// the upstream apiserver started in process.
func BenchmarkStart(b *testing.B) {
	ctx := context.Background()
	var start, stop time.Duration
	for b.Loop() {
		t0 := time.Now()
		e, err := listwatchtest.New(ctx)
		if err != nil {
			b.Fatal(err)
		}
		tr := &http.Transport{}
		resp, err := (&http.Client{Transport: tr}).Get(e.URL() + "/api/v1/namespaces/default/configmaps")
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("first list: %d %v", resp.StatusCode, err)
		}
		t1 := time.Now()
		tr.CloseIdleConnections()
		if err := e.Close(); err != nil {
			b.Fatal(err)
		}
		start += t1.Sub(t0)
		stop += time.Since(t1)
	}
	b.ReportMetric(float64(start.Microseconds())/1000/float64(b.N), "ms/start")
	b.ReportMetric(float64(stop.Microseconds())/1000/float64(b.N), "ms/close")
}
