package httpdiff

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/seeds"
)

// The whole surface: random requests, each a method on a path (a collection, an object, its status
// subresource, an unknown subresource), with a Content-Type and an Accept (JSON, YAML, protobuf,
// Table, PartialObjectMetadata, bogus ones), options and their invalid values (dryRun,
// fieldManager, fieldValidation, propagationPolicy, gracePeriodSeconds, orphanDependents, force,
// limit, continue, resourceVersionMatch, timeoutSeconds), bodies of every patch type, hostile
// bodies and metadata edge cases (finalizers, ownerReferences, generateName, invalid labels,
// unknown metadata fields), sent to widgets (no schema) and sprockets (a schema and a status
// subresource). Every answer is compared, and every few requests the stored objects are listed and
// compared.

// TestHTTPDifferentialSurface runs, for each seed, random requests across the API's surface against
// both servers and requires the same answers and the same stored objects.
func TestHTTPDifferentialSurface(t *testing.T) {
	seeds.Run(t, seeds.Config{SeedsVar: "LISTWATCH_HTTPDIFF_SURFACE_SEEDS", Seeds: "1-3",
		CountVar: "LISTWATCH_HTTPDIFF_SURFACE_OPS", Count: 250, Unit: "requests",
		ShortSeeds: "1", ShortCount: 60}, runSurfaceSeed)
}

func runSurfaceSeed(t *testing.T, seed uint64, ops int) stats {
	r := newRunner(t, seed, 0x9e3779b97f4a7c15, append(scaleCRDs(t), sprocketsCRD(t))...)
	r.warmUp(collection("warmup"), encode(r.widget("warmup", "warmup", nil)))
	for _, s := range r.servers {
		resp, err := s.do(r.ctx, "POST", "/apis/example.net/v1/namespaces/warmup/sprockets", "application/json",
			encode(map[string]any{"apiVersion": "example.net/v1", "kind": "Sprocket", "metadata": map[string]any{"name": "warmup"}}))
		if err != nil || resp.code != 201 {
			t.Fatalf("%s: sprocket warm-up: %v %d %s", s.name, err, resp.code, resp.raw)
		}
	}
	r.scaleWarmUp()
	for _, k := range surfaceKinds {
		r.fixedCases(k)
	}
	r.Play(ops, func() {
		r.surfaceRequest()
		if r.Rng.IntN(3) == 0 {
			r.scaleRequest()
		}
		if r.Rng.IntN(30) == 0 {
			r.finalizerLifecycle(pick(r.Rng, surfaceKinds))
		}
		if r.Rng.IntN(15) == 0 {
			r.transformedWatch(pick(r.Rng, surfaceKinds))
		}
		if r.Rng.IntN(6) == 0 {
			r.compareStored()
		}
	})
	r.compareStored()
	r.stats.Tally = r.Tally
	t.Logf("seed %d: %s", seed, r.stats)
	return r.stats
}

// surfaceKind is one of the two resources the surface test sends requests to.
type surfaceKind struct {
	apiVersion, kind, collection string
	names                        []string
}

var surfaceKinds = []surfaceKind{
	{"example.com/v1", "Widget", collection("a"), []string{"w0", "w1"}},
	{"example.net/v1", "Sprocket", sprocketsPath, []string{"s0", "s1"}},
}

// surfaceRequest sends both servers one random request and records the writes it made.
func (r *runner) surfaceRequest() {
	r.T.Helper()
	r.surfaceRequestTo(pick(r.Rng, surfaceKinds))
}

// surfaceRequestTo is surfaceRequest to kind k.
func (r *runner) surfaceRequestTo(k surfaceKind) {
	r.T.Helper()
	name := pick(r.Rng, k.names)
	path := k.collection
	switch r.Rng.IntN(12) {
	case 0, 1, 2:
	case 3:
		path += "/" + name + "/status"
	case 4:
		path += "/" + name + "/" + pick(r.Rng, []string{"bogus", "scale", "status/extra"})
	default:
		path += "/" + name
	}
	method := pick(r.Rng, []string{"GET", "GET", "GET", "POST", "POST", "POST", "PUT", "PUT", "PUT", "PATCH", "PATCH", "PATCH", "PATCH",
		"DELETE", "DELETE", "DELETE", "HEAD", "OPTIONS"})
	query := r.surfaceQuery(method)
	ctype, body := r.surfaceBody(k, name, method)
	if (method == "PUT" || method == "POST") && ctype == "application/vnd.kubernetes.protobuf" {
		// The apiserver panics decoding a protobuf body of a custom resource (its
		// schemaCoercingDecoder has no delegate for protobuf): not compared.
		ctype = "application/json"
	}
	accept := r.surfaceAccept()
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	what := fmt.Sprintf("%s %s (Content-Type %q, Accept %q) %s", method, path, ctype, accept, body)
	if len(body) > 500 {
		what = fmt.Sprintf("%s %s (Content-Type %q, Accept %q) a body of %d bytes: %.200s…", method, path, ctype, accept, len(body), body)
	}
	r.send(what, method, path, ctype, body, accept)
}

// send sends both servers one request (currentRV in body replaced by each server's), compares the
// answers and records the writes it made; it returns the answers' status codes. A write of
// existing objects waits for both caches to have seen the writes before it (awaitCaches).
func (r *runner) send(what, method, path, ctype string, body []byte, accept string) [2]int {
	r.T.Helper()
	if method == "PUT" || method == "PATCH" || method == "DELETE" {
		r.awaitCaches(collectionOf(path))
	}
	var desc [2]string
	var codes [2]int
	for i, s := range r.servers {
		var h http.Header
		if accept != "" {
			h = http.Header{"Accept": {accept}}
		}
		sent := r.withCurrentRV(s, path, body)
		resp, err := s.doHeader(r.ctx, method, path, ctype, sent, h)
		if err != nil {
			r.Fatalf("%s: %s: %v", what, s.name, err)
		}
		desc[i], codes[i] = s.describe(resp, askedRV(path, sent)), resp.code
	}
	r.recordRevisions()
	if desc[0] != desc[1] {
		r.Failf("%s: the answers differ (-kube +listwatch):\n%s", what, cmp.Diff(desc[0], desc[1]))
	}
	if method == "GET" || method == "HEAD" || method == "OPTIONS" {
		r.stats.gets++
	} else {
		r.stats.writes++
	}
	return codes
}

// recordRevisions appends each server's store revision to its writes when the request moved it:
// both servers' writes keep the same index as long as they write alike.
func (r *runner) recordRevisions() {
	for _, s := range r.servers {
		rev := s.st.Rev()
		if n := len(s.writes); n == 0 || s.writes[n-1] < rev {
			s.writes = append(s.writes, rev)
		}
	}
}

// compareStored lists both kinds on both servers and compares the lists: the stored result of the
// requests so far.
func (r *runner) compareStored() {
	r.T.Helper()
	for _, k := range surfaceKinds {
		r.call("stored "+k.kind+"s", "GET", same(k.collection), nil, "", nil)
	}
	for _, k := range scaleKinds {
		r.call("stored "+k.kind+"s", "GET", same(k.collection), nil, "", nil)
	}
	r.stats.lists++
}

// surfaceQuery is a random set of options, valid or not, for a request of method.
func (r *runner) surfaceQuery(method string) url.Values {
	q := url.Values{}
	opt := func(key string, values ...string) {
		if r.Rng.IntN(4) == 0 {
			q.Set(key, pick(r.Rng, values))
		}
	}
	switch method {
	case "GET", "HEAD":
		opt("limit", "1", "-1", "x")
		opt("continue", "garbage", "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJ3MFx1MDAwMCJ9")
		// Only a malformed resourceVersion: a cache may serve "0" or "1" before it has caught up.
		opt("resourceVersion", "x")
		opt("resourceVersionMatch", "NotOlderThan", "Exact", "bogus")
		opt("labelSelector", "app=x", "app in (", "!app")
		opt("fieldSelector", "metadata.name=w0", "spec.size=1", "bogus=1")
		opt("includeObject", "None", "Object", "Metadata", "bogus")
		opt("pretty", "true", "x")
		opt("export", "true", "false", "x")
	case "DELETE":
		opt("propagationPolicy", "Foreground", "Orphan", "Background", "bogus")
		opt("gracePeriodSeconds", "0", "30", "-1", "x")
		opt("orphanDependents", "true", "false", "x")
		opt("dryRun", "All", "bogus")
		opt("labelSelector", "app=x", "app in (")
		// Options of a deletecollection's list: a field selector custom resources do not support,
		// a match without a resourceVersion, pages.
		opt("fieldSelector", "metadata.name=w0", "spec.size=1")
		opt("resourceVersionMatch", "NotOlderThan", "bogus")
		opt("limit", "1", "x")
	default:
		opt("dryRun", "All", "bogus")
		opt("fieldManager", "a", "b", strings.Repeat("m", 200), "")
		opt("fieldValidation", "Strict", "Warn", "Ignore", "bogus")
		opt("force", "true", "false", "x")
	}
	return q
}

// surfaceAccept is a random Accept header: none, or a media type the servers may or may not offer.
func (r *runner) surfaceAccept() string {
	if r.Rng.IntN(2) > 0 {
		return ""
	}
	return pick(r.Rng, []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf",
		"application/json;as=Table;v=v1;g=meta.k8s.io", "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
		"application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
		"application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
		"application/json;as=Bogus;v=v1;g=meta.k8s.io", "*/*", "text/html", "application/json, text/html;q=0.5", "bogus"})
}

// surfaceBody is a random body and its Content-Type for a request of method on kind k's name.
func (r *runner) surfaceBody(k surfaceKind, name, method string) (string, []byte) {
	if method == "GET" || method == "HEAD" || method == "OPTIONS" {
		return "", nil
	}
	if method == "DELETE" {
		if r.Rng.IntN(2) == 0 {
			return "", nil
		}
		ctype := "application/json"
		if r.Rng.IntN(6) == 0 {
			ctype = r.surfaceContentType()
		}
		if r.Rng.IntN(20) == 0 {
			return ctype, []byte(oversized)
		}
		return ctype, encode(r.deleteOptions())
	}
	switch n := r.Rng.IntN(12); {
	case n == 0 && method != "PATCH" && r.Rng.IntN(8) == 0:
		// An object of another version of the kind. Not a patch: the apiserver decodes a patched
		// object of another version with no schema, its fields unknown in a random order.
		group, _, _ := strings.Cut(k.apiVersion, "/")
		return "application/json", encode(map[string]any{"apiVersion": group + "/v2", "kind": k.kind, "metadata": map[string]any{"name": name}})
	case n == 0:
		return r.surfaceContentType(), []byte(pick(r.Rng, []string{"", "{", "[]", "null", `""`, `{"kind":1}`,
			`{"metadata":{"name":5}}`, "\xff\xfe", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`,
			strings.Repeat("[", 2000) + strings.Repeat("]", 2000), oversized}))
	case method == "PATCH" && n < 6:
		return r.patchBody(k, name)
	default:
		obj := r.surfaceObject(k, name)
		if method == "PUT" && r.Rng.IntN(3) > 0 {
			obj["metadata"].(map[string]any)["resourceVersion"] = currentRV
		}
		return pick(r.Rng, []string{"application/json", "application/json", "application/json", "application/yaml",
			r.surfaceContentType()}), encode(obj)
	}
}

// oversized is a body over the servers' limit (the apiserver's --max-resource-write-bytes default,
// 3 MiB): 413 before it is decoded.
var oversized = `{"metadata":{"name":"w0"},"pad":"` + strings.Repeat("x", 3<<20) + `"}`

// currentRV in a body stands for the object's resourceVersion on each server (an update that may
// succeed), read just before the request.
const currentRV = "<current>"

// withCurrentRV is body with currentRV replaced by the resourceVersion of the object at path on s.
func (r *runner) withCurrentRV(s *server, path string, body []byte) []byte {
	if !strings.Contains(string(body), currentRV) {
		return body
	}
	path, _, _ = strings.Cut(path, "?")
	path = strings.TrimSuffix(strings.TrimSuffix(path, "/status"), "/scale")
	resp, err := s.do(r.ctx, "GET", path, "", nil)
	if err != nil {
		r.Fatalf("%s: reading %s: %v", s.name, path, err)
	}
	rv := "1"
	if md, ok := resp.body["metadata"].(map[string]any); ok && resp.code == 200 {
		rv, _ = md["resourceVersion"].(string)
	}
	return []byte(strings.ReplaceAll(string(body), currentRV, rv))
}

func (r *runner) surfaceContentType() string {
	return pick(r.Rng, []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "text/plain",
		"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json",
		"application/apply-patch+yaml", "application/json; charset=utf-8", "bogus", ""})
}

// deleteOptions is a random DeleteOptions body, valid or not.
func (r *runner) deleteOptions() map[string]any {
	o := map[string]any{"kind": "DeleteOptions", "apiVersion": "v1"}
	switch r.Rng.IntN(7) {
	case 0:
		o["propagationPolicy"] = pick(r.Rng, []string{"Foreground", "Orphan", "Background", "bogus"})
	case 1:
		o["gracePeriodSeconds"] = pick(r.Rng, []any{0, 10, -5})
	case 2:
		o["preconditions"] = map[string]any{"uid": "00000000-0000-0000-0000-000000000000"}
	case 3:
		o["orphanDependents"] = true
		o["propagationPolicy"] = "Foreground"
	case 4:
		o["dryRun"] = []any{pick(r.Rng, []string{"All", "bogus"})}
	case 5:
		o["kind"] = pick(r.Rng, []string{"Bogus", "ListOptions"})
		o["apiVersion"] = pick(r.Rng, []string{"v1", "meta.k8s.io/v1"})
	}
	return o
}

// patchBody is a random patch of one of the four types, valid or not.
func (r *runner) patchBody(k surfaceKind, name string) (string, []byte) {
	switch r.Rng.IntN(5) {
	case 0:
		return "application/json-patch+json", []byte(pick(r.Rng, []string{
			`[{"op":"add","path":"/metadata/labels","value":{"app":"z"}}]`,
			`[{"op":"replace","path":"/spec","value":{"size":3}}]`,
			`[{"op":"test","path":"/metadata/name","value":"nope"}]`,
			`[{"op":"remove","path":"/metadata/finalizers"}]`,
			`[{"op":"bogus","path":"/x"}]`, `{"op":"add"}`,
		}))
	case 1, 2:
		return "application/merge-patch+json", []byte(pick(r.Rng, []string{
			`{"metadata":{"finalizers":null}}`, `{"metadata":{"labels":{"app":"y"}}}`,
			`{"metadata":{"finalizers":["example.com/keep"]}}`, `{"metadata":{"name":"other"}}`,
			`{"spec":{"replicas":4}}`, `{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`,
			`{"metadata":{"bogus":1}}`, `{"metadata":{"labels":{"bad key!":"v"}}}`, `[]`,
		}))
	case 3:
		return "application/strategic-merge-patch+json", []byte(`{"metadata":{"labels":{"app":"s"}}}`)
	}
	obj := r.surfaceObject(k, name)
	return "application/apply-patch+yaml", encode(obj)
}

// surfaceObject is an object of kind k named name, with one random metadata edge case or none.
func (r *runner) surfaceObject(k surfaceKind, name string) map[string]any {
	md := map[string]any{"name": name}
	switch r.Rng.IntN(20) {
	case 0:
		md["finalizers"] = pick(r.Rng, []any{[]any{"example.com/keep"}, []any{"bad finalizer"}, []any{"kubernetes"},
			[]any{"example.com/keep", "example.com/keep"}, []any{"orphan"}})
	case 1:
		ref := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "11111111-1111-1111-1111-111111111111"}
		md["ownerReferences"] = pick(r.Rng, []any{[]any{ref}, []any{ref, ref}, []any{map[string]any{"kind": "ConfigMap"}},
			[]any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "11111111-1111-1111-1111-111111111111", "controller": true},
				map[string]any{"apiVersion": "v1", "kind": "Secret", "name": "p", "uid": "22222222-2222-2222-2222-222222222222", "controller": true}}})
	case 2:
		md["generateName"] = pick(r.Rng, []string{"g-", "Bad_"})
	case 3:
		md["labels"] = pick(r.Rng, []any{map[string]any{"bad key!": "v"}, map[string]any{"app": strings.Repeat("v", 70)}})
	case 4:
		md["bogus"] = 1
	case 5:
		md["annotations"] = map[string]any{"a": "b"}
	case 6:
		md["namespace"] = "elsewhere"
	case 7:
		md["resourceVersion"] = pick(r.Rng, []string{"1", "x"})
	case 8:
		md["uid"] = "33333333-3333-3333-3333-333333333333"
	}
	obj := map[string]any{"apiVersion": k.apiVersion, "kind": k.kind, "metadata": md}
	switch content := builtinContent[k.apiVersion+" "+k.kind]; {
	case content != nil:
		maps.Copy(obj, content(r))
	case k.kind == "Widget":
		obj["spec"] = map[string]any{"size": r.Rng.IntN(3)}
	default:
		obj["spec"] = r.sprocketSpec()
	}
	if r.Rng.IntN(10) == 0 {
		obj["unknownTop"] = true
	}
	return obj
}

// finalizerLifecycle takes an object of kind k through a deletion a finalizer holds: created with
// the finalizer, deleted with random options (marked for deletion, or not with dryRun), sometimes
// deleted again (already being deleted), its finalizers removed by a random write (which deletes a
// marked object, or is a dryRun), read, and at last its finalizers removed and deleted for good.
func (r *runner) finalizerLifecycle(k surfaceKind) {
	r.T.Helper()
	path := k.collection + "/fz"
	obj := r.surfaceObject(k, "fz")
	md := obj["metadata"].(map[string]any)
	md["finalizers"] = []any{"example.com/keep"}
	delete(md, "namespace")
	r.send("finalizer lifecycle: create", "POST", k.collection, "application/json", encode(obj), "")
	del := pick(r.Rng, []string{"", "?dryRun=All", "?gracePeriodSeconds=0", "?gracePeriodSeconds=30",
		"?propagationPolicy=Foreground", "?propagationPolicy=Orphan"})
	r.send("finalizer lifecycle: delete"+del, "DELETE", path+del, "", nil, "")
	if r.Rng.IntN(2) == 0 {
		r.send("finalizer lifecycle: delete again", "DELETE", path, "", nil, "")
	}
	dry := pick(r.Rng, []string{"", "", "?dryRun=All"})
	switch r.Rng.IntN(4) {
	case 0:
		r.send("finalizer lifecycle: JSON patch removing the finalizers"+dry, "PATCH", path+dry, "application/json-patch+json",
			[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), "")
	case 1:
		delete(md, "finalizers")
		md["resourceVersion"] = currentRV
		r.send("finalizer lifecycle: update without the finalizers"+dry, "PUT", path+dry, "application/json", encode(obj), "")
	case 2:
		r.send("finalizer lifecycle: status patch removing the finalizers"+dry, "PATCH", path+"/status"+dry,
			"application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), "")
	default:
		r.send("finalizer lifecycle: merge patch removing the finalizers"+dry, "PATCH", path+dry, "application/merge-patch+json",
			[]byte(`{"metadata":{"finalizers":null}}`), "")
	}
	r.send("finalizer lifecycle: get", "GET", path, "", nil, "")
	r.send("finalizer lifecycle: cleanup", "PATCH", path, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), "")
	r.send("finalizer lifecycle: cleanup", "DELETE", path, "", nil, "")
}

// transformedWatch sends both servers a watch-list of kind k (the stored objects, then the bookmark
// that ends them) with a random Accept (Table, PartialObjectMetadata, JSON, ones the servers refuse)
// and includeObject, reads each stream up to that bookmark and compares the normalized frames.
func (r *runner) transformedWatch(k surfaceKind) {
	r.T.Helper()
	q := url.Values{"watch": {"true"}, "sendInitialEvents": {"true"}, "allowWatchBookmarks": {"true"},
		"resourceVersionMatch": {"NotOlderThan"}}
	if r.Rng.IntN(3) == 0 {
		q.Set("includeObject", pick(r.Rng, []string{"None", "Object", "Metadata", "bogus"}))
	}
	accept := pick(r.Rng, []string{"application/json;as=Table;v=v1;g=meta.k8s.io", "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
		"application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io", "application/json;as=PartialObjectMetadata;v=v1beta1;g=meta.k8s.io",
		"application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", "application/json", "application/yaml",
		"application/json;as=Table;v=v1;g=meta.k8s.io, application/json"})
	what := fmt.Sprintf("watch-list of %s?%s (Accept %q)", k.collection, q.Encode(), accept)
	var desc [2]string
	for i, s := range r.servers {
		desc[i] = r.watchFrames(s, what, k.collection+"?"+q.Encode(), accept)
	}
	if desc[0] != desc[1] {
		r.Failf("%s: the answers differ (-kube +listwatch):\n%s", what, cmp.Diff(desc[0], desc[1]))
	}
	r.stats.gets++
}

// watchFrames opens the watch at path on s with accept and is its answer as compared: a refusal,
// or the status line and the normalized frames up to the first bookmark.
func (r *runner) watchFrames(s *server, what, path, accept string) string {
	r.T.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, testutil.WaitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", s.base+path, nil)
	if err != nil {
		r.T.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	resp, err := s.c.Do(req)
	if err != nil {
		r.Fatalf("%s: %s: %v", what, s.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		out := response{code: resp.StatusCode, header: resp.Header, raw: raw}
		_ = json.Unmarshal(raw, &out.body)
		return s.describe(out, "")
	}
	b := &strings.Builder{}
	fmt.Fprintf(b, "200 content-type=%q\n", resp.Header.Get("Content-Type"))
	dec := json.NewDecoder(resp.Body)
	var ages []int
	for {
		var frame map[string]any
		if err := dec.Decode(&frame); err != nil {
			fmt.Fprintf(b, "the stream ended: %v\n", err)
			return b.String()
		}
		if table, ok := frame["object"].(map[string]any); ok && table["kind"] == "Table" {
			// Only the first event's Table has column definitions.
			ages = normalAges(table, ages)
		}
		out, _ := json.MarshalIndent(s.normalize(frame, ""), "", "  ")
		b.Write(out)
		if frame["type"] == "BOOKMARK" {
			return b.String()
		}
	}
}

// fixedCases sends both servers, once per seed, requests the random ones reach too rarely to rely
// on (fixedDeletions, fixedRefusals). Each leaves nothing behind.
func (r *runner) fixedCases(k surfaceKind) {
	r.T.Helper()
	path := k.collection + "/fx"
	create := func(md map[string]any) {
		obj := r.surfaceObject(k, "fx")
		obj["metadata"] = md
		md["name"] = "fx"
		r.send("fixed: create", "POST", k.collection, "application/json", encode(obj), "")
	}
	cleanup := func() {
		r.send("fixed: cleanup", "PATCH", path, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), "")
		r.send("fixed: cleanup", "DELETE", path, "", nil, "")
	}
	r.fixedDeletions(path, create, cleanup)
	ref := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "11111111-1111-1111-1111-111111111111"}
	create(map[string]any{"ownerReferences": []any{ref, ref}})
	obj := r.surfaceObject(k, "fx")
	obj["metadata"] = map[string]any{"name": "fx", "resourceVersion": currentRV, "ownerReferences": []any{ref, ref, ref}}
	r.send("fixed: update with duplicate ownerReferences", "PUT", path, "application/json", encode(obj), "")
	r.fixedRefusals(k, path)
	cleanup()
}

// fixedDeletions deletes an object created with a finalizer, or none, with options that change
// its finalizers: marked and kept, or deleted at once after the update is abandoned (with a
// resourceVersion precondition, or as a dryRun).
func (r *runner) fixedDeletions(path string, create func(map[string]any), cleanup func()) {
	r.T.Helper()
	for _, c := range []struct{ finalizer, query, options string }{
		{"orphan", "", `{"propagationPolicy":"Background","preconditions":{"resourceVersion":"` + currentRV + `"}}`},
		{"orphan", "?dryRun=All", `{"propagationPolicy":"Background"}`},
		{"foregroundDeletion", "", `{"orphanDependents":false,"preconditions":{"resourceVersion":"` + currentRV + `"}}`},
		{"", "", `{"orphanDependents":true}`},
		{"", "", `{"propagationPolicy":"Foreground"}`},
		{"example.com/keep", "?propagationPolicy=Orphan", ``},
		{"foregroundDeletion", "", ``},
		{"orphan", "?propagationPolicy=Foreground", ``},
	} {
		md := map[string]any{}
		if c.finalizer != "" {
			md["finalizers"] = []any{c.finalizer}
		}
		create(md)
		r.send("fixed: delete"+c.query+" "+c.options, "DELETE", path+c.query, "application/json", []byte(c.options), "")
		r.send("fixed: get", "GET", path, "", nil, "")
		cleanup()
	}
}

// fixedRefusals sends requests about the object at path that both servers refuse or read without
// effect: the export option, oversized bodies, deletecollections the list, a worker or the body
// refuses, DeleteOptions of another kind.
func (r *runner) fixedRefusals(k surfaceKind, path string) {
	r.T.Helper()
	for _, q := range []string{"?export=true", "?export=false", "?export=x"} {
		r.send("fixed: get"+q, "GET", path+q, "", nil, "")
	}
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		p, ctype := path, "application/json"
		if m == "POST" {
			p = k.collection
		}
		if m == "PATCH" {
			ctype = "application/merge-patch+json"
		}
		r.send("fixed: "+m+" of an oversized body", m, p, ctype, []byte(oversized), "")
	}
	for _, q := range []string{"?fieldSelector=spec.size%3D1", "?resourceVersionMatch=bogus", "?propagationPolicy=bogus"} {
		r.send("fixed: deletecollection"+q, "DELETE", k.collection+q, "", nil, "")
	}
	r.send("fixed: deletecollection with a uid precondition", "DELETE", k.collection, "application/json",
		[]byte(`{"preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}`), "")
	listOptions := []byte(`{"kind":"ListOptions","apiVersion":"meta.k8s.io/v1"}`)
	r.send("fixed: delete with ListOptions", "DELETE", path, "application/json", listOptions, "")
	r.send("fixed: deletecollection with ListOptions", "DELETE", k.collection, "application/json", listOptions, "")
}
