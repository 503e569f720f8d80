package httpdiff

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/seeds"
)

// Custom resources with a schema: the same requests to the real apiextensions-apiserver and to
// listwatch, for a CRD whose schema prunes (unknown fields in the spec, the metadata and an
// embedded resource's metadata), defaults, validates (OpenAPI constraints, an enum, a set, an
// int-or-string, an embedded resource, a CEL rule) and has printer columns, one with a JSONPath
// filter. Bodies are sent with each fieldValidation; lists and objects are read back as JSON,
// Tables (each includeObject) and PartialObjectMetadataList.

const sprocketsPath = "/apis/example.net/v1/namespaces/a/sprockets"

// sprocketsCRD is httpwatch's testdata/sprockets.yaml, the CRD of sprockets.example.net/v1.
func sprocketsCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile("../../httpwatch/testdata/sprockets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// TestHTTPDifferentialSchema runs, for each seed, random writes and reads of sprockets against
// both servers and requires the same answers, normalized as TestHTTPDifferential's.
func TestHTTPDifferentialSchema(t *testing.T) {
	seeds.Run(t, seeds.Config{SeedsVar: "LISTWATCH_HTTPDIFF_SCHEMA_SEEDS", Seeds: "1-2",
		CountVar: "LISTWATCH_HTTPDIFF_SCHEMA_OPS", Count: 80, Unit: "requests",
		ShortSeeds: "1", ShortCount: 40}, runSchemaSeed)
}

func runSchemaSeed(t *testing.T, seed uint64, ops int) stats {
	r := newRunner(t, seed, 0x2545f4914f6cdd1d, sprocketsCRD(t))
	r.warmUp("/apis/example.net/v1/namespaces/warmup/sprockets",
		encode(map[string]any{"apiVersion": "example.net/v1", "kind": "Sprocket", "metadata": map[string]any{"name": "warmup"}}))
	r.Play(ops, func() {
		switch n := r.Rng.IntN(100); {
		case n < 35:
			r.sprocketCreate()
		case n < 55:
			r.sprocketPatch()
		case n < 65:
			r.sprocketStatus()
		case n < 75:
			r.sprocketApply()
		case n < 92:
			r.sprocketRead()
		default:
			r.sprocketWrite("delete", "DELETE", pick(r.Rng, sprocketNames), nil, nil, "")
		}
	})
	r.stats.Tally = r.Tally
	t.Logf("seed %d: %s", seed, r.stats)
	return r.stats
}

// TestAwaitCaches: once awaitCaches has waited for a deletion, a status patch of the deleted sprocket
// with fieldValidation Warn and an unknown field gets, from both servers, the answer of a cache that
// has seen the deletion: 404 and no warning (on a cache's stale copy the first try applies the patch
// and its warning stays). Failure mode: a collection the servers do not serve (404, as a version
// not served) ends the wait at once, with no failure: there is no cache to wait for.
func TestAwaitCaches(t *testing.T) {
	r := newRunner(t, 1, 0, sprocketsCRD(t))
	r.warmUp("/apis/example.net/v1/namespaces/warmup/sprockets",
		encode(map[string]any{"apiVersion": "example.net/v1", "kind": "Sprocket", "metadata": map[string]any{"name": "warmup"}}))
	sprocket := encode(map[string]any{"apiVersion": "example.net/v1", "kind": "Sprocket", "metadata": map[string]any{"name": "s0"}})
	patch := encode(map[string]any{"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "unknown": "x"}}}})
	for round := range 5 {
		for _, s := range r.servers {
			s.mustDo(t, "POST", sprocketsPath, sprocket, 201)
			s.mustDo(t, "DELETE", sprocketsPath+"/s0", nil, 200)
		}
		r.awaitCaches(sprocketsPath)
		for _, s := range r.servers {
			resp, err := s.do(r.ctx, "PATCH", sprocketsPath+"/s0/status?fieldValidation=Warn", "application/merge-patch+json", patch)
			if err != nil {
				t.Fatal(err)
			}
			if w := resp.header.Values("Warning"); resp.code != 404 || len(w) > 0 {
				t.Errorf("round %d: %s: status patch of the deleted s0: %d, warnings %q, want 404 and none: %s", round, s.name, resp.code, w, resp.raw)
			}
		}
	}
	rec := testutil.Record(t, func(tb testing.TB) {
		r.Runner.T = tb
		r.awaitCaches("/apis/example.net/v1/namespaces/a/bogus")
	})
	r.Runner.T = t
	if msg := rec.FatalMessage(); msg != "" {
		t.Errorf("waiting on a collection not served (404, no cache to wait for): %q, want no failure", msg)
	}
}

// mustDo sends the server a JSON request and fails t unless it answers code.
func (s *server) mustDo(t *testing.T, method, path string, body []byte, code int) {
	t.Helper()
	if resp, err := s.do(context.Background(), method, path, "application/json", body); err != nil || resp.code != code {
		t.Fatalf("%s: %s %s: %v %d %s", s.name, method, path, err, resp.code, resp.raw)
	}
}

// TestCollectionOf: an API path's collection, namespaced or not, whatever follows it.
func TestCollectionOf(t *testing.T) {
	for path, want := range map[string]string{
		sprocketsPath + "/s0/status?fieldValidation=Warn": sprocketsPath,
		sprocketsPath + "?dryRun=All":                     sprocketsPath,
		"/apis/example.org/v1/valves/v0/scale":            "/apis/example.org/v1/valves",
		"/apis/example.org/v1/valves":                     "/apis/example.org/v1/valves",
		"/apis/example.com/v1/namespaces/a/widgets/w0":    "/apis/example.com/v1/namespaces/a/widgets",
		"/api/v1/namespaces/a/events/e0?dryRun=All":       "/api/v1/namespaces/a/events",
		"/api/v1/namespaces/a/configmaps":                 "/api/v1/namespaces/a/configmaps",
		"/api/v1/nodes/n0/status":                         "/api/v1/nodes",
		"/api/v1/namespaces/a":                            "/api/v1/namespaces",
		"/api/v1/namespaces/a/status":                     "/api/v1/namespaces",
		"/api/v1/namespaces/a/finalize":                   "/api/v1/namespaces",
		"/apis/example.com/v1/namespaces/a/widgets":       "/apis/example.com/v1/namespaces/a/widgets",
	} {
		if got := collectionOf(path); got != want {
			t.Errorf("collectionOf(%q) = %q, want %q", path, got, want)
		}
	}
}

var (
	sprocketNames    = []string{"s0", "s1", "s2"}
	fieldValidations = []string{"", "Strict", "Warn", "Ignore"}
)

// sprocketSpec is a random spec: each field absent or valid, and then one problem or none: an
// invalid field or unknown fields (the apiserver reports several OpenAPI errors, and several
// errors of an applied configuration, in the random order of a map's iteration).
func (r *runner) sprocketSpec() map[string]any {
	spec := map[string]any{}
	choose := func(field string, values ...any) {
		if r.Rng.IntN(2) == 0 {
			spec[field] = pick(r.Rng, values)
		}
	}
	choose("replicas", 0, 3, 10)
	choose("minReplicas", 0, 2)
	choose("mode", "fast", "slow", nil)
	choose("port", 80, "http")
	choose("tags", []any{"a", "b"}, []any{})
	choose("template", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}, "data": map[string]any{"k": "v"}})
	switch r.Rng.IntN(6) {
	case 0, 1:
		bad := pick(r.Rng, []struct {
			field string
			value any
		}{
			{"replicas", 11}, {"replicas", -1}, {"replicas", "three"}, {"minReplicas", 5}, {"mode", "medium"}, {"port", true},
			{"tags", []any{"a", "a"}}, {"template", map[string]any{"metadata": map[string]any{"name": "x"}}},
			{"template", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "Not_A_Name"}}},
		})
		spec[bad.field] = bad.value
	case 2:
		spec["extra"] = pick(r.Rng, []any{1, map[string]any{"deep": true}})
	case 3:
		spec["template"] = map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "junk": 1}}
	}
	return spec
}

// sprocketWrite sends both servers the same write with a random fieldValidation, compares the
// answers and records an accepted write's resourceVersion. A write of an object waits for both
// caches to have seen the writes before it (awaitCaches).
func (r *runner) sprocketWrite(what, method, name string, query url.Values, body []byte, contentType string) {
	r.T.Helper()
	path := sprocketsPath
	if method != "POST" {
		path += "/" + name
	}
	if name == "status" {
		path = sprocketsPath + "/" + pick(r.Rng, sprocketNames) + "/status"
	}
	if query == nil {
		query = url.Values{}
	}
	if fv := pick(r.Rng, fieldValidations); fv != "" && method != "DELETE" {
		query.Set("fieldValidation", fv)
	}
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	if method != "POST" {
		r.awaitCaches(sprocketsPath)
	}
	resp := r.call(what+" "+method+" "+path+" "+string(body), method, same(path), func(*server) []byte { return body }, contentType, nil)
	if resp[0].code >= 300 {
		r.stats.badWrites++
		return
	}
	r.stats.writes++
	for i, s := range r.servers {
		rv := s.st.Rev()
		if md, ok := resp[i].body["metadata"].(map[string]any); ok && method != "DELETE" {
			v, _ := md["resourceVersion"].(string)
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				rv = n
			}
		}
		if n := len(s.writes); n == 0 || s.writes[n-1] < rv {
			s.writes = append(s.writes, rv)
		}
	}
}

func (r *runner) sprocketCreate() {
	md := map[string]any{"name": pick(r.Rng, sprocketNames)}
	if r.Rng.IntN(4) == 0 {
		md["bogus"] = "x"
	}
	body := encode(map[string]any{"apiVersion": "example.net/v1", "kind": "Sprocket", "metadata": md, "spec": r.sprocketSpec()})
	r.sprocketWrite("create", "POST", "", nil, body, "application/json")
}

func (r *runner) sprocketPatch() {
	body := encode(map[string]any{"spec": r.sprocketSpec()})
	r.sprocketWrite("merge patch", "PATCH", pick(r.Rng, sprocketNames), nil, body, "application/merge-patch+json")
}

// sprocketApply applies a random spec, sometimes forced. One manager applies: the apiserver lists
// the conflicts with several managers in the random order of a map's iteration.
func (r *runner) sprocketApply() {
	name := pick(r.Rng, sprocketNames)
	body := encode(map[string]any{"apiVersion": "example.net/v1", "kind": "Sprocket",
		"metadata": map[string]any{"name": name}, "spec": r.sprocketSpec()})
	query := url.Values{"fieldManager": {"applier"}}
	if r.Rng.IntN(3) == 0 {
		query.Set("force", "true")
	}
	r.sprocketWrite("apply", "PATCH", name, query, body, "application/apply-patch+yaml")
}

func (r *runner) sprocketStatus() {
	conds := []any{map[string]any{"type": "Other", "status": "False"}}
	switch r.Rng.IntN(3) {
	case 0:
		conds = append(conds, map[string]any{"type": "Ready", "status": pick(r.Rng, []string{"True", "False"})})
	case 1:
		conds = append(conds, map[string]any{"type": 1, "unknown": "x"})
	}
	body := encode(map[string]any{"status": map[string]any{"conditions": conds}})
	r.sprocketWrite("status merge patch", "PATCH", "status", nil, body, "application/merge-patch+json")
}

// sprocketRead reads the sprockets, or one, as JSON, a Table (with an includeObject) or a
// PartialObjectMetadataList.
func (r *runner) sprocketRead() {
	r.T.Helper()
	path := sprocketsPath
	if r.Rng.IntN(3) == 0 {
		path += "/" + pick(r.Rng, sprocketNames)
	}
	var accept string
	switch r.Rng.IntN(4) {
	case 0:
		accept = "application/json"
	case 1:
		accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
	default:
		accept = "application/json;as=Table;g=meta.k8s.io;v=v1"
		if io := pick(r.Rng, []string{"", "None", "Object", "Metadata"}); io != "" {
			path += "?includeObject=" + url.QueryEscape(io)
		}
	}
	what := "read " + path + " as " + accept
	var desc [2]string
	for i, s := range r.servers {
		resp, err := s.doHeader(r.ctx, "GET", path, "", nil, http.Header{"Accept": {accept}})
		if err != nil {
			r.Fatalf("%s: %s: %v", what, s.name, err)
		}
		desc[i] = s.describe(resp, "")
	}
	if desc[0] != desc[1] {
		r.Failf("%s: the answers differ (-kube +listwatch):\n%s", what, cmp.Diff(desc[0], desc[1]))
	}
	r.stats.gets++
}

var (
	// quotedRVPattern and quotedTimePattern find a resourceVersion and the times in an object quoted
	// in a message (a 422 on a patch quotes the patched object).
	quotedRVPattern   = regexp.MustCompile(`(\\"resourceVersion\\":\\")(\d+)`)
	quotedTimePattern = regexp.MustCompile(`(\\"(?:time|creationTimestamp)\\":\\")[^\\]*`)
)

// normalQuotedObject is msg with the resourceVersion of an object quoted in it by its place, and
// its times as <time>.
func (s *server) normalQuotedObject(msg string) string {
	msg = sortQuotedManagedFields(msg)
	msg = quotedTimePattern.ReplaceAllString(msg, "${1}<time>")
	return quotedRVPattern.ReplaceAllStringFunc(msg, func(m string) string {
		sub := quotedRVPattern.FindStringSubmatch(m)
		return sub[1] + s.rvName(sub[2])
	})
}

// sortQuotedManagedFields is msg with the managedFields of each object quoted in it (a Go-quoted JSON
// object, as field.Invalid quotes a patched object) ordered by sortManagedFields: their order depends
// on their times, which are each server's own.
func sortQuotedManagedFields(msg string) string {
	var out strings.Builder
	for {
		i := strings.Index(msg, `"{`)
		if i < 0 {
			break
		}
		quoted, err := strconv.QuotedPrefix(msg[i:])
		if err != nil {
			out.WriteString(msg[:i+2])
			msg = msg[i+2:]
			continue
		}
		out.WriteString(msg[:i])
		out.WriteString(sortedQuoted(quoted))
		msg = msg[i+len(quoted):]
	}
	out.WriteString(msg)
	return out.String()
}

// sortedQuoted is a Go-quoted JSON object with its metadata.managedFields sorted, quoted again; any
// other quoted string as it is.
func sortedQuoted(quoted string) string {
	text, err := strconv.Unquote(quoted)
	if err != nil {
		return quoted
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var obj map[string]any
	if dec.Decode(&obj) != nil || dec.More() {
		return quoted
	}
	md, _ := obj["metadata"].(map[string]any)
	mf, ok := md["managedFields"].([]any)
	if !ok {
		return quoted
	}
	sortManagedFields(mf)
	sorted, err := json.Marshal(obj)
	if err != nil {
		return quoted
	}
	return strconv.Quote(string(sorted))
}

// sortManagedFields orders managedFields entries whose times are gone. The apiserver orders them by
// operation, time (in seconds), manager, apiVersion and subresource; two writes a second apart on
// one server and within a second on the other are ordered differently, so without their times they
// are compared in the order of the rest.
func sortManagedFields(mf []any) {
	keyOf := func(e any) string {
		m, _ := e.(map[string]any)
		return fmt.Sprint(m["operation"], "\x00", m["manager"], "\x00", m["apiVersion"], "\x00", m["subresource"])
	}
	sort.SliceStable(mf, func(i, j int) bool { return keyOf(mf[i]) < keyOf(mf[j]) })
}

// TestSortQuotedManagedFields: a message quoting an object whose managedFields two servers ordered
// by their own times is normalized alike; one whose entries differ is not.
func TestSortQuotedManagedFields(t *testing.T) {
	quote := func(entries ...string) string {
		obj := `{"kind":"Sprocket","metadata":{"managedFields":[` + strings.Join(entries, ",") + `],"name":"s2"}}`
		return `Sprocket.example.net "s2" is invalid: patch: Invalid value: ` + strconv.Quote(obj) + `: unknown field "spec.extra"`
	}
	spec := `{"manager":"m","operation":"Update","time":"2026-12-04T12:00:01Z"}`
	status := `{"manager":"m","operation":"Update","subresource":"status","time":"2026-12-04T12:00:00Z"}`
	other := `{"manager":"n","operation":"Update","time":"2026-12-04T12:00:01Z"}`
	s := &server{}
	if a, b := s.normalQuotedObject(quote(spec, status)), s.normalQuotedObject(quote(status, spec)); a != b {
		t.Errorf("the same entries in another order normalize differently:\n%s\n%s", a, b)
	}
	if a, b := s.normalQuotedObject(quote(spec, status)), s.normalQuotedObject(quote(other, status)); a == b {
		t.Errorf("different entries normalize alike: %s", a)
	}
	if got, want := sortQuotedManagedFields(`a "{not json" b "{\"x\":1}" c`), `a "{not json" b "{\"x\":1}" c`; got != want {
		t.Errorf("quoted strings without managedFields: got %s, want %s", got, want)
	}
}
