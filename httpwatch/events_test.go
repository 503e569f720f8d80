package httpwatch

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/store"
)

// TestEvents serves core/v1 and events.k8s.io/v1 events with their own field labels, as
// `kubectl describe` selects an object's events (involvedObject.* and the source falling back to
// reportingComponent), and refuses the labels of the other version (and source at events.k8s.io/v1).
func TestEvents(t *testing.T) {
	e := newEnv(t)
	const core = "/api/v1/namespaces/default/events"
	e.mustCreate(core, `{"metadata":{"name":"a"},"involvedObject":{"kind":"Pod","name":"p","namespace":"default","uid":"u1"},
		"reason":"Started","type":"Normal","source":{"component":"kubelet"},"message":"hi","count":2,
		"firstTimestamp":"2026-01-02T03:00:05Z","lastTimestamp":"2026-01-02T03:03:05Z"}`)
	e.mustCreate(core, `{"metadata":{"name":"b"},"involvedObject":{"kind":"ConfigMap","name":"p","namespace":"default","uid":"u2"},
		"reason":"Bad","type":"Warning","reportingComponent":"ctl","message":"oops"}`)
	for _, c := range []struct{ selector, want string }{
		{"involvedObject.name=p,involvedObject.namespace=default,involvedObject.kind=Pod,involvedObject.uid=u1", "a"},
		{"involvedObject.kind=ConfigMap", "b"},
		{"source=kubelet", "a"},
		{"source=ctl", "b"}, // no source.component: the reportingComponent
		{"reportingComponent=ctl", "b"},
		{"type=Warning", "b"},
		{"reason!=Bad", "a"},
	} {
		if got := itemNames(t, e.do("GET", core+"?fieldSelector="+url.QueryEscape(c.selector), "").list(t)); got != c.want {
			t.Errorf("%s: %q, want %q", c.selector, got, c.want)
		}
	}
	wantStatus(t, e.do("GET", core+"?fieldSelector="+url.QueryEscape("regarding.name=p"), ""), 400, metav1.StatusReasonBadRequest,
		"field label not supported: regarding.name")

	const v1 = "/apis/events.k8s.io/v1/namespaces/default/events"
	e.mustCreate(v1, `{"metadata":{"name":"c"},"regarding":{"kind":"Pod","name":"p","namespace":"default"},"reason":"Pulled",
		"type":"Normal","reportingController":"kubelet","reportingInstance":"n1","action":"Pull","eventTime":"2026-01-02T03:04:00.000000Z"}`)
	for _, c := range []struct{ selector, want string }{
		// One resource: the core/v1 events a and b are listed here too.
		{"regarding.kind=Pod,regarding.name=p", "a,c"},
		{"reportingController=kubelet", "c"},
		{"regarding.kind=ConfigMap", "b"},
	} {
		if got := itemNames(t, e.do("GET", v1+"?fieldSelector="+url.QueryEscape(c.selector), "").list(t)); got != c.want {
			t.Errorf("events.k8s.io %s: %q, want %q", c.selector, got, c.want)
		}
	}
	if r := e.do("GET", v1+"?fieldSelector="+url.QueryEscape("involvedObject.name=p"), ""); r.code != 400 {
		t.Errorf("events.k8s.io with a core field label: %d %s", r.code, r.body)
	}
	// As AddFieldLabelConversionsForEvent, events.k8s.io/v1 has no source label.
	wantStatus(t, e.do("GET", v1+"?fieldSelector="+url.QueryEscape("source=kubelet"), ""), 400, metav1.StatusReasonBadRequest,
		"field label not supported: source")

	// As upstream's event strategy, a PUT of a missing event creates it.
	if r := e.do("PUT", core+"/d", `{"metadata":{"name":"d"},"involvedObject":{"kind":"Pod","name":"q"}}`); r.code != 201 {
		t.Errorf("PUT of a missing event: %d %s", r.code, r.body)
	}
}

// TestEventsTable prints events as kubectl get events shows them: no leading Name column, Last
// Seen first, the count and first seen in the wide columns.
func TestEventsTable(t *testing.T) {
	e := newEnv(t)
	const core = "/api/v1/namespaces/default/events"
	e.mustCreate(core, `{"metadata":{"name":"a"},"involvedObject":{"kind":"Pod","name":"p"},"reason":"Started","type":"Normal",
		"source":{"component":"kubelet","host":"n1"},"message":"hi","count":2,
		"firstTimestamp":"2026-01-02T03:00:05Z","lastTimestamp":"2026-01-02T03:03:05Z"}`)
	r := e.do("GET", core, "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	var table metav1.Table
	if r.code != 200 || json.Unmarshal(r.body, &table) != nil {
		t.Fatalf("table: %d %s", r.code, r.body)
	}
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "Last Seen,Type,Reason,Object,Subobject,Source,Message,First Seen,Count,Name" {
		t.Errorf("columns %s", got)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("rows %v", table.Rows)
	}
	cells, _ := json.Marshal(table.Rows[0].Cells)
	if got := string(cells); got != `["60s","Normal","Started","pod/p","","kubelet, n1","hi","4m",2,"a"]` {
		t.Errorf("cells %s", got)
	}
	// An object without a name shows its kind alone, as printEvent.
	e.mustCreate(core, `{"metadata":{"name":"b"},"involvedObject":{"kind":"Node"}}`)
	r = e.do("GET", core+"/b", "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if err := json.Unmarshal(r.body, &table); err != nil || len(table.Rows) != 1 || table.Rows[0].Cells[3] != "node" {
		t.Errorf("event of an unnamed object: %d %s", r.code, r.body)
	}
	// An event of the new API, without source, shows its reporting controller and instance (each
	// version), its note trimmed, as formatEventSource; without an instance, the controller alone.
	e.mustCreate(v1Events, `{"metadata":{"name":"c"},"regarding":{"kind":"Pod","name":"p","namespace":"default"},"reason":"Pulled",
		"note":" n \n","type":"Normal","reportingController":"kubelet","reportingInstance":"n1","action":"Pull","eventTime":"2026-01-02T03:04:00.000000Z"}`)
	e.mustCreate(core, `{"metadata":{"name":"d"},"involvedObject":{"kind":"Pod","name":"p"},"reportingComponent":"kubelet"}`)
	for _, c := range []struct{ path, source, message string }{
		{core + "/c", "kubelet, n1", "n"}, {v1Events + "/c", "kubelet, n1", "n"}, {v1Events + "/d", "kubelet", ""},
	} {
		r = e.do("GET", c.path, "", "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		if err := json.Unmarshal(r.body, &table); err != nil || len(table.Rows) != 1 || table.Rows[0].Cells[5] != c.source || table.Rows[0].Cells[6] != c.message {
			t.Errorf("%s: %d %s, want Source %q and Message %q", c.path, r.code, r.body, c.source, c.message)
		}
	}
}

// leaseTTL is the granted TTL of the lease the object at key is attached to, 0 for none.
func (e *env) leaseTTL(key string) int64 {
	e.t.Helper()
	resp, err := e.st.Range(&store.RangeRequest{Key: []byte(key)})
	if err != nil || len(resp.Kvs) != 1 {
		e.t.Fatalf("%s: %v %v", key, resp, err)
	}
	if resp.Kvs[0].Lease == 0 {
		return 0
	}
	l, err := e.st.LeaseTimeToLive(resp.Kvs[0].Lease, false)
	if err != nil {
		e.t.Fatalf("lease of %s: %v", key, err)
	}
	return l.GrantedTTL
}

// TestEventTTL: with Config.EventTTL, every create and update of an event of either version (a
// POST, a PUT creating it, a PUT, a patch) gives it a lease of at least that TTL (the storage reuses a
// lease for up to a minute more, as upstream's lease manager); other kinds get none, and without
// EventTTL neither do events. A negative EventTTL is refused.
func TestEventTTL(t *testing.T) {
	const core, v1 = "/api/v1/namespaces/default/events", "/apis/events.k8s.io/v1/namespaces/default/events"
	e := newEnv(t, func(c *Config) { c.EventTTL = 90 * time.Minute })
	e.mustCreate(core, `{"metadata":{"name":"a"},"involvedObject":{"kind":"Pod","name":"p"},"reason":"Started"}`)
	if r := e.do("PUT", core+"/b", `{"metadata":{"name":"b"},"involvedObject":{"kind":"Pod","name":"q"}}`); r.code != 201 {
		t.Fatalf("PUT of a missing event: %d %s", r.code, r.body)
	}
	e.mustCreate(v1, `{"metadata":{"name":"c"},"regarding":{"kind":"Pod","name":"p"},"reason":"Pulled","type":"Normal","reportingController":"kubelet",
		"reportingInstance":"n1","action":"Pull","eventTime":"2026-01-02T03:04:00.000000Z"}`)
	e.mustCreate("/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"cm"}}`)
	checkTTL := func(when string) {
		t.Helper()
		for _, key := range []string{"/registry/events/default/a", "/registry/events/default/b", "/registry/events/default/c"} {
			if ttl := e.leaseTTL(key); ttl < 90*60 || ttl > 90*60+60 {
				t.Errorf("%s: %s has a lease of %d s, want 5400 to 5460", when, key, ttl)
			}
		}
		if ttl := e.leaseTTL("/registry/configmaps/default/cm"); ttl != 0 {
			t.Errorf("%s: a configmap has a lease of %d s", when, ttl)
		}
	}
	checkTTL("created")
	if r := e.do("PUT", core+"/a", `{"metadata":{"name":"a"},"involvedObject":{"kind":"Pod","name":"p"},"reason":"Again"}`); r.code != 200 {
		t.Fatalf("PUT: %d %s", r.code, r.body)
	}
	if r := e.do("PATCH", core+"/b", `{"reason":"Patched"}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Fatalf("PATCH: %d %s", r.code, r.body)
	}
	if r := e.do("PATCH", "/api/v1/namespaces/default/configmaps/cm", `{"data":{"k":"v"}}`, "Content-Type", "application/merge-patch+json"); r.code != 200 {
		t.Fatalf("PATCH of the configmap: %d %s", r.code, r.body)
	}
	checkTTL("updated")

	plain := newEnv(t)
	plain.mustCreate(core, `{"metadata":{"name":"a"},"involvedObject":{"kind":"Pod","name":"p"}}`)
	if ttl := plain.leaseTTL("/registry/events/default/a"); ttl != 0 {
		t.Errorf("without EventTTL an event has a lease of %d s", ttl)
	}
	if _, err := New(Config{Resources: []ServedResource{{Resource: Events(), Storage: plain.storages["events"]}}, EventTTL: -time.Second}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a negative EventTTL: %v, want ErrInvalidConfig", err)
	}
}

// TestEventManagedFieldsOfZeroFields: a create's managedFields leave out the fields the typed
// object only holds as zero values (an event's reportingComponent "", eventTime null), as the
// create handler compares with the scheme's new object; the fields the body set are there.
func TestEventManagedFieldsOfZeroFields(t *testing.T) {
	e := newEnv(t)
	obj := e.mustCreate("/api/v1/namespaces/default/events", `{"metadata":{"name":"a"},"involvedObject":{"kind":"Pod","name":"p"},"reason":"Started"}`)
	mf := obj.GetManagedFields()
	if len(mf) != 1 || mf[0].FieldsV1 == nil {
		t.Fatalf("managedFields %v", mf)
	}
	var fields map[string]any
	if err := json.Unmarshal(mf[0].FieldsV1.Raw, &fields); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"f:reportingComponent", "f:eventTime", "f:firstTimestamp", "f:source"} {
		if _, ok := fields[f]; ok {
			t.Errorf("managedFields name %s, which the body did not set: %s", f, mf[0].FieldsV1.Raw)
		}
	}
	for _, f := range []string{"f:reason", "f:involvedObject"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("managedFields lack %s: %s", f, mf[0].FieldsV1.Raw)
		}
	}
}

// TestEventApplyTypedForm: a server-side apply answers with and stores the event as its Go type
// encodes it, as upstream's field manager returns the typed object: the fields the configuration
// leaves out at their zero value ("eventTime": null, "source": {}, "reportingComponent": ""), on
// create and on an apply that drops a field; a value the Go type cannot hold is refused as upstream's
// field manager refuses it.
func TestEventApplyTypedForm(t *testing.T) {
	e := newEnv(t)
	const events = "/api/v1/namespaces/default/events"
	apply := func(body string) map[string]any {
		t.Helper()
		r := e.do("PATCH", events+"/ap?fieldManager=m", body, "Content-Type", "application/apply-patch+yaml")
		if r.code != http.StatusCreated && r.code != http.StatusOK {
			t.Fatalf("apply: %d %s", r.code, r.body)
		}
		var obj map[string]any
		if err := json.Unmarshal(r.body, &obj); err != nil {
			t.Fatal(err)
		}
		return obj
	}
	check := func(what string, obj map[string]any) {
		t.Helper()
		for k, want := range map[string]any{"eventTime": nil, "firstTimestamp": nil, "source": map[string]any{}, "reportingComponent": "", "reportingInstance": ""} {
			if got, ok := obj[k]; !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %s is %v (present %t), want %v", what, k, got, ok, want)
			}
		}
	}
	check("created", apply(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"ap"},"involvedObject":{"kind":"Pod","name":"p"},"message":"m","action":"A"}`))
	check("a field dropped", apply(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"ap"},"involvedObject":{"kind":"Pod","name":"p"},"message":"m"}`))
	var stored map[string]any
	if err := json.Unmarshal(e.do("GET", events+"/ap", "").body, &stored); err != nil {
		t.Fatal(err)
	}
	check("stored", stored)

	// A value the Go type cannot hold is upstream's field manager's plain 500, and nothing is stored.
	r := e.do("PATCH", events+"/bad?fieldManager=m", `{"apiVersion":"v1","kind":"Event","metadata":{"name":"bad","creationTimestamp":"x"},"involvedObject":{"kind":"Pod","name":"p"}}`,
		"Content-Type", "application/apply-patch+yaml")
	var status map[string]any
	if err := json.Unmarshal(r.body, &status); err != nil {
		t.Fatal(err)
	}
	const want = `failed to convert new object (/bad; /v1, Kind=Event) to proper version: unable to convert unstructured object to /v1, Kind=Event: parsing time "x" as "2006-01-02T15:04:05Z07:00": cannot parse "x" as "2006"`
	if r.code != http.StatusInternalServerError || status["message"] != want || status["reason"] != nil {
		t.Errorf("apply of creationTimestamp x: %d %s, want 500 %q without a reason", r.code, r.body, want)
	}
	if r := e.do("GET", events+"/bad", ""); r.code != http.StatusNotFound {
		t.Errorf("after the refused apply: GET %d %s", r.code, r.body)
	}
}
