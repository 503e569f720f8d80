package httpwatch

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSizeLimits refuses what kube-apiserver over etcd refuses, with its answers: a ConfigMap or
// Secret holding over 1 MiB is invalid (422), a custom resource etcd finds too large is etcd's
// error (500, as the apiserver passes it on), a body over 3 MiB is 413; up to the limits, objects
// are stored.
func TestSizeLimits(t *testing.T) {
	e := newEnv(t)
	const mib = 1024 * 1024
	cmWith := func(name, field string, value string) string {
		return fmt.Sprintf(`{"metadata":{"name":%q},%q:{"k":%q}}`, name, field, value)
	}
	e.mustCreate("/api/v1/namespaces/default/configmaps", cmWith("full", "data", strings.Repeat("x", mib)))
	rev := e.st.Rev()
	wantStatus(t, e.do("POST", "/api/v1/namespaces/default/configmaps", cmWith("big", "data", strings.Repeat("x", mib+1))),
		http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, `ConfigMap "big" is invalid: []: Too long: may not be more than 1048576 bytes`)
	binary := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", mib+1)))
	wantStatus(t, e.do("POST", "/api/v1/namespaces/default/configmaps", cmWith("bin", "binaryData", binary)),
		http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, `ConfigMap "bin" is invalid: []: Too long: may not be more than 1048576 bytes`)
	wantStatus(t, e.do("POST", "/api/v1/namespaces/default/secrets", cmWith("s", "stringData", strings.Repeat("x", mib+1))),
		http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, `Secret "s" is invalid: data: Too long: may not be more than 1048576 bytes`)
	// An update is validated alike.
	wantStatus(t, e.do("PUT", "/api/v1/namespaces/default/configmaps/full", cmWith("full", "data", strings.Repeat("x", mib+1))),
		http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, `ConfigMap "full" is invalid: []: Too long: may not be more than 1048576 bytes`)
	// Over etcd's --max-request-bytes (1.5 MiB), etcd's own error.
	r := e.do("POST", "/apis/example.com/v1/namespaces/default/widgets", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"a":"`+strings.Repeat("x", 3*mib/2)+`"}}`)
	if s := r.status(t); r.code != http.StatusInternalServerError || s.Message != "etcdserver: request is too large" {
		t.Errorf("a widget over etcd's limit: %d %s", r.code, s.Message)
	}
	// Over the apiserver's body limit (3 MiB), 413 before anything is decoded.
	wantStatus(t, e.do("POST", "/api/v1/namespaces/default/configmaps", cmWith("huge", "data", strings.Repeat("x", 3*mib))),
		http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, "Request entity too large: limit is 3145728")
	e.unchanged(rev, "refused writes")
}
