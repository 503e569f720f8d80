package httpwatch

import (
	"bytes"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const deploymentsPath = "/apis/apps/v1/namespaces/default/deployments"

func deployment(name, spec string) string {
	return `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"` + name + `"},"spec":{` + spec +
		`"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}`
}

// TestBuiltInScaleSubresource: a deployment's scale subresource, as kube-apiserver's ScaleREST
// serves it: an autoscaling/v1 Scale of spec.replicas, status.replicas and the label selector in
// its string form (0 replicas when unset, where the CRD handler answers 500), in JSON, protobuf
// and as the printers' Table; PUT and every patch type (strategic merge too) change spec.replicas
// alone as an update of the deployment (a new generation, the scale's manager in managedFields).
func TestBuiltInScaleSubresource(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(deploymentsPath, deployment("d", `"replicas":2,"selector":{"matchLabels":{"a":"b"},"matchExpressions":[{"key":"t","operator":"In","values":["x"]}]},`))
	if r := e.patch(deploymentsPath+"/d/status", mergePatch, `{"status":{"replicas":1}}`); r.code != 200 {
		t.Fatalf("status patch: %d %s", r.code, r.body)
	}
	d := e.do("GET", deploymentsPath+"/d", "").object(t)
	r := e.do("GET", deploymentsPath+"/d/scale", "")
	if kind, name, spec, status, sel := scaleOf(t, r); kind != "autoscaling/v1/Scale" || name != "d" || spec != 2 || status != 1 || sel != "a=b,t in (x)" {
		t.Errorf("get scale: %s", r.body)
	}
	if o := r.object(t); o.GetResourceVersion() != d.GetResourceVersion() || o.GetUID() != d.GetUID() || o.GetNamespace() != "default" {
		t.Errorf("scale metadata %v, deployment's %v", o.Object["metadata"], d.Object["metadata"])
	}
	r = e.do("GET", deploymentsPath+"/d/scale", "", "Accept", "application/vnd.kubernetes.protobuf")
	if r.code != 200 || r.header.Get("Content-Type") != "application/vnd.kubernetes.protobuf" || !bytes.HasPrefix(r.body, []byte("k8s\x00")) ||
		!bytes.Contains(r.body, []byte("autoscaling/v1")) {
		t.Errorf("protobuf scale: %d %q", r.code, r.body)
	}
	var table metav1.Table
	r = e.do("GET", deploymentsPath+"/d/scale", "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if err := json.Unmarshal(r.body, &table); err != nil || len(table.ColumnDefinitions) != 4 || table.ColumnDefinitions[0].Format != "" ||
		table.ColumnDefinitions[1].Name != "Desired" || table.ColumnDefinitions[3].Type != "string" || len(table.Rows) != 1 ||
		table.Rows[0].Cells[0] != "d" || table.Rows[0].Cells[1] != float64(2) || table.Rows[0].Cells[2] != float64(1) {
		t.Errorf("scale Table: %d %s", r.code, r.body)
	}

	r = e.do("PUT", deploymentsPath+"/d/scale?fieldManager=hpa", `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"d"},"spec":{"replicas":5}}`)
	if _, _, spec, status, _ := scaleOf(t, r); spec != 5 || status != 1 {
		t.Errorf("put scale: %s", r.body)
	}
	d = e.do("GET", deploymentsPath+"/d", "").object(t)
	scaleManager := false
	for _, m := range d.GetManagedFields() {
		scaleManager = scaleManager || (m.Manager == "hpa" && m.Subresource == "scale" && m.APIVersion == "apps/v1" &&
			m.FieldsV1 != nil && string(m.FieldsV1.Raw) == `{"f:spec":{"f:replicas":{}}}`)
	}
	if nested(t, d, "spec", "replicas") != int64(5) || d.GetGeneration() != 2 || !scaleManager {
		t.Errorf("deployment after the scale's PUT: %v", d.Object)
	}
	patchScales(t, e, deploymentsPath+"/d", []scalePatch{
		{"merge", mergePatch, `{"spec":{"replicas":3}}`, ""},
		{"json", "application/json-patch+json", `[{"op":"replace","path":"/spec/replicas","value":4}]`, ""},
		{"strategic", smPatch, `{"spec":{"replicas":6}}`, ""},
		{"apply", applyPatch, "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: d\nspec:\n  replicas: 7\n", "&force=true"},
	})

	// Without spec.replicas (which upstream's defaulting would set), the Scale has 0.
	e.mustCreate(deploymentsPath, deployment("n", `"selector":{"matchLabels":{"a":"b"}},`))
	if _, _, spec, _, sel := scaleOf(t, e.do("GET", deploymentsPath+"/n/scale", "")); spec != 0 || sel != "a=b" {
		t.Errorf("scale without replicas: %d %q", spec, sel)
	}
}

// TestBuiltInScaleSubresourceErrors: what a deployment's scale subresource refuses, as
// kube-apiserver does, without writing: a missing object, negative replicas (autoscaling's
// ValidateScale), a stale resourceVersion, another UID (the storage's precondition on a PUT,
// ScaleREST's own on a patch), a body of another kind, a label selector that does not convert, a
// method it does not serve.
func TestBuiltInScaleSubresourceErrors(t *testing.T) {
	e := newEnv(t)
	d := e.mustCreate(deploymentsPath, deployment("d", `"replicas":2,"selector":{"matchLabels":{"a":"b"}},`))
	e.mustCreate(deploymentsPath, deployment("bad", `"replicas":1,"selector":{"matchExpressions":[{"key":"a","operator":"Bogus"}]},`))
	scaleBody := func(name, md, replicas string) string {
		return `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"` + name + `"` + md + `},"spec":{"replicas":` + replicas + `}}`
	}
	const otherUID = "11111111-1111-1111-1111-111111111111"
	rev := e.st.Rev()
	checkStatus(t, "missing object", e.do("GET", deploymentsPath+"/zz/scale", ""), 404, metav1.StatusReasonNotFound, `deployments.apps "zz" not found`)
	checkStatus(t, "put to a missing object", e.do("PUT", deploymentsPath+"/zz/scale", scaleBody("zz", "", "1")),
		404, metav1.StatusReasonNotFound, `deployments.apps "zz" not found`)
	checkStatus(t, "patch of a missing object", e.patch(deploymentsPath+"/zz/scale", mergePatch, `{"spec":{"replicas":1}}`),
		404, metav1.StatusReasonNotFound, `deployments.apps "zz" not found`)
	checkStatus(t, "negative replicas", e.do("PUT", deploymentsPath+"/d/scale", scaleBody("d", "", "-1")),
		422, metav1.StatusReasonInvalid, `Scale.autoscaling "d" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0`)
	checkStatus(t, "negative replicas by patch", e.patch(deploymentsPath+"/d/scale", smPatch, `{"spec":{"replicas":-2}}`),
		422, metav1.StatusReasonInvalid, `Scale.autoscaling "d" is invalid: spec.replicas: Invalid value: -2: must be greater than or equal to 0`)
	checkStatus(t, "stale resourceVersion", e.do("PUT", deploymentsPath+"/d/scale", scaleBody("d", `,"resourceVersion":"1"`, "3")),
		409, metav1.StatusReasonConflict, `Operation cannot be fulfilled on deployments.apps "d": the object has been modified; please apply your changes to the latest version and try again`)
	checkStatus(t, "another UID", e.do("PUT", deploymentsPath+"/d/scale", scaleBody("d", `,"uid":"`+otherUID+`"`, "3")),
		409, metav1.StatusReasonConflict, `Operation cannot be fulfilled on deployments.apps "d": StorageError: invalid object, Code: 4, Key: …`)
	checkStatus(t, "another UID by patch", e.patch(deploymentsPath+"/d/scale", mergePatch, `{"metadata":{"uid":"`+otherUID+`"}}`),
		409, metav1.StatusReasonConflict, `Operation cannot be fulfilled on deployments/scale.apps "d": Precondition failed: UID in precondition: `+otherUID+`, UID in object meta: `+string(d.GetUID()))
	checkStatus(t, "another kind", e.do("PUT", deploymentsPath+"/d/scale", deployment("d", `"replicas":3,`)),
		400, metav1.StatusReasonBadRequest, `Deployment in version "v1" cannot be handled as a Scale: converting (v1.Deployment) to (autoscaling.Scale): unknown conversion`)
	checkStatus(t, "invalid selector", e.do("GET", deploymentsPath+"/bad/scale", ""),
		400, metav1.StatusReasonBadRequest, `"Bogus" is not a valid label selector operator`)
	checkStatus(t, "delete", e.do("DELETE", deploymentsPath+"/d/scale", ""), 405, metav1.StatusReasonMethodNotAllowed, "…")
	checkStatus(t, "post", e.do("POST", deploymentsPath+"/d/scale", scaleBody("d", "", "3")), 405, metav1.StatusReasonMethodNotAllowed, "…")
	e.unchanged(rev, "refused scale requests")
}
