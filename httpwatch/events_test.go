package httpwatch

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEvents serves core/v1 and events.k8s.io/v1 events with their own field labels, as
// `kubectl describe` selects an object's events (involvedObject.* and the source falling back to
// reportingComponent), and refuses the labels of the other version.
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
		{"regarding.kind=Pod,regarding.name=p", "c"},
		{"reportingController=kubelet", "c"},
		{"source=kubelet", "c"}, // no deprecatedSource: the reportingController
		{"regarding.kind=ConfigMap", ""},
	} {
		if got := itemNames(t, e.do("GET", v1+"?fieldSelector="+url.QueryEscape(c.selector), "").list(t)); got != c.want {
			t.Errorf("events.k8s.io %s: %q, want %q", c.selector, got, c.want)
		}
	}
	if r := e.do("GET", v1+"?fieldSelector="+url.QueryEscape("involvedObject.name=p"), ""); r.code != 400 {
		t.Errorf("events.k8s.io with a core field label: %d %s", r.code, r.body)
	}

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
}
