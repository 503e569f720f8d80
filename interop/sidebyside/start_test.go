package sidebyside

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/listwatch/listwatch/interop/internal/etcdtest"
	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
	"github.com/listwatch/listwatch/listwatchtest"
)

// BenchmarkStart: how long a test waits for a Kubernetes API serving widgets, from nothing to the
// first answered list of widgets: the Go test API, listwatchtest.New with its defaults (a store, its
// etcd API on a loopback port, the etcd3 storage and a filled watch cache of every default resource,
// widgets included, and the HTTP API), against embedded etcd v3.7 started in a fresh directory plus
// upstream's apiextensions-apiserver started in process with the widgets CRD (kubeapiserver.Start,
// which returns once the CRD is served). Stopping is not timed. Reports start-ms of each side and the ratio
// (listwatch's over upstream's: below 1 is faster).
//
//	go test -run '^$' -bench 'BenchmarkStart$' -benchtime 5x ./sidebyside/
func BenchmarkStart(b *testing.B) {
	starts := map[string]func(b *testing.B) (url string, stop func()){
		"listwatch": func(b *testing.B) (string, func()) {
			e, err := listwatchtest.New(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			return e.URL(), func() {
				if err := e.Close(); err != nil {
					b.Error(err)
				}
			}
		},
		"upstream": func(b *testing.B) (string, func()) {
			dir, err := os.MkdirTemp(b.TempDir(), "etcd")
			if err != nil {
				b.Fatal(err)
			}
			cli, stopEtcd, err := etcdtest.Start(filepath.Join(dir, "data"))
			if err != nil {
				b.Fatal(err)
			}
			s, err := kubeapiserver.Start(context.Background(), kubeapiserver.Options{
				EtcdEndpoints: cli.Endpoints(), CRDs: []*apiextensionsv1.CustomResourceDefinition{kubeapiserver.WidgetsCRD()},
			})
			if err != nil {
				stopEtcd()
				b.Fatal(err)
			}
			return s.URL(), func() {
				if err := s.Stop(); err != nil {
					b.Error(err)
				}
				if err := stopEtcd(); err != nil {
					b.Error(err)
				}
			}
		},
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	figures := map[string]float64{}
	for _, name := range []string{"listwatch", "upstream"} {
		var total time.Duration
		for range b.N {
			start := time.Now()
			url, stop := starts[name](b)
			code, body, err := do(client, "GET", url+widgetsPath, nil)
			total += time.Since(start)
			stop()
			if err != nil || code != http.StatusOK {
				b.Fatalf("%s: the first list: %v %d %.200s", name, err, code, body)
			}
		}
		figures[name] = float64(total) / float64(time.Millisecond) / float64(b.N)
	}
	reportVs(b, figures, "upstream", "start-ms")
}
