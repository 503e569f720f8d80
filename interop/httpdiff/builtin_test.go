package httpdiff

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/listwatch/listwatch/chain"
	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/diffrun"
	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
	"github.com/listwatch/listwatch/interop/internal/kubebin"
	"github.com/listwatch/listwatch/interop/internal/seeds"
)

// The built-in kinds: the surface test's random requests (surface_test.go: every method on a
// collection, an object, its status and unknown subresources, every Content-Type and Accept, valid
// and invalid options, every patch type, hostile bodies, metadata edge cases, finalizer
// lifecycles, watch-lists as Table and PartialObjectMetadata, fixed deletions and refusals) sent
// to built-in kinds, with a real kube-apiserver v1.37 (the binary `make kube-apiserver` builds,
// interop/internal/kubebin) over listwatch's etcd API as upstream and listwatch's chain serving
// httpwatch.BuiltInResources as the other side. Without the binary the test skips, saying how to
// build it.

// builtinKindsVar names the built-in kinds TestHTTPDifferentialBuiltIn sends requests to
// (comma-separated keys of builtinKinds); default defaultBuiltinKinds.
const builtinKindsVar = "LISTWATCH_HTTPDIFF_BUILTIN_KINDS"

// defaultBuiltinKinds are the kinds whose answers listwatch gives as kube-apiserver does: the
// others differ by the defaulting and validation of their types, which listwatch does not mirror
// (README, "Built-in kinds against kube-apiserver").
const defaultBuiltinKinds = "configmaps"

// builtinKind is a built-in kind of the differential: its surface kind (collection in namespace
// a), the --etcd-servers-overrides key that keeps it in the compared store, its content (the
// fields besides apiVersion, kind and metadata) a request's object gets, and the objects of the
// kind kube-apiserver writes once at start (paths), which the test waits for: written after its
// requests began, they would move the compared store's revision between them.
type builtinKind struct {
	surfaceKind
	override string
	content  func(r *runner) map[string]any
	startup  []string
	// scale says the kind has the scale subresource.
	scale bool
}

var builtinKinds = map[string]builtinKind{
	"configmaps": {surfaceKind{"v1", "ConfigMap", "/api/v1/namespaces/a/configmaps", []string{"c0", "c1"}}, "/configmaps", configMapContent,
		// The legacy service-account token tracking's (a post-start controller). The authentication
		// information for extension servers is written only with a client CA, which the flags give
		// none.
		[]string{"/api/v1/namespaces/kube-system/configmaps/kube-apiserver-legacy-service-account-token-tracking"}, false},
	"secrets": {surfaceKind{"v1", "Secret", "/api/v1/namespaces/a/secrets", []string{"s0", "s1"}}, "/secrets", secretContent, nil, false},
	"pods":    {surfaceKind{"v1", "Pod", "/api/v1/namespaces/a/pods", []string{"p0", "p1"}}, "/pods", podContent, nil, false},
	"services": {surfaceKind{"v1", "Service", "/api/v1/namespaces/a/services", []string{"v0", "v1"}}, "/services", serviceContent,
		[]string{"/api/v1/namespaces/default/services/kubernetes"}, false},
	"deployments": {surfaceKind{"apps/v1", "Deployment", "/apis/apps/v1/namespaces/a/deployments", []string{"d0", "d1"}},
		"apps/deployments", deploymentContent, nil, true},
	// The two versions of events: one resource kept at /registry/events, so the same names written
	// at either version are read and written at the other.
	"events": {surfaceKind{"v1", "Event", "/api/v1/namespaces/a/events", []string{"e0", "e1"}}, "/events", coreEventContent, nil, false},
	"eventsv1": {surfaceKind{"events.k8s.io/v1", "Event", "/apis/events.k8s.io/v1/namespaces/a/events", []string{"e0", "e1"}},
		"/events", eventsV1Content, nil, false},
}

// builtinContent is the content of a built-in kind's objects by apiVersion and kind, for
// surfaceObject.
var builtinContent = func() map[string]func(*runner) map[string]any {
	m := map[string]func(*runner) map[string]any{}
	for _, k := range builtinKinds {
		m[k.apiVersion+" "+k.kind] = k.content
	}
	return m
}()

// TestHTTPDifferentialBuiltIn runs, for each seed, random requests across the API's surface to the
// built-in kinds of LISTWATCH_HTTPDIFF_BUILTIN_KINDS against kube-apiserver and listwatch's chain,
// and requires the same answers and the same stored objects.
func TestHTTPDifferentialBuiltIn(t *testing.T) {
	kinds, err := builtinKindsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubebin.Path(); err != nil {
		t.Skip(err)
	}
	seeds.Run(t, seeds.Config{SeedsVar: "LISTWATCH_HTTPDIFF_BUILTIN_SEEDS", Seeds: "1-2",
		CountVar: "LISTWATCH_HTTPDIFF_BUILTIN_OPS", Count: 200, Unit: "requests",
		ShortSeeds: "1", ShortCount: 60}, func(t *testing.T, seed uint64, ops int) stats {
		return runBuiltinSeed(t, seed, ops, kinds)
	})
}

func builtinKindsFromEnv() ([]builtinKind, error) {
	names := os.Getenv(builtinKindsVar)
	if names == "" {
		names = defaultBuiltinKinds
	}
	var out []builtinKind
	for n := range strings.SplitSeq(names, ",") {
		k, ok := builtinKinds[n]
		if !ok {
			return nil, fmt.Errorf("%s=%q: unknown kind %q", builtinKindsVar, names, n)
		}
		out = append(out, k)
	}
	return out, nil
}

// maxBuiltinFails is how many differences a seed reports before it stops, as diffrun's Play.
const maxBuiltinFails = 20

func runBuiltinSeed(t *testing.T, seed uint64, ops int, kinds []builtinKind) stats {
	r := &runner{ctx: t.Context(), servers: startBuiltinServers(t, kinds)}
	r.Runner = diffrun.New[watchReq](t, seed, 0xd1b54a32d192ed03, r)
	surface := make([]surfaceKind, len(kinds))
	for i, k := range kinds {
		surface[i] = k.surfaceKind
		r.fixedCases(k.surfaceKind)
		r.fixedTypedApply(k.surfaceKind)
		if k.scale {
			r.fixedScale(k.surfaceKind)
		}
	}
	for range ops {
		k := pick(r.Rng, surface)
		r.surfaceRequestTo(k)
		switch n := r.Rng.IntN(30); {
		case n == 0:
			r.finalizerLifecycle(k)
		case n < 3:
			r.transformedWatch(k)
		case n < 8:
			r.compareStoredOf(surface)
		}
		if r.Fails > maxBuiltinFails {
			r.Fatalf("stopping after %d differences", r.Fails)
		}
	}
	r.compareStoredOf(surface)
	r.stats.Tally = r.Tally
	t.Logf("seed %d: %s", seed, r.stats)
	return r.stats
}

// fixedTypedApply applies, to a new object and to an existing one, a value the field manager's
// schema takes (a string) that the kind's Go type does not (a timestamp that is no time).
func (r *runner) fixedTypedApply(k surfaceKind) {
	r.T.Helper()
	path := k.collection + "/ft?fieldManager=m"
	obj := r.surfaceObject(k, "ft")
	delete(obj, "unknownTop") // the field manager's schema refuses it first
	obj["metadata"] = map[string]any{"name": "ft", "creationTimestamp": "x"}
	r.send("fixed: apply of a value the Go type refuses, creating", "PATCH", path, "application/apply-patch+yaml", encode(obj), "")
	obj["metadata"] = map[string]any{"name": "ft"}
	r.send("fixed: apply, creating", "PATCH", path, "application/apply-patch+yaml", encode(obj), "")
	obj["metadata"] = map[string]any{"name": "ft", "creationTimestamp": "x"}
	r.send("fixed: apply of a value the Go type refuses, updating", "PATCH", path, "application/apply-patch+yaml", encode(obj), "")
	r.send("fixed: cleanup", "DELETE", k.collection+"/ft", "", nil, "")
}

// fixedScale reads and writes the scale subresource of an object: GETs in each format, PUTs and
// every patch type that succeed, and the refusals (negative replicas, a stale resourceVersion, another
// UID, a body of another kind, a missing object, a method it does not serve).
func (r *runner) fixedScale(k surfaceKind) {
	r.T.Helper()
	path := k.collection + "/fs"
	scale := path + "/scale"
	obj := r.surfaceObject(k, "fs")
	obj["metadata"] = map[string]any{"name": "fs"}
	r.send("fixed scale: create", "POST", k.collection, "application/json", encode(obj), "")
	for _, accept := range []string{"", "application/yaml", "application/vnd.kubernetes.protobuf", "application/json;as=Table;v=v1;g=meta.k8s.io"} {
		r.send("fixed scale: get "+accept, "GET", scale, "", nil, accept)
	}
	body := func(replicas int, md map[string]any) []byte {
		md["name"] = "fs"
		return encode(map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": md, "spec": map[string]any{"replicas": replicas}})
	}
	r.send("fixed scale: put", "PUT", scale, "application/json", body(3, map[string]any{}), "")
	r.send("fixed scale: put with resourceVersion", "PUT", scale, "application/json", body(4, map[string]any{"resourceVersion": currentRV}), "")
	r.send("fixed scale: put negative", "PUT", scale, "application/json", body(-1, map[string]any{}), "")
	r.send("fixed scale: put stale", "PUT", scale, "application/json", body(5, map[string]any{"resourceVersion": "1"}), "")
	r.send("fixed scale: put other uid", "PUT", scale, "application/json", body(5, map[string]any{"uid": "11111111-1111-1111-1111-111111111111"}), "")
	r.send("fixed scale: put invalid label", "PUT", scale, "application/json", body(5, map[string]any{"labels": map[string]any{"a b": "c"}}), "")
	r.send("fixed scale: put a deployment", "PUT", scale, "application/json", encode(obj), "")
	r.send("fixed scale: put missing", "PUT", k.collection+"/nx/scale", "application/json", body(1, map[string]any{}), "")
	for _, c := range []struct{ ctype, patch string }{
		{"application/merge-patch+json", `{"spec":{"replicas":6}}`},
		{"application/json-patch+json", `[{"op":"replace","path":"/spec/replicas","value":7}]`},
		{"application/strategic-merge-patch+json", `{"spec":{"replicas":8}}`},
		{"application/merge-patch+json", `{"spec":{"replicas":-2}}`},
		{"application/merge-patch+json", `{"metadata":{"uid":"11111111-1111-1111-1111-111111111111"}}`},
		{"application/merge-patch+json", `{"spec":{"replicas":"x"}}`},
		{"application/apply-patch+yaml", `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"fs"},"spec":{"replicas":9}}`},
	} {
		r.send("fixed scale: patch "+c.ctype, "PATCH", scale+"?fieldManager=m", c.ctype, []byte(c.patch), "")
	}
	r.send("fixed scale: forced apply", "PATCH", scale+"?fieldManager=m&force=true", "application/apply-patch+yaml",
		[]byte(`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"fs"},"spec":{"replicas":9}}`), "")
	r.send("fixed scale: apply conflict", "PATCH", scale+"?fieldManager=n", "application/apply-patch+yaml",
		[]byte(`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"fs"},"spec":{"replicas":2}}`), "")
	r.send("fixed scale: patch missing", "PATCH", k.collection+"/nx/scale", "application/merge-patch+json", []byte(`{"spec":{"replicas":1}}`), "")
	r.send("fixed scale: get missing", "GET", k.collection+"/nx/scale", "", nil, "")
	r.send("fixed scale: delete", "DELETE", scale, "", nil, "")
	r.send("fixed scale: post", "POST", scale, "application/json", body(1, map[string]any{}), "")
	r.send("fixed scale: get object", "GET", path, "", nil, "")
	r.send("fixed scale: cleanup", "DELETE", path, "", nil, "")
}

// compareStoredOf lists kinds on both servers and compares the lists.
func (r *runner) compareStoredOf(kinds []surfaceKind) {
	r.T.Helper()
	for _, k := range kinds {
		r.call("stored "+k.kind+"s", "GET", same(k.collection), nil, "", nil)
	}
	r.stats.lists++
}

// startBuiltinServers starts kube-apiserver over two listwatch stores (the kinds in the second,
// which only the test's requests write, everything else in the first) and listwatch's chain
// serving the built-in resources with kube-apiserver's system namespaces, and creates namespace a
// on both.
func startBuiltinServers(t *testing.T, kinds []builtinKind) [2]*server {
	t.Helper()
	main, _ := kubeapiserver.ListwatchEtcd(t)
	compared, kst := kubeapiserver.ListwatchEtcd(t)
	overrides := map[string][]string{}
	for _, k := range kinds {
		overrides[k.override] = compared
	}
	// No compaction: it writes compact_rev_key in the compared store every interval.
	kube := kubebin.StartT(t, kubebin.Options{EtcdServers: main, Overrides: overrides, Flags: []string{"--etcd-compaction-interval=0"}})
	ch, err := chain.New(context.Background(), chain.Config{Resources: httpwatch.BuiltInResources(), SystemNamespaces: true,
		Logger: testutil.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CloseAtCleanup(t, "closing the chain", ch.Close)
	kc, ktr := kube.HTTPClient()
	t.Cleanup(ktr.CloseIdleConnections)
	ltr := &http.Transport{}
	t.Cleanup(ltr.CloseIdleConnections)
	out := [2]*server{
		{name: "kube", base: kube.URL(), st: kst, c: kc, gen: map[string]string{}, deviations: uniqueCauses},
		{name: "listwatch", base: ch.URL(), st: ch.Store(), c: &http.Client{Transport: ltr}, gen: map[string]string{}, deviations: uniqueCauses},
	}
	prepareBuiltinServers(t, out, kinds)
	return out
}

// prepareBuiltinServers creates namespace a on both servers and waits for the objects of kinds
// kube-apiserver writes at start.
func prepareBuiltinServers(t *testing.T, out [2]*server, kinds []builtinKind) {
	t.Helper()
	for _, s := range out {
		resp, err := s.do(t.Context(), "POST", "/api/v1/namespaces", "application/json",
			[]byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}`))
		if err != nil || resp.code != 201 {
			t.Fatalf("%s: creating namespace a: %v %d %s", s.name, err, resp.code, resp.raw)
		}
	}
	for _, k := range kinds {
		for _, path := range k.startup {
			testutil.WaitFor(t, "kube-apiserver's "+path, func() bool {
				resp, err := out[0].do(t.Context(), "GET", path, "", nil)
				return err == nil && resp.code == 200
			})
		}
	}
}

// uniqueCauses drops the repeats of a Status's causes: a known deviation (README). On an update,
// kube-apiserver's declarative validation reports an invalid label or owner reference of a
// configmap once where the handwritten checks it covers, which listwatch mirrors, report it twice.
func uniqueCauses(body map[string]any) {
	details, _ := body["details"].(map[string]any)
	causes, _ := details["causes"].([]any)
	if body["kind"] != "Status" || len(causes) < 2 {
		return
	}
	var unique []any
	for _, c := range causes {
		if !slices.ContainsFunc(unique, func(u any) bool { return reflect.DeepEqual(u, c) }) {
			unique = append(unique, c)
		}
	}
	details["causes"] = unique
}

// configMapContent is a ConfigMap's data: keys and values, sometimes binaryData or immutable.
func configMapContent(r *runner) map[string]any {
	out := map[string]any{"data": map[string]any{"k": pick(r.Rng, []string{"0", "1", "2"})}}
	switch r.Rng.IntN(6) {
	case 0:
		out["binaryData"] = map[string]any{"b": "aGVsbG8="}
	case 1:
		out["data"] = map[string]any{"k": "v", "other.key_1-x": "w"}
	}
	return out
}

// secretContent is a Secret's data (base64) or stringData, sometimes its type.
func secretContent(r *runner) map[string]any {
	out := map[string]any{"data": map[string]any{"k": pick(r.Rng, []string{"MA==", "MQ=="})}}
	switch r.Rng.IntN(6) {
	case 0:
		out["stringData"] = map[string]any{"s": "plain"}
	case 1:
		out["type"] = "Opaque"
	}
	return out
}

// podContent is a Pod's spec: one container.
func podContent(r *runner) map[string]any {
	return map[string]any{"spec": map[string]any{"containers": []any{
		map[string]any{"name": "c", "image": pick(r.Rng, []string{"busybox", "busybox:1"})},
	}}}
}

// serviceContent is a Service's spec: one port.
func serviceContent(r *runner) map[string]any {
	return map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": 80 + r.Rng.IntN(2)}}}}
}

// deploymentContent is a Deployment's spec: replicas, a selector and a pod template that matches
// it.
func deploymentContent(r *runner) map[string]any {
	labels := map[string]any{"app": "d"}
	return map[string]any{"spec": map[string]any{
		"replicas": r.Rng.IntN(3),
		"selector": map[string]any{"matchLabels": labels},
		"template": map[string]any{"metadata": map[string]any{"labels": labels},
			"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}},
	}}
}

// coreEventContent is a core/v1 event: about a pod, sometimes with the fields of a new-style event
// (eventTime, then the reporting fields the legacy validation requires) or an old one's count.
func coreEventContent(r *runner) map[string]any {
	out := map[string]any{"involvedObject": map[string]any{"kind": "Pod", "name": "p", "namespace": "a"},
		"reason": pick(r.Rng, []string{"Started", "Pulled"}), "message": "m", "type": "Normal"}
	switch r.Rng.IntN(4) {
	case 0:
		out["eventTime"] = "2026-01-02T03:04:00.000001Z"
		out["reportingComponent"], out["reportingInstance"], out["action"] = "kubelet", "n1", "Start"
	case 1:
		out["eventTime"] = "2026-01-02T03:04:00.000001Z"
	case 2:
		out["count"], out["firstTimestamp"], out["source"] = 2, "2026-01-02T03:00:05Z", map[string]any{"component": "kubelet"}
	}
	return out
}

// eventsV1Content is an events.k8s.io/v1 event: valid, or missing eventTime or
// reportingController, or with deprecated fields or a short series.
func eventsV1Content(r *runner) map[string]any {
	out := map[string]any{"regarding": map[string]any{"kind": "Pod", "name": "p", "namespace": "a"},
		"reason": "Pulled", "note": pick(r.Rng, []string{"n0", "n1"}), "type": "Normal", "eventTime": "2026-01-02T03:04:00.000001Z",
		"reportingController": "kubelet", "reportingInstance": "n1", "action": "Pull"}
	switch r.Rng.IntN(6) {
	case 0:
		delete(out, "eventTime")
	case 1:
		delete(out, "reportingController")
	case 2:
		out["deprecatedCount"] = 2
	case 3:
		out["series"] = map[string]any{"count": r.Rng.IntN(3), "lastObservedTime": "2026-01-02T03:05:00.000000Z"}
	}
	return out
}
