package httpdiff

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/listwatch/listwatch/interop/internal/seeds"
)

// A CRD with several versions: cogs.example.net served at v1 (the storage version), v1beta1
// (deprecated, upstream's default warning) and v1alpha1 (deprecated with its own warning), each
// with its own schema (fields the others lack, defaults, a maximum), subresources and printer
// columns, and v2 not served. Of what other versions write, only spec.teeth is unknown to
// v1alpha1 and v1beta1 (legacy is never stored): the apiserver's field manager converts the live
// and the new object to each manager's version, in a map's order, and its 500 names the fields the
// first conversion lacks. Objects are created at one version (their body sometimes at
// another), read, listed, watched, patched, applied, updated and deleted at another, so every
// answer passes the conversion from the storage version to the version asked for.

const cogsCRDYAML = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: cogs.example.net
spec:
  group: example.net
  names: {plural: cogs, singular: cog, kind: Cog, listKind: CogList}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: false
    deprecated: true
    deprecationWarning: cogs v1alpha1 are going away
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              legacy: {type: string}
              color: {type: string}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string, default: red}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, maximum: 10}
              color: {type: string, default: blue}
              teeth: {type: integer}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - name: v2
    served: false
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// cogsCRD is the CRD of cogs.
func cogsCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict([]byte(cogsCRDYAML), crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

var (
	// cogVersions are the versions requests go to, served or not.
	cogVersions = []string{"v1", "v1", "v1beta1", "v1beta1", "v1alpha1", "v2"}
	cogNames    = []string{"c0", "c1", "c2"}
)

func cogsPath(version string) string { return "/apis/example.net/" + version + "/namespaces/a/cogs" }

// TestHTTPDifferentialVersions runs, for each seed, random requests at every version of cogs
// against both servers and requires the same answers, normalized as TestHTTPDifferential's.
func TestHTTPDifferentialVersions(t *testing.T) {
	seeds.Run(t, seeds.Config{SeedsVar: "LISTWATCH_HTTPDIFF_VERSIONS_SEEDS", Seeds: "1-3",
		CountVar: "LISTWATCH_HTTPDIFF_VERSIONS_OPS", Count: 120, Unit: "requests",
		ShortSeeds: "1", ShortCount: 50}, runVersionsSeed)
}

func runVersionsSeed(t *testing.T, seed uint64, ops int) stats {
	r := newRunner(t, seed, 0x853c49e6748fea9b, cogsCRD(t))
	r.warmUp("/apis/example.net/v1/namespaces/warmup/cogs",
		encode(map[string]any{"apiVersion": "example.net/v1", "kind": "Cog", "metadata": map[string]any{"name": "warmup"}}))
	for _, p := range []string{"/apis/example.net", "/apis/example.net/v1", "/apis/example.net/v1beta1", "/apis/example.net/v2"} {
		r.send("discovery "+p, "GET", p, "", nil, "")
	}
	r.Play(ops, func() {
		r.cogRequest()
		r.syncCogs(r.Rng.IntN(6) == 0)
		if r.Rng.IntN(8) == 0 {
			r.cogWatch()
		}
	})
	r.stats.Tally = r.Tally
	t.Logf("seed %d: %s", seed, r.stats)
	return r.stats
}

// cogSpec is a random spec: fields of one version or another, valid or not, unknown ones.
func (r *runner) cogSpec() map[string]any {
	spec := map[string]any{}
	choose := func(field string, values ...any) {
		if r.Rng.IntN(2) == 0 {
			spec[field] = pick(r.Rng, values)
		}
	}
	choose("size", 1, 5, 12)
	choose("color", "green", "")
	choose("legacy", "old")
	choose("teeth", 8)
	choose("extra", true)
	return spec
}

// cogObject is a cog named name whose body says apiVersion example.net/<version>.
func (r *runner) cogObject(version, name string) map[string]any {
	return map[string]any{"apiVersion": "example.net/" + version, "kind": "Cog",
		"metadata": map[string]any{"name": name}, "spec": r.cogSpec()}
}

// cogRequest sends both servers one random request of a cog at a random version.
func (r *runner) cogRequest() {
	r.T.Helper()
	v := pick(r.Rng, cogVersions)
	name := pick(r.Rng, cogNames)
	item := cogsPath(v) + "/" + name
	// A body at the version of the path, or sometimes at another.
	bodyVersion := v
	if r.Rng.IntN(4) == 0 {
		bodyVersion = pick(r.Rng, cogVersions)
	}
	ctJSON, merge, apply := "application/json", "application/merge-patch+json", "application/apply-patch+yaml"
	switch r.Rng.IntN(12) {
	case 0, 1:
		r.send("create", "POST", cogsPath(v), ctJSON, encode(r.cogObject(bodyVersion, name)), "")
	case 2, 3:
		r.send("merge patch", "PATCH", item, merge, encode(map[string]any{"spec": r.cogSpec()}), "")
	case 4:
		// One field besides size: the apiserver names one of an applied configuration's unknown
		// fields, the first of a map's iteration.
		obj := r.cogObject(bodyVersion, name)
		spec := map[string]any{"size": 3}
		if f := pick(r.Rng, []string{"", "color", "legacy", "teeth", "extra"}); f != "" {
			spec[f] = "x"
		}
		obj["spec"] = spec
		r.send("apply", "PATCH", item+"?fieldManager=applier&force=true", apply, encode(obj), "")
	case 5:
		obj := r.cogObject(bodyVersion, name)
		obj["metadata"].(map[string]any)["resourceVersion"] = currentRV
		r.send("update", "PUT", item, ctJSON, encode(obj), "")
	case 6:
		r.send("status", "PATCH", item+"/status", merge, encode(map[string]any{"status": map[string]any{"ready": r.Rng.IntN(2) == 0}}), "")
	case 7:
		r.send("delete", "DELETE", item, "", nil, "")
	case 8:
		r.send("get as Table", "GET", item, "", nil, "application/json;as=Table;g=meta.k8s.io;v=v1")
	case 9:
		r.send("list as Table", "GET", cogsPath(v), "", nil, "application/json;as=Table;g=meta.k8s.io;v=v1")
	default:
		r.send("get", "GET", item, "", nil, "")
	}
}

// cogWatch compares the watch-lists of cogs at a random version, up to the bookmark that ends
// their initial events.
func (r *runner) cogWatch() {
	r.T.Helper()
	q := url.Values{"watch": {"true"}, "sendInitialEvents": {"true"}, "allowWatchBookmarks": {"true"},
		"resourceVersionMatch": {"NotOlderThan"}}
	path := cogsPath(pick(r.Rng, cogVersions[:5])) + "?" + q.Encode()
	what := fmt.Sprintf("watch-list %s", path)
	var desc [2]string
	for i, s := range r.servers {
		desc[i] = r.watchFrames(s, what, path, "application/json")
	}
	if desc[0] != desc[1] {
		r.Failf("%s: the answers differ (-kube +listwatch):\n%s", what, cmp.Diff(desc[0], desc[1]))
	}
	r.stats.gets++
}

// syncCogs lists the cogs at each served version on both servers, comparing the lists when compare
// is set: a consistent list brings the version's watch cache to the store's revision, so the next
// write does not start from an object the cache still holds after another version's write deleted
// it (each version has its own cache, and the warnings of a patch applied to that object before
// the retry finds it gone are each server's timing).
func (r *runner) syncCogs(compare bool) {
	r.T.Helper()
	for _, v := range []string{"v1", "v1beta1", "v1alpha1"} {
		if compare {
			r.call("stored cogs at "+v, "GET", same(cogsPath(v)), nil, "", nil)
			continue
		}
		for _, s := range r.servers {
			if resp, err := s.do(r.ctx, "GET", cogsPath(v), "", nil); err != nil || resp.code != 200 {
				r.Fatalf("%s: the consistent list of cogs at %s: %v %d %s", s.name, v, err, resp.code, resp.raw)
			}
		}
	}
	if compare {
		r.stats.lists++
	}
}
