package httpwatch

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// cogsCRD serves cogs.example.net at v1 (the storage version, spec.size) and v2 (spec.count, the
// same field renamed), converted by a webhook: %s are the conversionReviewVersions, the URL and
// the caBundle (base64).
const cogsCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: cogs.example.net}
spec:
  group: example.net
  names: {plural: cogs, singular: cog, kind: Cog, listKind: CogList}
  scope: Namespaced
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [%s]
      clientConfig: {url: "%s", caBundle: "%s"}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {size: {type: integer}}}}}}
  - name: v2
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {count: {type: integer}}}}}}
`

const (
	cogsV1  = "/apis/example.net/v1/namespaces/default/cogs"
	cogsV2  = "/apis/example.net/v2/namespaces/default/cogs"
	cogsKey = "/registry/example.net/cogs/default/"
)

// convWebhook is a conversion webhook over TLS that renames spec.size (v1) to spec.count (v2) and
// back, or answers as its mode says; it records the ConversionReview versions it was sent.
type convWebhook struct {
	srv *httptest.Server

	mu       sync.Mutex
	mode     string
	reviews  []string
	requests int
}

func newConvWebhook(t *testing.T) *convWebhook {
	h := &convWebhook{mode: "ok"}
	h.srv = httptest.NewUnstartedServer(h)
	// A client that does not trust the certificate is a test case, not news.
	h.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	h.srv.StartTLS()
	t.Cleanup(h.srv.Close)
	return h
}

// caBundle is the PEM of the webhook server's certificate, base64 as a definition carries it.
func (h *convWebhook) caBundle() string {
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.srv.Certificate().Raw}))
}

func (h *convWebhook) setMode(m string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mode = m
}

func (h *convWebhook) seen() ([]string, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.reviews...), h.requests
}

func (h *convWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// v1 and v1beta1 ConversionReviews have the same fields: one type reads and answers both.
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("bad review: %v", err), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	mode := h.mode
	h.reviews = append(h.reviews, review.APIVersion)
	h.requests++
	h.mu.Unlock()
	if mode == "http-error" {
		http.Error(w, "webhook broken", http.StatusInternalServerError)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	switch mode {
	case "failure":
		resp.Result = metav1.Status{Status: metav1.StatusFailure, Message: "cogs cannot be converted today"}
	case "wrong-uid":
		resp.UID = "not-the-request"
	}
	if mode != "empty" && mode != "failure" {
		for _, raw := range review.Request.Objects {
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: convertCog(raw.Raw, review.Request.DesiredAPIVersion, mode)})
		}
	}
	review.Request, review.Response = nil, resp
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// convertCog renames the cog's size field to the desired version's; the metadata modes change its
// labels (which conversion may) or its UID or name (which it may not).
func convertCog(raw []byte, apiVersion, mode string) []byte {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return raw
	}
	from, to := "size", "count"
	if apiVersion == "example.net/v1" {
		from, to = to, from
	}
	if v, ok, _ := unstructured.NestedFieldCopy(u.Object, "spec", from); ok {
		unstructured.RemoveNestedField(u.Object, "spec", from)
		_ = unstructured.SetNestedField(u.Object, v, "spec", to)
	}
	u.SetAPIVersion(apiVersion)
	switch mode {
	case "label":
		u.SetLabels(map[string]string{"converted-to": strings.ReplaceAll(apiVersion, "/", ".")})
		u.SetGeneration(42)
	case "changed-uid":
		u.SetUID("changed")
	case "changed-name":
		u.SetName("changed")
	}
	out, _ := u.MarshalJSON()
	return out
}

// startCogs serves cogsCRD converted by the webhook at url with caBundle.
func startCogs(t *testing.T, reviewVersions, url, caBundle string) *env {
	t.Helper()
	rs, err := CRDResources([]byte(fmt.Sprintf(cogsCRD, reviewVersions, url, caBundle)))
	if err != nil {
		t.Fatal(err)
	}
	return newChainEnv(t, TestChainConfig{Resources: rs, Cached: true})
}

func cogSpec(t *testing.T, r response, apiVersion string) string {
	t.Helper()
	u := r.object(t)
	if u.GetAPIVersion() != apiVersion {
		t.Errorf("apiVersion %s, want %s: %s", u.GetAPIVersion(), apiVersion, r.body)
	}
	spec, _ := json.Marshal(u.Object["spec"])
	return string(spec)
}

// TestCRDWebhookConversion: a definition with a Webhook conversion reads, lists, watches and writes
// each version through the webhook (here a field rename): what is stored stays at the storage
// version, each version sees its own field; labels the webhook sets are kept, other metadata it
// changes is not; the ConversionReview is the first of conversionReviewVersions the server knows.
func TestCRDWebhookConversion(t *testing.T) {
	for _, reviews := range []string{"v1", "v1beta1"} {
		t.Run(reviews, func(t *testing.T) {
			h := newConvWebhook(t)
			e := startCogs(t, map[string]string{"v1": "v1, v1beta1", "v1beta1": "v1beta1, v1"}[reviews], h.srv.URL+"/convert", h.caBundle())
			w := e.watch(cogsV2 + "?watch=true")

			r := e.do("POST", cogsV2, `{"apiVersion":"example.net/v2","kind":"Cog","metadata":{"name":"a"},"spec":{"count":3}}`)
			if r.code != 201 || cogSpec(t, r, "example.net/v2") != `{"count":3}` {
				t.Fatalf("create at v2: %d %s", r.code, r.body)
			}
			if got := e.storedAt(cogsKey + "a"); got.GetAPIVersion() != "example.net/v1" || !jsonEqual(got.Object["spec"], `{"size":3}`) {
				t.Errorf("stored: %v", got.Object)
			}
			if s := cogSpec(t, e.do("GET", cogsV1+"/a", ""), "example.net/v1"); s != `{"size":3}` {
				t.Errorf("get at v1: %s", s)
			}
			r = e.do("GET", cogsV2+"/a", "")
			if s := cogSpec(t, r, "example.net/v2"); s != `{"count":3}` {
				t.Errorf("get at v2: %s", s)
			}
			rv := r.object(t).GetResourceVersion()
			r = e.do("PUT", cogsV1+"/a", `{"apiVersion":"example.net/v1","kind":"Cog","metadata":{"name":"a","resourceVersion":"`+rv+`"},"spec":{"size":5}}`)
			if r.code != 200 {
				t.Fatalf("update at v1: %d %s", r.code, r.body)
			}
			h.setMode("label")
			r = e.patch(cogsV2+"/a", mergePatch, `{"spec":{"count":7}}`)
			if r.code != 200 || cogSpec(t, r, "example.net/v2") != `{"count":7}` {
				t.Fatalf("patch at v2: %d %s", r.code, r.body)
			}
			if u := r.object(t); u.GetLabels()["converted-to"] != "example.net.v2" || u.GetGeneration() == 42 {
				t.Errorf("metadata after conversion: %v", u.Object["metadata"])
			}
			h.setMode("ok")
			checkVersionedList(t, e.do("GET", cogsV2, ""), "example.net/v2")
			checkVersionedList(t, e.do("GET", cogsV1, ""), "example.net/v1")
			for i, f := range w.expect("ADDED a", "MODIFIED a", "MODIFIED a") {
				var u unstructured.Unstructured
				want := []string{`{"count":3}`, `{"count":5}`, `{"count":7}`}[i]
				if err := u.UnmarshalJSON(f.Object); err != nil || u.GetAPIVersion() != "example.net/v2" || !jsonEqual(u.Object["spec"], want) {
					t.Errorf("watch event %d at v2: %s %v", i, f.Object, err)
				}
			}
			seen, n := h.seen()
			if n == 0 {
				t.Fatal("the webhook was never called")
			}
			for _, v := range seen {
				if v != "apiextensions.k8s.io/"+reviews {
					t.Errorf("ConversionReview %s, want apiextensions.k8s.io/%s", v, reviews)
				}
			}
		})
	}
}

// TestCRDWebhookConversionFailures: each way a conversion webhook fails gives upstream's converter
// error: a read at the other version is the 500 of an undecodable stored object (GET: InternalError,
// list: StorageReadError), a write at it the 500 of an encoding that failed, a watch at it an ERROR
// event; the storage version, which needs no conversion, is still read.
func TestCRDWebhookConversionFailures(t *testing.T) {
	for _, c := range []struct{ mode, want, also string }{
		{"down", `failed: Post "https://127.0.0.1:`, "dial tcp 127.0.0.1:"},
		{"no caBundle", `failed: Post "https://127.0.0.1:`, "tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		{"http-error", `failed: an error on the server ("webhook broken") has prevented the request from succeeding`, ""},
		{"failure", "failed: cogs cannot be converted today", ""},
		{"empty", "returned 0 objects, expected 1", ""},
		{"wrong-uid", `failed: expected response.uid="`, `", got "not-the-request"`},
		{"changed-uid", "returned invalid object: must have the same UID: ", " != changed"},
		{"changed-name", "returned invalid object: must have the same name: ", " != changed"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			h := newConvWebhook(t)
			ca := h.caBundle()
			if c.mode == "no caBundle" {
				ca = ""
			}
			rs, err := CRDResources([]byte(fmt.Sprintf(cogsCRD, "v1", h.srv.URL+"/convert", ca)))
			if err != nil {
				t.Fatal(err)
			}
			e := newChainEnv(t, TestChainConfig{Resources: rs})
			a := e.mustCreate(cogsV1, `{"apiVersion":"example.net/v1","kind":"Cog","metadata":{"name":"a"},"spec":{"size":3}}`)
			// The watch starts after a: its one event is c's, created once the webhook fails.
			w := e.watch(cogsV2 + "?watch=true&resourceVersion=" + a.GetResourceVersion())
			if c.mode == "down" {
				h.srv.Close()
			}
			h.setMode(c.mode)
			e.mustCreate(cogsV1, `{"apiVersion":"example.net/v1","kind":"Cog","metadata":{"name":"c"},"spec":{"size":4}}`)
			want := "conversion webhook for example.net/v1, Kind=Cog " + c.want
			wantConversionFailure(t, e.do("GET", cogsV2+"/a", ""), "InternalError", want, c.also)
			wantConversionFailure(t, e.do("GET", cogsV2, ""), "StorageReadError", want, c.also)
			wantConversionFailure(t, e.do("POST", cogsV2, `{"apiVersion":"example.net/v2","kind":"Cog","metadata":{"name":"b"},"spec":{"count":3}}`),
				"", "conversion webhook for example.net/v2, Kind=Cog "+c.want, c.also)
			var st metav1.Status
			if f := w.next(); f.Type != "ERROR" || json.Unmarshal(f.Object, &st) != nil || st.Reason != "InternalError" ||
				!strings.Contains(st.Message, want) || !strings.Contains(st.Message, c.also) {
				t.Errorf("watch at v2: %s", f.line)
			}
			w.close()
			if r := e.do("GET", cogsV1+"/a", ""); r.code != 200 {
				t.Errorf("get at v1: %d %s", r.code, r.body)
			}
			if _, n := h.seen(); (n == 0) != (c.mode == "down" || c.mode == "no caBundle") {
				t.Errorf("the webhook was called %d times", n)
			}
		})
	}
}

// wantConversionFailure checks a 500 with reason and a message that holds want and also.
func wantConversionFailure(t *testing.T, r response, reason metav1.StatusReason, want, also string) {
	t.Helper()
	if r.code != 500 {
		t.Errorf("HTTP %d, want 500: %s", r.code, r.body)
		return
	}
	if s := r.status(t); s.Reason != reason || !strings.Contains(s.Message, want) || !strings.Contains(s.Message, also) {
		t.Errorf("Status %q %q, want %q holding %q and %q", s.Reason, s.Message, reason, want, also)
	}
}
