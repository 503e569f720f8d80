package httpwatch

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/storage"
)

// admitNamespaceLifecycle mirrors the NamespaceLifecycle admission plugin's refusal of new content
// in a namespace being deleted (plugin/pkg/admission/namespace/lifecycle admission.go Admit): a
// create of a namespaced object in a namespace that is Terminating is 403 Forbidden with the
// NamespaceTerminating cause, so that the namespace controller's emptying of it ends. A namespace
// that does not exist is let through (unlike upstream, which answers 404 NotFound), as objects
// may name a namespace nobody created; so is everything when namespaces are not served.
func (h *resourceHandler) admitNamespaceLifecycle(ctx context.Context, namespace, name string) error {
	if !h.res.Namespaced || namespace == "" {
		return nil
	}
	nsHandler := h.server.resources[groupVersion{"", "v1"}]["namespaces"]
	if nsHandler == nil || !nsHandler.res.isCoreNamespaces() {
		return nil
	}
	ns := &unstructured.Unstructured{}
	key, err := nsHandler.key("", namespace)
	if err != nil {
		return nil
	}
	if err := nsHandler.storage.Get(ctx, key, storage.GetOptions{IgnoreNotFound: true}, ns); err != nil {
		return err
	}
	if phase, _, _ := unstructured.NestedString(ns.Object, "status", "phase"); phase != string(corev1.NamespaceTerminating) {
		return nil
	}
	// admission.NewForbidden's form: the resource and name, then the reason.
	err = apierrors.NewForbidden(h.gr(), name, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", namespace))
	se := err.(*apierrors.StatusError)
	se.ErrStatus.Details.Causes = append(se.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    corev1.NamespaceTerminatingCause,
		Message: fmt.Sprintf("namespace %s is being terminated", namespace),
		Field:   "metadata.namespace",
	})
	return err
}
