package httpwatch

import (
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNamespaceLifecycleAdmission refuses a create in a Terminating namespace as the
// NamespaceLifecycle admission plugin does (403, the NamespaceTerminating cause), and lets creates
// in an Active or a missing namespace through.
func TestNamespaceLifecycleAdmission(t *testing.T) {
	e := newEnv(t)
	e.mustCreate("/api/v1/namespaces", `{"metadata":{"name":"t"}}`)
	e.mustCreate("/api/v1/namespaces/t/configmaps", cmJSON("", "before", ""))
	if r := e.do("DELETE", "/api/v1/namespaces/t", ""); r.code != http.StatusOK {
		t.Fatalf("delete namespace: %d %s", r.code, r.body)
	}
	rev := e.st.Rev()
	r := e.do("POST", "/api/v1/namespaces/t/configmaps", cmJSON("", "after", ""))
	wantStatus(t, r, http.StatusForbidden, metav1.StatusReasonForbidden,
		`configmaps "after" is forbidden: unable to create new content in namespace t because it is being terminated`)
	if s := r.status(t); s.Details == nil || len(s.Details.Causes) != 1 || s.Details.Causes[0].Type != corev1.NamespaceTerminatingCause ||
		s.Details.Causes[0].Field != "metadata.namespace" {
		t.Errorf("details %+v", s.Details)
	}
	e.unchanged(rev, "a refused create")
	// Updates of what is already there go on, so that finalizers can be removed.
	if r := e.do("PUT", "/api/v1/namespaces/t/configmaps/before", cmJSON("t", "before", "")); r.code != http.StatusOK {
		t.Errorf("update in a terminating namespace: %d %s", r.code, r.body)
	}
	e.mustCreate("/api/v1/namespaces", `{"metadata":{"name":"a"}}`)
	e.mustCreate("/api/v1/namespaces/a/configmaps", cmJSON("", "x", ""))
	e.mustCreate("/api/v1/namespaces/missing/configmaps", cmJSON("", "x", ""))
	// Without RequireNamespaces even default may go.
	e.mustCreate("/api/v1/namespaces", `{"metadata":{"name":"default"}}`)
	if r := e.do("DELETE", "/api/v1/namespaces/default", ""); r.code != http.StatusOK {
		t.Errorf("delete of default without RequireNamespaces: %d %s", r.code, r.body)
	}
}

// TestNamespaceLifecycleMissingNamespace: with RequireNamespaces, a create in a namespace that does
// not exist is the namespace's 404, as the NamespaceLifecycle plugin answers, whether by POST or by
// server-side apply (a create on update); nothing is written. Namespaces themselves, creates in a
// namespace that exists, and cluster-scoped objects are let through.
func TestNamespaceLifecycleMissingNamespace(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.RequireNamespaces = true })
	rev := e.st.Rev()
	r := e.do("POST", "/api/v1/namespaces/missing/configmaps", cmJSON("", "x", ""))
	wantStatus(t, r, http.StatusNotFound, metav1.StatusReasonNotFound, `namespaces "missing" not found`)
	if s := r.status(t); s.Details == nil || s.Details.Kind != "namespaces" || s.Details.Name != "missing" {
		t.Errorf("details %+v", s.Details)
	}
	r = e.do("PATCH", "/api/v1/namespaces/missing/configmaps/x?fieldManager=m", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`,
		"Content-Type", "application/apply-patch+yaml")
	wantStatus(t, r, http.StatusNotFound, metav1.StatusReasonNotFound, `namespaces "missing" not found`)
	e.unchanged(rev, "creates in a missing namespace")

	// The namespaces kube-apiserver keeps may not be deleted; others may.
	e.mustCreate("/api/v1/namespaces", `{"metadata":{"name":"default"}}`)
	r = e.do("DELETE", "/api/v1/namespaces/default", "")
	wantStatus(t, r, http.StatusForbidden, metav1.StatusReasonForbidden, `namespaces "default" is forbidden: this namespace may not be deleted`)

	e.mustCreate("/api/v1/namespaces", `{"metadata":{"name":"missing"}}`)
	e.mustCreate("/api/v1/namespaces/missing/configmaps", cmJSON("", "x", ""))
	e.mustCreate("/apis/example.com/v1/gizmos", `{"apiVersion":"example.com/v1","kind":"Gizmo","metadata":{"name":"g"}}`)
	if r := e.do("DELETE", "/api/v1/namespaces/missing", ""); r.code != http.StatusOK {
		t.Errorf("delete of an ordinary namespace: %d %s", r.code, r.body)
	}
}
