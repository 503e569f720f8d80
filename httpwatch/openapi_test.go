package httpwatch

import (
	"encoding/json"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// TestOpenAPI covers /openapi/v3 and /openapi/v2: one v3 document per served group version, each
// operation naming its kind and action, PATCH with its patch types and fieldValidation (what
// kubectl reads to validate on the server and to build apply's patch), schemas carrying the patch
// strategies of the built-in types, and a v2 document in JSON and in gnostic's protobuf.
func TestOpenAPI(t *testing.T) {
	e := newEnv(t)
	var root struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if r := e.do("GET", "/openapi/v3", ""); r.code != 200 || json.Unmarshal(r.body, &root) != nil || len(root.Paths) != 4 {
		t.Fatalf("/openapi/v3: %d %s", r.code, r.body)
	}
	url := root.Paths["api/v1"].ServerRelativeURL
	if !strings.HasPrefix(url, "/openapi/v3/api/v1?hash=") {
		t.Fatalf("api/v1 at %q", url)
	}
	r := e.do("GET", url, "")
	var doc spec3.OpenAPI
	if r.code != 200 || json.Unmarshal(r.body, &doc) != nil || r.header.Get("Cache-Control") != "public, immutable" {
		t.Fatalf("%s: %d %v", url, r.code, r.header)
	}
	patch := doc.Paths.Paths["/api/v1/namespaces/{namespace}/configmaps/{name}"].Patch
	if patch == nil {
		t.Fatal("no PATCH of configmaps")
	}
	var gvk map[string]string
	if err := patch.Extensions.GetObject("x-kubernetes-group-version-kind", &gvk); err != nil || gvk["kind"] != "ConfigMap" || gvk["version"] != "v1" {
		t.Errorf("PATCH gvk %v (%v)", gvk, err)
	}
	if _, ok := patch.RequestBody.Content["application/strategic-merge-patch+json"]; !ok {
		t.Errorf("configmaps PATCH content %v", patch.RequestBody.Content)
	}
	hasFieldValidation := false
	for _, p := range patch.Parameters {
		hasFieldValidation = hasFieldValidation || (p.Name == "fieldValidation" && p.In == "query")
	}
	if !hasFieldValidation {
		t.Error("PATCH without fieldValidation")
	}
	// The schemas give strategic merge patch the containers' merge key, as kubectl apply reads it.
	pod := doc.Components.Schemas["io.k8s.api.core.v1.Pod"]
	if pod == nil {
		t.Fatal("no Pod schema")
	}
	meta := strategicpatch.PatchMetaFromOpenAPIV3{Schema: pod, SchemaList: doc.Components.Schemas}
	specMeta, _, err := meta.LookupPatchMetadataForStruct("spec")
	if err != nil {
		t.Fatal(err)
	}
	_, pm, err := specMeta.LookupPatchMetadataForSlice("containers")
	if err != nil || pm.GetPatchMergeKey() != "name" || len(pm.GetPatchStrategies()) != 1 || pm.GetPatchStrategies()[0] != "merge" {
		t.Errorf("containers patch meta %v %v (%v)", pm.GetPatchMergeKey(), pm.GetPatchStrategies(), err)
	}
	var listType string
	containers := doc.Components.Schemas["io.k8s.api.core.v1.PodSpec"].Properties["containers"]
	if err := containers.Extensions.GetObject("x-kubernetes-list-type", &listType); err != nil || listType != "map" {
		t.Errorf("containers list type %q (%v)", listType, err)
	}

	// A custom resource's document: its schema, and no strategic merge patch.
	r = e.do("GET", "/openapi/v3/apis/example.com/v1", "")
	if r.code != 200 || json.Unmarshal(r.body, &doc) != nil {
		t.Fatalf("example.com/v1: %d", r.code)
	}
	widgetPatch := doc.Paths.Paths["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"].Patch
	if _, ok := widgetPatch.RequestBody.Content["application/strategic-merge-patch+json"]; ok || widgetPatch.RequestBody.Content["application/apply-patch+yaml"] == nil {
		t.Errorf("widgets PATCH content %v", widgetPatch.RequestBody.Content)
	}
	if w := doc.Components.Schemas["com.example.v1.Widget"]; w == nil || doc.Components.Schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"] == nil {
		t.Errorf("widget schemas %v", schemaNames(doc.Components.Schemas))
	}

	// v2, JSON and protobuf.
	var swagger spec.Swagger
	if r := e.do("GET", "/openapi/v2", "", "Accept", "application/json"); r.code != 200 || json.Unmarshal(r.body, &swagger) != nil {
		t.Errorf("/openapi/v2 JSON: %d", r.code)
	}
	if ref := swagger.Definitions["io.k8s.api.apps.v1.Deployment"].Properties["spec"].Ref; ref.String() != "#/definitions/io.k8s.api.apps.v1.DeploymentSpec" {
		t.Errorf("v2 deployment spec ref %q", ref.String())
	}
	r = e.do("GET", "/openapi/v2", "", "Accept", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
	var pb openapi_v2.Document
	if r.code != 200 || proto.Unmarshal(r.body, &pb) != nil || pb.Swagger != "2.0" || pb.Definitions == nil {
		t.Errorf("/openapi/v2 protobuf: %d %s", r.code, r.header.Get("Content-Type"))
	}

	// Failure modes.
	if r := e.do("GET", "/openapi/v3/apis/other.io/v1", ""); r.code != 404 {
		t.Errorf("unknown group version: %d", r.code)
	}
	if r := e.do("GET", "/openapi/v2", "", "Accept", "text/html"); r.code != 406 {
		t.Errorf("v2 as HTML: %d", r.code)
	}
	if r := e.do("GET", "/openapi/v3/api/v1", "", "Accept", "text/html"); r.code != 406 {
		t.Errorf("v3 as HTML: %d", r.code)
	}
	wantStatus(t, e.do("POST", "/openapi/v2", "{}"), 405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
}

func schemaNames(m map[string]*spec.Schema) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
