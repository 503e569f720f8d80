package httpdiff

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"os"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The scale subresource: pistons (namespaced, a status subresource and a label selector path) and
// valves (cluster-scoped, their replicas at .spec.size, no selector), httpwatch's
// testdata/pistons.yaml, sent scale GETs, PUTs and PATCHes, valid and not (another kind or
// apiVersion in the body, negative or non-integer replicas, stale or malformed resourceVersions,
// a uid precondition, missing objects, patch types and content types not taken), between writes of the objects that
// set their replicas and selector to values the scale validation refuses or that are missing.

const (
	pistonsPath = "/apis/example.org/v1/namespaces/a/pistons"
	valvesPath  = "/apis/example.org/v1/valves"
)

// scaleCRDs are httpwatch's testdata/pistons.yaml: the CRDs of pistons and valves.
func scaleCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile("../../httpwatch/testdata/pistons.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewDocumentDecoder(io.NopCloser(bytes.NewReader(data)))
	var out []*apiextensionsv1.CustomResourceDefinition
	for {
		buf := make([]byte, len(data))
		n, err := dec.Read(buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(buf[:n], crd); err != nil {
			t.Fatal(err)
		}
		out = append(out, crd)
	}
	return out
}

// scaleKind is a resource with a scale subresource and where its spec replicas are.
type scaleKind struct {
	surfaceKind
	replicas string
}

var scaleKinds = []scaleKind{
	{surfaceKind{"example.org/v1", "Piston", pistonsPath, []string{"p0", "p1"}}, "replicas"},
	{surfaceKind{"example.org/v1", "Valve", valvesPath, []string{"v0", "v1"}}, "size"},
}

// scaleWarmUp creates an object of each scale kind on each server: the apiserver's first create
// after a CRD is Established sleeps 2 s.
func (r *runner) scaleWarmUp() {
	r.T.Helper()
	for _, k := range scaleKinds {
		for _, s := range r.servers {
			path := k.collection
			if k.kind == "Piston" {
				path = "/apis/example.org/v1/namespaces/warmup/pistons"
			}
			resp, err := s.do(r.ctx, "POST", path, "application/json",
				encode(map[string]any{"apiVersion": k.apiVersion, "kind": k.kind, "metadata": map[string]any{"name": "warmup"}}))
			if err != nil || resp.code != 201 {
				r.T.Fatalf("%s: %s warm-up: %v %d %s", s.name, k.kind, err, resp.code, resp.raw)
			}
		}
	}
}

// scaleRequest sends both servers one random request of the scale subresource's, or a write of an
// object that has one.
func (r *runner) scaleRequest() {
	r.T.Helper()
	k := pick(r.Rng, scaleKinds)
	name := pick(r.Rng, k.names)
	item := k.collection + "/" + name
	switch r.Rng.IntN(10) {
	case 0, 1:
		spec := map[string]any{"other": 1}
		if v := pick(r.Rng, []any{2, 2, 0, -1, "three", 2.5, nil}); v != nil {
			spec[k.replicas] = v
		}
		r.send("create "+name, "POST", k.collection, "application/json",
			encode(map[string]any{"apiVersion": k.apiVersion, "kind": k.kind, "metadata": map[string]any{"name": name}, "spec": spec}), "")
	case 2:
		status := map[string]any{"replicas": pick(r.Rng, []any{1, -3, "x"})}
		if r.Rng.IntN(2) == 0 {
			status["selector"] = pick(r.Rng, []any{"app=p", 5})
		}
		r.send("status of "+name, "PATCH", item+"/status", "application/merge-patch+json", encode(map[string]any{"status": status}), "")
	case 3:
		r.send("delete "+name, "DELETE", item, "", nil, "")
	default:
		r.scaleCall(k, name)
	}
}

// scaleCall sends a GET, PUT or PATCH (or a method the scale subresource does not serve) of an
// object's scale subresource.
func (r *runner) scaleCall(k scaleKind, name string) {
	method := pick(r.Rng, []string{"GET", "GET", "PUT", "PUT", "PUT", "PATCH", "PATCH", "PATCH", "DELETE", "POST"})
	q := url.Values{}
	if method == "PUT" || method == "PATCH" {
		opt := func(key string, values ...string) {
			if r.Rng.IntN(4) == 0 {
				q.Set(key, pick(r.Rng, values))
			}
		}
		opt("dryRun", "All", "bogus")
		opt("fieldManager", "hpa", "b")
		opt("fieldValidation", "Strict", "Warn", "Ignore")
	}
	var ctype string
	var body []byte
	switch method {
	case "PUT", "POST":
		ctype, body = r.scaleBody(name)
	case "PATCH":
		ctype, body = r.scalePatch(name)
		if ctype == "application/apply-patch+yaml" && q.Get("fieldManager") == "" && r.Rng.IntN(4) > 0 {
			q.Set("fieldManager", "applier")
		}
	}
	path := k.collection + "/" + name + "/scale"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	accept := pick(r.Rng, []string{"", "", "application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "bogus",
		"application/json;as=Table;v=v1;g=meta.k8s.io", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
		"application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"})
	r.send(method+" "+path+" ("+ctype+", Accept "+accept+") "+string(body), method, path, ctype, body, accept)
}

// scaleBody is a Scale, or an object of another kind or version, with a random resourceVersion
// and replicas, and its Content-Type.
func (r *runner) scaleBody(name string) (string, []byte) {
	md := map[string]any{"name": name}
	if rv := pick(r.Rng, []string{"", currentRV, currentRV, "1", "x"}); rv != "" {
		md["resourceVersion"] = rv
	}
	switch r.Rng.IntN(8) {
	case 0:
		md["name"] = "other"
	case 1:
		// A uid precondition no object has.
		md["uid"] = "00000000-0000-0000-0000-000000000000"
	}
	obj := map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": md,
		"spec": map[string]any{"replicas": pick(r.Rng, []any{3, 3, 0, -1, "x"})}}
	switch r.Rng.IntN(8) {
	case 0:
		obj["apiVersion"] = pick(r.Rng, []string{"extensions/v1beta1", "example.org/v1", "v1"})
	case 1:
		obj["kind"] = pick(r.Rng, []string{"Piston", "ConfigMap"})
	case 2:
		obj["spec"].(map[string]any)["bogus"] = true
	}
	ctype := pick(r.Rng, []string{"application/json", "application/json", "application/json", "application/yaml", "text/plain", "bogus",
		"application/merge-patch+json"})
	b := encode(obj)
	if ctype == "application/yaml" {
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			r.Fatalf("%v", err)
		}
		b = y
	}
	return ctype, b
}

// scalePatch is a random patch of a Scale and its Content-Type.
func (r *runner) scalePatch(name string) (string, []byte) {
	replicas := pick(r.Rng, []any{4, 4, 0, -2, "y", nil})
	switch r.Rng.IntN(6) {
	case 0:
		return "application/json-patch+json", encode([]any{map[string]any{"op": "replace", "path": "/spec/replicas", "value": replicas}})
	case 1:
		return "application/apply-patch+yaml", encode(map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"replicas": replicas}})
	case 2:
		return pick(r.Rng, []string{"application/strategic-merge-patch+json", "application/json", "text/plain"}),
			encode(map[string]any{"spec": map[string]any{"replicas": replicas}})
	case 3:
		return "application/merge-patch+json", encode(map[string]any{"metadata": map[string]any{"resourceVersion": pick(r.Rng, []string{"1", currentRV})},
			"spec": map[string]any{"replicas": replicas}})
	}
	return "application/merge-patch+json", encode(map[string]any{"spec": map[string]any{"replicas": replicas}})
}
