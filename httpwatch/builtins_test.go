package httpwatch

import (
	"encoding/json"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rowCells are the cells of each row of a Table, as JSON.
func rowCells(tbl *metav1.Table) []string {
	var out []string
	for _, row := range tbl.Rows {
		cells, _ := json.Marshal(row.Cells)
		out = append(out, string(cells))
	}
	return out
}

// TestBuiltInBookmarkTable: the row of a watch-list's initial-events-end BOOKMARK read as Table is
// the printer's row of the kind's zero object, as kube-apiserver prints the storage's new object:
// a deployment's Selector is "" (no selector selects nothing), a service's Type "" and External-IP
// <unknown> (no type, none defaulted); and a deployment's bookmark object has spec.replicas 0, the
// internal type's zero converted to apps/v1.
func TestBuiltInBookmarkTable(t *testing.T) {
	e := newEnv(t)
	const list = "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
	for _, c := range []struct{ path, cells string }{
		{deploymentsPath, `["","0/0",0,0,"\u003cunknown\u003e","","",""]`},
		{"/api/v1/namespaces/default/services", `["","","\u003cnone\u003e","\u003cunknown\u003e","\u003cnone\u003e","\u003cunknown\u003e","\u003cnone\u003e"]`},
		{"/api/v1/namespaces/default/pods", `["","0/0","","0","\u003cunknown\u003e","\u003cnone\u003e","\u003cnone\u003e","\u003cnone\u003e","\u003cnone\u003e"]`},
		{"/api/v1/namespaces/default/configmaps", `["",0,"\u003cunknown\u003e"]`},
		{"/api/v1/namespaces/default/secrets", `["","",0,"\u003cunknown\u003e"]`},
	} {
		w := e.watch(c.path+list, "Accept", tableAccept)
		f := w.next()
		var table metav1.Table
		if err := json.Unmarshal(f.Object, &table); err != nil || f.Type != "BOOKMARK" {
			t.Fatalf("%s: %s %s: %v", c.path, f.Type, f.Object, err)
		}
		if cells := rowCells(&table); !slices.Equal(cells, []string{c.cells}) {
			t.Errorf("%s: the bookmark's rows %v, want %s", c.path, cells, c.cells)
		}
		w.close()
	}
	w := e.watch(deploymentsPath + list)
	f := w.next()
	var obj map[string]any
	if err := json.Unmarshal(f.Object, &obj); err != nil || f.Type != "BOOKMARK" {
		t.Fatalf("%s %s: %v", f.Type, f.Object, err)
	}
	if replicas, found, _ := unstructured.NestedFieldNoCopy(obj, "spec", "replicas"); !found || replicas != float64(0) {
		t.Errorf("the bookmark's deployment has spec.replicas %v (found %v): %s", replicas, found, f.Object)
	}
	w.close()
}

// TestBuiltInPrinterCells: a deployment's Selector cell is its whole label selector's string form
// (matchExpressions too); a service's External-IP depends on its type, as getServiceExternalIP's:
// a load balancer without ingress is <pending>, an external name shows it.
func TestBuiltInPrinterCells(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(deploymentsPath, deployment("d", `"selector":{"matchLabels":{"a":"b"},"matchExpressions":[{"key":"t","operator":"In","values":["x"]}]},`))
	e.mustCreate(deploymentsPath, deployment("bad", `"selector":{"matchExpressions":[{"key":"a","operator":"Bogus"}]},`))
	rows := rowCells(e.do("GET", deploymentsPath, "", "Accept", tableAccept).table(t))
	want := []string{`["bad","0/0",0,0,"0s","c","i","\u003cinvalid\u003e"]`, `["d","0/0",0,0,"0s","c","i","a=b,t in (x)"]`}
	if !slices.Equal(rows, want) {
		t.Errorf("deployment rows %v, want %v", rows, want)
	}
	const services = "/api/v1/namespaces/default/services"
	for _, s := range []string{
		`{"metadata":{"name":"lb"},"spec":{"type":"LoadBalancer","ports":[{"port":80}]}}`,
		`{"metadata":{"name":"lbx"},"spec":{"type":"LoadBalancer","externalIPs":["10.0.0.9"],"ports":[{"port":80}]}}`,
		`{"metadata":{"name":"n"},"spec":{"type":"ExternalName","externalName":"db.example.com"}}`,
		`{"metadata":{"name":"p"},"spec":{"clusterIPs":["10.0.0.1"],"selector":{"app":"a"},"ports":[{"port":80}]}}`,
	} {
		e.mustCreate(services, s)
	}
	rows = rowCells(e.do("GET", services, "", "Accept", tableAccept).table(t))
	want = []string{
		`["lb","LoadBalancer","\u003cnone\u003e","\u003cpending\u003e","80/TCP","0s","\u003cnone\u003e"]`,
		`["lbx","LoadBalancer","\u003cnone\u003e","10.0.0.9","80/TCP","0s","\u003cnone\u003e"]`,
		`["n","ExternalName","\u003cnone\u003e","db.example.com","\u003cnone\u003e","0s","\u003cnone\u003e"]`,
		`["p","ClusterIP","10.0.0.1","\u003cnone\u003e","80/TCP","0s","app=a"]`,
	}
	if !slices.Equal(rows, want) {
		t.Errorf("service rows\n%v, want\n%v", rows, want)
	}
}

// TestDeploymentStatusUpdate: as kube-apiserver's deployment strategies, a new deployment has an
// empty status, so that a status update that changes nothing (the same status, labels, which the
// status strategy keeps) writes nothing and names no status manager; one that changes the status
// records only the status in its manager's fields.
func TestDeploymentStatusUpdate(t *testing.T) {
	e := newEnv(t)
	body := deployment("d", `"replicas":1,"selector":{"matchLabels":{"a":"b"}},`)
	if d := e.mustCreate(deploymentsPath, body); d.Object["status"] == nil {
		t.Errorf("a new deployment has no status: %v", d.Object)
	}
	rev := e.st.Rev()
	if r := e.do("PUT", deploymentsPath+"/d/status", body); r.code != 200 {
		t.Fatalf("PUT status: %d %s", r.code, r.body)
	}
	e.unchanged(rev, "a status PUT of the stored status")
	if r := e.patch(deploymentsPath+"/d/status", mergePatch, `{"metadata":{"labels":{"x":"y"}}}`); r.code != 200 || r.object(t).GetLabels() != nil {
		t.Fatalf("status patch of the labels: %d %s", r.code, r.body)
	}
	e.unchanged(rev, "a status patch of the labels")
	r := e.patch(deploymentsPath+"/d/status", mergePatch, `{"metadata":{"labels":{"x":"y"}},"status":{"replicas":1}}`)
	if r.code != 200 || r.object(t).GetLabels() != nil {
		t.Fatalf("status patch: %d %s", r.code, r.body)
	}
	for _, m := range r.object(t).GetManagedFields() {
		if got := string(m.FieldsV1.Raw); m.Subresource == "status" && got != `{"f:status":{"f:replicas":{}}}` {
			t.Errorf("the status manager's fields: %s", got)
		}
	}
}

// TestDeploymentGeneration: as deploymentStrategy, a change of the annotations starts a new
// generation, as a change of spec does; a change of the labels does not.
func TestDeploymentGeneration(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(deploymentsPath, deployment("d", `"selector":{"matchLabels":{"a":"b"}},`))
	for _, c := range []struct {
		patch      string
		generation int64
	}{
		{`{"metadata":{"labels":{"l":"1"}}}`, 1},
		{`{"metadata":{"annotations":{"a":"1"}}}`, 2},
		{`{"metadata":{"annotations":{"a":"1"}}}`, 2},
		{`{"spec":{"replicas":3}}`, 3},
	} {
		r := e.patch(deploymentsPath+"/d", mergePatch, c.patch)
		if r.code != 200 || r.object(t).GetGeneration() != c.generation {
			t.Errorf("%s: %d generation %d, want %d", c.patch, r.code, r.object(t).GetGeneration(), c.generation)
		}
	}
}

// TestPodStatusUpdate: as podStatusStrategy, an update of a pod's status keeps its owner
// references, and its manager claims none of them; labels it changes.
func TestPodStatusUpdate(t *testing.T) {
	e := newEnv(t)
	const pods = "/api/v1/namespaces/default/pods"
	owner := `{"apiVersion":"v1","kind":"ConfigMap","name":"o","uid":"11111111-1111-1111-1111-111111111111"}`
	e.mustCreate(pods, `{"metadata":{"name":"p","ownerReferences":[`+owner+`]},"spec":{"containers":[{"name":"c","image":"i"}]}}`)
	r := e.patch(pods+"/p/status", mergePatch, `{"metadata":{"ownerReferences":null,"labels":{"x":"y"}},"status":{"phase":"Running"}}`)
	p := r.object(t)
	if r.code != 200 || len(p.GetOwnerReferences()) != 1 || p.GetLabels()["x"] != "y" {
		t.Fatalf("status patch: %d %s", r.code, r.body)
	}
	for _, m := range p.GetManagedFields() {
		if got := string(m.FieldsV1.Raw); m.Subresource == "status" && got != `{"f:metadata":{"f:labels":{".":{},"f:x":{}}},"f:status":{"f:phase":{}}}` {
			t.Errorf("the status manager's fields: %s", got)
		}
	}
}
