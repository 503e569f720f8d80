package httpwatch

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/storage"
)

// immortalNamespaces are the namespaces kube-apiserver's NamespaceLifecycle plugin never lets go.
var immortalNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic}

// admitNamespaceDeletion mirrors NamespaceLifecycle's refusal to delete the default, kube-system
// and kube-public namespaces (lifecycle admission.go Admit): 403 Forbidden. It applies with
// Config.RequireNamespaces, which is when those namespaces are meant to exist.
func (h *resourceHandler) admitNamespaceDeletion(name string) error {
	if !h.server.requireNamespaces || !h.res.isCoreNamespaces() || !slices.Contains(immortalNamespaces, name) {
		return nil
	}
	return apierrors.NewForbidden(h.gr(), name, errors.New("this namespace may not be deleted"))
}

// admitNamespaceLifecycle mirrors the NamespaceLifecycle admission plugin's refusal of new content
// (k8s.io/apiserver pkg/admission/plugin/namespace/lifecycle admission.go Admit, for a create): a
// create of a namespaced object in a namespace that is Terminating is 403 Forbidden with the
// NamespaceTerminating cause, so that the namespace controller's emptying of it ends. With
// Config.RequireNamespaces, a create in a namespace that does not exist is the namespace's 404
// NotFound (namespaces "x" not found), as upstream's live lookup answers; without it such a
// create is let through, as objects may name a namespace nobody created. Everything is let through
// when namespaces are not served. Updates and deletes are never refused, as upstream's.
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
	if ns.GetName() == "" {
		if h.server.requireNamespaces {
			return apierrors.NewNotFound(nsHandler.gr(), namespace)
		}
		return nil
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
