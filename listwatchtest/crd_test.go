package listwatchtest_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/listwatchtest"
)

// crdYAML defines a CustomResourceDefinition of kind in group test.listwatch.dev, cluster-scoped
// or namespaced, with the status subresource.
func crdYAML(plural, kind, scope string) string {
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ` + plural + `.test.listwatch.dev
spec:
  group: test.listwatch.dev
  scope: ` + scope + `
  names: {plural: ` + plural + `, singular: ` + strings.ToLower(kind) + `, kind: ` + kind + `}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`
}

// TestCRDs: CustomResourceDefinitions given as YAML, as a Go value and in files are served beside
// the default resources, with their scope and status subresource, and listed in discovery.
func TestCRDs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "crds.yaml")
	if err := os.WriteFile(file, []byte(crdYAML("gadgets", "Gadget", "Namespaced")+"---\n"+crdYAML("sprockets", "Sprocket", "Cluster")), 0o600); err != nil {
		t.Fatal(err)
	}
	goValue := map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "doohickeys.test.listwatch.dev"},
		"spec": map[string]any{
			"group": "test.listwatch.dev", "scope": "Namespaced",
			"names": map[string]any{"plural": "doohickeys", "kind": "Doohickey"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}
	e := listwatchtest.Start(t, listwatchtest.WithCRDs(crdYAML("gizmos", "Gizmo", "Namespaced"), goValue), listwatchtest.WithCRDFiles(file))

	list, err := clientsetFor(t, e).Discovery().ServerResourcesForGroupVersion("test.listwatch.dev/v1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name)
	}
	for _, want := range []string{"gizmos", "gizmos/status", "gadgets", "gadgets/status", "sprockets", "sprockets/status", "doohickeys"} {
		if !slices.Contains(names, want) {
			t.Errorf("discovery lacks %s: %v", want, names)
		}
	}
	if _, err := clientsetFor(t, e).Discovery().ServerResourcesForGroupVersion("v1"); err != nil {
		t.Errorf("the default resources are not served beside the CRDs: %v", err)
	}
	// A cluster-scoped custom resource, written and read back.
	sprocket := &unstructured.Unstructured{}
	sprocket.SetAPIVersion("test.listwatch.dev/v1")
	sprocket.SetKind("Sprocket")
	sprocket.SetName("s")
	if err := e.Seed(ctxFor(t), sprocket); err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "test.listwatch.dev", Version: "v1", Resource: "sprockets"}
	if got, err := dynamicFor(t, e).Resource(gvr).Get(ctxFor(t), "s", metav1.GetOptions{}); err != nil || got.GetUID() != sprocket.GetUID() {
		t.Errorf("get sprocket: %v %v", got, err)
	}
	if key, err := e.Key("sprockets.test.listwatch.dev", "", "s"); err != nil || key != "/registry/test.listwatch.dev/sprockets/s" {
		t.Errorf("Key = %q, %v; want kube-apiserver's key of a custom resource", key, err)
	}
}

// TestCRDsRefused: a definition that is not one, or a file that is not there, fails New with
// ErrInvalidOption wrapping the reason.
func TestCRDsRefused(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	notCRD := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
	if _, err := listwatchtest.New(ctx, listwatchtest.WithCRDs(notCRD)); !errors.Is(err, listwatchtest.ErrInvalidOption) || !errors.Is(err, httpwatch.ErrInvalidCRD) {
		t.Errorf("WithCRDs(a ConfigMap) = %v, want ErrInvalidOption and httpwatch.ErrInvalidCRD", err)
	}
	if _, err := listwatchtest.New(ctx, listwatchtest.WithCRDFiles(filepath.Join(t.TempDir(), "missing.yaml"))); !errors.Is(err, listwatchtest.ErrInvalidOption) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("WithCRDFiles(a missing file) = %v, want ErrInvalidOption and fs.ErrNotExist", err)
	}
	if _, err := listwatchtest.New(ctx, listwatchtest.EtcdOnly(), listwatchtest.WithCRDs(crdYAML("gizmos", "Gizmo", "Namespaced"))); !errors.Is(err, listwatchtest.ErrInvalidOption) {
		t.Errorf("EtcdOnly with CRDs = %v, want ErrInvalidOption", err)
	}
}
