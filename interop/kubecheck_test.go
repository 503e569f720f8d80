package interop

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/chain"
	"github.com/listwatch/listwatch/check/kube"
	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// kubeCheck runs check/kube's workload (what `listwatch check --kube` runs) against the server
// rc names, on widgets, and checks the history.
func kubeCheck(t *testing.T, rc *rest.Config, seed uint64) (*kube.History, *kube.Result, time.Duration) {
	t.Helper()
	ctx := context.Background()
	res, err := kube.Discover(ctx, rc, widgets)
	if err != nil {
		t.Fatal(err)
	}
	res.Namespace = "check"
	rec, err := kube.NewRecorder(rc, res, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	start := time.Now()
	if _, err := kube.Run(ctx, rec, kube.Config{Seed: seed, Clients: 4, Watchers: 4, Duration: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	h := rec.History()
	r, err := kube.Check(h, kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if path := os.Getenv("KUBECHECK_HISTORY"); path != "" {
		f, err := os.Create(path + "-" + strings.ReplaceAll(t.Name(), "/", "-") + ".json")
		if err == nil {
			_ = h.WriteJSON(f)
			f.Close()
		}
	}
	c := r.Coverage
	t.Logf("%d requests in %v (%.0f/s), %d watches (%d resumed), %d events (%d replayed), %d bookmarks, %d initial-events-end, %d 410s; lists %v; verdict %s, %d violations",
		c.Requests, took.Round(time.Millisecond), float64(c.Requests)/took.Seconds(), len(h.Watches), c.Resumed, c.Events, c.EventsChecked,
		c.Bookmarks, c.InitialEventsEnd, c.Expired, c.Lists, r.Verdict, len(r.Violations))
	return h, r, took
}

// TestKubeCheckUpstreamAPIServer runs `check --kube`'s workload and checker against a real
// apiextensions-apiserver (k8s.io/* v0.37.2, in process) serving widgets, over embedded etcd and
// over listwatch's etcd API.
func TestKubeCheckUpstreamAPIServer(t *testing.T) {
	for _, over := range []struct {
		name string
		etcd func(testing.TB) []string
	}{
		{"embedded-etcd", kubeapiserver.EmbeddedEtcd},
		{"listwatch-etcd", func(tb testing.TB) []string { eps, _ := kubeapiserver.ListwatchEtcd(tb); return eps }},
	} {
		t.Run(over.name, func(t *testing.T) {
			s := kubeapiserver.StartT(t, kubeapiserver.Options{EtcdEndpoints: over.etcd(t), CRDs: []*apiextensionsv1.CustomResourceDefinition{kubeapiserver.WidgetsCRD()}})
			_, r, _ := kubeCheck(t, s.RESTConfig(), 11)
			for _, v := range r.Violations {
				t.Errorf("%v", v)
			}
		})
	}
}

// TestKubeCheckListwatch runs the same against listwatch's own HTTP API (chain.New), widgets
// included.
func TestKubeCheckListwatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := chain.New(ctx, chain.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, r, _ := kubeCheck(t, &rest.Config{Host: c.URL()}, 11)
	for _, v := range r.Violations {
		t.Errorf("%v", v)
	}
}
