package httpwatch

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	podPath     = "/api/v1/namespaces/default/pods"
	jsonPatch   = "application/json-patch+json"
	mergePatch  = "application/merge-patch+json"
	smPatch     = "application/strategic-merge-patch+json"
	applyPatch  = "application/apply-patch+yaml"
	gadgetsPath = "/apis/example.com/v1/namespaces/default/gadgets"
)

// patch sends a PATCH with the given patch type.
func (e *env) patch(path, patchType, body string, headers ...string) response {
	e.t.Helper()
	return e.do("PATCH", path, body, append([]string{"Content-Type", patchType}, headers...)...)
}

func nested(t *testing.T, u *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, _, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPatch covers handlers/patch.go's JSON patch, merge patch and strategic merge patch: each
// patches the stored object in a storage update, records its manager in managedFields, and answers
// with the patched object.
func TestPatch(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(cmPath, cmJSON("", "a", `"labels":{"x":"1"}`))
	w := e.watch(cmPath + "?watch=true&resourceVersion=" + e.mustGetRV(cmPath+"/a"))

	r := e.patch(cmPath+"/a", jsonPatch, `[{"op":"add","path":"/data/j","value":"json"},{"op":"test","path":"/data/k","value":"v"}]`)
	if r.code != 200 || nested(t, r.object(t), "data", "j") != "json" {
		t.Fatalf("json patch: %d %s", r.code, r.body)
	}
	r = e.patch(cmPath+"/a", mergePatch, `{"data":{"m":"merge","k":null},"metadata":{"labels":{"y":"2"}}}`)
	obj := r.object(t)
	if r.code != 200 || nested(t, obj, "data", "m") != "merge" || nested(t, obj, "data", "k") != nil || obj.GetLabels()["x"] != "1" {
		t.Fatalf("merge patch: %d %s", r.code, r.body)
	}
	r = e.patch(cmPath+"/a", smPatch, `{"data":{"s":"strategic"}}`, "User-Agent", "tester/1.0")
	obj = r.object(t)
	if r.code != 200 || nested(t, obj, "data", "s") != "strategic" || nested(t, obj, "data", "m") != "merge" {
		t.Fatalf("strategic merge patch: %d %s", r.code, r.body)
	}
	managers := map[string]bool{}
	for _, m := range obj.GetManagedFields() {
		managers[m.Manager+"/"+string(m.Operation)] = true
	}
	if !managers["tester/Update"] || !managers["Go-http-client/Update"] {
		t.Errorf("managedFields managers %v", managers)
	}
	w.expect("MODIFIED a", "MODIFIED a", "MODIFIED a")

	// A strategic merge patch merges lists by their patch merge key: containers by name.
	e.mustCreate(podPath, `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"a:1"},{"name":"b","image":"b:1"}]}}`)
	r = e.patch(podPath+"/p", smPatch, `{"spec":{"containers":[{"name":"b","image":"b:2"}]}}`)
	containers, _, _ := unstructured.NestedSlice(r.object(t).Object, "spec", "containers")
	if r.code != 200 || len(containers) != 2 || containers[1].(map[string]any)["image"] != "b:2" || containers[0].(map[string]any)["image"] != "a:1" {
		t.Errorf("strategic merge of containers: %d %v", r.code, containers)
	}
	// A merge patch replaces the list.
	r = e.patch(podPath+"/p", mergePatch, `{"spec":{"containers":[{"name":"b","image":"b:3"}]}}`)
	containers, _, _ = unstructured.NestedSlice(r.object(t).Object, "spec", "containers")
	if r.code != 200 || len(containers) != 1 {
		t.Errorf("merge patch of containers: %d %v", r.code, containers)
	}

	// Custom resources: JSON and merge patches; generation counts the spec changes.
	e.mustCreate(widgetPath, widgetJSON("w", ""))
	r = e.patch(widgetPath+"/w", mergePatch, `{"spec":{"size":2}}`)
	if r.code != 200 || r.object(t).GetGeneration() != 2 {
		t.Errorf("widget merge patch: %d %s", r.code, r.body)
	}

	// Failure modes: nothing stored changes.
	rev := e.st.Rev()
	for _, c := range []struct {
		name, path, patchType, body, query string
		code                               int
		reason                             metav1.StatusReason
		message                            string
	}{
		{"strategic on a custom resource", widgetPath + "/w", smPatch, `{"spec":{"size":3}}`, "", 415, metav1.StatusReasonUnsupportedMediaType,
			"the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"},
		// A built-in kind's PATCH route consumes only the patch types: go-restful's 415, as
		// kube-apiserver answers it (interop/httpdiff TestHTTPDifferentialBuiltIn).
		{"JSON body type", cmPath + "/a", "application/json", `{}`, "", 415, metav1.StatusReasonUnsupportedMediaType, "415: Unsupported Media Type"},
		{"no body type", cmPath + "/a", "", `{}`, "", 415, metav1.StatusReasonUnsupportedMediaType, "415: Unsupported Media Type"},
		{"patch type with another", podPath + "/p/status", "text/plain, application/bogus+json", `{}`, "", 415, metav1.StatusReasonUnsupportedMediaType,
			"415: Unsupported Media Type"},
		// The route takes any of a list; the handler, the whole header before its parameters.
		{"patch type in a list", cmPath + "/a", "text/plain, " + mergePatch, `{}`, "", 415, metav1.StatusReasonUnsupportedMediaType,
			"the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"},
		{"not JSON", cmPath + "/a", mergePatch, `{"data":`, "", 400, metav1.StatusReasonBadRequest, "invalid JSON patch"},
		{"missing", cmPath + "/zz", mergePatch, `{"data":{"a":"b"}}`, "", 404, metav1.StatusReasonNotFound, `configmaps "zz" not found`},
		{"failed test op", cmPath + "/a", jsonPatch, `[{"op":"test","path":"/data/s","value":"other"}]`, "", 422, metav1.StatusReasonInvalid, "…"},
		{"bad op", cmPath + "/a", jsonPatch, `[{"op":"frobnicate","path":"/data"}]`, "", 422, metav1.StatusReasonInvalid, "…"},
		{"not a patch array", cmPath + "/a", jsonPatch, `{"op":"add"}`, "", 400, metav1.StatusReasonBadRequest, "…"},
		{"rename", cmPath + "/a", mergePatch, `{"metadata":{"name":"b"}}`, "", 400, metav1.StatusReasonBadRequest,
			"the name of the object (b) does not match the name on the URL (a)"},
		{"other namespace", cmPath + "/a", mergePatch, `{"metadata":{"namespace":"kube-system"}}`, "", 400, metav1.StatusReasonBadRequest,
			"the namespace of the provided object does not match the namespace sent on the request"},
		{"stale resourceVersion", cmPath + "/a", mergePatch, `{"metadata":{"resourceVersion":"1"}}`, "", 409, metav1.StatusReasonConflict,
			`Operation cannot be fulfilled on configmaps "a": the object has been modified; please apply your changes to the latest version and try again`},
		{"wrong type", cmPath + "/a", mergePatch, `{"data":{"k":1}}`, "", 422, metav1.StatusReasonInvalid, "…"},
		{"unknown field, strict", cmPath + "/a", mergePatch, `{"bogus":1}`, "?fieldValidation=Strict", 422, metav1.StatusReasonInvalid, "…"},
		{"duplicate field, strict", cmPath + "/a", smPatch, `{"data":{"q":"1","q":"2"}}`, "?fieldValidation=Strict", 422, metav1.StatusReasonInvalid, "…"},
		{"force without apply", cmPath + "/a", mergePatch, `{}`, "?force=true", 422, metav1.StatusReasonInvalid,
			`PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch`},
		{"bad fieldValidation", cmPath + "/a", mergePatch, `{}`, "?fieldValidation=Loose", 422, metav1.StatusReasonInvalid, "…"},
		{"bad retainKeys", podPath + "/p", smPatch, `{"spec":{"$retainKeys":"x"}}`, "", 400, metav1.StatusReasonBadRequest, "…"},
	} {
		r := e.patch(c.path+c.query, c.patchType, c.body)
		checkStatus(t, c.name, r, c.code, c.reason, c.message)
		e.unchanged(rev, c.name)
	}

	// fieldValidation Warn (the default) keeps the patch and warns of each unknown field; Ignore
	// says nothing.
	r = e.patch(cmPath+"/a", mergePatch, `{"bogus":1,"data":{"w":"warn"}}`)
	if r.code != 200 || !strings.Contains(r.header.Get("Warning"), `unknown field \"bogus\"`) || r.object(t).Object["bogus"] != nil {
		t.Errorf("warned patch: %d %v %s", r.code, r.header["Warning"], r.body)
	}
	r = e.patch(cmPath+"/a?fieldValidation=Ignore", mergePatch, `{"bogus":1}`)
	if r.code != 200 || r.header.Get("Warning") != "" {
		t.Errorf("ignored patch: %d %v", r.code, r.header["Warning"])
	}
	// A PUT naming the uid of an object since deleted is a 404, as for any missing object of a
	// kind that is not created by updates (the uid precondition is checked only on what exists).
	gone := e.mustCreate(cmPath, cmJSON("", "gone", ""))
	if r := e.do("DELETE", cmPath+"/gone", ""); r.code != 200 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	body, _ := gone.MarshalJSON()
	checkStatus(t, "update of a deleted object", e.do("PUT", cmPath+"/gone", string(body)), 404, metav1.StatusReasonNotFound, `configmaps "gone" not found`)
	// Services are created by an update, as their strategy allows.
	if r := e.do("PUT", "/api/v1/namespaces/default/services/svc", `{"metadata":{"name":"svc"},"spec":{"ports":[{"port":80}]}}`); r.code != 201 {
		t.Errorf("service created by PUT: %d %s", r.code, r.body)
	}
	// dryRun patches check without writing.
	rev = e.st.Rev()
	if r := e.patch(cmPath+"/a?dryRun=All", mergePatch, `{"data":{"d":"dry"}}`); r.code != 200 || nested(t, r.object(t), "data", "d") != "dry" {
		t.Errorf("dry-run patch: %d %s", r.code, r.body)
	}
	e.unchanged(rev, "a dry-run patch")
}

// mustGetRV returns the resourceVersion of an object.
func (e *env) mustGetRV(path string) string {
	e.t.Helper()
	r := e.do("GET", path, "")
	if r.code != 200 {
		e.t.Fatalf("GET %s: %d %s", path, r.code, r.body)
	}
	return r.object(e.t).GetResourceVersion()
}

// TestApply covers server-side apply (apply-patch+yaml) through the field manager: apply creates
// (201) and updates (200), records the manager's fields as an Apply entry, removes fields the
// manager stops applying, and refuses with a 409 naming each conflicting field and its manager
// unless forced.
func TestApply(t *testing.T) {
	e := newEnv(t)
	const cfg = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: \"1\"\n  y: \"2\"\n"
	r := e.patch(cmPath+"/a?fieldManager=one", applyPatch, cfg)
	if r.code != 201 || nested(t, r.object(t), "data", "x") != "1" {
		t.Fatalf("apply create: %d %s", r.code, r.body)
	}
	mf := r.object(t).GetManagedFields()
	if len(mf) != 1 || mf[0].Manager != "one" || mf[0].Operation != metav1.ManagedFieldsOperationApply || !strings.Contains(string(mf[0].FieldsV1.Raw), `"f:x"`) {
		t.Errorf("managedFields after apply %+v", mf)
	}
	// The same manager applying without y removes it.
	r = e.patch(cmPath+"/a?fieldManager=one", applyPatch, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: \"1\"\n")
	if r.code != 200 || nested(t, r.object(t), "data", "y") != nil {
		t.Errorf("apply without y: %d %s", r.code, r.body)
	}
	// Another manager setting x to another value conflicts.
	rev := e.st.Rev()
	r = e.patch(cmPath+"/a?fieldManager=two", applyPatch, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: \"9\"\n")
	checkStatus(t, "conflict", r, 409, metav1.StatusReasonConflict, `Apply failed with 1 conflict: conflict with "one": .data.x`)
	if s := r.status(t); s.Details == nil || len(s.Details.Causes) != 1 || s.Details.Causes[0].Type != metav1.CauseTypeFieldManagerConflict ||
		s.Details.Causes[0].Field != ".data.x" || s.Details.Causes[0].Message != `conflict with "one"` {
		t.Errorf("conflict details %+v", s.Details)
	}
	e.unchanged(rev, "a conflicting apply")
	// Forced, it takes x over.
	r = e.patch(cmPath+"/a?fieldManager=two&force=true", applyPatch, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: \"9\"\n")
	if r.code != 200 || nested(t, r.object(t), "data", "x") != "9" {
		t.Fatalf("forced apply: %d %s", r.code, r.body)
	}
	// An update by another manager is tracked as Update.
	r = e.patch(cmPath+"/a?fieldManager=three", mergePatch, `{"data":{"z":"3"}}`)
	ops := map[string]metav1.ManagedFieldsOperationType{}
	for _, m := range r.object(t).GetManagedFields() {
		ops[m.Manager] = m.Operation
	}
	if ops["two"] != metav1.ManagedFieldsOperationApply || ops["three"] != metav1.ManagedFieldsOperationUpdate {
		t.Errorf("managers %v", ops)
	}
	// Custom resources apply too, their fields deduced from the objects.
	r = e.patch(widgetPath+"/w?fieldManager=one", applyPatch, "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  size: 1\n")
	if r.code != 201 {
		t.Fatalf("apply widget: %d %s", r.code, r.body)
	}
	r = e.patch(widgetPath+"/w?fieldManager=two", applyPatch, "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  size: 2\n")
	checkStatus(t, "widget conflict", r, 409, metav1.StatusReasonConflict, `Apply failed with 1 conflict: conflict with "one": .spec.size`)

	// Failure modes.
	rev = e.st.Rev()
	for _, c := range []struct {
		name, path, body string
		code             int
		reason           metav1.StatusReason
		message          string
	}{
		{"no fieldManager", cmPath + "/a", cfg, 422, metav1.StatusReasonInvalid,
			`PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`},
		{"not YAML", cmPath + "/a?fieldManager=one", "data: [", 400, metav1.StatusReasonBadRequest, "…"},
		{"unknown field", cmPath + "/a?fieldManager=one", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\nbogus: 1\n", 500, "",
			"failed to create typed patch object (/a; /v1, Kind=ConfigMap): .bogus: field not declared in schema"},
		{"other kind", cmPath + "/a?fieldManager=one", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: a\n", 400, metav1.StatusReasonBadRequest, "…"},
		{"other name", cmPath + "/a?fieldManager=one", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n", 400, metav1.StatusReasonBadRequest,
			"the name of the object (b) does not match the name on the URL (a)"},
		{"uid of nothing", cmPath + "/new?fieldManager=one", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: new\n  uid: abc\n", 409, metav1.StatusReasonConflict,
			`Operation cannot be fulfilled on configmaps "new": uid mismatch: the provided object specified uid abc, and no existing object was found`},
	} {
		checkStatus(t, c.name, e.patch(c.path, applyPatch, c.body), c.code, c.reason, c.message)
		e.unchanged(rev, c.name)
	}
}

// FuzzPatch sends arbitrary patch bodies of every patch type: the server never panics (the request
// would fail), a success answers with an object, and a rejected patch leaves the store unchanged.
// (Like the apiserver, it answers some malformed strategic merge patches and apply configurations
// with a 500 carrying the library's error.)
func FuzzPatch(f *testing.F) {
	for _, seed := range []struct {
		typ  uint8
		body string
	}{
		{0, `[{"op":"add","path":"/data/a","value":"b"}]`}, {0, `[{"op":"remove","path":"/metadata"}]`}, {0, `[]`},
		{0, `[{"op":"replace","path":"/kind","value":"Pod"}]`}, {0, `[{"op":"move","from":"/data","path":"/data/x"}]`},
		{1, `{"data":{"a":"b"}}`}, {1, `{"metadata":null}`}, {1, `null`}, {1, `{"apiVersion":"v2"}`}, {1, `[1]`},
		{2, `{"data":{"$patch":"delete"}}`}, {2, `{"$setElementOrder/data":[]}`}, {2, `{"metadata":{"finalizers":["x"]}}`},
		{3, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  q: r\n"}, {3, "{}"}, {3, "- 1"},
	} {
		f.Add(seed.typ, seed.body)
	}
	types := []string{jsonPatch, mergePatch, smPatch, applyPatch}
	f.Fuzz(func(t *testing.T, typ uint8, body string) {
		e := newEnv(t)
		e.mustCreate(cmPath, cmJSON("", "a", ""))
		rev := e.st.Rev()
		r := e.patch(cmPath+"/a?fieldManager=fuzz", types[int(typ)%len(types)], body)
		switch {
		case r.code == 200 || r.code == 201:
			var obj map[string]any
			if err := json.Unmarshal(r.body, &obj); err != nil {
				t.Fatalf("200 with a body that is not an object: %s", r.body)
			}
		default:
			e.unchanged(rev, "a rejected patch")
		}
	})
}

// TestPatchWarningsOncePerRetry: the patch is applied again in each try of its update (a conflict
// with the object the cache served sends it round again), and its strict errors with
// fieldValidation Warn become one Warning each, however many tries, as the apiserver's warning
// recorder keeps one of each message; with Strict they refuse the patch.
func TestPatchWarningsOncePerRetry(t *testing.T) {
	rec := httptest.NewRecorder()
	p := &patcher{w: rec, validation: metav1.FieldValidationWarn}
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	unknown := []error{errors.New(`unknown field "spec.extra"`)}
	for range 3 {
		if _, err := p.strictResult(obj, "{}", unknown); err != nil {
			t.Fatal(err)
		}
	}
	if got := rec.Header().Values("Warning"); len(got) != 1 || got[0] != `299 - "unknown field \"spec.extra\""` {
		t.Errorf("warnings after three tries: %q, want one", got)
	}
	// Failure mode: Strict refuses it.
	p.validation = metav1.FieldValidationStrict
	if _, err := p.strictResult(obj, "{}", unknown); err == nil || !strings.Contains(err.Error(), `unknown field "spec.extra"`) {
		t.Errorf("Strict: %v, want a 422 naming the field", err)
	}
}
