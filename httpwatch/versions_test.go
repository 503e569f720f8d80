package httpwatch

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/store"
)

// gearsCRD serves gears.example.net at v1 (the storage version; spec.color defaults to blue) and
// v1beta1 (deprecated; spec.old, which v1 does not have), and has v2 unserved.
const gearsCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gears.example.net
spec:
  group: example.net
  names: {plural: gears, singular: gear, kind: Gear, listKind: GearList}
  scope: Namespaced
  versions:
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              old: {type: string}
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string, default: blue}
  - name: v2
    served: false
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

const (
	gearsV1      = "/apis/example.net/v1/namespaces/default/gears"
	gearsV1beta1 = "/apis/example.net/v1beta1/namespaces/default/gears"
	gearsKey     = "/registry/example.net/gears/default/"
)

// startGears serves the definition over st (a new store when nil), with watch caches.
func startGears(t *testing.T, crd string, st *store.Store) *env {
	t.Helper()
	rs, err := CRDResources([]byte(crd))
	if err != nil {
		t.Fatal(err)
	}
	return newChainEnv(t, TestChainConfig{Resources: rs, Cached: true, Store: st})
}

// storedAt is the object stored under key.
func (e *env) storedAt(key string) *unstructured.Unstructured {
	e.t.Helper()
	m := e.stored(key)
	if m == nil {
		e.t.Fatalf("nothing stored at %s", key)
	}
	return &unstructured.Unstructured{Object: m}
}

// TestCRDVersions: the served versions of a definition share its objects, stored at the storage
// version and converted to the version asked for on create, get, list, watch (through the watch
// caches) and patch; each version prunes and defaults by its own schema; a deprecated version's
// answers carry its Warning; discovery lists the versions, the preferred first; OpenAPI has each
// version's schema; Tables have each version's columns.
func TestCRDVersions(t *testing.T) {
	rs, err := CRDResources([]byte(gearsCRD))
	if err != nil {
		t.Fatal(err)
	}
	const warning = `299 - "example.net/v1beta1 Gear is deprecated; use example.net/v1 Gear"`
	if len(rs) != 2 || rs[0].Version != "v1" || rs[1].Version != "v1beta1" || rs[1].DeprecationWarning == "" ||
		rs[0].DeprecationWarning != "" || !slices.Equal(rs[0].StoredVersions, []string{"v1"}) {
		t.Fatalf("resources %+v", rs)
	}
	e := startGears(t, gearsCRD, nil)
	w := e.watch(gearsV1beta1 + "?watch=true")

	// Created at v1beta1, stored at v1: v1 prunes old; read back at v1beta1, which prunes v1's default.
	r := e.do("POST", gearsV1beta1, `{"apiVersion":"example.net/v1beta1","kind":"Gear","metadata":{"name":"a"},"spec":{"size":3,"old":"x"}}`)
	if r.code != 201 || r.header.Get("Warning") != warning {
		t.Fatalf("create at v1beta1: %d %q %s", r.code, r.header.Values("Warning"), r.body)
	}
	if got := r.object(t); got.GetAPIVersion() != "example.net/v1beta1" || !jsonEqual(got.Object["spec"], `{"size":3}`) {
		t.Errorf("created: %s", r.body)
	}
	if got := e.storedAt(gearsKey + "a"); got.GetAPIVersion() != "example.net/v1" || !jsonEqual(got.Object["spec"], `{"size":3}`) {
		t.Errorf("stored: %v", got.Object)
	}
	// Read at v1: the storage version's defaults apply as the object is read.
	r = e.do("GET", gearsV1+"/a", "")
	if got := r.object(t); got.GetAPIVersion() != "example.net/v1" || !jsonEqual(got.Object["spec"], `{"color":"blue","size":3}`) ||
		len(r.header.Values("Warning")) != 0 {
		t.Errorf("get at v1: %q %s", r.header.Values("Warning"), r.body)
	}
	checkVersionedList(t, e.do("GET", gearsV1beta1, ""), "example.net/v1beta1")
	checkVersionedList(t, e.do("GET", gearsV1, ""), "example.net/v1")

	// Patched at v1, watched at v1beta1.
	if r := e.patch(gearsV1+"/a", mergePatch, `{"spec":{"size":4}}`); r.code != 200 {
		t.Fatalf("patch at v1: %d %s", r.code, r.body)
	}
	for _, f := range w.expect("ADDED a", "MODIFIED a") {
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(f.Object); err != nil || u.GetAPIVersion() != "example.net/v1beta1" {
			t.Errorf("watch event at v1beta1: %s %v", f.Object, err)
		}
	}
	// A body at another version is refused, as upstream's handlers refuse it.
	wantStatus(t, e.do("POST", gearsV1, `{"apiVersion":"example.net/v1beta1","kind":"Gear","metadata":{"name":"b"}}`), 400,
		"BadRequest", "the API version in the data (example.net/v1beta1) does not match the expected API version (example.net/v1)")

	// Discovery: v1 preferred; each version its own columns.
	if r := e.do("GET", "/apis/example.net", ""); !strings.Contains(string(r.body), `"versions":[{"groupVersion":"example.net/v1","version":"v1"},{"groupVersion":"example.net/v1beta1","version":"v1beta1"}],"preferredVersion":{"groupVersion":"example.net/v1","version":"v1"}`) {
		t.Errorf("group discovery: %s", r.body)
	}
	// OpenAPI: each served version's schema.
	if r := e.do("GET", "/openapi/v3/apis/example.net/v1beta1", ""); r.code != 200 || !strings.Contains(string(r.body), `"old":{"type":"string"}`) ||
		strings.Contains(string(r.body), `"color"`) {
		t.Errorf("openapi v3 of v1beta1: %d %.300s", r.code, r.body)
	}
	if r := e.do("GET", "/openapi/v2", ""); !strings.Contains(string(r.body), `"net.example.v1.Gear"`) || !strings.Contains(string(r.body), `"net.example.v1beta1.Gear"`) {
		t.Errorf("openapi v2 lacks a version's definition: %d", r.code)
	}
	r = e.do("GET", gearsV1beta1+"/a", "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if strings.Contains(string(r.body), `"name":"Color"`) || !strings.Contains(string(e.do("GET", gearsV1+"/a", "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").body), `"name":"Color"`) {
		t.Errorf("the columns of v1beta1: %s", r.body)
	}
}

func checkVersionedList(t *testing.T, r response, apiVersion string) {
	t.Helper()
	items, _ := r.list(t)["items"].([]any)
	if r.code != 200 || len(items) == 0 {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	for _, it := range items {
		if it.(map[string]any)["apiVersion"] != apiVersion {
			t.Errorf("list item at %v, want %s", it.(map[string]any)["apiVersion"], apiVersion)
		}
	}
}

func jsonEqual(v any, want string) bool {
	got, err := json.Marshal(v)
	return err == nil && string(got) == want
}

// TestCRDVersionUnserved: a version the definition does not serve is a 404, as are its discovery
// document and OpenAPI; the served ones are there.
func TestCRDVersionUnserved(t *testing.T) {
	e := startGears(t, gearsCRD, nil)
	if r := e.do("GET", gearsV1beta1, ""); r.code != 200 {
		t.Errorf("list at v1beta1: %d %s", r.code, r.body)
	}
	for _, p := range []string{"/apis/example.net/v2/namespaces/default/gears", "/apis/example.net/v2", "/openapi/v3/apis/example.net/v2"} {
		if r := e.do("GET", p, ""); r.code != 404 {
			t.Errorf("GET %s: %d %s", p, r.code, r.body)
		}
	}
	if r := e.do("POST", "/apis/example.net/v2/namespaces/default/gears", `{"apiVersion":"example.net/v2","kind":"Gear","metadata":{"name":"a"}}`); r.code != 404 {
		t.Errorf("create at v2: %d %s", r.code, r.body)
	}
}

// TestCRDStorageVersionChange: a definition served again with another storage version reads what
// was stored at the old one and stores every write at the new one; its stored versions keep the
// old, and a definition that drops a stored version from its versions is refused as the
// apiserver refuses it.
func TestCRDStorageVersionChange(t *testing.T) {
	e := startGears(t, gearsCRD, nil)
	e.mustCreate(gearsV1, `{"apiVersion":"example.net/v1","kind":"Gear","metadata":{"name":"a"},"spec":{"size":3}}`)
	st := e.st
	// v2 becomes the storage version, served; the definition carries its stored versions.
	moved := strings.Replace(strings.Replace(strings.Replace(gearsCRD, "served: false\n    storage: false", "served: true\n    storage: true", 1),
		"served: true\n    storage: true\n    additionalPrinterColumns", "served: true\n    storage: false\n    additionalPrinterColumns", 1),
		"spec:\n  group", "status: {storedVersions: [v1]}\nspec:\n  group", 1)
	rs, err := CRDResources([]byte(moved))
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Version != "v2" || !slices.Equal(rs[0].StoredVersions, []string{"v1", "v2"}) {
		t.Fatalf("moved: %s %v", rs[0].Version, rs[0].StoredVersions)
	}
	e2 := startGears(t, moved, st)
	if got := e2.do("GET", "/apis/example.net/v2/namespaces/default/gears/a", "").object(t); got.GetAPIVersion() != "example.net/v2" {
		t.Errorf("get at v2: %v", got.Object)
	}
	if got := e2.storedAt(gearsKey + "a"); got.GetAPIVersion() != "example.net/v1" {
		t.Errorf("stored before a write: %s", got.GetAPIVersion())
	}
	if r := e2.patch(gearsV1+"/a", mergePatch, `{"spec":{"size":5}}`); r.code != 200 || r.object(t).GetAPIVersion() != "example.net/v1" {
		t.Fatalf("patch at v1: %d %s", r.code, r.body)
	}
	if got := e2.storedAt(gearsKey + "a"); got.GetAPIVersion() != "example.net/v2" {
		t.Errorf("stored after a write: %s", got.GetAPIVersion())
	}

	// v1 dropped while still a stored version.
	dropped := strings.Replace(moved, "  - name: v1\n", "  - name: v1x\n", 1)
	_, err = CRDResources([]byte(dropped))
	const want = `status.storedVersions[0]: Invalid value: "v1": missing from spec.versions; v1 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v1 and removes v1 from status.storedVersions`
	if !errors.Is(err, ErrInvalidCRD) || !strings.Contains(err.Error(), want) {
		t.Errorf("a stored version dropped: %v", err)
	}
}

// TestCRDVersionsRefused: definitions apiextensions' validation refuses, with its errors (among
// them a Webhook conversion's), and a webhook named by service, which the server cannot resolve.
func TestCRDVersionsRefused(t *testing.T) {
	for _, c := range []struct{ name, from, to, want string }{
		{"two storage versions", "served: true\n    storage: false\n    deprecated", "served: true\n    storage: true\n    deprecated",
			"must have exactly one version marked as storage version"},
		{"served without schema", "  - name: v2\n    served: false", "  - name: v2\n    served: true\n    deprecated: false",
			`CustomResourceDefinition.apiextensions.k8s.io "gears.example.net" is invalid: spec.versions[2].schema.openAPIV3Schema: Required value`},
		{"a version twice", "  - name: v2\n", "  - name: v1\n", "must contain unique version names"},
		{"webhook service", "  scope: Namespaced\n", "  scope: Namespaced\n  conversion:\n    strategy: Webhook\n    webhook:\n      conversionReviewVersions: [v1]\n      clientConfig: {service: {namespace: ops, name: conv}}\n",
			"spec.conversion.webhook.clientConfig.service ops/conv is not served: the server has no cluster (no Services, Endpoints or cluster DNS) to resolve it; give spec.conversion.webhook.clientConfig.url"},
		{"webhook without a known review version", "  scope: Namespaced\n", "  scope: Namespaced\n  conversion:\n    strategy: Webhook\n    webhook:\n      conversionReviewVersions: [v9]\n      clientConfig: {url: \"https://conv.example.net/convert\"}\n",
			`spec.conversion.conversionReviewVersions: Invalid value: ["v9"]: must include at least one of v1, v1beta1`},
		{"webhook over http", "  scope: Namespaced\n", "  scope: Namespaced\n  conversion:\n    strategy: Webhook\n    webhook:\n      conversionReviewVersions: [v1]\n      clientConfig: {url: \"http://conv.example.net/convert\"}\n",
			`spec.conversion.webhookClientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]`},
	} {
		doc := strings.Replace(gearsCRD, c.from, c.to, 1)
		if doc == gearsCRD {
			t.Fatalf("%s: the replacement did not apply", c.name)
		}
		if c.name == "served without schema" {
			doc = strings.Replace(doc, "    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n", "", 1)
		}
		_, err := CRDResources([]byte(doc))
		if !errors.Is(err, ErrInvalidCRD) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
