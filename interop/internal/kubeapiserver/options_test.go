package kubeapiserver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/httpwatch"
)

// closedEndpoint is a loopback URL where nothing listens.
func closedEndpoint(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + lis.Addr().String()
	lis.Close()
	return endpoint
}

func TestStartFailsWithoutEtcd(t *testing.T) {
	endpoint := closedEndpoint(t)
	s, err := Start(context.Background(), Options{EtcdEndpoints: []string{endpoint}, Timeout: time.Second})
	if err == nil {
		s.Stop()
		t.Fatal("Start with no etcd at the endpoint succeeded")
	}
	if !errors.Is(err, ErrEtcdUnavailable) || !strings.Contains(err.Error(), endpoint) {
		t.Errorf("error %q is not ErrEtcdUnavailable naming %s", err, endpoint)
	}
	// TestMain's goleak check shows that nothing of the attempt is left running.
}

func TestStartRefusesBadOptions(t *testing.T) {
	noVersion := WidgetsCRD()
	noVersion.Spec.Versions = nil
	for name, o := range map[string]Options{
		"no endpoint":     {},
		"empty endpoint":  {EtcdEndpoints: []string{""}},
		"relative prefix": {EtcdEndpoints: []string{"http://127.0.0.1:1"}, EtcdPrefix: "registry"},
		"nil CRD":         {EtcdEndpoints: []string{"http://127.0.0.1:1"}, CRDs: []*apiextensionsv1.CustomResourceDefinition{nil}},
		"CRD no version":  {EtcdEndpoints: []string{"http://127.0.0.1:1"}, CRDs: []*apiextensionsv1.CustomResourceDefinition{noVersion}},
		"negative time":   {EtcdEndpoints: []string{"http://127.0.0.1:1"}, Timeout: -time.Second},
	} {
		s, err := Start(context.Background(), o)
		if err == nil {
			s.Stop()
			t.Errorf("%s: Start succeeded", name)
			continue
		}
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: error %q is not ErrInvalidOptions", name, err)
		}
	}
}

// A CRD the server refuses fails Start with the server's reason, and the server is stopped, though
// it had not finished starting: before Stop waited for the crd-informer-synced hook, upstream ended
// the test process here (runPostStartHook's klog.Fatalf).
func TestStartFailsOnRefusedCRD(t *testing.T) {
	bad := WidgetsCRD()
	bad.Name = "wrong.example.com" // must be <plural>.<group>
	s, err := Start(context.Background(), Options{
		EtcdEndpoints: EmbeddedEtcd(t),
		CRDs:          []*apiextensionsv1.CustomResourceDefinition{bad},
	})
	if err == nil {
		s.Stop()
		t.Fatal("Start with an invalid CRD succeeded")
	}
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "wrong.example.com") {
		t.Errorf("error %q is not ErrInvalidOptions naming the CRD", err)
	}
}

func TestToken(t *testing.T) {
	s := StartT(t, Options{EtcdEndpoints: EmbeddedEtcd(t), CRDs: []*apiextensionsv1.CustomResourceDefinition{WidgetsCRD()}, Token: "secret"})
	ctx := ctxFor(t)
	if _, err := dynamicFor(t, s.RESTConfig()).Resource(widgetsGVR).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list with the token: %v", err)
	}
	for name, token := range map[string]string{"no token": "", "wrong token": "guess"} {
		cfg := s.RESTConfig()
		cfg.BearerToken = token
		_, err := dynamicFor(t, cfg).Resource(widgetsGVR).List(ctx, metav1.ListOptions{})
		if !apierrors.IsUnauthorized(err) {
			t.Errorf("%s: list error %v, want 401 Unauthorized", name, err)
		}
	}
}

// Discovery lists the CRDs' resources both ways client-go asks: aggregated (the default) and
// unaggregated; OpenAPI v3 publishes their schemas, unless turned off.
func TestDiscoveryAndOpenAPI(t *testing.T) {
	endpoints := EmbeddedEtcd(t)
	crds := []*apiextensionsv1.CustomResourceDefinition{WidgetsCRD(), gadgetsCRD(t)}
	s := StartT(t, Options{EtcdEndpoints: endpoints, CRDs: crds})

	dc, err := discovery.NewDiscoveryClientForConfig(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, aggregated := range []bool{true, false} {
		dc.UseLegacyDiscovery = !aggregated
		_, lists, err := dc.ServerGroupsAndResources()
		if err != nil {
			t.Fatalf("aggregated=%v: %v", aggregated, err)
		}
		found := map[string]bool{}
		for _, l := range lists {
			if l.GroupVersion != "example.com/v1" {
				continue
			}
			for _, r := range l.APIResources {
				found[r.Name] = r.Namespaced
			}
		}
		if namespaced, ok := found["widgets"]; !ok || !namespaced {
			t.Errorf("aggregated=%v: discovery has widgets %v, namespaced %v; want a namespaced resource", aggregated, ok, namespaced)
		}
		if namespaced, ok := found["gadgets"]; !ok || namespaced {
			t.Errorf("aggregated=%v: discovery has gadgets %v, namespaced %v; want a cluster-scoped resource", aggregated, ok, namespaced)
		}
	}

	// The OpenAPI controllers publish a CRD's document on their own schedule.
	var body []byte
	waitFor(t, "/openapi/v3/apis/example.com/v1 describing both kinds", func() bool {
		body, err = dc.RESTClient().Get().AbsPath("/openapi/v3/apis/example.com/v1").DoRaw(ctxFor(t))
		return err == nil && strings.Contains(string(body), "com.example.v1.Widget") && strings.Contains(string(body), "com.example.v1.Gadget")
	})

	off := StartT(t, Options{EtcdEndpoints: endpoints, EtcdPrefix: "/off", CRDs: crds, DisableOpenAPI: true})
	for _, path := range []string{"/openapi/v2", "/openapi/v3"} {
		status := 0
		off.restClient(t).Get().AbsPath(path).Do(ctxFor(t)).StatusCode(&status)
		if status != http.StatusNotFound {
			t.Errorf("with OpenAPI off, %s answers %d, want 404", path, status)
		}
	}
}

func (s *Server) restClient(t *testing.T) rest.Interface {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return dc.RESTClient()
}

// metric returns the value of the counter line `name{labels}` in the server's /metrics, 0 if absent.
func metric(t *testing.T, s *Server, line string) float64 {
	t.Helper()
	body, err := s.restClient(t).Get().AbsPath("/metrics").DoRaw(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), line+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// watchCacheRuns numbers the runs of TestWatchCacheOption in the process (-count).
var watchCacheRuns atomic.Int32

// The watch cache is on by default and off with DisableWatchCache: upstream counts the watch
// caches it initializes, per resource and process-wide, so each case serves a resource of its own.
func TestWatchCacheOption(t *testing.T) {
	endpoints := EmbeddedEtcd(t)
	run := strconv.Itoa(int(watchCacheRuns.Add(1)))
	for _, disable := range []bool{false, true} {
		resource := "cachedthings" + run
		if disable {
			resource = "uncachedthings" + run
		}
		crd, err := CRDFor(httpwatch.Resource{Group: "example.com", Version: "v1", Resource: resource, Kind: "Thing" + strconv.FormatBool(disable)})
		if err != nil {
			t.Fatal(err)
		}
		s := StartT(t, Options{EtcdEndpoints: endpoints, DisableWatchCache: disable, CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}})
		// Start listed the resource, which creates its storage, and with it its watch cache.
		n := metric(t, s, `apiserver_watch_cache_initializations_total{group="example.com",resource="`+resource+`"}`)
		if disable && n != 0 {
			t.Errorf("with the watch cache off, %d watch caches of %s were initialized", int(n), resource)
		}
		if !disable && n != 1 {
			t.Errorf("with the watch cache on, %d watch caches of %s were initialized, want 1", int(n), resource)
		}
	}
}

// A watch still open when the server stops ends, and Stop returns.
func TestStopEndsOpenWatches(t *testing.T) {
	s, err := Start(context.Background(), Options{EtcdEndpoints: EmbeddedEtcd(t), CRDs: []*apiextensionsv1.CustomResourceDefinition{WidgetsCRD()}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := dynamicFor(t, s.RESTConfig()).Resource(widgetsGVR).Watch(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	for ev := range w.ResultChan() {
		if ev.Type != watch.Error {
			t.Errorf("event after stop: %s %v", ev.Type, ev.Object)
		}
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	// Nothing listens any more.
	resp, err := http.Get(s.URL() + "/readyz")
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t.Errorf("GET /readyz after Stop answered %s", resp.Status)
	}
}

func TestCRDFor(t *testing.T) {
	w := WidgetsCRD()
	if w.Name != "widgets.example.com" || w.Spec.Group != "example.com" || w.Spec.Scope != apiextensionsv1.NamespaceScoped ||
		w.Spec.Names.Kind != "Widget" || w.Spec.Names.ListKind != "WidgetList" || w.Spec.Names.Singular != "widget" ||
		len(w.Spec.Versions) != 1 || w.Spec.Versions[0].Name != "v1" || !w.Spec.Versions[0].Served || !w.Spec.Versions[0].Storage {
		t.Errorf("WidgetsCRD() = %+v, not httpwatch.Widgets()", w)
	}
	for _, r := range []httpwatch.Resource{httpwatch.ConfigMaps(), httpwatch.Pods(), {Group: "example.com", Resource: "things"}} {
		if _, err := CRDFor(r); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("CRDFor(%s) error %v, want ErrInvalidOptions", r.Resource, err)
		}
	}
	if _, err := CRDFor(httpwatch.Resource{
		Group: "example.com", Version: "v1", Resource: "things", Kind: "Thing",
		SelectableFields: []httpwatch.SelectableField{{Label: "color", Path: []string{"spec", "color"}}},
	}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("CRDFor with a field label that is not its path: error %v, want ErrInvalidOptions", err)
	}
}

// A CRD's selectable field filters lists as upstream's field selectors do.
func TestSelectableField(t *testing.T) {
	s := StartT(t, Options{EtcdEndpoints: EmbeddedEtcd(t), CRDs: []*apiextensionsv1.CustomResourceDefinition{gadgetsCRD(t)}})
	ctx := ctxFor(t)
	ri := dynamicFor(t, s.RESTConfig()).Resource(gadgetsGVR)
	for _, c := range []struct{ name, color string }{{"r", "red"}, {"b", "blue"}} {
		if _, err := ri.Create(ctx, object(gadgetsGVR, "Gadget", "", c.name, map[string]any{"color": c.color}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := ri.List(ctx, metav1.ListOptions{FieldSelector: "spec.color=red"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].GetName() != "r" {
		t.Errorf("list spec.color=red = %v, want r only", list.Items)
	}
	if _, err := ri.List(ctx, metav1.ListOptions{FieldSelector: "spec.size=1"}); !apierrors.IsBadRequest(err) {
		t.Errorf("list by a field that is not selectable: error %v, want 400", err)
	}
}
