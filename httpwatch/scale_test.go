package httpwatch

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	pistonsPath = "/apis/example.org/v1/namespaces/default/pistons"
	valvesPath  = "/apis/example.org/v1/valves"
)

// newScaleEnv serves testdata/pistons.yaml (pistons and valves, with a scale subresource) and
// sprockets (none).
func newScaleEnv(t *testing.T) *env {
	t.Helper()
	data, err := os.ReadFile("testdata/pistons.yaml")
	if err != nil {
		t.Fatal(err)
	}
	resources, err := CRDResources(data)
	if err != nil {
		t.Fatal(err)
	}
	sprockets, err := CRDResource(sprocketsCRD(t))
	if err != nil {
		t.Fatal(err)
	}
	return newCRDEnv(t, append(resources, sprockets)...)
}

func piston(name, spec string) string {
	return `{"apiVersion":"example.org/v1","kind":"Piston","metadata":{"name":"` + name + `"},"spec":{` + spec + `}}`
}

// scaleOf decodes a Scale answer: kind, name, spec and status replicas, selector.
func scaleOf(t *testing.T, r response) (kind string, name string, spec, status int64, selector string) {
	t.Helper()
	o := r.object(t)
	if r.code != 200 {
		t.Fatalf("HTTP %d: %s", r.code, r.body)
	}
	spec, _ = nested(t, o, "spec", "replicas").(int64)
	status, _ = nested(t, o, "status", "replicas").(int64)
	selector, _ = nested(t, o, "status", "selector").(string)
	return o.GetAPIVersion() + "/" + o.GetKind(), o.GetName(), spec, status, selector
}

// scalePatch is a patch of a scale subresource, sent by manager m-<name>.
type scalePatch struct{ name, contentType, body, query string }

// patchScales sends each patch to the scale of the object at path and checks that the object's
// spec.replicas is then the Scale's.
func patchScales(t *testing.T, e *env, path string, patches []scalePatch) {
	t.Helper()
	for _, p := range patches {
		r := e.patch(path+"/scale?fieldManager=m-"+p.name+p.query, p.contentType, p.body)
		if r.code != 200 {
			t.Errorf("%s patch: %d %s", p.name, r.code, r.body)
			continue
		}
		_, _, spec, _, _ := scaleOf(t, r)
		if got := nested(t, e.do("GET", path, "").object(t), "spec", "replicas"); got != spec {
			t.Errorf("%s patch: scale %d, object %v", p.name, spec, got)
		}
	}
}

// TestScaleSubresource: a custom resource's scale subresource reads its replicas and selector as an
// autoscaling/v1 Scale; PUT, merge, JSON and apply patches of the Scale change the spec replicas
// alone, as an update of the resource (a MODIFIED event, a new generation, the scale's manager in
// managedFields); discovery lists <plural>/scale as autoscaling/v1 Scale, and the OpenAPI its paths
// and the Scale schema.
func TestScaleSubresource(t *testing.T) {
	e := newScaleEnv(t)
	e.mustCreate(pistonsPath, piston("p", `"replicas":2,"other":"x"`))
	if r := e.patch(pistonsPath+"/p/status", mergePatch, `{"status":{"replicas":1,"selector":"app=p"}}`); r.code != 200 {
		t.Fatalf("status patch: %d %s", r.code, r.body)
	}
	cr := e.do("GET", pistonsPath+"/p", "").object(t)
	r := e.do("GET", pistonsPath+"/p/scale", "")
	if kind, name, spec, status, sel := scaleOf(t, r); kind != "autoscaling/v1/Scale" || name != "p" || spec != 2 || status != 1 || sel != "app=p" {
		t.Errorf("get scale: %s", r.body)
	}
	if o := r.object(t); o.GetResourceVersion() != cr.GetResourceVersion() || o.GetNamespace() != "default" || o.GetUID() != cr.GetUID() {
		t.Errorf("scale metadata %v, object's %v", o.Object["metadata"], cr.Object["metadata"])
	}

	w := e.watch(pistonsPath + "?watch=true&resourceVersion=" + cr.GetResourceVersion())
	defer w.close()
	r = e.do("PUT", pistonsPath+"/p/scale?fieldManager=hpa", `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"p"},"spec":{"replicas":5}}`)
	if _, _, spec, status, _ := scaleOf(t, r); spec != 5 || status != 1 {
		t.Errorf("put scale: %s", r.body)
	}
	f := w.next()
	if f.Type != "MODIFIED" {
		t.Fatalf("event %s, want MODIFIED", f.Type)
	}
	var ev struct {
		Object struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
			Spec     map[string]any    `json:"spec"`
		} `json:"object"`
	}
	if err := json.Unmarshal(f.line, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Object.Spec["replicas"] != float64(5) || ev.Object.Spec["other"] != "x" || ev.Object.Metadata.Generation != 2 {
		t.Errorf("modified object %s", f.line)
	}
	scaleManager := false
	for _, m := range ev.Object.Metadata.ManagedFields {
		scaleManager = scaleManager || (m.Manager == "hpa" && m.Subresource == "scale" && m.APIVersion == "example.org/v1" &&
			m.FieldsV1 != nil && string(m.FieldsV1.Raw) == `{"f:spec":{"f:replicas":{}}}`)
	}
	if !scaleManager {
		t.Errorf("managedFields %+v, want hpa's spec.replicas through scale", ev.Object.Metadata.ManagedFields)
	}

	patchScales(t, e, pistonsPath+"/p", []scalePatch{
		{"merge", mergePatch, `{"spec":{"replicas":3}}`, ""},
		{"json", "application/json-patch+json", `[{"op":"replace","path":"/spec/replicas","value":4}]`, ""},
		// Forced: the managers of the updates own the replicas.
		{"apply", applyPatch, "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: p\nspec:\n  replicas: 6\n", "&force=true"},
	})

	// A cluster-scoped resource, its replicas elsewhere, without a label selector path.
	e.mustCreate(valvesPath, `{"apiVersion":"example.org/v1","kind":"Valve","metadata":{"name":"v"},"spec":{"size":7}}`)
	if _, _, spec, _, sel := scaleOf(t, e.patch(valvesPath+"/v/scale", mergePatch, `{"spec":{"replicas":8}}`)); spec != 8 || sel != "" {
		t.Errorf("valve scale %d %q", spec, sel)
	}
	if got := nested(t, e.do("GET", valvesPath+"/v", "").object(t), "spec", "size"); got != int64(8) {
		t.Errorf("valve spec.size %v", got)
	}

	var list metav1.APIResourceList
	if err := json.Unmarshal(e.do("GET", "/apis/example.org/v1", "").body, &list); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, ar := range list.APIResources {
		if (ar.Name == "pistons/scale" && ar.Namespaced || ar.Name == "valves/scale" && !ar.Namespaced) &&
			ar.Group == "autoscaling" && ar.Version == "v1" && ar.Kind == "Scale" && len(ar.Verbs) == 3 {
			found++
		}
	}
	if found != 2 {
		t.Errorf("discovery %+v", list.APIResources)
	}
	var agg apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(e.do("GET", "/apis", "", "Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList").body, &agg); err != nil {
		t.Fatal(err)
	}
	aggScale := 0
	for _, g := range agg.Items {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				for _, sub := range r.Subresources {
					if sub.Subresource == "scale" && *sub.ResponseKind == (metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}) {
						aggScale++
					}
				}
			}
		}
	}
	if aggScale != 2 {
		t.Errorf("aggregated discovery: %d scale subresources, want 2", aggScale)
	}
	var doc struct {
		Paths      map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(e.do("GET", "/openapi/v3/apis/example.org/v1", "").body, &doc); err != nil {
		t.Fatal(err)
	}
	scalePath := doc.Paths["/apis/example.org/v1/namespaces/{namespace}/pistons/{name}/scale"]
	if scalePath["get"] == nil || scalePath["put"] == nil || scalePath["patch"] == nil || doc.Components.Schemas["io.k8s.api.autoscaling.v1.Scale"] == nil {
		t.Errorf("OpenAPI v3: scale path %v, Scale schema %v", scalePath, doc.Components.Schemas["io.k8s.api.autoscaling.v1.Scale"])
	}
}

// TestScaleSubresourceErrors: what the scale subresource refuses, as apiextensions-apiserver does,
// without writing: a resource without one, a missing object, a spec replicas that is missing or
// not an integer, a negative replicas, a stale resourceVersion, a body of another kind or in a
// format not taken, a method it does not serve; and scale paths a CRD may not have.
func TestScaleSubresourceErrors(t *testing.T) {
	e := newScaleEnv(t)
	p := e.mustCreate(pistonsPath, piston("p", `"replicas":2`))
	e.mustCreate(pistonsPath, piston("none", `"other":1`))
	e.mustCreate("/apis/example.net/v1/namespaces/default/sprockets", sprocket("s", "", `"replicas":2`))
	scaleBody := func(name, rv string, replicas string) string {
		return `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"` + name + `","resourceVersion":"` + rv + `"},"spec":{"replicas":` + replicas + `}}`
	}
	rev := e.st.Rev()
	checkStatus(t, "no scale subresource", e.do("GET", "/apis/example.net/v1/namespaces/default/sprockets/s/scale", ""),
		404, metav1.StatusReasonNotFound, `sprockets.example.net "s" not found`)
	checkStatus(t, "missing object", e.do("GET", pistonsPath+"/zz/scale", ""), 404, metav1.StatusReasonNotFound, `pistons.example.org "zz" not found`)
	checkStatus(t, "put to a missing object", e.do("PUT", pistonsPath+"/zz/scale", scaleBody("zz", "", "1")),
		404, metav1.StatusReasonNotFound, `pistons.example.org "zz" not found`)
	checkStatus(t, "no spec replicas", e.do("GET", pistonsPath+"/none/scale", ""),
		500, metav1.StatusReasonInternalError, `Internal error occurred: the spec replicas field ".spec.replicas" does not exist`)
	checkStatus(t, "patch leaving no spec replicas", e.patch(pistonsPath+"/none/scale", mergePatch, `{"metadata":{"labels":{"a":"b"}}}`),
		400, metav1.StatusReasonBadRequest, `the spec replicas field ".spec.replicas" cannot be empty`)
	checkStatus(t, "negative replicas", e.do("PUT", pistonsPath+"/p/scale", scaleBody("p", "", "-1")),
		422, metav1.StatusReasonInvalid, `Piston.example.org "p" is invalid: .spec.replicas: Invalid value: -1: should be a non-negative integer`)
	checkStatus(t, "stale resourceVersion", e.do("PUT", pistonsPath+"/p/scale", scaleBody("p", "1", "3")),
		409, metav1.StatusReasonConflict, `Operation cannot be fulfilled on pistons.example.org "p": the object has been modified; please apply your changes to the latest version and try again`)
	checkStatus(t, "another kind", e.do("PUT", pistonsPath+"/p/scale", piston("p", `"replicas":3`)),
		400, metav1.StatusReasonBadRequest, "…")
	checkStatus(t, "strategic merge patch", e.patch(pistonsPath+"/p/scale", "application/strategic-merge-patch+json", `{"spec":{"replicas":3}}`),
		415, metav1.StatusReasonUnsupportedMediaType, "…")
	checkStatus(t, "text body", e.do("PUT", pistonsPath+"/p/scale", scaleBody("p", "", "3"), "Content-Type", "text/plain"),
		415, metav1.StatusReasonUnsupportedMediaType, "…")
	checkStatus(t, "delete", e.do("DELETE", pistonsPath+"/p/scale", ""), 405, metav1.StatusReasonMethodNotAllowed, "…")
	e.unchanged(rev, "refused scale requests")
	// A spec replicas that is not an integer is refused on every write of the resource.
	checkStatus(t, "string replicas", e.do("POST", pistonsPath, piston("q", `"replicas":"three"`)),
		422, metav1.StatusReasonInvalid, `Piston.example.org "q" is invalid: .spec.replicas: Invalid value: 0: .spec.replicas accessor error: three is of the type string, expected int64`)
	checkStatus(t, "negative on update", e.patch(pistonsPath+"/p", mergePatch, `{"spec":{"replicas":-2}}`),
		422, metav1.StatusReasonInvalid, `Piston.example.org "p" is invalid: .spec.replicas: Invalid value: -2: should be a non-negative integer`)
	if got := e.do("GET", pistonsPath+"/p", "").object(t); got.GetResourceVersion() != p.GetResourceVersion() {
		t.Errorf("refused writes changed the piston")
	}

	// Scale paths apiextensions' CRD validation refuses.
	crd, err := os.ReadFile("testdata/pistons.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to, want string }{
		{"specReplicasPath: .spec.replicas", "specReplicasPath: .status.replicas", `subresources.scale.specReplicasPath: Invalid value: ".status.replicas": should be a json path under .spec`},
		{"statusReplicasPath: .status.replicas", "statusReplicasPath: .spec.x", `subresources.scale.statusReplicasPath: Invalid value: ".spec.x": should be a json path under .status`},
		{"labelSelectorPath: .status.selector", "labelSelectorPath: .metadata.x", `subresources.scale.labelSelectorPath: Invalid value: ".metadata.x": should be a json path under either .spec or .status`},
	} {
		_, err := CRDResources([]byte(strings.Replace(string(crd), c.from, c.to, 1)))
		if !errors.Is(err, ErrInvalidCRD) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.to, err, c.want)
		}
	}
	if _, err := (Resource{Version: "v1", Resource: "things", Kind: "Thing", BuiltIn: true,
		Scale: &ScaleSubresource{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"}}).withDefaults(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a built-in resource with a scale subresource: %v", err)
	}
}
