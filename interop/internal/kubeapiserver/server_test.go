package kubeapiserver

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/store"
)

// waitTimeout bounds every wait of a test; generous, never what a test asserts.
const waitTimeout = 30 * time.Second

var widgetsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// gadgets is a cluster-scoped custom resource with a selectable field.
func gadgetsCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := CRDFor(httpwatch.Resource{
		Group: "example.com", Version: "v1", Resource: "gadgets", Kind: "Gadget",
		SelectableFields: []httpwatch.SelectableField{{Label: "spec.color", Path: []string{"spec", "color"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

var gadgetsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func dynamicFor(t *testing.T, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func object(gvr schema.GroupVersionResource, kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// createListWatch creates an object of each CRD with the dynamic client, lists it, and sees its
// ADDED event on a watch from resourceVersion 0 and its MODIFIED event on a watch from the list.
func createListWatch(t *testing.T, s *Server) {
	t.Helper()
	ctx := ctxFor(t)
	dyn := dynamicFor(t, s.RESTConfig())
	for _, c := range []struct {
		gvr       schema.GroupVersionResource
		kind      string
		namespace string
	}{
		{widgetsGVR, "Widget", "a"},
		{gadgetsGVR, "Gadget", ""},
	} {
		var ri dynamic.ResourceInterface = dyn.Resource(c.gvr)
		if c.namespace != "" {
			ri = dyn.Resource(c.gvr).Namespace(c.namespace)
		}
		created, err := ri.Create(ctx, object(c.gvr, c.kind, c.namespace, "x", map[string]any{"color": "red"}), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", c.gvr.Resource, err)
		}
		if created.GetResourceVersion() == "" || created.GetUID() == "" {
			t.Fatalf("created %s has no resourceVersion or uid: %v", c.gvr.Resource, created.Object)
		}

		list, err := dyn.Resource(c.gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list %s: %v", c.gvr.Resource, err)
		}
		if len(list.Items) != 1 || list.Items[0].GetName() != "x" || list.Items[0].GetNamespace() != c.namespace {
			t.Fatalf("list %s = %v, want the one created object", c.gvr.Resource, list.Items)
		}

		w, err := dyn.Resource(c.gvr).Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatalf("watch %s: %v", c.gvr.Resource, err)
		}
		ev := next(t, w)
		if ev.Type != watch.Added || ev.Object.(*unstructured.Unstructured).GetResourceVersion() != created.GetResourceVersion() {
			t.Fatalf("first event of a watch of %s from 0 = %s %v, want ADDED at %s", c.gvr.Resource, ev.Type, ev.Object, created.GetResourceVersion())
		}
		w.Stop()

		// From the list's resourceVersion: only what changed since.
		w, err = dyn.Resource(c.gvr).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			t.Fatalf("watch %s: %v", c.gvr.Resource, err)
		}
		created.Object["spec"] = map[string]any{"color": "blue"}
		updated, err := ri.Update(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("update %s: %v", c.gvr.Resource, err)
		}
		ev = next(t, w)
		if ev.Type != watch.Modified || ev.Object.(*unstructured.Unstructured).GetResourceVersion() != updated.GetResourceVersion() {
			t.Fatalf("first event of a watch of %s from the list = %s %v, want MODIFIED at %s", c.gvr.Resource, ev.Type, ev.Object, updated.GetResourceVersion())
		}
		w.Stop()
	}
}

// waitFor polls cond until it holds, failing t after waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	deadline := time.After(waitTimeout)
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-ticker.C:
		}
	}
}

func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed before an event")
		}
		return ev
	case <-time.After(waitTimeout):
		t.Fatal("no watch event")
	}
	return watch.Event{}
}

func TestOverEmbeddedEtcd(t *testing.T) {
	for _, cached := range []bool{true, false} {
		name := "watchcache"
		if !cached {
			name = "nowatchcache"
		}
		t.Run(name, func(t *testing.T) {
			s := StartT(t, Options{
				EtcdEndpoints:     EmbeddedEtcd(t),
				CRDs:              []*apiextensionsv1.CustomResourceDefinition{WidgetsCRD(), gadgetsCRD(t)},
				DisableWatchCache: !cached,
			})
			if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
				t.Errorf("URL %q is not on loopback", s.URL())
			}
			createListWatch(t, s)
		})
	}
}

func TestOverListwatchEtcd(t *testing.T) {
	endpoints, st := ListwatchEtcd(t)
	s := StartT(t, Options{
		EtcdEndpoints: endpoints,
		CRDs:          []*apiextensionsv1.CustomResourceDefinition{WidgetsCRD(), gadgetsCRD(t)},
	})
	createListWatch(t, s)
	// The objects are in listwatch's store, where kube-apiserver keeps custom resources.
	res, err := st.Range(&store.RangeRequest{Key: []byte("/registry/example.com/widgets/a/x")})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Kvs) != 1 {
		t.Errorf("store has %d keys at the widget's key, want 1", len(res.Kvs))
	}
}
