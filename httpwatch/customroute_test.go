package httpwatch

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCustomResourceRoutes checks that a custom resource's requests go by the verb their method
// makes, as apiextensions-apiserver routes them: POST on an object's path creates the body's
// object, HEAD answers as GET, another method is a 405 naming the verb, an unknown subresource a
// 404 naming the object, a PUT or PATCH of the collection a 400.
func TestCustomResourceRoutes(t *testing.T) {
	e := newEnv(t)
	created := e.do("POST", widgetPath+"/ignored", widgetJSON("w", ""), "Content-Type", "application/json")
	if created.code != 201 || created.object(t).GetName() != "w" {
		t.Fatalf("POST on an object's path: %d %s, want 201 creating w", created.code, created.body)
	}
	if r := e.do("HEAD", widgetPath+"/w", ""); r.code != 200 || len(r.body) != 0 {
		t.Errorf("HEAD: %d %q, want 200 without a body", r.code, r.body)
	}
	if r := e.do("HEAD", widgetPath+"/absent", ""); r.code != 404 {
		t.Errorf("HEAD of an absent widget: %d, want 404", r.code)
	}
	wantStatus(t, e.do("OPTIONS", widgetPath+"/w", ""), 405, metav1.StatusReasonMethodNotAllowed,
		` is not supported on resources of kind "widgets.example.com"`)
	for _, sub := range []string{"bogus", "status", "scale", "status/extra"} {
		wantStatus(t, e.do("GET", widgetPath+"/w/"+sub, ""), 404, metav1.StatusReasonNotFound, `widgets.example.com "w" not found`)
	}
	wantStatus(t, e.do("PUT", widgetPath, widgetJSON("w", ""), "Content-Type", "application/json"), 400,
		metav1.StatusReasonBadRequest, "name must be provided")
	wantStatus(t, e.do("PATCH", widgetPath, `{}`, "Content-Type", "application/merge-patch+json"), 400,
		metav1.StatusReasonBadRequest, "name must be provided")
	wantStatus(t, e.do("PATCH", widgetPath, `{}`, "Content-Type", "application/strategic-merge-patch+json"), 415,
		metav1.StatusReasonUnsupportedMediaType, "the body of the request was in an unknown format - accepted media types include: "+
			"application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
	// A built-in kind keeps go-restful's routes: POST on an object's path is a 405.
	if r := e.do("POST", cmPath+"/a", cmJSON("", "a", ""), "Content-Type", "application/json"); r.code != 405 {
		t.Errorf("POST on a ConfigMap's path: %d, want 405", r.code)
	}
}

// TestCustomResourceProtobuf checks that a custom resource's endpoint offers protobuf for what is
// typed only: a custom resource asked for in protobuf is a 406 listing the three media types,
// written in protobuf, and so is any error to a protobuf client.
func TestCustomResourceProtobuf(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(widgetPath, widgetJSON("w", ""))
	for _, path := range []string{widgetPath + "/w", widgetPath + "/absent", widgetPath} {
		r := e.do("GET", path, "", "Accept", "application/vnd.kubernetes.protobuf")
		status, ok := decodeProtobuf(t, r.body).(*metav1.Status)
		if r.code != 406 || !ok || r.header.Get("Content-Type") != "application/vnd.kubernetes.protobuf" ||
			status.Message != "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf" {
			t.Errorf("GET %s in protobuf: %d %s %+v, want a protobuf 406", path, r.code, r.header.Get("Content-Type"), status)
		}
	}
	r := e.do("GET", widgetPath+"/w/bogus", "", "Accept", "application/vnd.kubernetes.protobuf")
	if status, ok := decodeProtobuf(t, r.body).(*metav1.Status); r.code != 404 || !ok || status.Reason != metav1.StatusReasonNotFound {
		t.Errorf("an error to a protobuf client: %d %q", r.code, r.body)
	}
}

// TestDuplicateOwnerReferences checks that a write drops an owner reference equal to an earlier
// one and warns of its uid, and keeps two references that share a uid but differ.
func TestDuplicateOwnerReferences(t *testing.T) {
	e := newEnv(t)
	ref := `{"apiVersion":"v1","kind":"ConfigMap","name":"o","uid":"u1"}`
	r := e.do("POST", widgetPath, widgetJSON("w", `"ownerReferences":[`+ref+`,`+ref+`]`), "Content-Type", "application/json")
	if r.code != 201 || len(r.object(t).GetOwnerReferences()) != 1 {
		t.Fatalf("create with a duplicate owner reference: %d %s, want 201 with one", r.code, r.body)
	}
	if w := r.header.Values("Warning"); len(w) != 1 || !strings.Contains(w[0], "duplicate UID(s) observed: u1") {
		t.Errorf("warnings %q, want one naming u1", w)
	}
	other := `{"apiVersion":"v1","kind":"Secret","name":"o","uid":"u1"}`
	r = e.do("POST", widgetPath, widgetJSON("v", `"ownerReferences":[`+ref+`,`+other+`]`), "Content-Type", "application/json")
	if r.code != 201 || len(r.object(t).GetOwnerReferences()) != 2 || len(r.header.Values("Warning")) != 0 {
		t.Errorf("two references sharing a uid: %d %s %q, want both kept without a warning", r.code, r.body, r.header.Values("Warning"))
	}
}

// TestSchemalessManagedFields checks that a custom resource without a schema records its metadata
// as ObjectMeta is typed: finalizers as a set, owner references by uid.
func TestSchemalessManagedFields(t *testing.T) {
	e := newEnv(t)
	w := e.mustCreate(widgetPath, widgetJSON("w", `"finalizers":["example.com/keep"],"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"o","uid":"u1"}]`))
	mf := w.GetManagedFields()
	if len(mf) != 1 || mf[0].FieldsV1 == nil {
		t.Fatalf("managedFields %+v, want one entry", mf)
	}
	fields := string(mf[0].FieldsV1.Raw)
	for _, want := range []string{`"f:finalizers":{".":{},"v:\"example.com/keep\"":{}}`, `"f:ownerReferences":{".":{},"k:{\"uid\":\"u1\"}":{}}`} {
		if !strings.Contains(fields, want) {
			t.Errorf("managedFields %s, want %s", fields, want)
		}
	}
}

// TestCustomResourceUpdateValidation checks that an update of a custom resource reports its
// metadata's errors as upstream's two passes over it do: each cause twice.
func TestCustomResourceUpdateValidation(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(widgetPath, widgetJSON("w", ""))
	r := e.do("PATCH", widgetPath+"/w", `{"metadata":{"uid":"other"}}`, "Content-Type", "application/merge-patch+json")
	wantStatus(t, r, 422, metav1.StatusReasonInvalid, "")
	var uidCauses int
	for _, c := range r.status(t).Details.Causes {
		if c.Field == "metadata.uid" && strings.Contains(c.Message, "field is immutable") {
			uidCauses++
		}
	}
	if uidCauses != 2 {
		t.Errorf("causes %+v, want metadata.uid immutable twice", r.status(t).Details.Causes)
	}
}

// TestListNegotiatesFirst checks that a list the client cannot read in any format is a 406 before
// its options are checked, as handlers.ListResource orders them.
func TestListNegotiatesFirst(t *testing.T) {
	e := newEnv(t)
	wantStatus(t, e.do("GET", widgetPath+"?resourceVersionMatch=bogus", "", "Accept", "text/html"), 406,
		metav1.StatusReasonNotAcceptable, "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf")
}

// TestDecodeErrorsAsUpstream checks the messages of bodies that do not decode: a JSON patch that is
// not a list names upstream's type, a patch that leaves no object quotes the decoder's own error,
// and a YAML body is quoted as sent.
func TestDecodeErrorsAsUpstream(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(widgetPath, widgetJSON("w", ""))
	wantStatus(t, e.do("PATCH", widgetPath+"/w", `{"op":"add"}`, "Content-Type", "application/json-patch+json"), 400,
		metav1.StatusReasonBadRequest, "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp")
	r := e.do("PATCH", widgetPath+"/w?fieldValidation=Ignore", `[]`, "Content-Type", "application/merge-patch+json")
	wantStatus(t, r, 422, metav1.StatusReasonInvalid, "")
	if msg := r.status(t).Message; !strings.HasPrefix(msg, ` "" is invalid: patch: Invalid value: "[]": couldn't get version/kind; json parse error`) {
		t.Errorf("merge patch []: %q", msg)
	}
	wantStatus(t, e.do("POST", widgetPath, "", "Content-Type", "application/yaml"), 400, metav1.StatusReasonBadRequest,
		"the object provided is unrecognized (must be of type Widget): Object 'Kind' is missing in '' (<empty>)")
}
