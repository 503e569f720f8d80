package httpwatch

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDeletePropagation marks an object for the garbage collector as the generic registry store
// does: Foreground keeps it with the foregroundDeletion finalizer, Orphan (and orphanDependents)
// with the orphan finalizer, Background deletes it; events, which garbage collection does not
// concern, are deleted whatever the policy; a removed finalizer lets the deletion finish.
func TestDeletePropagation(t *testing.T) {
	e := newEnv(t)
	const cms = "/api/v1/namespaces/default/configmaps"
	for _, c := range []struct {
		name, body string
		finalizers []string // nil: deleted
		code       int
	}{
		{"fg", `{"propagationPolicy":"Foreground"}`, []string{metav1.FinalizerDeleteDependents}, http.StatusOK},
		{"orphan", `{"propagationPolicy":"Orphan"}`, []string{metav1.FinalizerOrphanDependents}, http.StatusOK},
		{"orphandeps", `{"orphanDependents":true}`, []string{metav1.FinalizerOrphanDependents}, http.StatusOK},
		{"bg", `{"propagationPolicy":"Background"}`, nil, http.StatusOK},
		{"nodeps", `{"orphanDependents":false}`, nil, http.StatusOK},
		{"default", ``, nil, http.StatusOK},
	} {
		e.mustCreate(cms, cmJSON("", c.name, ""))
		r := e.do("DELETE", cms+"/"+c.name, c.body)
		if r.code != c.code {
			t.Errorf("%s: %d %s", c.name, r.code, r.body)
			continue
		}
		got := e.do("GET", cms+"/"+c.name, "")
		if c.finalizers == nil {
			if got.code != http.StatusNotFound {
				t.Errorf("%s: still there: %s", c.name, got.body)
			}
			continue
		}
		obj := got.object(t)
		if !slices.Equal(obj.GetFinalizers(), c.finalizers) || obj.GetDeletionTimestamp() == nil ||
			obj.GetDeletionGracePeriodSeconds() == nil || *obj.GetDeletionGracePeriodSeconds() != 0 {
			t.Errorf("%s: finalizers %v, deletionTimestamp %v, want %v and marked", c.name, obj.GetFinalizers(), obj.GetDeletionTimestamp(), c.finalizers)
		}
	}
	// A Foreground delete of an object marked Orphan switches the finalizer, as upstream.
	r := e.do("DELETE", cms+"/orphan", `{"propagationPolicy":"Foreground"}`)
	if fs := r.object(t).GetFinalizers(); r.code != http.StatusOK || !slices.Equal(fs, []string{metav1.FinalizerDeleteDependents}) {
		t.Errorf("re-delete Foreground: %d %v", r.code, fs)
	}
	// The garbage collector's removal of the finalizer deletes the object.
	obj := e.do("GET", cms+"/fg", "").object(t)
	obj.SetFinalizers(nil)
	body, _ := obj.MarshalJSON()
	if r := e.do("PUT", cms+"/fg", string(body)); r.code != http.StatusOK {
		t.Fatalf("removing the finalizer: %d %s", r.code, r.body)
	}
	if r := e.do("GET", cms+"/fg", ""); r.code != http.StatusNotFound {
		t.Errorf("after its last finalizer went: %d %s", r.code, r.body)
	}

	// Events are not garbage collected: no finalizer, deleted at once.
	e.mustCreate("/api/v1/namespaces/default/events", `{"metadata":{"name":"ev"},"involvedObject":{"kind":"Pod","name":"p"}}`)
	if r := e.do("DELETE", "/api/v1/namespaces/default/events/ev", `{"propagationPolicy":"Foreground"}`); r.code != http.StatusOK {
		t.Fatalf("delete event: %d %s", r.code, r.body)
	}
	if r := e.do("GET", "/api/v1/namespaces/default/events/ev", ""); r.code != http.StatusNotFound {
		t.Errorf("event kept by a Foreground delete: %s", r.body)
	}

	// Failure modes: both ways of asking, or an unknown policy, are refused and change nothing.
	e.mustCreate(cms, cmJSON("", "kept", ""))
	rev := e.st.Rev()
	r = e.do("DELETE", cms+"/kept", `{"propagationPolicy":"Orphan","orphanDependents":true}`)
	wantStatus(t, r, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
	r = e.do("DELETE", cms+"/kept", `{"propagationPolicy":"Sideways"}`)
	wantStatus(t, r, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "")
	e.unchanged(rev, "refused deletes")
}

// TestEventDeleteDropsGCFinalizers: a delete of an event, whose kind the garbage collector does not
// concern, removes the orphan and foregroundDeletion finalizers whatever the options ask, as the
// registry store with the policy Unsupported: an event holding only those is deleted, one holding
// another is marked and keeps that one; with a resourceVersion precondition the first is a 409,
// the precondition having become the abandoned update's empty resourceVersion.
func TestEventDeleteDropsGCFinalizers(t *testing.T) {
	e := newEnv(t)
	const events = "/api/v1/namespaces/default/events"
	event := func(name, finalizers string) string {
		return `{"metadata":{"name":"` + name + `","finalizers":[` + finalizers + `]},"involvedObject":{"kind":"Pod","name":"p"}}`
	}
	for _, c := range []struct{ finalizer, body string }{
		{`"orphan"`, `{"propagationPolicy":"Orphan"}`}, {`"orphan"`, `{"orphanDependents":true}`},
		{`"foregroundDeletion"`, `{"propagationPolicy":"Foreground"}`}, {`"orphan"`, ``}, {`"foregroundDeletion"`, ``},
	} {
		body := c.body
		e.mustCreate(events, event("held", c.finalizer))
		if r := e.do("DELETE", events+"/held", body); r.code != http.StatusOK {
			t.Fatalf("delete %s %s: %d %s", c.finalizer, body, r.code, r.body)
		}
		if r := e.do("GET", events+"/held", ""); r.code != http.StatusNotFound {
			t.Errorf("delete %s %s kept the event: %s", c.finalizer, body, r.body)
		}
	}
	e.mustCreate(events, event("kept", `"orphan","example.com/keep"`))
	obj := e.do("DELETE", "/apis/events.k8s.io/v1/namespaces/default/events/kept", `{"propagationPolicy":"Orphan"}`).object(t)
	if !slices.Equal(obj.GetFinalizers(), []string{"example.com/keep"}) || obj.GetDeletionTimestamp() == nil {
		t.Errorf("an event with another finalizer: finalizers %v, deletionTimestamp %v; want that one, marked", obj.GetFinalizers(), obj.GetDeletionTimestamp())
	}

	// Failure mode: the precondition, even the current resourceVersion, fails, as upstream's.
	held := e.mustCreate(events, event("held", `"orphan"`))
	rev := e.st.Rev()
	r := e.do("DELETE", events+"/held", `{"preconditions":{"resourceVersion":"`+held.GetResourceVersion()+`"}}`)
	wantStatus(t, r, http.StatusConflict, metav1.StatusReasonConflict, `Operation cannot be fulfilled on events "held": StorageError: invalid object, Code: 4, Key: /registry/events/default/held, `+
		"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: ResourceVersion in precondition: , ResourceVersion in object meta: "+held.GetResourceVersion())
	e.unchanged(rev, "a delete whose precondition became empty")
}

// TestDeleteRemovingLastFinalizer: a delete whose options remove an object's only finalizer (orphan,
// with propagationPolicy Background) deletes the object as stored, in one write, as the registry
// store abandons its update (errDeleteNow): a watch sees the DELETED object with the finalizer and
// no MODIFIED before it. As upstream, a resourceVersion precondition then fails: it becomes the
// abandoned update's empty resourceVersion.
func TestDeleteRemovingLastFinalizer(t *testing.T) {
	e := newEnv(t)
	const cms = "/api/v1/namespaces/default/configmaps"
	e.mustCreate(cms, cmJSON("", "held", `"finalizers":["orphan"]`))
	rev := e.st.Rev()
	w := e.watch(cms + "?watch=true&resourceVersion=" + strconv.FormatInt(rev, 10))
	if r := e.do("DELETE", cms+"/held", `{"propagationPolicy":"Background"}`); r.code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	if got := e.st.Rev(); got != rev+1 {
		t.Errorf("the delete made %d writes, want 1", got-rev)
	}
	fs := w.expect("DELETED held")
	if _, m, _ := fs[0].Meta(); !slices.Equal(m.Finalizers, []string{metav1.FinalizerOrphanDependents}) {
		t.Errorf("DELETED object's finalizers %v, want it as stored", m.Finalizers)
	}

	// Failure mode: with a resourceVersion precondition, even the current one, a 409.
	held := e.mustCreate(cms, cmJSON("", "held2", `"finalizers":["orphan"]`))
	rev = e.st.Rev()
	r := e.do("DELETE", cms+"/held2", `{"propagationPolicy":"Background","preconditions":{"resourceVersion":"`+held.GetResourceVersion()+`"}}`)
	wantStatus(t, r, http.StatusConflict, metav1.StatusReasonConflict, `Operation cannot be fulfilled on configmaps "held2": StorageError: invalid object, Code: 4, Key: /registry/configmaps/default/held2, `+
		"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: ResourceVersion in precondition: , ResourceVersion in object meta: "+held.GetResourceVersion())
	e.unchanged(rev, "a delete whose precondition became empty")

	// A dryRun answers with the abandoned update's output: no object, only its kind, as upstream's
	// store.Delete answers with its NewFunc's.
	const widgets = "/apis/example.com/v1/namespaces/default/widgets"
	e.mustCreate(widgets, widgetJSON("held", `"finalizers":["orphan"]`))
	rev = e.st.Rev()
	r = e.do("DELETE", widgets+"/held", `{"propagationPolicy":"Background","dryRun":["All"]}`)
	if got := strings.TrimSpace(string(r.body)); r.code != http.StatusOK || got != `{"apiVersion":"example.com/v1","kind":"Widget"}` {
		t.Errorf("dryRun delete: %d %s", r.code, got)
	}
	e.unchanged(rev, "a dryRun delete")
}
