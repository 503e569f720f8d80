package httpwatch

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

func (r response) table(t *testing.T) *metav1.Table {
	t.Helper()
	var tbl metav1.Table
	if err := json.Unmarshal(r.body, &tbl); err != nil || tbl.Kind != "Table" {
		t.Fatalf("not a Table (%v): %s", err, r.body)
	}
	return &tbl
}

func columnNames(tbl *metav1.Table) []string {
	var out []string
	for _, c := range tbl.ColumnDefinitions {
		out = append(out, c.Name)
	}
	return out
}

// TestTable covers the Table conversion kubectl get asks for: the printer columns of built-in
// kinds, a CRD's columns (Age by default), the row object as metadata, the whole object or nothing,
// and watch events as one-row tables whose first alone carries the columns.
func TestTable(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(cmPath, cmJSON("", "a", ""))
	e.clock.Step(90 * time.Second)
	tbl := e.do("GET", cmPath, "", "Accept", tableAccept).table(t)
	if got := columnNames(tbl); len(got) != 3 || got[0] != "Name" || got[1] != "Data" || got[2] != "Age" {
		t.Errorf("configmap columns %v", got)
	}
	// The printers' descriptions: the Go types' documentation of the fields shown, whole.
	if d := tbl.ColumnDefinitions; len(d) == 3 && (d[1].Description != corev1.ConfigMap{}.SwaggerDoc()["data"] ||
		d[2].Description != metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]) {
		t.Errorf("configmap column descriptions %q, %q", d[1].Description, d[2].Description)
	}
	if len(tbl.Rows) != 1 || tbl.Rows[0].Cells[0] != "a" || tbl.Rows[0].Cells[1] != float64(1) || tbl.Rows[0].Cells[2] != "90s" || tbl.ResourceVersion == "" {
		t.Errorf("configmap rows %+v", tbl.Rows)
	}
	var partial metav1.PartialObjectMetadata
	if err := json.Unmarshal(tbl.Rows[0].Object.Raw, &partial); err != nil || partial.Kind != "PartialObjectMetadata" || partial.Name != "a" {
		t.Errorf("row object %s", tbl.Rows[0].Object.Raw)
	}
	// includeObject=Object embeds the object; None nothing.
	tbl = e.do("GET", cmPath+"/a?includeObject=Object", "", "Accept", tableAccept).table(t)
	if len(tbl.Rows) != 1 || !json.Valid(tbl.Rows[0].Object.Raw) || string(tbl.Rows[0].Object.Raw) == "" {
		t.Errorf("includeObject=Object %s", tbl.Rows[0].Object.Raw)
	}
	tbl = e.do("GET", cmPath+"?includeObject=None", "", "Accept", tableAccept).table(t)
	if len(tbl.Rows) != 1 || tbl.Rows[0].Object.Raw != nil {
		t.Errorf("includeObject=None %s", tbl.Rows[0].Object.Raw)
	}
	// Custom resources: their columns, dates as ages.
	e.mustCreate(gadgetsPath, `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"size":7}}`)
	tbl = e.do("GET", gadgetsPath, "", "Accept", tableAccept).table(t)
	if got := columnNames(tbl); len(got) != 3 || got[1] != "Size" || tbl.Rows[0].Cells[1] != float64(7) || tbl.Rows[0].Cells[2] != "0s" {
		t.Errorf("gadget table %v %+v", got, tbl.Rows)
	}
	e.mustCreate(widgetPath, widgetJSON("w", ""))
	if got := columnNames(e.do("GET", widgetPath, "", "Accept", tableAccept).table(t)); len(got) != 2 || got[1] != "Age" {
		t.Errorf("widget columns %v", got)
	}
	// YAML tables too.
	if r := e.do("GET", cmPath, "", "Accept", "application/yaml;as=Table;v=v1;g=meta.k8s.io"); r.code != 200 || r.header.Get("Content-Type") != "application/yaml" {
		t.Errorf("YAML table: %d %s", r.code, r.body)
	}

	// A watch of tables: one row per event, the columns in the first only.
	w := e.watch(cmPath+"?watch=true&resourceVersion="+e.currentRV(), "Accept", tableAccept)
	e.mustCreate(cmPath, cmJSON("", "b", ""))
	e.mustCreate(cmPath, cmJSON("", "c", ""))
	for i, name := range []string{"b", "c"} {
		f := w.next()
		var ev metav1.Table
		if err := json.Unmarshal(f.Object, &ev); err != nil || f.Type != "ADDED" || len(ev.Rows) != 1 || ev.Rows[0].Cells[0] != name {
			t.Fatalf("table event %s %s", f.Type, f.Object)
		}
		if (i == 0) != (len(ev.ColumnDefinitions) == 3) {
			t.Errorf("event %d columns %v", i, columnNames(&ev))
		}
	}

	// Failure modes: tables are JSON or YAML; includeObject must be known.
	checkStatus(t, "protobuf table", e.do("GET", cmPath, "", "Accept", "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io"), 406, metav1.StatusReasonNotAcceptable, "…")
	checkStatus(t, "table of another group", e.do("GET", cmPath, "", "Accept", "application/json;as=Table;v=v1;g=example.com"), 406, metav1.StatusReasonNotAcceptable, "…")
	checkStatus(t, "bad includeObject", e.do("GET", cmPath+"?includeObject=Some", "", "Accept", tableAccept), 400, metav1.StatusReasonBadRequest, "…")
}

// TestPartialObjectMetadata covers the metadata-only responses of client-go's metadata client.
func TestPartialObjectMetadata(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(cmPath, cmJSON("", "a", `"labels":{"x":"y"}`))
	const one = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	const list = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
	var p metav1.PartialObjectMetadata
	if r := e.do("GET", cmPath+"/a", "", "Accept", one); r.code != 200 || json.Unmarshal(r.body, &p) != nil || p.Kind != "PartialObjectMetadata" ||
		p.APIVersion != "meta.k8s.io/v1" || p.Labels["x"] != "y" {
		t.Errorf("partial object: %d %s", r.code, r.body)
	}
	var pl metav1.PartialObjectMetadataList
	if r := e.do("GET", cmPath, "", "Accept", list); r.code != 200 || json.Unmarshal(r.body, &pl) != nil || len(pl.Items) != 1 || pl.ResourceVersion == "" {
		t.Errorf("partial list: %d %s", r.code, r.body)
	}
	// Protobuf too, as controller-runtime's metadata client asks.
	if r := e.do("GET", cmPath+"/a", "", "Accept", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"); r.code != 200 {
		t.Errorf("protobuf partial: %d %s", r.code, r.body)
	} else if _, ok := decodeProtobuf(t, r.body).(*metav1.PartialObjectMetadata); !ok {
		t.Errorf("protobuf partial decoded as %T", decodeProtobuf(t, r.body))
	}
	w := e.watch(cmPath+"?watch=true&resourceVersion="+e.currentRV(), "Accept", one)
	e.mustCreate(cmPath, cmJSON("", "b", ""))
	if f := w.next(); json.Unmarshal(f.Object, &p) != nil || p.Kind != "PartialObjectMetadata" || p.Name != "b" {
		t.Errorf("partial watch event %s", f.Object)
	}
	// Failure modes: the list and the single form are not interchangeable. The message names
	// upstream's type: a built-in kind's internal one, a custom resource's unstructured one.
	checkStatus(t, "partial of a list", e.do("GET", cmPath, "", "Accept", one), 406, metav1.StatusReasonNotAcceptable,
		"you requested PartialObjectMetadata, but the requested object is a list (*core.ConfigMapList)")
	checkStatus(t, "partial list of an object", e.do("GET", cmPath+"/a", "", "Accept", list), 406, metav1.StatusReasonNotAcceptable,
		"you requested PartialObjectMetadataList, but the requested object is not a list (*core.ConfigMap)")
	e.mustCreate(widgetPath, widgetJSON("w", ""))
	checkStatus(t, "partial of a widget list", e.do("GET", widgetPath, "", "Accept", one), 406, metav1.StatusReasonNotAcceptable,
		"you requested PartialObjectMetadata, but the requested object is a list (*unstructured.UnstructuredList)")
}
