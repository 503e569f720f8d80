package goapi

import (
	"context"
	_ "embed"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/listwatchtest"
)

// kubeconfigEnv names the variable that points the tests at a real cluster (an etcd and a
// kube-apiserver): the path of a kubeconfig whose current context has the rights to create
// namespaces and CustomResourceDefinitions.
const kubeconfigEnv = "LISTWATCH_KUBECONFIG"

//go:embed testdata/gizmos.yaml
var gizmosCRD []byte

var (
	gizmosGVR     = schema.GroupVersionResource{Group: "goapi.listwatch.dev", Version: "v1", Resource: "gizmos"}
	namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// target is a Kubernetes API a test body runs against: listwatch's Go API, or the real cluster
// kubeconfigEnv names.
type target struct {
	config     *rest.Config
	kubeconfig string
	env        *listwatchtest.Env // nil for a real cluster
	// namespace is the test's own.
	namespace string
}

// restConfig is a copy of the target's client configuration.
func (tg *target) restConfig() *rest.Config { return rest.CopyConfig(tg.config) }

// forEachTarget runs body against a new environment of the Go API serving the default resources
// and testdata/gizmos.yaml and, when kubeconfigEnv is set, against that cluster, each as a subtest.
func forEachTarget(t *testing.T, body func(t *testing.T, tg *target)) {
	t.Run("listwatch", func(t *testing.T) {
		env := listwatchtest.Start(t, listwatchtest.WithCRDs(gizmosCRD))
		kubeconfig, err := env.Kubeconfig()
		if err != nil {
			t.Fatal(err)
		}
		tg := &target{config: env.Config(), kubeconfig: kubeconfig, env: env}
		tg.namespace = newNamespace(t, tg)
		body(t, tg)
	})
	path := os.Getenv(kubeconfigEnv)
	if path == "" {
		return
	}
	t.Run("cluster", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatalf("%s=%s: %v", kubeconfigEnv, path, err)
		}
		cfg.QPS = -1
		// HTTP/1.1: each connection's goroutines end once it is closed, which closeIdle does.
		cfg.NextProtos = []string{"http/1.1"}
		closeIdle(t, cfg)
		tg := &target{config: cfg, kubeconfig: path}
		installGizmos(t, tg)
		tg.namespace = newNamespace(t, tg)
		body(t, tg)
	})
}

// closeIdle makes every client built from cfg close its idle connections at the end of the test:
// client-go keeps the transports of TLS configurations for the life of the process, and their
// idle connections to a cluster, unlike those to the Go API, which closes them, would outlive the
// test.
func closeIdle(t *testing.T, cfg *rest.Config) {
	var mu sync.Mutex
	var transports []http.RoundTripper
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		mu.Lock()
		transports = append(transports, rt)
		mu.Unlock()
		return rt
	})
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, rt := range transports {
			utilnet.CloseIdleConnectionsFor(rt)
		}
	})
}

// discovered returns the discovery entry of a resource (or subresource) of gv, or nil.
func discovered(cfg *rest.Config, gv schema.GroupVersion, name string) (*metav1.APIResource, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	list, err := dc.ServerResourcesForGroupVersion(gv.String())
	if err != nil {
		return nil, err
	}
	for i := range list.APIResources {
		if list.APIResources[i].Name == name {
			return &list.APIResources[i], nil
		}
	}
	return nil, nil
}

// newNamespace creates a namespace of the test's own; on a real cluster it is deleted at the
// test's cleanup.
func newNamespace(t *testing.T, tg *target) string {
	t.Helper()
	name := "goapi-" + utilrand.String(6)
	dyn, err := dynamic.NewForConfig(tg.restConfig())
	if err != nil {
		t.Fatal(err)
	}
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(name)
	if _, err := dyn.Resource(namespacesGVR).Create(ctxFor(t), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the namespace %s: %v", name, err)
	}
	if tg.env == nil {
		t.Cleanup(func() {
			if err := dyn.Resource(namespacesGVR).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting the namespace %s: %v", name, err)
			}
		})
	}
	return name
}

// installGizmos installs testdata/gizmos.yaml in a real cluster, unless it is there, and waits
// until the cluster serves it.
func installGizmos(t *testing.T, tg *target) {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(gizmosCRD, &crd); err != nil {
		t.Fatal(err)
	}
	cs, err := apiextensionsclient.NewForConfig(tg.restConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("installing %s: %v", crd.Name, err)
	}
	testutil.WaitFor(t, crd.Name+" to be served", func() bool {
		r, err := discovered(tg.restConfig(), gizmosGVR.GroupVersion(), gizmosGVR.Resource+"/status")
		return err == nil && r != nil
	})
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testutil.WaitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 10 ms until it holds, failing the test after testutil.WaitTimeout
// with what cond last said.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	var last error
	err := testutil.Poller{Interval: 10 * time.Millisecond}.Poll(what, func() bool {
		last = cond()
		return last == nil
	})
	if err != nil {
		t.Fatalf("%v: %v", err, last)
	}
}
