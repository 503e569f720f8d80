package httpwatch

import (
	"encoding/json"
	"errors"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDiscovery(t *testing.T) {
	e := newEnv(t)
	var versions metav1.APIVersions
	if r := e.do("GET", "/api", ""); r.code != 200 || json.Unmarshal(r.body, &versions) != nil ||
		versions.Kind != "APIVersions" || len(versions.Versions) != 1 || versions.Versions[0] != "v1" {
		t.Errorf("/api: %d %s", r.code, r.body)
	}
	var core metav1.APIResourceList
	if r := e.do("GET", "/api/v1", ""); r.code != 200 || json.Unmarshal(r.body, &core) != nil || core.GroupVersion != "v1" {
		t.Errorf("/api/v1: %d %s", r.code, r.body)
	}
	var names []string
	for _, r := range core.APIResources {
		names = append(names, r.Name)
		switch r.Name {
		case "configmaps":
			if !r.Namespaced || r.Kind != "ConfigMap" || strings.Join(r.Verbs, ",") != "create,delete,deletecollection,get,list,patch,update,watch" ||
				strings.Join(r.ShortNames, ",") != "cm" {
				t.Errorf("configmaps resource %+v", r)
			}
		case "pods":
			if strings.Join(r.Categories, ",") != "all" || strings.Join(r.ShortNames, ",") != "po" {
				t.Errorf("pods resource %+v", r)
			}
		case "pods/status":
			if r.Kind != "Pod" || strings.Join(r.Verbs, ",") != "get,patch,update" {
				t.Errorf("pods/status %+v", r)
			}
		case "namespaces":
			if r.Namespaced || strings.Join(r.ShortNames, ",") != "ns" {
				t.Errorf("namespaces resource %+v", r)
			}
		}
	}
	if strings.Join(names, ",") != "configmaps,events,namespaces,namespaces/finalize,namespaces/status,pods,pods/status,secrets,services,services/status" {
		t.Errorf("core resources %v", names)
	}
	var groups metav1.APIGroupList
	if r := e.do("GET", "/apis", ""); r.code != 200 || json.Unmarshal(r.body, &groups) != nil || len(groups.Groups) != 3 ||
		groups.Groups[0].Name != "apps" || groups.Groups[1].Name != "events.k8s.io" || groups.Groups[2].Name != "example.com" ||
		groups.Groups[2].PreferredVersion.GroupVersion != "example.com/v1" {
		t.Errorf("/apis: %d %s", r.code, r.body)
	}
	var group metav1.APIGroup
	if r := e.do("GET", "/apis/example.com", ""); r.code != 200 || json.Unmarshal(r.body, &group) != nil || group.Name != "example.com" {
		t.Errorf("/apis/example.com: %d %s", r.code, r.body)
	}
	var custom metav1.APIResourceList
	if r := e.do("GET", "/apis/example.com/v1/", ""); r.code != 200 || json.Unmarshal(r.body, &custom) != nil || len(custom.APIResources) != 4 { // gadgets, gadgets/status, gizmos, widgets
		t.Errorf("/apis/example.com/v1: %d %s", r.code, r.body)
	}
	for _, r := range custom.APIResources {
		if r.Name == "gizmos" && r.Namespaced {
			t.Errorf("gizmos shown as namespaced")
		}
	}
	var apps metav1.APIResourceList
	if r := e.do("GET", "/apis/apps/v1", ""); r.code != 200 || json.Unmarshal(r.body, &apps) != nil || len(apps.APIResources) != 3 ||
		apps.APIResources[0].Name != "deployments" || apps.APIResources[0].Kind != "Deployment" || apps.APIResources[1].Name != "deployments/scale" ||
		apps.APIResources[1].Group != "autoscaling" || apps.APIResources[1].Version != "v1" || apps.APIResources[1].Kind != "Scale" ||
		strings.Join(apps.APIResources[1].Verbs, ",") != "get,patch,update" || apps.APIResources[2].Name != "deployments/status" {
		t.Errorf("/apis/apps/v1: %d %s", r.code, r.body)
	}

	// Aggregated discovery, as client-go v0.37 asks for it first: one document per root, its
	// Content-Type naming it.
	for _, version := range []string{"v2", "v2beta1"} {
		accept := "application/json;g=apidiscovery.k8s.io;v=" + version + ";as=APIGroupDiscoveryList,application/json"
		r := e.do("GET", "/apis", "", "Accept", accept)
		var agg apidiscoveryv2.APIGroupDiscoveryList
		if r.code != 200 || json.Unmarshal(r.body, &agg) != nil || agg.Kind != "APIGroupDiscoveryList" || agg.APIVersion != "apidiscovery.k8s.io/"+version {
			t.Fatalf("/apis aggregated %s: %d %s", version, r.code, r.body)
		}
		if ct := r.header.Get("Content-Type"); ct != "application/json;g=apidiscovery.k8s.io;v="+version+";as=APIGroupDiscoveryList" {
			t.Errorf("aggregated Content-Type %q", ct)
		}
		if len(agg.Items) != 3 || agg.Items[0].Name != "apps" || agg.Items[1].Name != "events.k8s.io" || agg.Items[2].Name != "example.com" {
			t.Fatalf("aggregated groups %+v", agg.Items)
		}
		d := agg.Items[0].Versions[0].Resources[0]
		if d.Resource != "deployments" || d.Scope != apidiscoveryv2.ScopeNamespace || d.ResponseKind.Kind != "Deployment" ||
			d.SingularResource != "deployment" || strings.Join(d.Categories, ",") != "all" || len(d.Subresources) != 2 ||
			d.Subresources[0].Subresource != "scale" || d.Subresources[0].ResponseKind.Group != "autoscaling" ||
			d.Subresources[0].ResponseKind.Kind != "Scale" || d.Subresources[1].Subresource != "status" || agg.Items[0].Versions[0].Freshness != apidiscoveryv2.DiscoveryFreshnessCurrent {
			t.Errorf("aggregated deployments %+v", d)
		}
	}
	r := e.do("GET", "/api", "", "Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	var coreAgg apidiscoveryv2.APIGroupDiscoveryList
	if r.code != 200 || json.Unmarshal(r.body, &coreAgg) != nil || len(coreAgg.Items) != 1 || coreAgg.Items[0].Name != "" ||
		len(coreAgg.Items[0].Versions[0].Resources) != 6 {
		t.Errorf("/api aggregated: %d %s", r.code, r.body)
	}
	// Failure modes: a version of the document that does not exist, or YAML, gets the legacy
	// document; a method other than GET is a 405.
	for _, accept := range []string{"application/json;g=apidiscovery.k8s.io;v=v9;as=APIGroupDiscoveryList,application/json",
		"application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"} {
		if r := e.do("GET", "/apis", "", "Accept", accept); r.code != 200 || !strings.Contains(string(r.body), `"kind":"APIGroupList"`) {
			t.Errorf("/apis with %q: %d %s", accept, r.code, r.body)
		}
	}
	wantStatus(t, e.do("POST", "/apis", "{}"), 405, metav1.StatusReasonMethodNotAllowed, "the server does not allow this method on the requested resource")
	if r := e.do("GET", "/version", ""); r.code != 200 || !strings.Contains(string(r.body), `"gitVersion"`) {
		t.Errorf("/version: %d %s", r.code, r.body)
	}
	if r := e.do("GET", "/healthz", ""); r.code != 200 || string(r.body) != "ok" {
		t.Errorf("/healthz: %d %s", r.code, r.body)
	}
}

// TestRouting: unknown paths answer as the apiserver's muxes do.
func TestRouting(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		method, path string
		code         int
		status       bool // a Status body, else the plain NotFound text
	}{
		{"GET", "/", 404, false},
		{"GET", "/metrics", 404, false},
		{"GET", "/apis/other.io/v1/things", 404, false},
		{"GET", "/apis/other.io", 404, false},
		{"GET", "/api/v2/configmaps", 404, false},
		{"GET", "/api/v1/endpoints", 404, true},
		{"GET", "/api/v1/namespaces/default/configmaps/a/status", 404, true}, // configmaps have no status
		{"GET", "/api/v1/namespaces/default/pods/a/scale", 404, true},
		{"GET", "/api/v1/namespaces/default/pods/a/status/x", 404, true},
		{"GET", "/api/v1/watch/namespaces/default/pods/a/status", 404, true},
		{"DELETE", "/api/v1/namespaces/default/pods/a/status", 405, true},
		{"GET", "/api/v1/namespaces/default/finalize", 405, true},
		{"DELETE", "/api/v1/pods", 405, true},                                // deletecollection is per namespace
		{"GET", "/api/v1/configmaps/a", 404, true},                           // namespaced: no cluster-wide item
		{"GET", "/apis/example.com/v1/namespaces/default/gizmos", 404, true}, // cluster-scoped: no namespace
		{"PATCH", cmPath, 405, true},
		{"PUT", cmPath, 405, true},
		{"POST", "/api/v1/watch/configmaps", 405, true},
		{"POST", "/api", 405, true},
	} {
		r := e.do(c.method, c.path, "")
		if r.code != c.code {
			t.Errorf("%s %s: %d, want %d: %s", c.method, c.path, r.code, c.code, r.body)
			continue
		}
		if c.status {
			want := "the server could not find the requested resource"
			reason := metav1.StatusReasonNotFound
			if c.code == 405 {
				want, reason = "the server does not allow this method on the requested resource", metav1.StatusReasonMethodNotAllowed
			}
			wantStatus(t, r, c.code, reason, want)
		} else if string(r.body) != "404 page not found\n" {
			t.Errorf("%s %s: body %q", c.method, c.path, r.body)
		}
	}
}

// TestNegotiation: each Accept header gets the first format it admits among the endpoint's: JSON,
// YAML and protobuf for built-in kinds, JSON and YAML for custom resources; others get 406. A
// built-in kind's route (go-restful's, in kube-apiserver) refuses first an Accept none of whose
// media types, without parameters, it produces: application/* too.
func TestNegotiation(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(cmPath, cmJSON("", "a", ""))
	e.mustCreate(widgetPath, widgetJSON("w", ""))
	for _, c := range []struct{ path, accept, contentType string }{
		{cmPath + "/a", "", "application/json"},
		{cmPath + "/a", "*/*", "application/json"},
		{widgetPath + "/w", "application/*", "application/json"},
		{cmPath + "/a", "application/json;stream=watch", "application/json"},
		{cmPath + "/a", "application/yaml", "application/yaml"},
		{cmPath + "/a", "application/vnd.kubernetes.protobuf, application/json", "application/vnd.kubernetes.protobuf"},
		{cmPath + "/a", "application/json;q=0.5, application/yaml", "application/yaml"},
		{cmPath + "/a", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", "application/json"},
		{widgetPath + "/w", "application/vnd.kubernetes.protobuf, application/json", "application/json"},
		{widgetPath + "/w", "application/yaml", "application/yaml"},
	} {
		r := e.do("GET", c.path, "", "Accept", c.accept)
		if r.code != 200 || r.header.Get("Content-Type") != c.contentType {
			t.Errorf("GET %s Accept %q: %d %s, want 200 %s: %s", c.path, c.accept, r.code, r.header.Get("Content-Type"), c.contentType, r.body)
		}
	}
	const builtin = "application/json, application/yaml, application/vnd.kubernetes.protobuf"
	const handler = "only the following media types are accepted: " + builtin
	const route = "406: Not Acceptable\n\nAvailable representations: " + builtin
	for _, c := range []struct{ path, accept, want string }{
		{cmPath + "/a", "text/html", route},
		{cmPath + "/a", "application/*", route},
		{cmPath, "bogus, text/html", route + ", application/json;stream=watch, application/vnd.kubernetes.protobuf;stream=watch"},
		{cmPath + "/a", "application/json;stream=other", handler},
		{cmPath + "/a", "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io", handler},
		{cmPath + "/a", "application/json;as=Thing;v=v1;g=meta.k8s.io", handler},
		{widgetPath + "/w", "text/html", handler},
	} {
		r := e.do("GET", c.path, "", "Accept", c.accept)
		wantStatus(t, r, 406, metav1.StatusReasonNotAcceptable, c.want)
	}
	// An error is still written, as raw JSON, when the client accepts nothing the endpoint has.
	r := e.do("GET", "/api/v1/endpoints", "", "Accept", "text/html")
	if r.code != 404 || !strings.Contains(string(r.body), `"reason": "NotFound"`) {
		t.Errorf("error to a non-JSON client: %d %s", r.code, r.body)
	}
}

func TestNewConfig(t *testing.T) {
	st := &fakeStorage{}
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"no resources", Config{}},
		{"no storage", Config{Resources: []ServedResource{{Resource: ConfigMaps()}}}},
		{"duplicate", Config{Resources: []ServedResource{{ConfigMaps(), st}, {ConfigMaps(), st}}}},
		{"no kind", Config{Resources: []ServedResource{{Resource{Version: "v1", Resource: "things"}, st}}}},
		{"reserved name", Config{Resources: []ServedResource{{Resource{Version: "v1", Resource: "namespaces", Kind: "Namespace", Namespaced: true}, st}}}},
		{"upper case", Config{Resources: []ServedResource{{Resource{Version: "v1", Resource: "Things", Kind: "Thing"}, st}}}},
		{"negative timeout", Config{Resources: []ServedResource{{ConfigMaps(), st}}, MinRequestTimeout: -1}},
	} {
		if _, err := New(c.cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", c.name, err)
		}
	}
	if _, err := New(Config{Resources: []ServedResource{{ConfigMaps(), st}}}); err != nil {
		t.Errorf("valid config: %v", err)
	}
	// A group may have several versions (a CRD's).
	if _, err := New(Config{Resources: []ServedResource{{Widgets(), st}, {Resource{Group: "example.com", Version: "v2", Resource: "x", Kind: "X"}, st}}}); err != nil {
		t.Errorf("two versions of a group: %v", err)
	}
}

func TestErrorToAPIStatus(t *testing.T) {
	s := errorToAPIStatus(errors.New("boom"))
	if s.Code != http.StatusInternalServerError || s.Reason != "" || s.Message != "boom" || s.Kind != "Status" {
		t.Errorf("plain error: %+v", s)
	}
}
