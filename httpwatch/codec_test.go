package httpwatch

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// protobufBody encodes a typed object as the apiserver's protobuf (magic, envelope).
func protobufBody(t *testing.T, obj runtime.Object) string {
	t.Helper()
	var buf bytes.Buffer
	if err := protobufCodec().Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func decodeProtobuf(t *testing.T, data []byte) runtime.Object {
	t.Helper()
	obj, _, err := protobufCodec().Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("decoding protobuf: %v (%q)", err, data)
	}
	return obj
}

// TestProtobuf covers the protobuf encoding of built-in kinds, as kubectl and clients configured
// for protobuf use it: bodies in, objects and lists out, and watch streams of length-prefixed
// WatchEvents.
func TestProtobuf(t *testing.T) {
	e := newEnv(t)
	const pb = "application/vnd.kubernetes.protobuf"
	w := e.watchRaw(cmPath+"?watch=true&resourceVersion="+e.currentRV(), "Accept", pb+";stream=watch")
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"l": "1"}}, Data: map[string]string{"k": "v"}}
	r := e.do("POST", cmPath, protobufBody(t, cm), "Content-Type", pb, "Accept", pb)
	if r.code != 201 || r.header.Get("Content-Type") != pb {
		t.Fatalf("protobuf create: %d %s %q", r.code, r.header.Get("Content-Type"), r.body)
	}
	created, ok := decodeProtobuf(t, r.body).(*corev1.ConfigMap)
	if !ok || created.Name != "a" || created.Data["k"] != "v" || created.UID == "" || created.ResourceVersion == "" {
		t.Fatalf("protobuf create answered %#v", created)
	}
	// JSON clients see the same object.
	if got := e.do("GET", cmPath+"/a", "").object(t); got.GetUID() != created.UID {
		t.Errorf("JSON get %v", got.Object)
	}
	list, ok := decodeProtobuf(t, e.do("GET", cmPath, "", "Accept", pb).body).(*corev1.ConfigMapList)
	if !ok || len(list.Items) != 1 || list.Items[0].Name != "a" || list.ResourceVersion == "" {
		t.Errorf("protobuf list %#v", list)
	}
	created.Data["k"] = "w"
	r = e.do("PUT", cmPath+"/a", protobufBody(t, created), "Content-Type", pb, "Accept", pb)
	if updated, ok := decodeProtobuf(t, r.body).(*corev1.ConfigMap); r.code != 200 || !ok || updated.Data["k"] != "w" {
		t.Errorf("protobuf update: %d %q", r.code, r.body)
	}
	r = e.do("DELETE", cmPath+"/a", "", "Accept", pb)
	if status, ok := decodeProtobuf(t, r.body).(*metav1.Status); r.code != 200 || !ok || status.Status != metav1.StatusSuccess {
		t.Errorf("protobuf delete: %d %q", r.code, r.body)
	}
	for _, want := range []string{"ADDED a", "MODIFIED a", "DELETED a"} {
		ev := w.nextProtobuf(t)
		obj := decodeProtobuf(t, ev.Object.Raw).(*corev1.ConfigMap)
		if got := ev.Type + " " + obj.Name; got != want {
			t.Errorf("protobuf watch event %q, want %q", got, want)
		}
	}
	if ct := w.resp.Header.Get("Content-Type"); ct != pb+";stream=watch" {
		t.Errorf("protobuf watch Content-Type %q", ct)
	}

	// Failure modes: nothing is stored.
	rev := e.st.Rev()
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	for _, c := range []struct {
		name, path, body string
		code             int
		reason           metav1.StatusReason
		message          string
	}{
		{"not protobuf", cmPath, `{"metadata":{"name":"x"}}`, 400, metav1.StatusReasonBadRequest, "…"},
		{"another kind", cmPath, protobufBody(t, pod), 400, metav1.StatusReasonBadRequest, `Pod in version "v1" cannot be handled as a ConfigMap: converting (v1.Pod) to (core.ConfigMap): unknown conversion`},
		{"custom resource", widgetPath, protobufBody(t, cm), 415, metav1.StatusReasonUnsupportedMediaType,
			"the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"},
	} {
		checkStatus(t, c.name, e.do("POST", c.path, c.body, "Content-Type", pb), c.code, c.reason, c.message)
		e.unchanged(rev, c.name)
	}
	// An error to a protobuf client is a protobuf Status.
	r = e.do("GET", cmPath+"/missing", "", "Accept", pb)
	if status, ok := decodeProtobuf(t, r.body).(*metav1.Status); r.code != 404 || !ok || status.Reason != metav1.StatusReasonNotFound {
		t.Errorf("protobuf error: %d %q", r.code, r.body)
	}
}

// currentRV is the store's revision, as a resourceVersion.
func (e *env) currentRV() string { return strconv.FormatInt(e.st.Rev(), 10) }

// rawWatch is a watch whose body the test reads itself.
type rawWatch struct {
	resp *http.Response
	body io.ReadCloser
}

// watchRaw opens a watch and returns once the headers arrived.
func (e *env) watchRaw(path string, headers ...string) *rawWatch {
	e.t.Helper()
	resp := e.openWatch(context.Background(), func() {}, path, headers)
	e.t.Cleanup(func() { resp.Body.Close() })
	return &rawWatch{resp: resp, body: resp.Body}
}

// nextProtobuf reads one length-prefixed WatchEvent.
func (w *rawWatch) nextProtobuf(t *testing.T) metav1.WatchEvent {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(w.body, size[:]); err != nil {
		t.Fatalf("reading a frame length: %v", err)
	}
	data := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(w.body, data); err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	var ev metav1.WatchEvent
	if err := ev.Unmarshal(data); err != nil {
		t.Fatalf("decoding a WatchEvent: %v", err)
	}
	return ev
}

// TestYAML covers YAML bodies and responses, for built-in kinds and custom resources.
func TestYAML(t *testing.T) {
	e := newEnv(t)
	const y = "application/yaml"
	r := e.do("POST", cmPath, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n", "Content-Type", y, "Accept", y)
	if r.code != 201 || r.header.Get("Content-Type") != y || !strings.Contains(string(r.body), "\ndata:\n  k: v\n") {
		t.Fatalf("YAML create: %d %s", r.code, r.body)
	}
	r = e.do("POST", widgetPath, "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  size: 2\n", "Content-Type", y)
	if r.code != 201 || nested(t, r.object(t), "spec", "size") != int64(2) {
		t.Fatalf("YAML widget create: %d %s", r.code, r.body)
	}
	if r := e.do("GET", widgetPath, "", "Accept", y); r.code != 200 || !strings.Contains(string(r.body), "kind: WidgetList") {
		t.Errorf("YAML list: %d %s", r.code, r.body)
	}
	rev := e.st.Rev()
	checkStatus(t, "bad YAML", e.do("POST", cmPath, "metadata: [", "Content-Type", y), 400, metav1.StatusReasonBadRequest, "…")
	e.unchanged(rev, "bad YAML")
	// Errors to a YAML client are YAML.
	r = e.do("GET", cmPath+"/missing", "", "Accept", y)
	if r.code != 404 || r.header.Get("Content-Type") != y || !strings.Contains(string(r.body), "reason: NotFound") {
		t.Errorf("YAML error: %d %s", r.code, r.body)
	}
}

// TestFieldValidation covers the fieldValidation of create and update bodies of built-in kinds:
// unknown and duplicate fields are a 400 with Strict, a warning each with Warn (the default), and
// dropped silently with Ignore; they are never stored.
func TestFieldValidation(t *testing.T) {
	e := newEnv(t)
	body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"},"bogus":1,"spec":{"x":1}}`
	rev := e.st.Rev()
	checkStatus(t, "strict", e.do("POST", cmPath+"?fieldValidation=Strict", body), 400, metav1.StatusReasonBadRequest,
		`ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "bogus", unknown field "spec"`)
	checkStatus(t, "strict duplicate", e.do("POST", cmPath+"?fieldValidation=Strict", `{"metadata":{"name":"a"},"data":{"k":"v","k":"w"}}`), 400, metav1.StatusReasonBadRequest,
		`ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: duplicate field "data.k"`)
	checkStatus(t, "bad value", e.do("POST", cmPath+"?fieldValidation=Other", body), 422, metav1.StatusReasonInvalid, "…")
	e.unchanged(rev, "refused creates")
	r := e.do("POST", cmPath, body)
	if r.code != 201 || len(r.header.Values("Warning")) != 2 || r.header.Values("Warning")[0] != `299 - "unknown field \"bogus\""` {
		t.Fatalf("warned create: %d %v %s", r.code, r.header.Values("Warning"), r.body)
	}
	if stored := e.stored("/registry/configmaps/default/a"); stored["bogus"] != nil || stored["spec"] != nil {
		t.Errorf("unknown fields stored: %v", stored)
	}
	r = e.do("PUT", cmPath+"/a?fieldValidation=Ignore", strings.Replace(body, `"name":"a"`, `"name":"a","resourceVersion":"`+e.mustGetRV(cmPath+"/a")+`"`, 1))
	if r.code != 200 || len(r.header.Values("Warning")) != 0 {
		t.Errorf("ignored update: %d %v", r.code, r.header.Values("Warning"))
	}
	// Custom resources keep every field: without a schema nothing is unknown.
	r = e.do("POST", widgetPath+"?fieldValidation=Strict", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"bogus":1}`)
	if r.code != 201 || r.object(t).Object["bogus"] != int64(1) {
		t.Errorf("widget with any field: %d %s", r.code, r.body)
	}
}
