package listwatchtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/listwatchtest"
	"github.com/listwatch/listwatch/store"
)

var widgetsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testutil.WaitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// clientsetFor is a typed clientset with client-go's defaults (protobuf for the built-in kinds).
func clientsetFor(t *testing.T, e *listwatchtest.Env) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(e.Config())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func dynamicFor(t *testing.T, e *listwatchtest.Env) *dynamic.DynamicClient {
	t.Helper()
	dc, err := dynamic.NewForConfig(e.Config())
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

func etcdFor(t *testing.T, e *listwatchtest.Env) *clientv3.Client {
	t.Helper()
	cli, err := e.Etcd()
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

func configMap(namespace, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
}

func widget(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1)}}}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Widget")
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// TestStart: one call gives both APIs over one store: an etcd API that a client made from
// Endpoint alone reaches, and a Kubernetes API that client-go discovers, writes and lists, whose
// writes are in the store at kube-apiserver's keys.
func TestStart(t *testing.T) {
	t.Parallel()
	e := listwatchtest.Start(t)
	ctx := ctxFor(t)

	// The etcd API, from its endpoint alone.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "/plain", "v"); err != nil {
		t.Fatal(err)
	}
	if got, err := etcdFor(t, e).Get(ctx, "/plain"); err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v" {
		t.Fatalf("Get through Etcd(): %v %v", got, err)
	}

	// The Kubernetes API: discovery, then a write and a list.
	cs := clientsetFor(t, e)
	if _, err := cs.Discovery().ServerResourcesForGroupVersion("v1"); err != nil {
		t.Fatalf("discovery: %v", err)
	}
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", "a", map[string]string{"k": "v"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "a" {
		t.Fatalf("list: %v %v", list, err)
	}

	// The write is in the store, at the key kube-apiserver would use.
	key, err := e.Key("configmaps", "default", "a")
	if err != nil || key != "/registry/configmaps/default/a" {
		t.Fatalf("Key = %q, %v", key, err)
	}
	kv, err := e.Raw(key)
	if err != nil || kv == nil {
		t.Fatalf("Raw(%s) = %v, %v", key, kv, err)
	}
	var stored corev1.ConfigMap
	if err := json.Unmarshal(kv.Value, &stored); err != nil || stored.Data["k"] != "v" || stored.UID != cm.UID {
		t.Fatalf("stored %s: %v", kv.Value, err)
	}
	if fmt.Sprint(kv.ModRevision) != cm.ResourceVersion {
		t.Errorf("stored at revision %d, resourceVersion %s", kv.ModRevision, cm.ResourceVersion)
	}
	kvs, err := e.RawList("/registry/configmaps/")
	if err != nil || len(kvs) != 1 || string(kvs[0].Key) != key {
		t.Errorf("RawList = %v, %v", kvs, err)
	}
	if kv, err := e.Raw("/registry/configmaps/default/missing"); kv != nil || err != nil {
		t.Errorf("Raw of a missing key = %v, %v", kv, err)
	}
}

// TestStartParallel: twenty environments started at once in one process are each their own: while
// all are open, each has ports of its own (no address is handed to two of them), and each sees only
// its own writes. All twenty stay open until the test ends: an environment's port is only its own
// while it is open, and the kernel may hand a closed one's port to the next listener.
func TestStartParallel(t *testing.T) {
	t.Parallel()
	const n = 20
	ctx := ctxFor(t)
	envs := make([]*listwatchtest.Env, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { envs[i], errs[i] = listwatchtest.New(ctx) })
	}
	wg.Wait()
	for i, e := range envs {
		if e != nil {
			t.Cleanup(func() {
				if err := e.Close(); err != nil {
					t.Errorf("close environment %d: %v", i, err)
				}
			})
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	owner := map[string]int{}
	for i, e := range envs {
		for _, addr := range []string{e.URL(), e.Endpoint()} {
			if j, dup := owner[addr]; dup {
				t.Fatalf("%s handed to environments %d and %d, both open", addr, j, i)
			}
			owner[addr] = i
		}
	}
	for i, e := range envs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			ctx := ctxFor(t)
			cs := clientsetFor(t, e)
			name := fmt.Sprintf("env-%d", i)
			if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, configMap("default", name, nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			list, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 1 || list.Items[0].Name != name {
				t.Fatalf("environment %d lists %d objects (first %v): another environment's writes leaked in", i, len(list.Items), list.Items)
			}
		})
	}
}

// TestCloseLeavesNoGoroutine: Close ends everything, open watches of both APIs and the clients the
// environment made included, and is idempotent.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	// Not parallel: goleak looks at the whole process.
	ignore := goleak.IgnoreCurrent()
	e, err := listwatchtest.New(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	cli, err := e.Etcd()
	if err != nil {
		t.Fatal(err)
	}
	etcdWatch := cli.Watch(ctx, "/", clientv3.WithPrefix())
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(e.URL() + "/api/v1/configmaps?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Kubeconfig(); err != nil {
		t.Fatal(err)
	}
	path, _ := e.Kubeconfig()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for range etcdWatch {
	}
	resp.Body.Close()
	hc.CloseIdleConnections()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the kubeconfig %s outlived Close: %v", path, err)
	}
	if err := goleak.Find(ignore); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Compact(); !errors.Is(err, listwatchtest.ErrClosed) {
		t.Errorf("Compact after Close = %v, want ErrClosed", err)
	}
	if _, err := e.Etcd(); !errors.Is(err, listwatchtest.ErrClosed) {
		t.Errorf("Etcd after Close = %v, want ErrClosed", err)
	}
	if err := e.Seed(ctxFor(t), configMap("default", "late", nil)); !errors.Is(err, listwatchtest.ErrClosed) {
		t.Errorf("Seed after Close = %v, want ErrClosed", err)
	}
}

// TestOptionsRefused: options that cannot work are refused by New with ErrInvalidOption (or the
// chain's error for a resource it refuses), naming the problem, before anything starts.
func TestOptionsRefused(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	for name, opts := range map[string][]listwatchtest.Option{
		"no resources":          {listwatchtest.WithResources()},
		"nil scheme":            {listwatchtest.WithScheme(nil)},
		"nil logger":            {listwatchtest.WithLogger(nil)},
		"progress below 100ms":  {listwatchtest.WithProgressNotifyInterval(store.MinProgressNotifyInterval / 2)},
		"etcd only and objects": {listwatchtest.EtcdOnly(), listwatchtest.WithObjects(configMap("default", "a", nil))},
	} {
		if e, err := listwatchtest.New(ctx, opts...); !errors.Is(err, listwatchtest.ErrInvalidOption) {
			if e != nil {
				e.Close()
			}
			t.Errorf("%s: New = %v, want ErrInvalidOption", name, err)
		}
	}
	bad := httpwatch.Resource{Version: "v1", Resource: "Things", Kind: "Thing"}
	if _, err := listwatchtest.New(ctx, listwatchtest.WithResources(bad)); !errors.Is(err, httpwatch.ErrInvalidConfig) {
		t.Errorf("a resource named in upper case: New = %v, want httpwatch.ErrInvalidConfig", err)
	}
}

// TestEtcdOnly: EtcdOnly serves the etcd API alone; the Kubernetes methods say there is none.
func TestEtcdOnly(t *testing.T) {
	t.Parallel()
	e := listwatchtest.Start(t, listwatchtest.EtcdOnly())
	if _, err := etcdFor(t, e).Put(ctxFor(t), "k", "v"); err != nil {
		t.Fatal(err)
	}
	if kv, err := e.Raw("k"); err != nil || kv == nil || string(kv.Value) != "v" {
		t.Errorf("Raw(k) = %v, %v", kv, err)
	}
	if e.URL() != "" || e.Config() != nil || e.Chain() != nil {
		t.Errorf("an etcd-only environment has a Kubernetes API: %q %v %v", e.URL(), e.Config(), e.Chain())
	}
	for name, err := range map[string]error{
		"Kubeconfig":    second(e.Kubeconfig()),
		"Key":           second(e.Key("configmaps", "default", "a")),
		"Seed":          e.Seed(ctxFor(t), configMap("default", "a", nil)),
		"InjectExpired": second(e.InjectExpired("configmaps")),
		"Relist":        e.Relist(ctxFor(t), "configmaps"),
	} {
		if !errors.Is(err, listwatchtest.ErrNoKubernetesAPI) {
			t.Errorf("%s = %v, want ErrNoKubernetesAPI", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// TestSeed: typed objects without apiVersion and kind and unstructured ones are created through
// the API, and each is updated with what the server stored; WithObjects does the same before Start
// returns.
func TestSeed(t *testing.T) {
	t.Parallel()
	pre := configMap("default", "pre", map[string]string{"a": "b"})
	e := listwatchtest.Start(t, listwatchtest.WithObjects(pre))
	if pre.ResourceVersion == "" || pre.UID == "" {
		t.Fatalf("WithObjects left the object without resourceVersion or uid: %+v", pre.ObjectMeta)
	}
	ctx := ctxFor(t)
	cm, w := configMap("ns", "typed", map[string]string{"k": "v"}), widget("ns", "w")
	if err := e.Seed(ctx, cm, w); err != nil {
		t.Fatal(err)
	}
	if cm.ResourceVersion == "" || cm.CreationTimestamp.IsZero() || w.GetResourceVersion() == "" || w.GetUID() == "" {
		t.Fatalf("Seed did not update the objects: %+v %v", cm.ObjectMeta, w.Object)
	}
	got, err := clientsetFor(t, e).CoreV1().ConfigMaps("ns").Get(ctx, "typed", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" || got.ResourceVersion != cm.ResourceVersion {
		t.Errorf("get typed: %v %v", got, err)
	}
	gw, err := dynamicFor(t, e).Resource(widgetsGVR).Namespace("ns").Get(ctx, "w", metav1.GetOptions{})
	if err != nil || gw.GetResourceVersion() != w.GetResourceVersion() {
		t.Errorf("get widget: %v %v", gw, err)
	}
}

// TestSeedFailures: Seed names the object it could not create and why; the objects before it are
// created, none after it; a failing WithObjects fails New and leaves nothing running.
func TestSeedFailures(t *testing.T) {
	t.Parallel()
	e := listwatchtest.Start(t)
	ctx := ctxFor(t)
	type unknown struct{ corev1.ConfigMap }
	for name, tc := range map[string]struct {
		obj  runtime.Object
		is   func(error) bool
		text string
	}{
		"no namespace":     {configMap("", "a", nil), func(error) bool { return true }, "metadata.namespace is empty"},
		"kind not served":  {&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, isUnknown, "no served resource has kind /v1, Kind=Node"},
		"kind not known":   {&unknown{}, func(error) bool { return true }, "has no apiVersion and kind"},
		"already existing": {configMap("default", "dup", nil), apierrors.IsAlreadyExists, `configmaps "dup" already exists`},
	} {
		if name == "already existing" {
			if err := e.Seed(ctx, configMap("default", "dup", nil)); err != nil {
				t.Fatal(err)
			}
		}
		err := e.Seed(ctx, configMap("default", "before-"+strings.ReplaceAll(name, " ", "-"), nil), tc.obj, configMap("default", "after", nil))
		if err == nil || !tc.is(err) || !strings.Contains(err.Error(), tc.text) || !strings.Contains(err.Error(), "object 1") {
			t.Errorf("%s: Seed = %v, want an error naming object 1 and %q", name, err, tc.text)
		}
	}
	list, err := clientsetFor(t, e).CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		if cm.Name == "after" {
			t.Error("Seed went on after a failure")
		}
	}
	if len(list.Items) != 5 { // dup and the four before-*
		t.Errorf("%d configmaps, want 5", len(list.Items))
	}

	if e2, err := listwatchtest.New(ctx, listwatchtest.WithObjects(configMap("", "x", nil))); err == nil {
		e2.Close()
		t.Error("New with an object that cannot be created succeeded")
	}
}

func isUnknown(err error) bool { return errors.Is(err, listwatchtest.ErrUnknownResource) }

// TestKey: Key is the storage key of a namespaced or cluster-scoped resource's object; an unknown
// resource, a namespace for a cluster-scoped one or none for a namespaced one are refused.
func TestKey(t *testing.T) {
	t.Parallel()
	nodes := httpwatch.Resource{Version: "v1", Resource: "nodes", Kind: "Node", BuiltIn: true}
	e := listwatchtest.Start(t, listwatchtest.WithResources(httpwatch.ConfigMaps(), httpwatch.Widgets(), nodes))
	for _, tc := range []struct{ resource, namespace, name, want string }{
		{"configmaps", "ns", "a", "/registry/configmaps/ns/a"},
		{"widgets.example.com", "ns", "w", "/registry/widgets/ns/w"},
		{"nodes", "", "n", "/registry/nodes/n"},
	} {
		if got, err := e.Key(tc.resource, tc.namespace, tc.name); err != nil || got != tc.want {
			t.Errorf("Key(%s, %s, %s) = %q, %v; want %q", tc.resource, tc.namespace, tc.name, got, err, tc.want)
		}
	}
	if _, err := e.Key("pods", "ns", "p"); !errors.Is(err, listwatchtest.ErrUnknownResource) {
		t.Errorf("Key of a resource not served = %v, want ErrUnknownResource", err)
	}
	for _, bad := range [][3]string{{"nodes", "ns", "n"}, {"configmaps", "", "a"}, {"configmaps", "ns", ""}} {
		if key, err := e.Key(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("Key(%q) = %q, want an error", bad, key)
		}
	}
	if _, err := e.RawList(""); err == nil {
		t.Error("RawList of an empty prefix succeeded")
	}
}
