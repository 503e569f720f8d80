package httpdiff

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"sigs.k8s.io/yaml"

	"github.com/listwatch/listwatch/chain"
	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/diffrun"
	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
	"github.com/listwatch/listwatch/proptest/kubemodel"
	"github.com/listwatch/listwatch/store"
)

// server is one of the two servers and what the test knows of it: its own resourceVersions, the
// names it generated, and the model of its writes in its own resourceVersions.
type server struct {
	name string
	base string
	st   *store.Store
	c    *http.Client
	h    *kubemodel.History
	// writes are the resourceVersions of the test's writes on this server, in order: the same
	// write has the same index on both servers.
	writes []int64
	// gen maps the names this server generated (generateName) to the test's names for them.
	gen map[string]string
	// deviations, if set, removes from an answer's body what differs by a known deviation
	// before it is compared (builtin_test.go).
	deviations func(body map[string]any)
}

const (
	group        = "example.com"
	version      = "v1"
	resourcePath = "/apis/" + group + "/" + version
)

// startServers starts the real apiextensions-apiserver over a listwatch store's etcd API and
// listwatch's chain, both serving widgets.example.com/v1 and the extra CRDs (listwatch's resources
// made of them by httpwatch.CRDResources, one per served version).
func startServers(t *testing.T, extra ...*apiextensionsv1.CustomResourceDefinition) [2]*server {
	t.Helper()
	resources := []httpwatch.Resource{httpwatch.Widgets()}
	for _, crd := range extra {
		data, err := json.Marshal(crd)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := httpwatch.CRDResources(data)
		if err != nil {
			t.Fatal(err)
		}
		resources = append(resources, rs...)
	}
	endpoints, kst := kubeapiserver.ListwatchEtcd(t)
	kube := kubeapiserver.StartT(t, kubeapiserver.Options{EtcdEndpoints: endpoints,
		CRDs: append([]*apiextensionsv1.CustomResourceDefinition{kubeapiserver.WidgetsCRD()}, extra...), DisableOpenAPI: true})
	ch, err := chain.New(context.Background(), chain.Config{Resources: resources, Logger: testutil.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CloseAtCleanup(t, "closing the chain", ch.Close)
	var out [2]*server
	for i, s := range []struct {
		name, base string
		st         *store.Store
	}{{"kube", kube.URL(), kst}, {"listwatch", ch.URL(), ch.Store()}} {
		tr := &http.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		out[i] = &server{name: s.name, base: s.base, st: s.st, c: &http.Client{Transport: tr}, gen: map[string]string{}}
	}
	return out
}

// newRunner starts both servers (serving the extra CRDs too) and the runner of one seed, with its
// own random stream; the test's cleanup stops them.
func newRunner(t *testing.T, seed, stream uint64, extra ...*apiextensionsv1.CustomResourceDefinition) *runner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &runner{ctx: ctx, servers: startServers(t, extra...)}
	r.Runner = diffrun.New[watchReq](t, seed, stream, r)
	t.Cleanup(r.StopAll)
	return r
}

// warmUp creates the object body names ("warmup") in collection on each server and deletes it,
// then starts each server's model: the apiserver sleeps 2 s in the first create after a CRD is
// Established (crdHandler serveResource), and one write before the test's keeps that sleep out of
// its requests.
func (r *runner) warmUp(collection string, body []byte) {
	r.T.Helper()
	for _, s := range r.servers {
		for _, req := range []struct{ method, path string }{{"POST", collection}, {"DELETE", collection + "/warmup"}} {
			b := body
			if req.method == "DELETE" {
				b = nil
			}
			resp, err := s.do(r.ctx, req.method, req.path, "application/json", b)
			if err != nil || resp.code >= 300 {
				r.T.Fatalf("%s: warm-up %s: %v %d %s", s.name, req.method, err, resp.code, resp.raw)
			}
		}
		s.h = kubemodel.NewHistory(s.st.Rev())
	}
}

// response is an answer as the test compares it.
type response struct {
	code   int
	header http.Header
	body   map[string]any
	raw    []byte
}

func (s *server) do(ctx context.Context, method, path, contentType string, body []byte) (response, error) {
	return s.doHeader(ctx, method, path, contentType, body, nil)
}

// doHeader is do with more request headers (Accept).
func (s *server) doHeader(ctx context.Context, method, path, contentType string, body []byte, header http.Header) (response, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := s.c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	r := response{code: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) == 0 {
		return r, nil
	}
	ctype := resp.Header.Get("Content-Type")
	switch {
	case strings.Contains(ctype, "yaml"):
		if raw, err = yaml.YAMLToJSON(raw); err != nil {
			return r, fmt.Errorf("%s %s: %d with a body that is not YAML: %q", method, path, resp.StatusCode, r.raw)
		}
	case strings.Contains(ctype, "protobuf"):
		if raw, err = protobufToJSON(raw); err != nil {
			return r, fmt.Errorf("%s %s: %d with a protobuf body that does not decode: %v", method, path, resp.StatusCode, err)
		}
	case !strings.Contains(ctype, "json"):
		return r, nil
	}
	if err := json.Unmarshal(raw, &r.body); err != nil {
		return r, fmt.Errorf("%s %s: %d with a body that is not JSON: %q", method, path, resp.StatusCode, raw)
	}
	return r, nil
}

// pos is where rv falls in the test's writes on this server: the number of them at or below it. A
// server's resourceVersions are its own; their places among the writes are what both share.
func (s *server) pos(rv int64) int {
	return sort.Search(len(s.writes), func(i int) bool { return s.writes[i] > rv })
}

// rvName is a resourceVersion as the test compares it: the write that made it ("w3"), else its
// place among the writes ("@3").
func (s *server) rvName(v string) string {
	rv, err := strconv.ParseInt(v, 10, 64)
	if err != nil || rv <= 0 {
		return v
	}
	p := s.pos(rv)
	if p > 0 && s.writes[p-1] == rv {
		return "w" + strconv.Itoa(p)
	}
	return "@" + strconv.Itoa(p)
}

var (
	uidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	// rvPattern finds the resourceVersions in the apiserver's messages: "resource version: N",
	// "current: N", "(N)" (too old resource version, preconditions), "ResourceVersion in ...: N",
	// "revision=N" (an object that did not decode).
	mediaTypesPattern = regexp.MustCompile(`(accepted media types include: ).*`)
	// storageKeyPattern finds a storage key in a StorageError: a deviation listwatch keeps (doc.go).
	storageKeyPattern = regexp.MustCompile(`(Key: )\S*?([a-z0-9-]+/[a-z0-9-]+/[a-z0-9.-]+,)`)
	rvPattern         = regexp.MustCompile(`(?i)(version: |current: |version in [a-z ]+: |revision=|\()(\d+)\b`)
)

// normalMessage is a Status message with what is the server's own replaced: uids, generated names,
// and resourceVersions (by their place, or as the one the request asked for).
func (s *server) normalMessage(msg, asked string) string {
	msg = uidPattern.ReplaceAllString(msg, "<uid>")
	// A deviation listwatch keeps (doc.go): the 415 is compared without its list of media types.
	msg = mediaTypesPattern.ReplaceAllString(msg, "${1}<media types>")
	msg = storageKeyPattern.ReplaceAllString(msg, "${1}<prefix>/${2}")
	for real, name := range s.gen {
		msg = strings.ReplaceAll(msg, real, name)
	}
	msg = s.normalQuotedObject(msg)
	return rvPattern.ReplaceAllStringFunc(msg, func(m string) string {
		sub := rvPattern.FindStringSubmatch(m)
		if sub[2] == asked {
			return sub[1] + "<asked>"
		}
		return sub[1] + s.rvName(sub[2])
	})
}

// normalize rewrites a response body in place into what both servers must agree on: without uids,
// timestamps and managedFields (field-manager bookkeeping of server-side apply, which listwatch
// does not keep), with generated names, resourceVersions and continue tokens by the test's names,
// and the answer's own resourceVersion, if it is the one the request asked for, as <asked>.
func (s *server) normalize(v any, asked string) any {
	switch x := v.(type) {
	case map[string]any:
		if kind, _ := x["kind"].(string); kind == "Table" {
			normalAges(x, nil)
		}
		if kind, _ := x["kind"].(string); kind == "Status" {
			if m, ok := x["message"].(string); ok {
				x["message"] = s.normalMessage(m, asked)
			}
			if d, ok := x["details"].(map[string]any); ok {
				delete(d, "uid")
				if n, ok := d["name"].(string); ok {
					d["name"] = s.genName(n)
				}
				if cs, ok := d["causes"].([]any); ok {
					for _, c := range cs {
						if cm, ok := c.(map[string]any); ok {
							if m, ok := cm["message"].(string); ok {
								cm["message"] = s.normalMessage(m, asked)
							}
						}
					}
				}
			}
		}
		if md, ok := x["metadata"].(map[string]any); ok {
			delete(md, "uid")
			delete(md, "creationTimestamp")
			if _, ok := md["deletionTimestamp"]; ok {
				md["deletionTimestamp"] = "<time>"
			}
			if mf, ok := md["managedFields"].([]any); ok {
				for _, e := range mf {
					if m, ok := e.(map[string]any); ok {
						delete(m, "time")
					}
				}
				sortManagedFields(mf)
			}
			if rv, ok := md["resourceVersion"].(string); ok && asked != "" && rv == asked {
				md["resourceVersion"] = "<asked>"
			} else if ok {
				md["resourceVersion"] = s.rvName(rv)
			}
			if n, ok := md["name"].(string); ok {
				md["name"] = s.genName(n)
			}
			if c, ok := md["continue"].(string); ok && c != "" {
				md["continue"] = s.normalContinue(c)
			}
		}
		// Only the answer's own resourceVersion repeats the one asked for: a list's items are
		// compared by their place, whatever number they have.
		for k, e := range x {
			x[k] = s.normalize(e, "")
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = s.normalize(e, "")
		}
		return x
	}
	return v
}

func (s *server) genName(n string) string {
	if g, ok := s.gen[n]; ok {
		return g
	}
	return n
}

// continueToken is a continue token decoded: base64url JSON of the version, resourceVersion and
// start key.
type continueToken struct {
	V     string `json:"v"`
	RV    int64  `json:"rv"`
	Start string `json:"start"`
}

func decodeContinue(token string) (continueToken, error) {
	var c continueToken
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return c, fmt.Errorf("undecodable continue token %s", token)
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("undecodable continue token %s", data)
	}
	return c, nil
}

// normalContinue is a continue token decoded with its resourceVersion by place.
func (s *server) normalContinue(token string) string {
	c, err := decodeContinue(token)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("continue{v=%s rv=%s start=%q}", c.V, s.rvName(strconv.FormatInt(c.RV, 10)), s.genStart(c.Start))
}

// askedRV is the resourceVersion a request names itself: its continue token's, else its body's
// metadata.resourceVersion; "" for none. An answer that repeats it (a list continued at that
// revision, a dry-run create's object) carries the same number on both servers, whatever place
// it has among each server's writes: it is compared as the one asked for.
func askedRV(path string, body []byte) string {
	if u, err := url.Parse(path); err == nil {
		if c, err := decodeContinue(u.Query().Get("continue")); err == nil && c.RV > 0 {
			return strconv.FormatInt(c.RV, 10)
		}
	}
	var obj struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(body, &obj); err != nil {
		return ""
	}
	return obj.Metadata.ResourceVersion
}

// genStart is a continue token's start key (the page's last key relative to the listed one, then
// "\x00") with a generated name in its last segment replaced by the test's name for it.
func (s *server) genStart(start string) string {
	key, zero := strings.CutSuffix(start, "\x00")
	dir, name := "", key
	if i := strings.LastIndex(key, "/"); i >= 0 {
		dir, name = key[:i+1], key[i+1:]
	}
	if !zero {
		return start
	}
	return dir + s.genName(name) + "\x00"
}

// describe is a normalized response, for comparison and diffs: status code, the headers that carry
// meaning (Content-Type, Retry-After, Warning) and the body.
func (s *server) describe(r response, asked string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d content-type=%q retry-after=%q warning=%q\n", r.code, r.header.Get("Content-Type"),
		r.header.Get("Retry-After"), r.header.Values("Warning"))
	if r.body == nil {
		fmt.Fprintf(&b, "%s", r.raw)
		return b.String()
	}
	body := runtime.DeepCopyJSONValue(r.body).(map[string]any)
	if s.deviations != nil {
		s.deviations(body)
	}
	out, err := json.MarshalIndent(s.normalize(body, asked), "", "  ")
	if err != nil {
		return b.String() + err.Error()
	}
	b.Write(out)
	return b.String()
}

// objectOf is an object a write returned, as the server's model holds it.
func objectOf(key string, body map[string]any) (*kubemodel.Object, error) {
	return kubemodel.FromUnstructured(key, &unstructured.Unstructured{Object: body}, nil)
}

// metaScheme knows the types a protobuf answer may hold: the meta.k8s.io ones (Status, Table,
// PartialObjectMetadata and its list), the built-in kinds and autoscaling/v1 Scale
// (TestHTTPDifferentialBuiltIn).
var metaScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{metav1.AddMetaToScheme, corev1.AddToScheme, appsv1.AddToScheme, autoscalingv1.AddToScheme, eventsv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// protobufToJSON decodes a protobuf answer into the JSON the test compares, its kind named.
func protobufToJSON(raw []byte) ([]byte, error) {
	obj, gvk, err := protobuf.NewSerializer(metaScheme, metaScheme).Decode(raw, nil, nil)
	if err != nil {
		return nil, err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u["apiVersion"], u["kind"] = gvk.GroupVersion().String(), gvk.Kind
	return json.Marshal(u)
}

// normalAges replaces the cells of a Table's date columns and of a built-in printer's Age (a string
// column), each an age: the time since a timestamp each server set on its own, read a moment
// apart, with "<age>", and returns those columns: the table's own, or cols for a table without
// column definitions (a watch's events after the first). Only a timestamp or a duration is
// replaced: a cell without one ("<unknown>" for no creationTimestamp, null) is compared as it is.
func normalAges(table map[string]any, cols []int) []int {
	if defs, ok := table["columnDefinitions"].([]any); ok {
		cols = nil
		for i, d := range defs {
			if dm, ok := d.(map[string]any); ok && (dm["type"] == "date" || dm["type"] == "string" && dm["name"] == "Age") {
				cols = append(cols, i)
			}
		}
	}
	rows, _ := table["rows"].([]any)
	for _, row := range rows {
		cells, _ := row.(map[string]any)["cells"].([]any)
		for _, c := range cols {
			if c < len(cells) {
				if v, ok := cells[c].(string); ok && ageCell.MatchString(v) {
					cells[c] = "<age>"
				}
			}
		}
	}
	return cols
}

// ageCell is an age as a Table shows it: a timestamp (a date column's RFC 3339) or a duration as
// duration.HumanDuration prints it (a built-in printer's Age: "5s", "3m2s", "4d").
var ageCell = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T|^[0-9]+[smhdy]`)

// TestAskedResourceVersion: a list continued from a token's revision, or a dry-run create that
// repeats its body's resourceVersion, answers that same number on both servers, at whatever place
// it is among each server's writes (kube-apiserver's compared store empty at revision 1, where
// listwatch's chain has written up to 6): it compares as the one asked for, where by place it
// would be "w1" against "@0".
func TestAskedResourceVersion(t *testing.T) {
	kube, lw := &server{writes: []int64{1, 2}}, &server{writes: []int64{6, 7}}
	answer := func(kind string) response {
		return response{code: 200, header: http.Header{}, body: map[string]any{"kind": kind,
			"metadata": map[string]any{"resourceVersion": "1"}}}
	}
	continued := "/apis/apps/v1/namespaces/a/deployments?continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJ3MFx1MDAwMCJ9"
	for _, c := range []struct {
		what, path, body, kind string
	}{
		{"a list continued at revision 1", continued, "", "DeploymentList"},
		{"a dry-run create of a YAML body with resourceVersion 1", "/apis/apps/v1/namespaces/a/deployments?dryRun=All",
			"metadata:\n  name: d0\n  resourceVersion: \"1\"\n", "Deployment"},
	} {
		asked := askedRV(c.path, []byte(c.body))
		if asked != "1" {
			t.Errorf("%s: asked %q", c.what, asked)
		}
		if k, l := kube.describe(answer(c.kind), asked), lw.describe(answer(c.kind), asked); k != l {
			t.Errorf("%s: %s against %s", c.what, k, l)
		}
	}
	if k, l := kube.describe(answer("DeploymentList"), ""), lw.describe(answer("DeploymentList"), ""); k == l {
		t.Errorf("revision 1 by place: %s on both", k)
	}
	// An item of the continued list is compared by its place, though its number is the one asked for.
	withItem := func() response {
		a := answer("DeploymentList")
		a.body["items"] = []any{map[string]any{"metadata": map[string]any{"resourceVersion": "1"}}}
		return a
	}
	if k, l := kube.describe(withItem(), "1"), lw.describe(withItem(), "1"); k == l || strings.Count(k, "asked") != 1 {
		t.Errorf("an item at the asked revision: %s against %s, want it by place", k, l)
	}
}

// TestNormalAges: the ages of a Table compare as "<age>", what is no age as it is (a BOOKMARK row's
// "<unknown>", a null date, another string column).
func TestNormalAges(t *testing.T) {
	table := map[string]any{
		"columnDefinitions": []any{
			map[string]any{"name": "Name", "type": "string"},
			map[string]any{"name": "Age", "type": "string"},
			map[string]any{"name": "Created", "type": "date"},
		},
		"rows": []any{
			map[string]any{"cells": []any{"a", "5s", "2026-12-04T22:00:00Z"}},
			map[string]any{"cells": []any{"3m2s", "<unknown>", nil}},
		},
	}
	if cols := normalAges(table, nil); !reflect.DeepEqual(cols, []int{1, 2}) {
		t.Errorf("columns = %v, want [1 2]", cols)
	}
	want := []any{
		map[string]any{"cells": []any{"a", "<age>", "<age>"}},
		map[string]any{"cells": []any{"3m2s", "<unknown>", nil}},
	}
	if diff := cmp.Diff(want, table["rows"]); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
}
