package kubeapiserver

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/interop/internal/etcdtest"
	"github.com/listwatch/listwatch/store"
)

// BenchmarkStart measures how long a test waits for a real apiserver serving the widgets CRD:
// from nothing to the first answered list of widgets, by a client made after Start returned.
// Reported per start: etcd-ms (the etcd alone: a fresh embedded member, or a fresh listwatch store
// served on a loopback port), apiserver-ms (Start to the first list) and total-ms. Stopping is not
// timed.
//
//	go test -run '^$' -bench Start -benchtime 10x ./internal/kubeapiserver/
func BenchmarkStart(b *testing.B) {
	cases := []struct {
		name string
		etcd func(b *testing.B) (endpoints []string, stop func())
		opts Options
	}{
		{name: "etcd=embedded", etcd: benchEmbeddedEtcd},
		{name: "etcd=listwatch", etcd: benchListwatchEtcd},
		{name: "etcd=listwatch/openapi=off", etcd: benchListwatchEtcd, opts: Options{DisableOpenAPI: true}},
		{name: "etcd=listwatch/watchcache=off", etcd: benchListwatchEtcd, opts: Options{DisableWatchCache: true}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var etcdTime, apiTime time.Duration
			for b.Loop() {
				t0 := time.Now()
				endpoints, stopEtcd := c.etcd(b)
				t1 := time.Now()
				opts := c.opts
				opts.EtcdEndpoints = endpoints
				opts.CRDs = []*apiextensionsv1.CustomResourceDefinition{WidgetsCRD()}
				s, err := Start(context.Background(), opts)
				if err != nil {
					b.Fatal(err)
				}
				dyn, err := dynamic.NewForConfig(s.RESTConfig())
				if err != nil {
					b.Fatal(err)
				}
				if _, err := dyn.Resource(widgetsGVR).Namespace("a").List(context.Background(), metav1.ListOptions{}); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				etcdTime += t1.Sub(t0)
				apiTime += t2.Sub(t1)

				b.StopTimer()
				if err := s.Stop(); err != nil {
					b.Fatal(err)
				}
				stopEtcd()
				b.StartTimer()
			}
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
			b.ReportMetric(ms(etcdTime), "etcd-ms")
			b.ReportMetric(ms(apiTime), "apiserver-ms")
			b.ReportMetric(ms(etcdTime+apiTime), "total-ms")
		})
	}
}

func benchEmbeddedEtcd(b *testing.B) ([]string, func()) {
	cli, stop, err := etcdtest.Start(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return cli.Endpoints(), func() {
		if err := stop(); err != nil {
			b.Fatal(err)
		}
	}
}

func benchListwatchEtcd(b *testing.B) ([]string, func()) {
	opts := etcdgrpc.Options{}.WithDefaults()
	st := store.New(store.Options{MinLeaseTTL: etcdtest.MinLeaseTTL, MemberID: opts.MemberID})
	endpoint, stop, err := ServeEtcdAPI(st, opts)
	if err != nil {
		b.Fatal(err)
	}
	return []string{endpoint}, func() {
		if err := stop(); err != nil {
			b.Fatal(err)
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
