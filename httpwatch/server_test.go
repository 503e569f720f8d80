package httpwatch

import (
	"encoding/json"
	"errors"
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
		if r.Name == "configmaps" && (!r.Namespaced || r.Kind != "ConfigMap" || strings.Join(r.Verbs, ",") != "create,delete,get,list,update,watch") {
			t.Errorf("configmaps resource %+v", r)
		}
	}
	if strings.Join(names, ",") != "configmaps,pods" {
		t.Errorf("core resources %v", names)
	}
	var groups metav1.APIGroupList
	if r := e.do("GET", "/apis", ""); r.code != 200 || json.Unmarshal(r.body, &groups) != nil || len(groups.Groups) != 1 ||
		groups.Groups[0].Name != "example.com" || groups.Groups[0].PreferredVersion.GroupVersion != "example.com/v1" {
		t.Errorf("/apis: %d %s", r.code, r.body)
	}
	var group metav1.APIGroup
	if r := e.do("GET", "/apis/example.com", ""); r.code != 200 || json.Unmarshal(r.body, &group) != nil || group.Name != "example.com" {
		t.Errorf("/apis/example.com: %d %s", r.code, r.body)
	}
	var custom metav1.APIResourceList
	if r := e.do("GET", "/apis/example.com/v1/", ""); r.code != 200 || json.Unmarshal(r.body, &custom) != nil || len(custom.APIResources) != 2 {
		t.Errorf("/apis/example.com/v1: %d %s", r.code, r.body)
	}
	for _, r := range custom.APIResources {
		if r.Name == "gizmos" && r.Namespaced {
			t.Errorf("gizmos shown as namespaced")
		}
	}
	// Aggregated discovery is not served: a client asking for it first gets the plain documents.
	r := e.do("GET", "/apis", "", "Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json")
	if r.code != 200 || !strings.Contains(string(r.body), `"kind":"APIGroupList"`) {
		t.Errorf("/apis with aggregated Accept: %d %s", r.code, r.body)
	}
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
		{"GET", "/api/v1/secrets", 404, true},
		{"GET", "/api/v1/namespaces/default", 404, true},
		{"GET", "/api/v1/namespaces/default/configmaps/a/status", 404, true},
		{"GET", "/api/v1/configmaps/a", 404, true},                           // namespaced: no cluster-wide item
		{"GET", "/apis/example.com/v1/namespaces/default/gizmos", 404, true}, // cluster-scoped: no namespace
		{"PATCH", cmPath + "/a", 405, true},
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

// TestNegotiation: JSON is served to every Accept header that admits it; others get 406.
func TestNegotiation(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(cmPath, cmJSON("", "a", ""))
	for _, accept := range []string{"", "*/*", "application/*", "application/json", "application/json;stream=watch",
		"application/vnd.kubernetes.protobuf, application/json",
		"application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"} {
		if r := e.do("GET", cmPath+"/a", "", "Accept", accept); r.code != 200 {
			t.Errorf("Accept %q: %d %s", accept, r.code, r.body)
		}
	}
	for _, accept := range []string{"application/yaml", "application/json;as=Table;v=v1;g=meta.k8s.io", "text/html", "application/json;stream=other"} {
		r := e.do("GET", cmPath+"/a", "", "Accept", accept)
		wantStatus(t, r, 406, metav1.StatusReasonNotAcceptable, "only the following media types are accepted: application/json")
	}
	// An error is still written, as raw JSON, when the client accepts no JSON.
	r := e.do("GET", "/api/v1/secrets", "", "Accept", "application/yaml")
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
		{"two versions", Config{Resources: []ServedResource{{Widgets(), st}, {Resource{Group: "example.com", Version: "v2", Resource: "x", Kind: "X"}, st}}}},
		{"no kind", Config{Resources: []ServedResource{{Resource{Version: "v1", Resource: "things"}, st}}}},
		{"reserved name", Config{Resources: []ServedResource{{Resource{Version: "v1", Resource: "namespaces", Kind: "Namespace"}, st}}}},
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
}

func TestErrorToAPIStatus(t *testing.T) {
	s := errorToAPIStatus(errors.New("boom"))
	if s.Code != http.StatusInternalServerError || s.Reason != "" || s.Message != "boom" || s.Kind != "Status" {
		t.Errorf("plain error: %+v", s)
	}
}
