package httpwatch

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/listwatch/listwatch/internal/testutil"
)

const thingsCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.org
spec:
  group: example.org
  names:
    plural: things
    singular: thing
    kind: Thing
    listKind: ThingList
    shortNames: [th]
    categories: [all]
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - name: Color
      type: string
      jsonPath: .spec.color
    selectableFields:
    - jsonPath: .spec.color
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color:
                type: string
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name:
                      type: string
                    port:
                      type: integer
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: knobs.example.org
spec:
  group: example.org
  names: {plural: knobs, kind: Knob}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// TestCRDResources covers CustomResourceDefinitions as YAML and as Go values: the storage version
// first, then the other served one, with its names, scope, status subresource, columns, selectable fields and schema; and served, a
// schema that server-side apply merges by (a list keyed by name) and that /openapi/v3 publishes.
func TestCRDResources(t *testing.T) {
	rs, err := CRDResources([]byte(thingsCRD))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || rs[1].Resource != "things" || rs[1].Version != "v1alpha1" || rs[1].StatusSubresource {
		t.Fatalf("%d resources", len(rs))
	}
	th := rs[0]
	if th.Group != "example.org" || th.Version != "v1" || th.Resource != "things" || th.Kind != "Thing" || !th.Namespaced ||
		!th.StatusSubresource || len(th.Columns) != 1 || th.Columns[0].JSONPath != ".spec.color" || th.Schema == nil ||
		len(th.SelectableFields) != 1 || th.SelectableFields[0].Label != "spec.color" || th.KeyPrefix != "/example.org/things" ||
		strings.Join(th.ShortNames, ",") != "th" || strings.Join(th.Categories, ",") != "all" {
		t.Errorf("things %+v", th)
	}
	if rs[2].Namespaced || rs[2].Resource != "knobs" {
		t.Errorf("knobs %+v", rs[2])
	}
	// A Go value that encodes to the definition's JSON.
	var value map[string]any
	if err := yamlUnmarshal(strings.Split(thingsCRD, "---")[1], &value); err != nil {
		t.Fatal(err)
	}
	if r, err := CRDResource(value); err != nil || r.Resource != "knobs" {
		t.Errorf("CRDResource of a Go value: %+v %v", r, err)
	}

	// Served: server-side apply merges the ports of two managers by name.
	c, err := StartChain(TestChainConfig{Resources: rs})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CloseAtCleanup(t, "Close", c.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	e := &env{t: t, st: c.Store, api: c.API, url: c.URL, client: &http.Client{Transport: tr}}
	const path = "/apis/example.org/v1/namespaces/default/things/t"
	apply := func(manager, ports string) response {
		return e.patch(path+"?fieldManager="+manager, applyPatch, "apiVersion: example.org/v1\nkind: Thing\nmetadata:\n  name: t\nspec:\n  ports:\n"+ports)
	}
	if r := apply("one", "  - name: a\n    port: 1\n"); r.code != 201 {
		t.Fatalf("apply one: %d %s", r.code, r.body)
	}
	r := apply("two", "  - name: b\n    port: 2\n")
	ports, _, _ := unstructured.NestedSlice(r.object(t).Object, "spec", "ports")
	if r.code != 200 || len(ports) != 2 {
		t.Errorf("ports after two managers: %d %v", r.code, ports)
	}
	checkStatus(t, "port conflict", apply("two", "  - name: a\n    port: 9\n"), 409, metav1.StatusReasonConflict, `Apply failed with 1 conflict: conflict with "one": .spec.ports[name="a"].port`)
	if r := e.do("GET", "/apis/example.org/v1/namespaces/default/things?fieldSelector=spec.color%3Dred", ""); r.code != 200 {
		t.Errorf("selectable field: %d %s", r.code, r.body)
	}
	if r := e.do("GET", "/openapi/v3/apis/example.org/v1", ""); r.code != 200 || !strings.Contains(string(r.body), `"x-kubernetes-list-map-keys":["name"]`) {
		t.Errorf("openapi of things: %d", r.code)
	}

	// Failure modes.
	for _, c := range []struct{ name, doc string }{
		{"not a CRD", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"},
		{"bad name", strings.Replace(thingsCRD, "name: things.example.org", "name: things", 1)},
		{"no group", strings.Replace(thingsCRD, "group: example.org", "group: \"\"", 1)},
		{"bad scope", strings.Replace(thingsCRD, "scope: Namespaced", "scope: Everywhere", 1)},
		{"no schema", strings.Replace(strings.Split(thingsCRD, "---")[1], "    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n", "", 1)},
		{"not YAML", "apiVersion: [\n"},
	} {
		if _, err := CRDResources([]byte(c.doc)); !errors.Is(err, ErrInvalidCRD) {
			t.Errorf("%s: %v, want ErrInvalidCRD", c.name, err)
		}
	}
	// A definition that serves nothing is valid, and has no resource.
	if rs, err := CRDResources([]byte(strings.ReplaceAll(strings.Split(thingsCRD, "---")[1], "served: true", "served: false"))); err != nil || len(rs) != 0 {
		t.Errorf("nothing served: %v %v", rs, err)
	}
	if _, err := CRDResource([]byte(thingsCRD)); !errors.Is(err, ErrInvalidCRD) {
		t.Errorf("two definitions to CRDResource: %v", err)
	}
	if _, err := CRDResource(func() {}); !errors.Is(err, ErrInvalidCRD) {
		t.Errorf("a func to CRDResource: %v", err)
	}
}

func yamlUnmarshal(doc string, v any) error { return sigsyaml.Unmarshal([]byte(doc), v) }
