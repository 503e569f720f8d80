package httpwatch

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/internal/testutil"
)

// sprocketsCRD is testdata/sprockets.yaml: a schema that prunes, defaults and validates (OpenAPI,
// a CEL rule, a set, an int-or-string, an embedded resource) and printer columns, one with a
// JSONPath filter.
func sprocketsCRD(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("testdata/sprockets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

const sprocketsPath = "/apis/example.net/v1/namespaces/default/sprockets"

func newSprocketsEnv(t *testing.T) *env {
	t.Helper()
	r, err := CRDResource(sprocketsCRD(t))
	if err != nil {
		t.Fatal(err)
	}
	return newCRDEnv(t, r)
}

// newCRDEnv serves resources (and nothing else) over an in-memory store.
func newCRDEnv(t *testing.T, resources ...Resource) *env {
	t.Helper()
	return newChainEnv(t, TestChainConfig{Resources: resources})
}

// newChainEnv serves a chain of cfg.
func newChainEnv(t *testing.T, cfg TestChainConfig) *env {
	t.Helper()
	c, err := StartChain(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testutil.CloseAtCleanup(t, "Close", c.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &env{t: t, st: c.Store, api: c.API, url: c.URL, client: &http.Client{Transport: tr}}
}

func sprocket(name, metadata, spec string) string {
	if metadata != "" {
		metadata = "," + metadata
	}
	return `{"apiVersion":"example.net/v1","kind":"Sprocket","metadata":{"name":"` + name + `"` + metadata + `},"spec":{` + spec + `}}`
}

// TestCustomResourcePruningAndDefaults: unknown fields are pruned (the root's metadata, the spec,
// an embedded resource's metadata) and reported as fieldValidation asks (Warn: a warning each,
// Strict: a 400 listing them with duplicate fields, Ignore: nothing); defaults are applied.
func TestCustomResourcePruningAndDefaults(t *testing.T) {
	e := newSprocketsEnv(t)
	body := sprocket("a", `"bogus":1`, `"replicas":3,"extra":true,"template":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","junk":1},"data":{"k":"v"}}`)
	r := e.do("POST", sprocketsPath, body)
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	obj := r.object(t)
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	if _, ok := spec["extra"]; ok {
		t.Errorf("spec.extra kept: %v", spec)
	}
	if spec["minReplicas"] != int64(0) || spec["mode"] != "slow" || spec["replicas"] != int64(3) {
		t.Errorf("defaults: %v", spec)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "bogus"); ok {
		t.Errorf("metadata.bogus kept")
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "template", "metadata", "junk"); ok {
		t.Errorf("spec.template.metadata.junk kept")
	}
	if d, _, _ := unstructured.NestedString(obj.Object, "spec", "template", "data", "k"); d != "v" {
		t.Errorf("the embedded resource's preserved fields: %v", spec["template"])
	}
	want := []string{`299 - "unknown field \"metadata.bogus\""`, `299 - "unknown field \"spec.extra\""`, `299 - "unknown field \"spec.template.metadata.junk\""`}
	if got := r.header.Values("Warning"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings %q, want %q", got, want)
	}

	// Strict: a 400 naming the duplicate and unknown fields; nothing stored.
	rev := e.st.Rev()
	dup := sprocket("b", "", `"replicas":1,"replicas":2,"extra":1`)
	checkStatus(t, "strict", e.do("POST", sprocketsPath+"?fieldValidation=Strict", dup), 400, metav1.StatusReasonBadRequest,
		`Sprocket in version "v1" cannot be handled as a Sprocket: strict decoding error: duplicate field "spec.replicas", unknown field "spec.extra"`)
	e.unchanged(rev, "a strict create with unknown fields")
	// Ignore: pruned without a word.
	r = e.do("POST", sprocketsPath+"?fieldValidation=Ignore", sprocket("c", "", `"extra":1`))
	if _, ok, _ := unstructured.NestedFieldNoCopy(r.object(t).Object, "spec", "extra"); r.code != 201 || ok || len(r.header.Values("Warning")) > 0 {
		t.Errorf("ignore: %d %q %s", r.code, r.header.Values("Warning"), r.body)
	}
	// A merge patch is decoded through the schema too: Strict makes its unknown field a 422.
	checkStatus(t, "strict patch", e.do("PATCH", sprocketsPath+"/a?fieldValidation=Strict", `{"spec":{"more":1}}`, "Content-Type", "application/merge-patch+json"),
		422, metav1.StatusReasonInvalid, "…")
	if r := e.do("PATCH", sprocketsPath+"/a?fieldValidation=Strict", `{"spec":{"more":1}}`, "Content-Type", "application/merge-patch+json"); !strings.Contains(string(r.body), `strict decoding error: unknown field \"spec.more\"`) {
		t.Errorf("strict patch: %s", r.body)
	}
	r = e.do("PATCH", sprocketsPath+"/a", `{"spec":{"more":1,"mode":null}}`, "Content-Type", "application/merge-patch+json")
	if m, _, _ := unstructured.NestedString(r.object(t).Object, "spec", "mode"); r.code != 200 || m != "slow" || len(r.header.Values("Warning")) != 1 {
		t.Errorf("patch: the default again, a warning: %d %q %s", r.code, r.header.Values("Warning"), r.body)
	}
}

// TestCustomResourceValidation: the schema's OpenAPI constraints, list types, int-or-string,
// embedded resources and CEL rules are 422s with upstream's field errors, on create and update; a
// status update is validated by the status schema.
func TestCustomResourceValidation(t *testing.T) {
	e := newSprocketsEnv(t)
	for _, c := range []struct{ name, spec, cause string }{
		{"maximum", `"replicas":11`, "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"},
		{"enum", `"mode":"medium"`, `spec.mode: Unsupported value: "medium": supported values: "fast", "slow"`},
		{"type", `"replicas":"three"`, `spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`},
		{"set", `"tags":["a","a"]`, `spec.tags[1]: Duplicate value: "a"`},
		{"int-or-string", `"port":true`, "spec.port"},
		{"embedded", `"template":{"metadata":{"name":"x"}}`, "spec.template.kind: Required value"},
		{"cel", `"replicas":1,"minReplicas":3`, "spec: Invalid value: minReplicas must not exceed replicas"},
	} {
		rev := e.st.Rev()
		r := e.do("POST", sprocketsPath, sprocket("bad", "", c.spec))
		checkStatus(t, c.name, r, 422, metav1.StatusReasonInvalid, `Sprocket.example.net "bad" is invalid: …`)
		if !strings.Contains(r.status(t).Message, c.cause) {
			t.Errorf("%s: %q, want it to name %q", c.name, r.status(t).Message, c.cause)
		}
		e.unchanged(rev, c.name)
	}
	for _, ok := range []string{`"port":80`, `"port":"http"`, `"tags":["a","b"]`} {
		if r := e.do("POST", sprocketsPath, sprocket("ok", "", ok)); r.code != 201 {
			t.Errorf("%s: %d %s", ok, r.code, r.body)
		}
		e.do("DELETE", sprocketsPath+"/ok", "")
	}
	// Updates are validated too, the status by the status schema.
	e.mustCreate(sprocketsPath, sprocket("s", "", `"replicas":2`))
	r := e.do("PATCH", sprocketsPath+"/s", `{"spec":{"replicas":-1}}`, "Content-Type", "application/merge-patch+json")
	checkStatus(t, "update", r, 422, metav1.StatusReasonInvalid, `Sprocket.example.net "s" is invalid: [spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0, spec: Invalid value: minReplicas must not exceed replicas]`)
	r = e.do("PATCH", sprocketsPath+"/s/status", `{"status":{"conditions":[{"type":1}]}}`, "Content-Type", "application/merge-patch+json")
	checkStatus(t, "status update", r, 422, metav1.StatusReasonInvalid, "…")
	if !strings.Contains(r.status(t).Message, "status.conditions[0].type: Invalid value") {
		t.Errorf("status update: %s", r.body)
	}
}

// TestCustomResourceTable: the CRD's printer columns as apiextensions' tableconvertor gives them
// (JSONPath filters, cell types, descriptions), and PartialObjectMetadataList items with their kind.
func TestCustomResourceTable(t *testing.T) {
	e := newSprocketsEnv(t)
	a := e.mustCreate(sprocketsPath, sprocket("a", "", `"replicas":3,"port":"http","tags":["x","y"]`))
	if r := e.do("PUT", sprocketsPath+"/a/status", `{"apiVersion":"example.net/v1","kind":"Sprocket","metadata":{"name":"a","resourceVersion":"`+a.GetResourceVersion()+`"},"status":{"conditions":[{"type":"Other","status":"False"},{"type":"Ready","status":"True"}]}}`); r.code != 200 {
		t.Fatalf("status: %d %s", r.code, r.body)
	}
	r := e.do("GET", sprocketsPath, "", "Accept", "application/json;as=Table;g=meta.k8s.io;v=v1")
	var table metav1.Table
	if err := json.Unmarshal(r.body, &table); err != nil || r.code != 200 {
		t.Fatalf("table: %d %s", r.code, r.body)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name+"|"+c.Type+"|"+c.Description)
	}
	wantCols := []string{"Name|string|" + nameDescription,
		"Replicas|integer|Custom resource definition column (in JSONPath format): .spec.replicas",
		"Mode|string|How fast it turns",
		`Ready|string|Custom resource definition column (in JSONPath format): .status.conditions[?(@.type=="Ready")].status`,
		"Port|string|Custom resource definition column (in JSONPath format): .spec.port",
		"Tags|string|Custom resource definition column (in JSONPath format): .spec.tags"}
	if strings.Join(cols, "\n") != strings.Join(wantCols, "\n") {
		t.Errorf("columns\n%s\nwant\n%s", strings.Join(cols, "\n"), strings.Join(wantCols, "\n"))
	}
	if len(table.Rows) != 1 {
		t.Fatalf("rows %+v", table.Rows)
	}
	cells, _ := json.Marshal(table.Rows[0].Cells)
	if string(cells) != `["a",3,"slow","True","http","[\"x\",\"y\"]"]` {
		t.Errorf("cells %s", cells)
	}
	var pl metav1.PartialObjectMetadataList
	r = e.do("GET", sprocketsPath, "", "Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
	if json.Unmarshal(r.body, &pl) != nil || len(pl.Items) != 1 || pl.Items[0].Kind != "PartialObjectMetadata" || pl.Items[0].APIVersion != "meta.k8s.io/v1" {
		t.Errorf("partial list items: %d %s", r.code, r.body)
	}
	// One custom resource asked for as a list: upstream's unstructured object passes for a list
	// until its items are listed.
	r = e.do("GET", sprocketsPath+"/a", "", "Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
	checkStatus(t, "partial list of one", r, 500, "", "content is not a list")
}

// TestCRDSchemaRefused: a definition whose schema is not structural, or whose printer column's
// JSONPath does not parse, is not served.
func TestCRDSchemaRefused(t *testing.T) {
	for _, c := range []struct{ name, from, to string }{
		{"untyped property", "minReplicas: {type: integer, default: 0}", "minReplicas: {default: 0}"},
		{"bad JSONPath", "jsonPath: .spec.replicas}", "jsonPath: '.spec.replicas[?(@'}"},
	} {
		doc := strings.Replace(sprocketsCRD(t), c.from, c.to, 1)
		if _, err := CRDResource(doc); !errors.Is(err, ErrInvalidCRD) {
			t.Errorf("%s: %v, want ErrInvalidCRD", c.name, err)
		}
	}
	if _, err := New(Config{Resources: []ServedResource{{Resource: Resource{Group: "example.net", Version: "v1", Resource: "bad", Kind: "Bad",
		Columns: []Column{{Name: "X", Type: "string", JSONPath: "{{"}}}}}}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a resource with a bad column: %v, want ErrInvalidConfig", err)
	}
}

// TestCustomResourceApply: server-side apply by the types apiextensions' OpenAPI builder makes of
// the schema (an embedded resource's metadata is ObjectMeta: an unknown field there is
// refused), with the applied numbers whole (the CEL rule compares integers), and the result
// defaulted.
func TestCustomResourceApply(t *testing.T) {
	e := newSprocketsEnv(t)
	const applyPath = sprocketsPath + "/a?fieldManager=applier"
	r := e.do("PATCH", applyPath, "apiVersion: example.net/v1\nkind: Sprocket\nmetadata:\n  name: a\nspec:\n  replicas: 3\n  minReplicas: 2\n",
		"Content-Type", "application/apply-patch+yaml")
	if r.code != 201 {
		t.Fatalf("apply: %d %s", r.code, r.body)
	}
	if spec, _, _ := unstructured.NestedMap(r.object(t).Object, "spec"); spec["replicas"] != int64(3) || spec["mode"] != "slow" {
		t.Errorf("applied spec %v", spec)
	}
	r = e.do("PATCH", applyPath, "apiVersion: example.net/v1\nkind: Sprocket\nmetadata:\n  name: a\nspec:\n  template:\n    apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: x\n      junk: 1\n",
		"Content-Type", "application/apply-patch+yaml")
	checkStatus(t, "unknown field in an embedded resource's metadata", r, 500, "",
		"failed to create typed patch object (/a; example.net/v1, Kind=Sprocket): .spec.template.metadata.junk: field not declared in schema")
}

// TestCustomResourceApplyNull: an apply that takes the last items of a set another manager's
// update made empty leaves the list null (structured-merge-diff's result), and the apiserver
// validates the applied object as it is: a non-nullable null without a default is a 422, as the
// schema's type check words it, not dropped first as a decoded body's would be. An apply that
// leaves the list items succeeds.
func TestCustomResourceApplyNull(t *testing.T) {
	e := newSprocketsEnv(t)
	const item = sprocketsPath + "/s9?fieldManager=applier"
	apply := func(spec string) response {
		return e.do("PATCH", item, "apiVersion: example.net/v1\nkind: Sprocket\nmetadata:\n  name: s9\nspec:\n"+spec,
			"Content-Type", "application/apply-patch+yaml")
	}
	if r := e.do("POST", sprocketsPath, `{"apiVersion":"example.net/v1","kind":"Sprocket","metadata":{"name":"s9"},"spec":{"port":80,"tags":[]}}`); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	if r := apply("  port: 80\n  tags: [a, b]\n"); r.code != 200 {
		t.Fatalf("apply of the tags: %d %s", r.code, r.body)
	}
	checkStatus(t, "apply giving up the tags", apply("  port: 80\n"), 422, metav1.StatusReasonInvalid,
		`Sprocket.example.net "s9" is invalid: [spec.tags: Invalid value: "null": spec.tags in body must be of type array: "null", `+
			`<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]`)
	if r := apply("  port: 80\n  tags: [a]\n"); r.code != 200 {
		t.Errorf("apply keeping a tag: %d %s", r.code, r.body)
	}
}

// TestCustomResourcePatchToAnotherKind: a merge patch that makes a custom resource an object of
// another group and kind is decoded as it is, as upstream's patcher decodes a patched custom
// resource, so its name is checked first: another name is upstream's 400. Failure mode: with the
// object's own name the patch is refused (a 422 naming the API version) and nothing is written.
func TestCustomResourcePatchToAnotherKind(t *testing.T) {
	e := newSprocketsEnv(t)
	if r := e.do("POST", sprocketsPath, `{"apiVersion":"example.net/v1","kind":"Sprocket","metadata":{"name":"s0"}}`); r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	patch := func(name string) response {
		return e.do("PATCH", sprocketsPath+"/s0", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+name+`"}}`,
			"Content-Type", "application/merge-patch+json")
	}
	checkStatus(t, "another kind and name", patch("x"), 400, metav1.StatusReasonBadRequest,
		"the name of the object (x) does not match the name on the URL (s0)")
	rev := e.st.Rev()
	r := patch("s0")
	if m := r.status(t).Message; r.code != 422 || !strings.Contains(m, "the API version in the data (v1) does not match the expected API version (example.net/v1)") {
		t.Errorf("another kind, the same name: %d %s", r.code, m)
	}
	if e.st.Rev() != rev {
		t.Errorf("the refused patch wrote: revision %d, was %d", e.st.Rev(), rev)
	}
}
