package clientgo

import (
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/pager"

	"github.com/listwatch/listwatch/internal/testutil"
)

// TestDiscovery: client-go's discovery client finds the served groups and resources, and a
// RESTMapper built from them maps kinds to resources with the right scope.
func TestDiscovery(t *testing.T) {
	e := newEnv(t, envOptions{})
	dc, err := discovery.NewDiscoveryClientForConfig(e.restConfig(directAgent))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.ServerVersion(); err != nil {
		t.Errorf("ServerVersion: %v", err)
	}
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("ServerGroupsAndResources: %v", err)
	}
	type served struct {
		kind       string
		namespaced bool
		verbs      []string
	}
	got := map[schema.GroupVersionResource]served{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatalf("group version %q: %v", l.GroupVersion, err)
		}
		for _, r := range l.APIResources {
			got[gv.WithResource(r.Name)] = served{kind: r.Kind, namespaced: r.Namespaced, verbs: r.Verbs}
		}
	}
	for gvr, kind := range map[schema.GroupVersionResource]string{configMapsGVR: "ConfigMap", podsGVR: "Pod", widgetsGVR: "Widget"} {
		s, ok := got[gvr]
		if !ok {
			t.Errorf("discovery has no %v; it has %v", gvr, got)
			continue
		}
		if s.kind != kind || !s.namespaced {
			t.Errorf("%v: kind %q namespaced %v, want %q namespaced", gvr, s.kind, s.namespaced, kind)
		}
		for _, verb := range []string{"create", "delete", "get", "list", "update", "watch"} {
			if !slices.Contains(s.verbs, verb) {
				t.Errorf("%v: verbs %v lack %q", gvr, s.verbs, verb)
			}
		}
	}

	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	m, err := mapper.RESTMapping(schema.GroupKind{Group: "example.com", Kind: "Widget"})
	if err != nil {
		t.Fatalf("RESTMapping Widget: %v", err)
	}
	if m.Resource != widgetsGVR || m.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Errorf("Widget maps to %v (scope %s), want %v namespaced", m.Resource, m.Scope.Name(), widgetsGVR)
	}
}

// TestDynamicClient: create, get, list, update, delete and watch through client-go's dynamic
// client, for a built-in resource and a custom one, with the API errors client-go recognises.
func TestDynamicClient(t *testing.T) {
	for _, gvr := range []schema.GroupVersionResource{configMapsGVR, widgetsGVR} {
		t.Run(gvr.Resource, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			c := e.direct.Resource(gvr).Namespace("crud")

			a, err := c.Create(e.ctx(), object(gvr, "crud", "a", map[string]string{"app": "x"}), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			if ts := a.GetCreationTimestamp(); a.GetResourceVersion() == "" || a.GetUID() == "" || ts.IsZero() {
				t.Errorf("created object lacks resourceVersion, uid or creationTimestamp: %v", a.Object["metadata"])
			}
			if _, err := c.Create(e.ctx(), object(gvr, "crud", "a", nil), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
				t.Errorf("second create: %v, want AlreadyExists", err)
			}
			b, err := c.Create(e.ctx(), object(gvr, "crud", "b", map[string]string{"app": "y"}), metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create b: %v", err)
			}

			got, err := c.Get(e.ctx(), "a", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if got.GetResourceVersion() != a.GetResourceVersion() || got.GetUID() != a.GetUID() {
				t.Errorf("get returned rv %s uid %s, created rv %s uid %s", got.GetResourceVersion(), got.GetUID(), a.GetResourceVersion(), a.GetUID())
			}
			if _, err := c.Get(e.ctx(), "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("get of a missing object: %v, want NotFound", err)
			}

			l, err := c.List(e.ctx(), metav1.ListOptions{LabelSelector: "app=x"})
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			if len(l.Items) != 1 || l.Items[0].GetName() != "a" {
				t.Errorf("list app=x: %v, want [a]", names(l.Items))
			}
			if rvNumber(t, l.GetResourceVersion()) < rvNumber(t, b.GetResourceVersion()) {
				t.Errorf("list resourceVersion %s is older than the last write %s", l.GetResourceVersion(), b.GetResourceVersion())
			}

			// client-go's pager follows continue tokens (a limited list with RV "" goes to etcd).
			mark := e.log.mark()
			p := pager.New(pager.SimplePageFunc(func(opts metav1.ListOptions) (runtime.Object, error) {
				return c.List(e.ctx(), opts)
			}))
			p.PageSize = 1
			paged, _, err := p.List(e.ctx(), metav1.ListOptions{})
			if err != nil {
				t.Fatalf("paged list: %v", err)
			}
			items, err := meta.ExtractList(paged)
			if err != nil {
				t.Fatal(err)
			}
			if len(items) != 2 {
				t.Errorf("paged list returned %d items, want a and b", len(items))
			}
			pages := e.log.since(mark, directAgent, func(r *request) bool { return r.isList() })
			if len(pages) < 2 || pages[0].query.Get("limit") != "1" || pages[1].query.Get("continue") == "" {
				t.Errorf("paged list requests:%s\nwant limit=1, then a continue token", describe(pages))
			}

			w, err := c.Watch(e.ctx(), metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
			if err != nil {
				t.Fatalf("watch: %v", err)
			}
			defer w.Stop()

			a.Object["spec"] = map[string]any{"size": int64(2)}
			a.Object["data"] = map[string]any{"k": "v2"}
			updated, err := c.Update(e.ctx(), a, metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if rvNumber(t, updated.GetResourceVersion()) <= rvNumber(t, a.GetResourceVersion()) {
				t.Errorf("update did not move the resourceVersion: %s -> %s", a.GetResourceVersion(), updated.GetResourceVersion())
			}
			if _, err := c.Update(e.ctx(), a, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
				t.Errorf("update with a stale resourceVersion: %v, want Conflict", err)
			}
			wantEvents := []string{"MODIFIED a " + updated.GetResourceVersion()}

			// An update without resourceVersion is unconditional for ConfigMaps; custom resources
			// refuse it (the CRD strategy's AllowUnconditionalUpdate is false).
			unconditional := updated.DeepCopy()
			unconditional.SetResourceVersion("")
			unconditional.SetLabels(map[string]string{"app": "x", "unconditional": "true"})
			again, err := c.Update(e.ctx(), unconditional, metav1.UpdateOptions{})
			switch gvr {
			case configMapsGVR:
				if err != nil {
					t.Errorf("unconditional update of a ConfigMap: %v", err)
				} else {
					wantEvents = append(wantEvents, "MODIFIED a "+again.GetResourceVersion())
				}
			default:
				if !apierrors.IsInvalid(err) {
					t.Errorf("unconditional update of a custom resource: %v, want Invalid", err)
				}
			}

			wrongUID := types.UID("00000000-0000-0000-0000-000000000000")
			err = c.Delete(e.ctx(), "b", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrongUID}})
			if !apierrors.IsConflict(err) {
				t.Errorf("delete with a wrong UID precondition: %v, want Conflict", err)
			}
			if err := c.Delete(e.ctx(), "b", metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if _, err := c.Get(e.ctx(), "b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("get after delete: %v, want NotFound", err)
			}
			if err := c.Delete(e.ctx(), "b", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("second delete: %v, want NotFound", err)
			}
			after, err := c.List(e.ctx(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantEvents = append(wantEvents, "DELETED b "+after.GetResourceVersion())

			var gotEvents []string
			for len(gotEvents) < len(wantEvents) {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						t.Fatalf("watch closed after %v, want %v", gotEvents, wantEvents)
					}
					u, ok := ev.Object.(*unstructured.Unstructured)
					if !ok {
						t.Fatalf("watch event object %T, want *unstructured.Unstructured", ev.Object)
					}
					if ev.Type == watch.Bookmark {
						continue
					}
					if u.GetKind() != object(gvr, "", "", nil).GetKind() {
						t.Errorf("event object of kind %q", u.GetKind())
					}
					gotEvents = append(gotEvents, string(ev.Type)+" "+u.GetName()+" "+u.GetResourceVersion())
				case <-time.After(testutil.WaitTimeout):
					t.Fatalf("watch events %v, want %v", gotEvents, wantEvents)
				}
			}
			if !slices.Equal(gotEvents, wantEvents) {
				t.Errorf("watch events %v, want %v", gotEvents, wantEvents)
			}
		})
	}
}

// TestTypedClient: the generated clientset for ConfigMaps (create, get, list with a field
// selector, watch, update, delete), and a typed shared informer with client-go's default gates.
func TestTypedClient(t *testing.T) {
	e := newEnv(t, envOptions{})

	// Generated clients prefer protobuf for reads and writes (TestProtobufClient); this test speaks
	// JSON.
	cfg := e.restConfig(directAgent)
	cfg.ContentType = "application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps("typed")
	created, err := cms.Create(e.ctx(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "one", Labels: map[string]string{"app": "typed"}},
		Data:       map[string]string{"a": "1"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.Namespace != "typed" || created.ResourceVersion == "" || created.UID == "" {
		t.Errorf("created %+v", created.ObjectMeta)
	}
	got, err := cms.Get(e.ctx(), "one", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Data["a"] != "1" || got.ResourceVersion != created.ResourceVersion {
		t.Errorf("get: data %v rv %s, want a=1 rv %s", got.Data, got.ResourceVersion, created.ResourceVersion)
	}
	if _, err := cms.Create(e.ctx(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "two"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := cms.List(e.ctx(), metav1.ListOptions{FieldSelector: "metadata.name=one"})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(l.Items) != 1 || l.Items[0].Name != "one" {
		t.Errorf("list metadata.name=one returned %d items", len(l.Items))
	}
	if _, err := cms.List(e.ctx(), metav1.ListOptions{FieldSelector: "data.a=1"}); !apierrors.IsBadRequest(err) {
		t.Errorf("list with an unsupported field label: %v, want BadRequest", err)
	}

	w, err := cms.Watch(e.ctx(), metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	got.Data["a"] = "2"
	updated, err := cms.Update(e.ctx(), got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if err := cms.Delete(e.ctx(), "two", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	for _, want := range []struct {
		typ  watch.EventType
		name string
		data string
	}{{watch.Modified, "one", "2"}, {watch.Deleted, "two", ""}} {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("event object %T, want *v1.ConfigMap", ev.Object)
			}
			if ev.Type != want.typ || cm.Name != want.name || cm.Data["a"] != want.data {
				t.Errorf("event %s %s data %v, want %s %s a=%q", ev.Type, cm.Name, cm.Data, want.typ, want.name, want.data)
			}
			if want.typ == watch.Modified && cm.ResourceVersion != updated.ResourceVersion {
				t.Errorf("MODIFIED at rv %s, the update returned %s", cm.ResourceVersion, updated.ResourceVersion)
			}
		case <-time.After(testutil.WaitTimeout):
			t.Fatalf("no %s event", want.typ)
		}
	}

	// WatchListClient is on by default in v0.37: the informer streams. It asks for JSON here, so
	// that the request log can read its frames; TestProtobufClient runs one over protobuf.
	readersCfg := e.restConfig(informerAgent)
	readersCfg.AcceptContentTypes = "application/json"
	readers, err := kubernetes.NewForConfig(readersCfg)
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(readers, 0, informers.WithNamespace("typed"))
	lister := factory.Core().V1().ConfigMaps().Lister()
	inf := factory.Core().V1().ConfigMaps().Informer()
	e.startFactory(factory)
	e.waitFor("typed informer sync", inf.HasSynced)
	first := checkWatchListStart(t, e.log.requests(informerAgent, nil), "/api/v1/namespaces/typed/configmaps")
	checkInitialEvents(t, first, []string{"typed/one"}, inf.LastSyncResourceVersion())
	if _, err := cms.Create(e.ctx(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "three"}, Data: map[string]string{"a": "3"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the typed informer to see configmap three", func() bool {
		cm, err := lister.ConfigMaps("typed").Get("three")
		return err == nil && cm.Data["a"] == "3"
	})
	all, err := lister.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 { // one (updated) and three; two was deleted
		t.Errorf("typed informer holds %d configmaps, want 2", len(all))
	}
}

func names(items []unstructured.Unstructured) []string {
	var out []string
	for i := range items {
		out = append(out, items[i].GetName())
	}
	return out
}

func rvNumber(t *testing.T, rv string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not a number: %v", rv, err)
	}
	return n
}
