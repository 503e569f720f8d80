package httpdiff

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// gearsWebhookCRD is gears.example.org at v1 (stored, spec.teeth) and v2 (spec.cogs, the field
// renamed), converted by a webhook; the URL and caBundle are filled in.
const gearsWebhookCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gears.example.org}
spec:
  group: example.org
  names: {plural: gears, singular: gear, kind: Gear, listKind: GearList}
  scope: Namespaced
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {teeth: {type: integer}}}}}}
  - name: v2
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {cogs: {type: integer}}}}}}
`

// renameWebhook converts gears by renaming spec.teeth and spec.cogs, or, once failing is set,
// answers every review with a Failure.
type renameWebhook struct{ failing atomic.Bool }

func (h *renameWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not a ConversionReview", http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	if h.failing.Load() {
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: "gears are stuck"}
	} else {
		for _, o := range review.Request.Objects {
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: renameGear(o.Raw, review.Request.DesiredAPIVersion)})
		}
	}
	review.Request, review.Response = nil, resp
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// renameGear is the gear at apiVersion, its spec field renamed to that version's.
func renameGear(raw []byte, apiVersion string) []byte {
	var obj map[string]any
	if json.Unmarshal(raw, &obj) != nil {
		return raw
	}
	from, to := "teeth", "cogs"
	if apiVersion == "example.org/v1" {
		from, to = to, from
	}
	if spec, ok := obj["spec"].(map[string]any); ok {
		if v, ok := spec[from]; ok {
			delete(spec, from)
			spec[to] = v
		}
	}
	obj["apiVersion"] = apiVersion
	out, _ := json.Marshal(obj)
	return out
}

// TestHTTPDifferentialWebhookConversion: both servers given the same definition and conversion
// webhook (a field rename, over TLS with the definition's caBundle) answer alike a create, get and
// list at either version; and, once the webhook fails, the same 500s with its message (a get and
// a create at v2), while v1 is still read and v2 still listed from the watch cache.
func TestHTTPDifferentialWebhookConversion(t *testing.T) {
	h := &renameWebhook{}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(gearsWebhookCRD), crd); err != nil {
		t.Fatal(err)
	}
	url := srv.URL + "/convert"
	crd.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{URL: &url,
		CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}

	r := newRunner(t, 1, 0, crd)
	r.warmUp("/apis/example.org/v1/namespaces/warmup/gears",
		encode(map[string]any{"apiVersion": "example.org/v1", "kind": "Gear", "metadata": map[string]any{"name": "warmup"}}))
	const v1, v2 = "/apis/example.org/v1/namespaces/a/gears", "/apis/example.org/v2/namespaces/a/gears"
	gear := func(version, name, field string) []byte {
		return encode(map[string]any{"apiVersion": "example.org/" + version, "kind": "Gear", "metadata": map[string]any{"name": name},
			"spec": map[string]any{field: 12}})
	}
	r.recordWrite("/gears/a/g0", r.call("create g0 at v1", "POST", same(v1), func(*server) []byte { return gear("v1", "g0", "teeth") }, "application/json", nil), 201)
	r.recordWrite("/gears/a/g1", r.call("create g1 at v2", "POST", same(v2), func(*server) []byte { return gear("v2", "g1", "cogs") }, "application/json", nil), 201)
	for _, p := range []string{v1 + "/g0", v2 + "/g0", v1 + "/g1", v2 + "/g1", v1, v2} {
		wantCode(t, r.call("GET "+p, "GET", same(p), nil, "", nil), 200)
	}
	h.failing.Store(true)
	// The list at v2 is the watch cache's, which converted both gears while the webhook worked.
	for p, code := range map[string]int{v1 + "/g0": 200, v2 + "/g0": 500, v2: 200} {
		wantCode(t, r.call("GET "+p+" (webhook failing)", "GET", same(p), nil, "", nil), code)
	}
	wantCode(t, r.call("create g2 at v2 (webhook failing)", "POST", same(v2), func(*server) []byte { return gear("v2", "g2", "cogs") }, "application/json", nil), 500)
}

// wantCode fails t unless the apiserver answered code (listwatch's answer is compared to it).
func wantCode(t *testing.T, resp [2]response, code int) {
	t.Helper()
	if resp[0].code != code {
		t.Errorf("kube answered %d, want %d: %s", resp[0].code, code, resp[0].raw)
	}
}
