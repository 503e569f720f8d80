package httpwatch

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/store"
)

const (
	coreEvents = "/api/v1/namespaces/default/events"
	v1Events   = "/apis/events.k8s.io/v1/namespaces/default/events"
)

// Events with every field set, at each version: the same event, as upstream's conversion maps it;
// an events.k8s.io/v1 event as written at that version (no deprecated fields) and as core/v1 shows it.
const (
	newV1EventJSON = `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"a","namespace":"default"},
		"regarding":{"kind":"Pod","name":"p","namespace":"default"},"reason":"Pulled","note":"n","type":"Normal",
		"reportingController":"kubelet","reportingInstance":"n1","action":"Pull","eventTime":"2026-01-02T03:04:00.000000Z"}`
	newV1AsCoreJSON = `{"apiVersion":"v1","kind":"Event","metadata":{"name":"a","namespace":"default"},
		"involvedObject":{"kind":"Pod","name":"p","namespace":"default"},"reason":"Pulled","message":"n","type":"Normal",
		"source":{},"firstTimestamp":null,"lastTimestamp":null,
		"reportingComponent":"kubelet","reportingInstance":"n1","action":"Pull","eventTime":"2026-01-02T03:04:00.000000Z"}`
	coreEventJSON = `{"apiVersion":"v1","kind":"Event","metadata":{"name":"a","namespace":"default"},
		"involvedObject":{"kind":"Pod","name":"p","namespace":"default","uid":"u1"},"reason":"Started","message":"hi",
		"source":{"component":"kubelet","host":"n1"},"firstTimestamp":"2026-01-02T03:00:05Z","lastTimestamp":"2026-01-02T03:03:05Z",
		"count":2,"type":"Normal","eventTime":"2026-01-02T03:00:05.000001Z","series":{"count":2,"lastObservedTime":"2026-01-02T03:03:05.000000Z"},
		"action":"Start","related":{"kind":"Node","name":"n1"},"reportingComponent":"kubelet","reportingInstance":"n1"}`
	v1EventJSON = `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"a","namespace":"default"},
		"regarding":{"kind":"Pod","name":"p","namespace":"default","uid":"u1"},"reason":"Started","note":"hi",
		"deprecatedSource":{"component":"kubelet","host":"n1"},"deprecatedFirstTimestamp":"2026-01-02T03:00:05Z",
		"deprecatedLastTimestamp":"2026-01-02T03:03:05Z","deprecatedCount":2,"type":"Normal","eventTime":"2026-01-02T03:00:05.000001Z",
		"series":{"count":2,"lastObservedTime":"2026-01-02T03:03:05.000000Z"},"action":"Start","related":{"kind":"Node","name":"n1"},
		"reportingController":"kubelet","reportingInstance":"n1"}`
)

// eventContent is an event's fields besides its metadata.
func eventContent(t *testing.T, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	out := map[string]any{}
	for k, v := range u.Object {
		if k != "metadata" {
			out[k] = v
		}
	}
	return out
}

func parseEvent(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(s)); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestEventVersionsRoundTrip: the two versions of events are one resource, stored once at core/v1
// under /registry/events: an event written at either version reads at the other with every field
// converted as upstream's conversion does, and written back there reads unchanged at the first.
func TestEventVersionsRoundTrip(t *testing.T) {
	for _, c := range []struct{ name, from, to, body, other string }{
		{"core to events.k8s.io", coreEvents, v1Events, coreEventJSON, v1EventJSON},
		{"events.k8s.io to core", v1Events, coreEvents, newV1EventJSON, newV1AsCoreJSON},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			created := e.mustCreate(c.from, c.body)
			if keys := e.storedEvents(); !reflect.DeepEqual(keys, []string{"/registry/events/default/a"}) {
				t.Fatalf("stored at %v, want /registry/events/default/a alone", keys)
			}
			r := e.do("GET", c.to+"/a", "")
			if r.code != 200 {
				t.Fatalf("GET at the other version: %d %s", r.code, r.body)
			}
			if got, want := eventContent(t, r.object(t)), eventContent(t, parseEvent(t, c.other)); !reflect.DeepEqual(got, want) {
				t.Errorf("at the other version\n  %v\nwant\n  %v", got, want)
			}
			if r := e.do("PUT", c.to+"/a", string(r.body)); r.code != 200 {
				t.Fatalf("PUT back at the other version: %d %s", r.code, r.body)
			}
			if got, want := eventContent(t, e.do("GET", c.from+"/a", "").object(t)), eventContent(t, created); !reflect.DeepEqual(got, want) {
				t.Errorf("after the round trip\n  %v\nwant\n  %v", got, want)
			}
		})
	}
}

// TestEventVersionsNoOpWrite: events.k8s.io/v1 stores an event in the bytes core/v1 does, so a
// write that changes nothing (a PUT of the object read, a repeated delete at either version of an
// event its finalizer holds) is no write, as upstream's; the first delete, which marks it, is one.
func TestEventVersionsNoOpWrite(t *testing.T) {
	for _, c := range []struct{ name, from, to, body string }{
		{"core to events.k8s.io", coreEvents, v1Events, coreEventJSON},
		{"events.k8s.io to core", v1Events, coreEvents, newV1EventJSON},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			created := e.mustCreate(c.from, c.body)
			created.SetFinalizers([]string{"example.com/keep"})
			body, _ := created.MarshalJSON()
			if r := e.do("PUT", c.from+"/a", string(body)); r.code != 200 {
				t.Fatalf("adding a finalizer: %d %s", r.code, r.body)
			}
			rev := e.st.Rev()
			if r := e.do("PUT", c.from+"/a", string(e.do("GET", c.from+"/a", "").body)); r.code != 200 {
				t.Fatalf("PUT of the object read: %d %s", r.code, r.body)
			}
			e.unchanged(rev, "a PUT of the object read")
			if r := e.do("DELETE", c.from+"/a", ""); r.code != 200 {
				t.Fatalf("marking delete: %d %s", r.code, r.body)
			}
			if e.st.Rev() != rev+1 {
				t.Errorf("the marking delete made %d writes, want 1", e.st.Rev()-rev)
			}
			rev = e.st.Rev()
			for _, path := range []string{c.to, c.from} {
				if r := e.do("DELETE", path+"/a", ""); r.code != 200 {
					t.Fatalf("repeated delete at %s: %d %s", path, r.code, r.body)
				}
			}
			e.unchanged(rev, "repeated deletes")
		})
	}
}

// TestEventVersionsManagedFields: a write at one version of events drops the managers that wrote
// at the other, as kube-apiserver's field manager, whose type converter for a group has no type
// for the other group's Event; managers of the version written keep their fields.
func TestEventVersionsManagedFields(t *testing.T) {
	for _, c := range []struct{ name, from, to, body, fromVersion, toVersion string }{
		{"core then events.k8s.io", coreEvents, v1Events, coreEventJSON, "v1", "events.k8s.io/v1"},
		{"events.k8s.io then core", v1Events, coreEvents, newV1EventJSON, "events.k8s.io/v1", "v1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			if r := e.do("POST", c.from+"?fieldManager=b", c.body); r.code != 201 {
				t.Fatalf("create: %d %s", r.code, r.body)
			}
			patch := func(path, manager, labels string) []metav1.ManagedFieldsEntry {
				t.Helper()
				r := e.do("PATCH", path+"/a?fieldManager="+manager, `{"metadata":{"labels":`+labels+`}}`, "Content-Type", "application/merge-patch+json")
				if r.code != 200 {
					t.Fatalf("patch at %s: %d %s", path, r.code, r.body)
				}
				return r.object(t).GetManagedFields()
			}
			if got := managers(patch(c.from, "c", `{"x":"1"}`)); got != "b@"+c.fromVersion+",c@"+c.fromVersion {
				t.Errorf("after a patch at the same version: %s", got)
			}
			if got := managers(patch(c.to, "d", `{"y":"1"}`)); got != "d@"+c.toVersion {
				t.Errorf("after a patch at the other version: %s, want d@%s alone", got, c.toVersion)
			}
		})
	}
}

// managers lists managedFields entries as manager@apiVersion.
func managers(entries []metav1.ManagedFieldsEntry) string {
	var out []string
	for _, m := range entries {
		out = append(out, m.Manager+"@"+m.APIVersion)
	}
	return strings.Join(out, ",")
}

// storedEvents are the keys of the store's events, of either version: all under /registry/events/.
func (e *env) storedEvents() []string {
	e.t.Helper()
	resp, err := e.st.Range(&store.RangeRequest{Key: []byte("/registry/events"), RangeEnd: []byte("/registry/eventt")})
	if err != nil {
		e.t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

// TestEventVersionsWatch: each version's watch (through its own watch cache over the one key
// prefix) sees the events written at the other, converted to its version; kubectl describe's
// core/v1 field selector finds an event written at events.k8s.io/v1.
func TestEventVersionsWatch(t *testing.T) {
	e := newCachedEnv(t)
	coreWatch, v1Watch := e.watch(coreEvents+"?watch=true"), e.watch(v1Events+"?watch=true")
	e.mustCreate(coreEvents, coreEventJSON)
	e.mustCreate(v1Events, `{"metadata":{"name":"b"},"regarding":{"kind":"Pod","name":"p","namespace":"default","uid":"u1"},
		"reason":"Pulled","note":"pulled","type":"Normal","reportingController":"kubelet","reportingInstance":"n1","action":"Pull",
		"eventTime":"2026-01-02T03:04:00.000000Z"}`)
	for _, c := range []struct {
		s          *stream
		apiVersion string
		message    string
	}{{coreWatch, "v1", "message"}, {v1Watch, "events.k8s.io/v1", "note"}} {
		for _, f := range c.s.expect("ADDED a", "ADDED b") {
			var obj map[string]any
			if err := json.Unmarshal(f.Object, &obj); err != nil {
				t.Fatal(err)
			}
			if obj["apiVersion"] != c.apiVersion || obj[c.message] == nil {
				t.Errorf("watch at %s: %s", c.apiVersion, f.Object)
			}
		}
	}
	// As kubectl describe's searchEvents selects an object's events.
	selector := "involvedObject.kind=Pod,involvedObject.name=p,involvedObject.namespace=default,involvedObject.uid=u1"
	if got := itemNames(t, e.do("GET", coreEvents+"?fieldSelector="+url.QueryEscape(selector), "").list(t)); got != "a,b" {
		t.Errorf("describe's events: %q, want a,b", got)
	}
}

// TestEventVersionsValidation: events are validated as upstream validates the internal Event: an
// events.k8s.io/v1 event without eventTime, without reportingController, or with the deprecated
// fields set is refused with upstream's 422 (naming core's kind), and its fields are immutable;
// core/v1 gets the legacy checks only.
func TestEventVersionsValidation(t *testing.T) {
	e := newEnv(t)
	const dns1123Subdomain = `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`
	const qualifiedName = `name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`
	for _, c := range []struct{ path, body, message string }{
		{v1Events, `{"metadata":{"name":"c"},"regarding":{"kind":"Pod","name":"p"},"reason":"R","type":"Normal","reportingController":"c","reportingInstance":"i","action":"A"}`,
			`Event "c" is invalid: eventTime: Required value`},
		{v1Events, `{"metadata":{"name":"c"},"regarding":{"kind":"Pod","name":"p"},"reason":"R","type":"Normal","reportingInstance":"i","action":"A","eventTime":"2026-01-02T03:04:00.000000Z"}`,
			`Event "c" is invalid: [reportingController: Required value, reportingController: Invalid value: "": name part must be non-empty, reportingController: Invalid value: "": ` + qualifiedName + `]`},
		{coreEvents, `{"metadata":{"name":"c"},"involvedObject":{"kind":"Pod","name":"p"},"reason":"R","type":"Normal","reportingInstance":"i","action":"A","eventTime":"2026-01-02T03:04:00.000000Z"}`,
			`Event "c" is invalid: [reportingComponent: Required value, reportingComponent: Invalid value: "": name part must be non-empty, reportingComponent: Invalid value: "": ` + qualifiedName + `]`},
		{v1Events, `{"metadata":{"name":"c"},"regarding":{"kind":"Pod","name":"p"},"reason":"R","type":"Bad","reportingController":"c","reportingInstance":"i","action":"A",
			"deprecatedCount":3,"deprecatedSource":{"host":"h"},"series":{"count":1},"eventTime":"2026-01-02T03:04:00.000000Z"}`,
			`Event "c" is invalid: [series.count: Invalid value: "": should be at least 2, series.lastObservedTime: Required value, type: Invalid value: "": has invalid value: Bad, count: Invalid value: "": needs to be unset, source: Invalid value: "": needs to be unset]`},
		// The metadata is checked where the strict validation checks it, after the legacy checks,
		// and not at all at core/v1 when the legacy checks find something.
		{v1Events, `{"metadata":{"name":"Bad_"},"regarding":{"kind":"Pod","name":"p"},"reason":"R","type":"Normal","reportingInstance":"i","action":"A","eventTime":"2026-01-02T03:04:00.000000Z"}`,
			`Event "Bad_" is invalid: [reportingController: Required value, reportingController: Invalid value: "": name part must be non-empty, reportingController: Invalid value: "": ` + qualifiedName +
				`, metadata.name: Invalid value: "Bad_": ` + dns1123Subdomain + `]`},
		{coreEvents, `{"metadata":{"name":"c","labels":{"bad key!":"v"}},"involvedObject":{"kind":"Pod","name":"p","namespace":"other"}}`,
			`Event "c" is invalid: involvedObject.namespace: Invalid value: "other": does not match event.namespace`},
	} {
		wantStatus(t, e.do("POST", c.path, c.body), 422, metav1.StatusReasonInvalid, c.message)
	}
	// At core/v1 a name need only be a path segment, as the generic checks ask, on update too.
	bad := e.mustCreate(coreEvents, `{"metadata":{"name":"Bad_","generateName":"Bad_"},"involvedObject":{"kind":"Pod","name":"p"}}`)
	bad.SetLabels(map[string]string{"a": "b"})
	if body, _ := bad.MarshalJSON(); e.do("PUT", coreEvents+"/Bad_", string(body)).code != 200 {
		t.Error("an update of a core/v1 event named Bad_ was refused")
	}
	// An events.k8s.io/v1 update checks core's finalizer names too, and an immutable field's value
	// prints as the internal type's (Go field names).
	e.mustCreate(coreEvents, `{"metadata":{"name":"im"},"involvedObject":{"kind":"Pod","name":"p","namespace":"default"},"reason":"R","message":"m","source":{"component":"kubelet"},"type":"Normal"}`)
	const imV1 = `{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"im"%s},"regarding":{"kind":"Pod","name":"p","namespace":"default"},"reason":"R","note":"m","type":"Normal"%s}`
	wantStatus(t, e.do("PUT", v1Events+"/im", fmt.Sprintf(imV1, "", "")), 422, metav1.StatusReasonInvalid,
		`Event "im" is invalid: source: Invalid value: {"Component":"","Host":""}: field is immutable`)
	wantStatus(t, e.do("PUT", v1Events+"/im", fmt.Sprintf(imV1, `,"finalizers":["bad finalizer"]`, `,"deprecatedSource":{"component":"kubelet"}`)), 422, metav1.StatusReasonInvalid,
		`Event "im" is invalid: [metadata.finalizers: Invalid value: "bad finalizer": `+qualifiedName+
			`, metadata.finalizers[0]: Invalid value: "bad finalizer": name is neither a standard finalizer name nor is it fully qualified]`)
	// A core/v1 event without eventTime needs none of them.
	e.mustCreate(coreEvents, `{"metadata":{"name":"old"},"involvedObject":{"kind":"Pod","name":"p"},"count":3}`)

	e.mustCreate(v1Events, `{"metadata":{"name":"b"},"regarding":{"kind":"Pod","name":"p","namespace":"default"},"reason":"Pulled","note":"n",
		"type":"Normal","reportingController":"kubelet","reportingInstance":"n1","action":"Pull","eventTime":"2026-01-02T03:04:00.000000Z"}`)
	wantStatus(t, e.do("PATCH", v1Events+"/b", `{"note":"changed","reason":"Other","series":{"count":1}}`, "Content-Type", "application/merge-patch+json"),
		422, metav1.StatusReasonInvalid,
		`Event "b" is invalid: [series.count: Invalid value: "": should be at least 2, series.lastObservedTime: Required value, reason: Invalid value: "Other": field is immutable, message: Invalid value: "changed": field is immutable]`)
	// At core/v1 the same event's fields may change.
	if r := e.do("PATCH", coreEvents+"/b", `{"message":"changed"}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Errorf("PATCH at core/v1: %d %s", r.code, r.body)
	}
}

// TestEventBookmarkObject: the initial-events-end BOOKMARK of an events.k8s.io/v1 watch-list carries
// the typed zero event, as kube-apiserver's (its null timestamps, empty regarding and source).
func TestEventBookmarkObject(t *testing.T) {
	e := newEnv(t)
	w := e.watch(v1Events + "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
	f := w.next()
	var obj map[string]any
	if err := json.Unmarshal(f.Object, &obj); err != nil || f.Type != "BOOKMARK" {
		t.Fatalf("%s %s: %v", f.Type, f.Object, err)
	}
	for _, k := range []string{"regarding", "deprecatedSource", "eventTime", "deprecatedFirstTimestamp", "deprecatedLastTimestamp"} {
		if _, ok := obj[k]; !ok {
			t.Errorf("the bookmark's object lacks %s: %s", k, f.Object)
		}
	}
	if obj["apiVersion"] != "events.k8s.io/v1" || obj["kind"] != "Event" {
		t.Errorf("the bookmark's object: %s", f.Object)
	}
}
