package httpwatch

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStatusSubresource covers the status subresource of a built-in kind (pods) and of a custom
// resource (gadgets): an update of the resource keeps the stored status, an update of the status
// keeps everything else, and each records its manager in managedFields.
func TestStatusSubresource(t *testing.T) {
	e := newEnv(t)
	// A new pod's status is the strategy's: Pending, whatever the body says.
	p := e.mustCreate(podPath, `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]},"status":{"phase":"Running"}}`)
	if nested(t, p, "status", "phase") != "Pending" {
		t.Errorf("new pod status %v", p.Object["status"])
	}
	r := e.patch(podPath+"/p/status", mergePatch, `{"spec":{"nodeName":"ignored"},"status":{"phase":"Running","podIP":"10.0.0.1"}}`)
	if o := r.object(t); r.code != 200 || nested(t, o, "status", "phase") != "Running" || nested(t, o, "spec", "nodeName") != nil {
		t.Fatalf("status patch: %d %s", r.code, r.body)
	}
	// GET on the status is the whole object.
	if o := e.do("GET", podPath+"/p/status", "").object(t); nested(t, o, "status", "podIP") != "10.0.0.1" || o.GetName() != "p" {
		t.Errorf("get status %v", o.Object)
	}
	// An update of the pod keeps its status.
	r = e.patch(podPath+"/p", mergePatch, `{"metadata":{"labels":{"a":"b"}},"status":{"phase":"Failed"}}`)
	if o := r.object(t); r.code != 200 || nested(t, o, "status", "phase") != "Running" || o.GetLabels()["a"] != "b" {
		t.Errorf("main patch: %d %s", r.code, r.body)
	}
	// PUT of the status.
	cur := e.do("GET", podPath+"/p", "").object(t)
	cur.Object["status"] = map[string]any{"phase": "Succeeded"}
	cur.Object["spec"] = map[string]any{"containers": []any{}}
	body, _ := cur.MarshalJSON()
	r = e.do("PUT", podPath+"/p/status", string(body))
	if o := r.object(t); r.code != 200 || nested(t, o, "status", "phase") != "Succeeded" || len(nested(t, o, "spec", "containers").([]any)) != 1 {
		t.Errorf("status put: %d %s", r.code, r.body)
	}
	// Apply to the status is tracked under the status subresource.
	r = e.patch(podPath+"/p/status?fieldManager=kubelet", applyPatch, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nstatus:\n  message: hi\n")
	found := false
	for _, m := range r.object(t).GetManagedFields() {
		found = found || (m.Manager == "kubelet" && m.Subresource == "status" && m.Operation == metav1.ManagedFieldsOperationApply)
	}
	if r.code != 200 || !found {
		t.Errorf("status apply: %d %s", r.code, r.body)
	}

	// A custom resource: no status on create; a status update changes nothing else, not even
	// metadata; the generation counts spec changes only.
	g := e.mustCreate(gadgetsPath, `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"size":1},"status":{"ready":true}}`)
	if g.Object["status"] != nil || g.GetGeneration() != 1 {
		t.Errorf("new gadget %v", g.Object)
	}
	r = e.patch(gadgetsPath+"/g/status", mergePatch, `{"metadata":{"labels":{"a":"b"}},"spec":{"size":9},"status":{"ready":true}}`)
	if o := r.object(t); r.code != 200 || nested(t, o, "status", "ready") != true || nested(t, o, "spec", "size") != int64(1) || o.GetLabels() != nil || o.GetGeneration() != 1 {
		t.Errorf("gadget status patch: %d %s", r.code, r.body)
	}
	r = e.patch(gadgetsPath+"/g", mergePatch, `{"spec":{"size":2},"status":{"ready":false}}`)
	if o := r.object(t); r.code != 200 || nested(t, o, "status", "ready") != true || o.GetGeneration() != 2 {
		t.Errorf("gadget patch: %d %s", r.code, r.body)
	}
	// Deployments count spec changes too.
	d := e.mustCreate("/apis/apps/v1/namespaces/default/deployments", `{"metadata":{"name":"d"},"spec":{"replicas":1,"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}`)
	r = e.patch("/apis/apps/v1/namespaces/default/deployments/d", smPatch, `{"spec":{"replicas":3}}`)
	if r.code != 200 || d.GetGeneration() != 1 || r.object(t).GetGeneration() != 2 {
		t.Errorf("deployment generation %d -> %d: %s", d.GetGeneration(), r.object(t).GetGeneration(), r.body)
	}

	// Failure modes.
	rev := e.st.Rev()
	checkStatus(t, "no status", e.do("GET", cmPath+"/a/status", ""), 404, metav1.StatusReasonNotFound, "the server could not find the requested resource")
	checkStatus(t, "missing", e.patch(podPath+"/zz/status", mergePatch, `{}`), 404, metav1.StatusReasonNotFound, `pods "zz" not found`)
	// Server-side apply creates a missing object, but never through a subresource.
	checkStatus(t, "apply to a missing status", e.patch(podPath+"/zz/status?fieldManager=kubelet", applyPatch,
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: zz\nstatus:\n  message: hi\n"), 404, metav1.StatusReasonNotFound, `pods "zz" not found`)
	checkStatus(t, "apply to a missing custom resource's status", e.patch(gadgetsPath+"/zz/status?fieldManager=m", applyPatch,
		"apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: zz\nstatus:\n  ready: true\n"), 404, metav1.StatusReasonNotFound, `gadgets.example.com "zz" not found`)
	cur = e.do("GET", podPath+"/p", "").object(t)
	cur.SetResourceVersion("1")
	body, _ = cur.MarshalJSON()
	checkStatus(t, "stale status", e.do("PUT", podPath+"/p/status", string(body)), 409, metav1.StatusReasonConflict,
		`Operation cannot be fulfilled on pods "p": the object has been modified; please apply your changes to the latest version and try again`)
	checkStatus(t, "delete status", e.do("DELETE", podPath+"/p/status", ""), 405, metav1.StatusReasonMethodNotAllowed, "")
	e.unchanged(rev, "refused status requests")
}

// TestGracefulDeletion covers pods' graceful deletion (rest.BeforeDelete with podStrategy): a pod
// bound to a node is marked with a deletionTimestamp its grace period ahead and kept until a delete
// with gracePeriodSeconds=0; a shorter grace period shortens it; an unbound pod goes at once (as
// upstream, after an update that marks it with a zero grace period).
func TestGracefulDeletion(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(podPath, `{"metadata":{"name":"bound"},"spec":{"nodeName":"n1","terminationGracePeriodSeconds":60}}`)
	e.mustCreate(podPath, `{"metadata":{"name":"unbound"},"spec":{}}`)
	w := e.watch(podPath + "?watch=true&resourceVersion=" + e.currentRV())
	now := e.clock.Now()

	r := e.do("DELETE", podPath+"/bound", "")
	o := r.object(t)
	if r.code != 200 || o.GetDeletionTimestamp() == nil || !o.GetDeletionTimestamp().Time.Equal(now.Add(60*time.Second).Truncate(time.Second)) ||
		*o.GetDeletionGracePeriodSeconds() != 60 {
		t.Fatalf("graceful delete: %d %s", r.code, r.body)
	}
	w.expect("MODIFIED bound")
	// The same or a longer period changes nothing.
	rev := e.st.Rev()
	if r := e.do("DELETE", podPath+"/bound?gracePeriodSeconds=90", ""); r.code != 200 || *r.object(t).GetDeletionGracePeriodSeconds() != 60 {
		t.Errorf("longer grace: %d %s", r.code, r.body)
	}
	e.unchanged(rev, "a longer grace period")
	// A shorter one moves the deletionTimestamp back.
	r = e.do("DELETE", podPath+"/bound?gracePeriodSeconds=10", "")
	if o := r.object(t); r.code != 200 || *o.GetDeletionGracePeriodSeconds() != 10 || !o.GetDeletionTimestamp().Time.Equal(now.Add(10*time.Second).Truncate(time.Second)) {
		t.Errorf("shorter grace: %d %s", r.code, r.body)
	}
	w.expect("MODIFIED bound")
	// Zero deletes it, as the kubelet would: the grace period is shortened to 0, then the pod is
	// deleted, two events as upstream.
	if r := e.do("DELETE", podPath+"/bound", `{"gracePeriodSeconds":0}`); r.code != 200 {
		t.Errorf("forced delete: %d %s", r.code, r.body)
	}
	w.expect("MODIFIED bound", "DELETED bound")
	if r := e.do("DELETE", podPath+"/unbound", ""); r.code != 200 || r.object(t).GetName() != "unbound" {
		t.Errorf("unbound delete: %d %s", r.code, r.body)
	}
	w.expect("MODIFIED unbound", "DELETED unbound")
	checkStatus(t, "gone", e.do("GET", podPath+"/bound", ""), 404, metav1.StatusReasonNotFound, `pods "bound" not found`)
}

// TestNamespaces covers the namespace registry: a new namespace is Active with the kubernetes
// finalizer; a delete marks it Terminating and keeps it until finalize empties spec.finalizers;
// an update of the namespace may not change them.
func TestNamespaces(t *testing.T) {
	e := newEnv(t)
	const nsPath = "/api/v1/namespaces"
	ns := e.mustCreate(nsPath, `{"metadata":{"name":"team"}}`)
	if nested(t, ns, "status", "phase") != "Active" || len(nested(t, ns, "spec", "finalizers").([]any)) != 1 {
		t.Fatalf("new namespace %v", ns.Object)
	}
	if r := e.patch(nsPath+"/team", mergePatch, `{"spec":{"finalizers":[]}}`); r.code != 200 || len(nested(t, r.object(t), "spec", "finalizers").([]any)) != 1 {
		t.Errorf("namespace update changed its finalizers: %d %s", r.code, r.body)
	}
	r := e.do("DELETE", nsPath+"/team", "")
	if o := r.object(t); r.code != 200 || nested(t, o, "status", "phase") != "Terminating" || o.GetDeletionTimestamp() == nil {
		t.Fatalf("namespace delete: %d %s", r.code, r.body)
	}
	if r := e.do("GET", nsPath+"/team", ""); r.code != 200 {
		t.Fatalf("terminating namespace gone: %d", r.code)
	}
	cur := e.do("GET", nsPath+"/team", "").object(t)
	cur.Object["spec"] = map[string]any{"finalizers": []any{}}
	body, _ := cur.MarshalJSON()
	if r := e.do("PUT", nsPath+"/team/finalize", string(body)); r.code != 200 {
		t.Fatalf("finalize: %d %s", r.code, r.body)
	}
	checkStatus(t, "finalized", e.do("GET", nsPath+"/team", ""), 404, metav1.StatusReasonNotFound, `namespaces "team" not found`)

	// Failure modes.
	rev := e.st.Rev()
	checkStatus(t, "bad name", e.do("POST", nsPath, `{"metadata":{"name":"Team.X"}}`), 422, metav1.StatusReasonInvalid, "…")
	checkStatus(t, "patch finalize", e.patch(nsPath+"/team/finalize", mergePatch, `{}`), 405, metav1.StatusReasonMethodNotAllowed, "")
	e.unchanged(rev, "refused namespace requests")
}

// TestDeleteCollection covers deletecollection (registry.Store.DeleteCollection): the selected
// objects are deleted one by one as by DELETE (finalizers honoured) and the answer lists them.
func TestDeleteCollection(t *testing.T) {
	e := newEnv(t)
	e.mustCreate(cmPath, cmJSON("", "a", `"labels":{"app":"x"}`))
	e.mustCreate(cmPath, cmJSON("", "b", `"labels":{"app":"x"},"finalizers":["example.com/hold"]`))
	e.mustCreate(cmPath, cmJSON("", "c", `"labels":{"app":"y"}`))
	e.mustCreate("/api/v1/namespaces/other/configmaps", cmJSON("", "d", `"labels":{"app":"x"}`))

	r := e.do("DELETE", cmPath+"?labelSelector=app%3Dx", "")
	if r.code != 200 || itemNames(t, r.list(t)) != "a,b" || r.list(t)["kind"] != "ConfigMapList" {
		t.Fatalf("deletecollection: %d %s", r.code, r.body)
	}
	if got := itemNames(t, e.do("GET", "/api/v1/configmaps", "").list(t)); got != "b,c,d" {
		t.Errorf("left: %s", got)
	}
	if b := e.do("GET", cmPath+"/b", "").object(t); b.GetDeletionTimestamp() == nil {
		t.Errorf("b with a finalizer not marked: %v", b.Object)
	}
	// dryRun deletes nothing.
	rev := e.st.Rev()
	if r := e.do("DELETE", cmPath+"?dryRun=All", ""); r.code != 200 || !strings.Contains(itemNames(t, r.list(t)), "c") {
		t.Errorf("dry-run deletecollection: %d %s", r.code, r.body)
	}
	e.unchanged(rev, "a dry-run deletecollection")
	// A limit deletes one page and answers with it as listed: its continue token names the rest.
	e.mustCreate(cmPath, cmJSON("", "e", ""))
	r = e.do("DELETE", cmPath+"?limit=1", "")
	page := r.list(t)
	md, _ := page["metadata"].(map[string]any)
	if r.code != 200 || itemNames(t, page) != "b" || md["continue"] == nil || md["continue"] == "" || md["remainingItemCount"] != float64(2) {
		t.Errorf("deletecollection of one page: %d %s", r.code, r.body)
	}
	if got := itemNames(t, e.do("GET", cmPath, "").list(t)); got != "b,c,e" {
		t.Errorf("left after one page: %s", got)
	}
	rev = e.st.Rev()
	// Failure modes.
	checkStatus(t, "bad selector", e.do("DELETE", cmPath+"?labelSelector=%3D%3D", ""), 400, metav1.StatusReasonBadRequest, "…")
	checkStatus(t, "bad field label", e.do("DELETE", cmPath+"?fieldSelector=spec.x%3D1", ""), 400, metav1.StatusReasonBadRequest, "…")
	checkStatus(t, "all namespaces", e.do("DELETE", "/api/v1/configmaps", ""), 405, metav1.StatusReasonMethodNotAllowed, "")
	e.unchanged(rev, "refused deletecollections")
}
