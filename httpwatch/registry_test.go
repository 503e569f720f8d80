package httpwatch

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

const widgetPath = "/apis/example.com/v1/namespaces/default/widgets"

// stored returns the etcd value at key, or nil.
func (e *env) stored(key string) map[string]any {
	e.t.Helper()
	resp, err := e.st.Range(&store.RangeRequest{Key: []byte(key)})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
		e.t.Fatalf("value at %s: %v", key, err)
	}
	return m
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestCreate(t *testing.T) {
	e := newEnv(t)
	rv := strconv.FormatInt(e.st.Rev(), 10)
	w := e.watch(cmPath + "?watch=true&resourceVersion=" + rv)

	// System fields in the request are replaced.
	a := e.mustCreate(cmPath, cmJSON("", "a", `"uid":"mine","creationTimestamp":"2000-01-01T00:00:00Z"`))
	if !uuidPattern.MatchString(string(a.GetUID())) || a.GetCreationTimestamp().Time.Unix() != e.clock.Now().Unix() ||
		a.GetResourceVersion() != strconv.FormatInt(e.st.Rev(), 10) || a.GetNamespace() != "default" {
		t.Errorf("created object metadata %v", a.Object["metadata"])
	}
	v := e.stored("/registry/configmaps/default/a")
	if v == nil || v["kind"] != "ConfigMap" || v["metadata"].(map[string]any)["resourceVersion"] != nil {
		t.Errorf("stored value %v: want the object without resourceVersion at /registry/configmaps/default/a", v)
	}
	w.expect("ADDED a")

	// A built-in body may leave out apiVersion and kind.
	b := e.mustCreate(cmPath, `{"metadata":{"name":"b"}}`)
	if b.GetKind() != "ConfigMap" || b.GetAPIVersion() != "v1" {
		t.Errorf("defaulted type %s %s", b.GetAPIVersion(), b.GetKind())
	}
	// generateName picks a name.
	g := e.mustCreate(cmPath, `{"metadata":{"generateName":"gen-"}}`)
	if !regexp.MustCompile(`^gen-[a-z0-9]{5}$`).MatchString(g.GetName()) {
		t.Errorf("generated name %q", g.GetName())
	}
	// Custom resources start at generation 1; cluster-scoped objects lose a namespace.
	wd := e.mustCreate(widgetPath, widgetJSON("w", ""))
	if wd.GetGeneration() != 1 || e.stored("/registry/widgets/default/w") == nil {
		t.Errorf("widget generation %d", wd.GetGeneration())
	}
	gz := e.mustCreate("/apis/example.com/v1/gizmos", `{"apiVersion":"example.com/v1","kind":"Gizmo","metadata":{"name":"g","namespace":"ns"}}`)
	if gz.GetNamespace() != "" || e.stored("/registry/gizmos/g") == nil {
		t.Errorf("cluster-scoped create: namespace %q", gz.GetNamespace())
	}
	// dryRun=All answers as a create would and stores nothing.
	rev := e.st.Rev()
	r := e.do("POST", cmPath+"?dryRun=All", cmJSON("", "dry", ""))
	if r.code != 201 || r.object(t).GetName() != "dry" {
		t.Errorf("dry-run create: %d %s", r.code, r.body)
	}
	e.unchanged(rev, "a dry-run create")

	huge := newEnv(t, func(c *Config) { c.MaxRequestBodyBytes = 100 })
	r = huge.do("POST", cmPath, cmJSON("", "big", `"labels":{"a":"`+strings.Repeat("x", 200)+`"}`))
	wantStatus(t, r, 413, metav1.StatusReasonRequestEntityTooLarge, "Request entity too large: limit is 100")

	const cmKind = "the object provided is unrecognized (must be of type ConfigMap): "
	cases := []struct {
		name, path, body, contentType string
		code                          int
		reason                        metav1.StatusReason
		message                       string // exact, or a prefix ending in "…"
	}{
		{"exists", cmPath, cmJSON("", "a", ""), "", 409, metav1.StatusReasonAlreadyExists, `configmaps "a" already exists`},
		{"bad JSON", cmPath, `{"kind":`, "", 400, metav1.StatusReasonBadRequest,
			cmKind + `couldn't get version/kind; json parse error: unexpected end of JSON input ({"kind":)`},
		{"not an object", cmPath, `[1]`, "", 400, metav1.StatusReasonBadRequest, cmKind + "couldn't get version/kind; json parse error: json: cannot unmarshal array…"},
		{"custom resource without kind", widgetPath, `{"apiVersion":"example.com/v1","metadata":{"name":"x"}}`, "", 400, metav1.StatusReasonBadRequest,
			`the object provided is unrecognized (must be of type Widget): Object 'Kind' is missing in '{"apiVersion":"example.com/v1","metadata":{"name":"x"}}' ({"apiVersion":"example.com/v1" ...)`},
		{"custom resource without kind, fieldValidation Ignore", widgetPath + "?fieldValidation=Ignore", `{"apiVersion":"example.com/v1","metadata":{"name":"x"}}`, "", 400, metav1.StatusReasonBadRequest,
			`Widget in version "v1" cannot be handled as a Widget: Object 'Kind' is missing in '{"apiVersion":"example.com/v1","metadata":{"name":"x"}}'`},
		{"custom resource as YAML without kind, fieldValidation Ignore", widgetPath + "?fieldValidation=Ignore", "metadata:\n  name: x\n", "application/yaml", 400, metav1.StatusReasonBadRequest,
			`Widget in version "v1" cannot be handled as a Widget: Object 'Kind' is missing in '{"metadata":{"name":"x"}}'`},
		{"custom resource of another kind", widgetPath, `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"x"}}`, "", 422, metav1.StatusReasonInvalid,
			`Gadget.example.com "x" is invalid: kind: Invalid value: "Gadget": must be Widget`},
		{"another API version", widgetPath, `{"apiVersion":"example.com/v2","kind":"Widget","metadata":{"name":"x"}}`, "", 400, metav1.StatusReasonBadRequest,
			"the API version in the data (example.com/v2) does not match the expected API version (example.com/v1)"},
		// A built-in kind's body is decoded as kube-apiserver's codec decodes it (interop/httpdiff's
		// kube-apiserver answers so): another kind of its scheme does not convert, a kind or version
		// it does not have is not registered, another version it has is another API version.
		{"built-in of another kind", cmPath, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}`, "", 400, metav1.StatusReasonBadRequest,
			`Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion`},
		{"built-in of an unknown kind", cmPath, `{"apiVersion":"v1","kind":"Gadget","metadata":{"name":"x"}}`, "", 400, metav1.StatusReasonBadRequest,
			`Gadget in version "v1" cannot be handled as a ConfigMap: no kind "Gadget" is registered for version "v1" in scheme "pkg/runtime/scheme.go:111"`},
		{"built-in of an unknown version", cmPath, `{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"x"}}`, "", 400, metav1.StatusReasonBadRequest,
			`ConfigMap in version "v2" cannot be handled as a ConfigMap: no kind "ConfigMap" is registered for version "v2" in scheme "pkg/runtime/scheme.go:111"`},
		{"built-in of another version", "/apis/apps/v1/namespaces/default/deployments", `{"apiVersion":"apps/v1beta2","kind":"Deployment","metadata":{"name":"x"}}`, "", 400,
			metav1.StatusReasonBadRequest, "the API version in the data (apps/v1beta2) does not match the expected API version (apps/v1)"},
		{"malformed metadata", cmPath, `{"metadata":{"name":"x","labels":"x"}}`, "", 400, metav1.StatusReasonBadRequest,
			`ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal string into Go struct field…`},
		{"invalid name", cmPath, cmJSON("", "Bad_Name", ""), "", 422, metav1.StatusReasonInvalid,
			`ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain…`},
		{"no name", cmPath, `{"metadata":{}}`, "", 422, metav1.StatusReasonInvalid,
			`ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required`},
		{"other namespace", cmPath, cmJSON("other", "x", ""), "", 400, metav1.StatusReasonBadRequest,
			"the namespace of the provided object does not match the namespace sent on the request"},
		{"resourceVersion set", cmPath, cmJSON("", "x", `"resourceVersion":"5"`), "", 500, "",
			"resourceVersion should not be set on objects to be created"},
		{"not JSON", cmPath, cmJSON("", "x", ""), "text/plain", 415, metav1.StatusReasonUnsupportedMediaType,
			"the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf"},
		{"bad dryRun", cmPath + "?dryRun=Some", cmJSON("", "x", ""), "", 422, metav1.StatusReasonInvalid,
			`CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Some"]: supported values: "All"`},
		{"cluster-wide path", "/api/v1/configmaps", cmJSON("", "x", ""), "", 405, metav1.StatusReasonMethodNotAllowed,
			"the server does not allow this method on the requested resource"},
	}
	for _, c := range cases {
		rev := e.st.Rev()
		var headers []string
		if c.contentType != "" {
			headers = []string{"Content-Type", c.contentType}
		}
		r := e.do("POST", c.path, c.body, headers...)
		checkStatus(t, c.name, r, c.code, c.reason, c.message)
		e.unchanged(rev, c.name)
	}

	// A name that is taken by an object being deleted says so.
	e.mustCreate(cmPath, cmJSON("", "f", `"finalizers":["example.com/hold"]`))
	if r := e.do("DELETE", cmPath+"/f", ""); r.code != 200 {
		t.Fatalf("delete with finalizer: %d %s", r.code, r.body)
	}
	r = e.do("POST", cmPath, cmJSON("", "f", ""))
	checkStatus(t, "being deleted", r, 409, metav1.StatusReasonAlreadyExists, `object is being deleted: configmaps "f" already exists`)
}

// checkStatus is wantStatus with "…" ending a message prefix.
func checkStatus(t *testing.T, name string, r response, code int, reason metav1.StatusReason, message string) {
	t.Helper()
	if prefix, ok := strings.CutSuffix(message, "…"); ok {
		wantStatus(t, r, code, reason, "")
		if r.code == code {
			if m := r.status(t).Message; !strings.HasPrefix(m, prefix) {
				t.Errorf("%s: message %q, want prefix %q", name, m, prefix)
			}
		}
		return
	}
	if r.code != code {
		t.Errorf("%s: HTTP %d, want %d: %s", name, r.code, code, r.body)
		return
	}
	wantStatus(t, r, code, reason, message)
}

func TestUpdate(t *testing.T) {
	e := newEnv(t)
	a := e.mustCreate(cmPath, cmJSON("", "a", ""))
	w := e.watch(cmPath + "?watch=true&resourceVersion=" + a.GetResourceVersion())

	r := e.do("PUT", cmPath+"/a", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"`+a.GetResourceVersion()+`"},"data":{"k":"v2"}}`)
	if r.code != 200 {
		t.Fatalf("update: %d %s", r.code, r.body)
	}
	u := r.object(t)
	if u.GetUID() != a.GetUID() || !u.GetCreationTimestamp().Time.Equal(a.GetCreationTimestamp().Time) || u.GetResourceVersion() == a.GetResourceVersion() {
		t.Errorf("update kept uid %q (want %q), creationTimestamp %v, resourceVersion %s", u.GetUID(), a.GetUID(), u.GetCreationTimestamp(), u.GetResourceVersion())
	}
	w.expect("MODIFIED a")
	// Built-ins allow an unconditional update.
	if r := e.do("PUT", cmPath+"/a", cmJSON("", "a", "")); r.code != 200 {
		t.Errorf("unconditional update: %d %s", r.code, r.body)
	}
	w.expect("MODIFIED a")
	// dryRun=All answers with the result and writes nothing.
	rev := e.st.Rev()
	r = e.do("PUT", cmPath+"/a?dryRun=All", `{"metadata":{"name":"a"},"data":{"k":"dry"}}`)
	if r.code != 200 || r.object(t).Object["data"].(map[string]any)["k"] != "dry" {
		t.Errorf("dry-run update: %d %s", r.code, r.body)
	}
	e.unchanged(rev, "a dry-run update")

	// Custom resources: no unconditional update; a change outside metadata is a new generation.
	wd := e.mustCreate(widgetPath, widgetJSON("w", ""))
	r = e.do("PUT", widgetPath+"/w", widgetJSON("w", `"resourceVersion":"`+wd.GetResourceVersion()+`","labels":{"x":"y"}`))
	if r.code != 200 || r.object(t).GetGeneration() != 1 {
		t.Errorf("metadata-only update: %d generation %d", r.code, r.object(t).GetGeneration())
	}
	wd = r.object(t)
	r = e.do("PUT", widgetPath+"/w", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","resourceVersion":"`+wd.GetResourceVersion()+`"},"spec":{"size":2}}`)
	if r.code != 200 || r.object(t).GetGeneration() != 2 {
		t.Errorf("spec update: %d generation %d", r.code, r.object(t).GetGeneration())
	}

	cur := e.do("GET", cmPath+"/a", "").object(t)
	curW := e.do("GET", widgetPath+"/w", "").object(t)
	cases := []struct {
		name, path, body string
		code             int
		reason           metav1.StatusReason
		message          string
	}{
		{"stale resourceVersion", cmPath + "/a", cmJSON("", "a", `"resourceVersion":"`+a.GetResourceVersion()+`"`), 409, metav1.StatusReasonConflict,
			`Operation cannot be fulfilled on configmaps "a": the object has been modified; please apply your changes to the latest version and try again`},
		{"no resourceVersion on a custom resource", widgetPath + "/w", widgetJSON("w", ""), 422, metav1.StatusReasonInvalid,
			`widgets.example.com "w" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update`},
		{"missing", cmPath + "/zz", cmJSON("", "zz", ""), 404, metav1.StatusReasonNotFound, `configmaps "zz" not found`},
		{"name mismatch", cmPath + "/a", cmJSON("", "b", ""), 400, metav1.StatusReasonBadRequest,
			"the name of the object (b) does not match the name on the URL (a)"},
		{"no name", cmPath + "/a", `{"metadata":{}}`, 400, metav1.StatusReasonBadRequest,
			"the name of the object (a based on URL) was undeterminable: name must be provided"},
		{"other namespace", cmPath + "/a", cmJSON("other", "a", ""), 400, metav1.StatusReasonBadRequest,
			"the namespace of the provided object does not match the namespace sent on the request"},
		{"other uid", cmPath + "/a", cmJSON("", "a", `"uid":"not-it"`), 409, metav1.StatusReasonConflict,
			`Operation cannot be fulfilled on configmaps "a": StorageError: invalid object, Code: 4, Key: /registry/configmaps/default/a, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: not-it, UID in object meta: ` + string(cur.GetUID())},
		{"unparsable resourceVersion", cmPath + "/a", cmJSON("", "a", `"resourceVersion":"abc"`), 500, "",
			`strconv.ParseUint: parsing "abc": invalid syntax`},
		{"bad JSON", cmPath + "/a", `{`, 400, metav1.StatusReasonBadRequest,
			`the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: unexpected end of JSON input ({)`},
		{"wrong kind", widgetPath + "/w", `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"w","resourceVersion":"` + curW.GetResourceVersion() + `"}}`, 422, metav1.StatusReasonInvalid,
			`Gadget.example.com "w" is invalid: kind: Invalid value: "Gadget": must be Widget`},
		{"post to an item", cmPath + "/a", "", 405, metav1.StatusReasonMethodNotAllowed, ""},
	}
	for _, c := range cases {
		rev := e.st.Rev()
		method := "PUT"
		if c.name == "post to an item" {
			method = "POST"
		}
		r := e.do(method, c.path, c.body)
		checkStatus(t, c.name, r, c.code, c.reason, c.message)
		e.unchanged(rev, c.name)
	}
	// The refused updates left the object as it was.
	if got := e.do("GET", cmPath+"/a", "").object(t); got.GetResourceVersion() != cur.GetResourceVersion() {
		t.Errorf("object changed from %s to %s", cur.GetResourceVersion(), got.GetResourceVersion())
	}
}

func TestDelete(t *testing.T) {
	e := newEnv(t)
	a := e.mustCreate(cmPath, cmJSON("", "a", ""))
	w := e.watch(cmPath + "?watch=true&resourceVersion=" + a.GetResourceVersion())

	rev := e.st.Rev()
	cases := []struct {
		name, path, body string
		code             int
		reason           metav1.StatusReason
		message          string
	}{
		{"missing", cmPath + "/zz", "", 404, metav1.StatusReasonNotFound, `configmaps "zz" not found`},
		{"stale resourceVersion", cmPath + "/a", `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"resourceVersion":"1"}}`, 409, metav1.StatusReasonConflict,
			`Operation cannot be fulfilled on ConfigMap "a": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (` + a.GetResourceVersion() + `). The object might have been modified`},
		{"other uid", cmPath + "/a", `{"preconditions":{"uid":"x"}}`, 409, metav1.StatusReasonConflict,
			`Operation cannot be fulfilled on ConfigMap "a": the UID in the precondition (x) does not match the UID in record (` + string(a.GetUID()) + `). The object might have been deleted and then recreated`},
		{"not DeleteOptions", cmPath + "/a", `{"kind":"Pod","apiVersion":"v1"}`, 400, metav1.StatusReasonBadRequest, `no kind "Pod" is registered for version "v1"…`},
		{"bad body", cmPath + "/a", `{`, 400, metav1.StatusReasonBadRequest, ""},
		{"bad propagationPolicy", cmPath + "/a?propagationPolicy=Sometimes", "", 422, metav1.StatusReasonInvalid,
			`DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sometimes": supported values: "Foreground", "Background", "Orphan", "nil"`},
		{"unsafe delete", cmPath + "/a?ignoreStoreReadErrorWithClusterBreakingPotential=true", "", 500, metav1.StatusReasonInternalError,
			"Internal error occurred: no authorizer provided, unable to authorize unsafe delete"},
		{"cluster-wide collection", "/api/v1/configmaps", "", 405, metav1.StatusReasonMethodNotAllowed, ""},
	}
	for _, c := range cases {
		r := e.do("DELETE", c.path, c.body)
		checkStatus(t, c.name, r, c.code, c.reason, c.message)
		e.unchanged(rev, c.name)
	}
	r := e.do("DELETE", cmPath+"/a?dryRun=All", "")
	if r.code != 200 {
		t.Errorf("dry-run delete: %d %s", r.code, r.body)
	}
	e.unchanged(rev, "a dry-run delete")

	// client-go's dynamic client sends v1 DeleteOptions with preconditions.
	r = e.do("DELETE", cmPath+"/a", `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"resourceVersion":"`+a.GetResourceVersion()+`"}}`, "Content-Type", "application/json")
	if r.code != 200 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	// A Success Status naming the resource in details.kind, without a code, as upstream.
	const want = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","details":{"name":"a","kind":"configmaps","uid":"`
	if !strings.HasPrefix(string(r.body), want+string(a.GetUID())+`"}}`) {
		t.Errorf("delete answered %s", r.body)
	}
	w.expect("DELETED a")
	if e.stored("/registry/configmaps/default/a") != nil {
		t.Error("still stored after delete")
	}

	// Pods answer with the deleted object.
	e.mustCreate("/api/v1/namespaces/default/pods", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}`)
	r = e.do("DELETE", "/api/v1/namespaces/default/pods/p", "")
	if r.code != 200 || r.object(t).GetKind() != "Pod" {
		t.Errorf("pod delete: %d %s", r.code, r.body)
	}

	// Finalizers: DELETE only marks the object; the update that removes the last one deletes it.
	f := e.mustCreate(cmPath, cmJSON("", "f", `"finalizers":["example.com/hold"]`))
	r = e.do("DELETE", cmPath+"/f", "")
	marked := r.object(t)
	if r.code != 200 || marked.GetDeletionTimestamp() == nil || *marked.GetDeletionGracePeriodSeconds() != 0 {
		t.Fatalf("delete with finalizer: %d %s", r.code, r.body)
	}
	w.expect("ADDED f", "MODIFIED f")
	if r := e.do("GET", cmPath+"/f", ""); r.code != 200 {
		t.Errorf("object with a finalizer gone after DELETE: %d", r.code)
	}
	// Deleting again changes nothing.
	rev = e.st.Rev()
	if r := e.do("DELETE", cmPath+"/f", ""); r.code != 200 {
		t.Errorf("second delete: %d %s", r.code, r.body)
	}
	e.unchanged(rev, "a second delete of an object being deleted")
	r = e.do("PUT", cmPath+"/f", cmJSON("", "f", `"resourceVersion":"`+marked.GetResourceVersion()+`"`))
	if r.code != 200 {
		t.Fatalf("removing the finalizer: %d %s", r.code, r.body)
	}
	w.expect("DELETED f")
	if r := e.do("GET", cmPath+"/f", ""); r.code != http.StatusNotFound {
		t.Errorf("object still there after its finalizers went: %d", r.code)
	}
	_ = f
}

func TestGet(t *testing.T) {
	e := newEnv(t)
	a := e.mustCreate(cmPath, cmJSON("", "a", ""))
	r := e.do("GET", cmPath+"/a", "")
	if r.code != 200 || r.object(t).GetUID() != a.GetUID() || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("get: %d %v %s", r.code, r.header, r.body)
	}
	// curl gets indented JSON, as the apiserver pretty-prints for it.
	if r := e.do("GET", cmPath+"/a", "", "User-Agent", "curl/8.0"); !strings.Contains(string(r.body), "\n  \"apiVersion\": \"v1\"") {
		t.Errorf("no pretty print for curl: %s", r.body)
	}
	// resourceVersion 0 is served from the watch cache without waiting for it to catch up
	// (cacher.go Get), so the new object may be missing at first: 404 until the cache has it.
	testutil.WaitFor(t, "get at resourceVersion 0 to find the object", func() bool {
		r := e.do("GET", cmPath+"/a?resourceVersion=0", "")
		if r.code != 200 && r.code != 404 {
			t.Fatalf("get at resourceVersion 0: %d %s", r.code, r.body)
		}
		return r.code == 200
	})
	rev := e.st.Rev()
	for _, c := range []struct {
		name, path string
		code       int
		reason     metav1.StatusReason
		message    string
	}{
		{"missing", cmPath + "/zz", 404, metav1.StatusReasonNotFound, `configmaps "zz" not found`},
		{"export", cmPath + "/a?export=true", 400, metav1.StatusReasonBadRequest, "the export parameter, deprecated since v1.14, is no longer supported"},
		{"future resourceVersion", cmPath + "/a?resourceVersion=999", 504, metav1.StatusReasonTimeout, "Timeout: Too large resource version: 999, current: " + strconv.FormatInt(rev, 10)},
		{"dot name", cmPath + "/..", 400, metav1.StatusReasonBadRequest, `Name parameter invalid: "..": may not be '..'`},
		{"not found widget", widgetPath + "/none", 404, metav1.StatusReasonNotFound, `widgets.example.com "none" not found`},
	} {
		r := e.do("GET", c.path, "")
		checkStatus(t, c.name, r, c.code, c.reason, c.message)
	}
	e.unchanged(rev, "gets")
}

// TestPodsIndexedByNodeName: pods are served as the kube-apiserver serves them
// (k8s.io/kubernetes pkg/registry/core/pod/storage/storage.go and strategy.go): the watch cache's
// trigger is spec.nodeName (NodeNameTriggerFunc; chain TestCacheConfigIndexesPodsByNodeName checks the
// cache's index), and the predicate of every pod list and watch
// names it in IndexFields (MatchPod), so a kubelet's watch (fieldSelector spec.nodeName=X) is
// indexed by its node and offered only that node's pods, with the channel size of a trigger watcher.
// Other resources have neither. Failure mode: pods without the trigger, whose kubelet watches are
// offered every pod of the cluster.
func TestPodsIndexedByNodeName(t *testing.T) {
	if got := Pods().TriggerField; got != "spec.nodeName" {
		t.Fatalf("Pods().TriggerField = %q, want spec.nodeName", got)
	}
	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "default"}, "spec": map[string]any{"nodeName": "n1"}}}
	if got := Pods().TriggerValue(pod); got != "n1" {
		t.Errorf("trigger value of a pod on n1: %q", got)
	}
	if got := ConfigMaps().TriggerField; got != "" {
		t.Errorf("ConfigMaps().TriggerField = %q, want none", got)
	}

	e := newEnv(t)
	rv := "&resourceVersion=" + strconv.FormatInt(e.st.Rev(), 10)
	w := e.watch("/api/v1/pods?watch=true&fieldSelector=spec.nodeName%3Dn1" + rv)
	if got := e.spies["pods"].nthWatch(t, 1).opts.Predicate.IndexFields; !slices.Equal(got, []string{"spec.nodeName"}) {
		t.Errorf("IndexFields of a kubelet's pod watch: %v", got)
	}
	w.close()
	e.do("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1", "")
	e.spies["pods"].mu.Lock()
	listed := e.spies["pods"].lastList.Predicate.IndexFields
	e.spies["pods"].mu.Unlock()
	if !slices.Equal(listed, []string{"spec.nodeName"}) {
		t.Errorf("IndexFields of a pod list: %v", listed)
	}
	w = e.watch(cmPath + "?watch=true" + rv)
	if got := e.spies["configmaps"].nthWatch(t, 1).opts.Predicate.IndexFields; got != nil {
		t.Errorf("IndexFields of a configmap watch: %v", got)
	}
	w.close()
}
