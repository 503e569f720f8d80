package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

var namespacesGVR = corev1.SchemeGroupVersion.WithResource("namespaces")

// errContentRemaining is the namespace controller's ResourcesRemainingError: the namespace is
// requeued after the estimate.
type errContentRemaining struct{ estimate time.Duration }

func (e errContentRemaining) Error() string {
	return fmt.Sprintf("some content remains in the namespace, estimate %v before it is removed", e.estimate)
}

// namespaceController mirrors the kube-controller-manager's namespace controller
// (pkg/controller/namespace namespace_controller.go and deletion/namespaced_resources_deleter.go):
// a namespace with a deletionTimestamp is emptied, resource by resource, with deletecollection
// (Background propagation), its status conditions say what remains and why, and once nothing
// remains the "kubernetes" finalizer is removed through the finalize subresource, after which the
// apiserver deletes it. Besides upstream's timed requeue, any change of an object in a terminating
// namespace requeues it, so that it goes as soon as its last object does.
type namespaceController struct {
	*clients
	queue interface {
		Add(string)
		AddAfter(string, time.Duration)
	}
}

func newNamespaceController(c *clients) (interface{ ShutDown() }, func(context.Context), error) {
	if _, ok := c.resource(namespacesGVR); !ok {
		return nil, nil, fmt.Errorf("%w: the namespace controller needs core/v1 namespaces served", ErrInvalidConfig)
	}
	q := newQueue[string](c, Namespace)
	nc := &namespaceController{clients: c, queue: q}
	enqueueNamespace := func(obj any) {
		if m, ok := metaOf(obj); ok && m.DeletionTimestamp != nil {
			q.Add(m.Name)
		}
	}
	if _, err := c.factory.ForResource(namespacesGVR).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueNamespace,
		UpdateFunc: func(_, obj any) { enqueueNamespace(obj) },
	}); err != nil {
		return nil, nil, err
	}
	// Content changes requeue their namespace if it is terminating.
	nsLister := c.factory.ForResource(namespacesGVR).Lister()
	content := func(obj any) {
		m, ok := metaOf(obj)
		if !ok || m.Namespace == "" {
			return
		}
		if ns, err := nsLister.Get(m.Namespace); err == nil {
			if nm, ok := ns.(*metav1.PartialObjectMetadata); ok && nm.DeletionTimestamp != nil {
				q.Add(m.Namespace)
			}
		}
	}
	for _, r := range c.resources {
		if !r.namespaced || !r.can("list") || !r.can("watch") || isEvents(r.gvr) {
			continue
		}
		if _, err := c.factory.ForResource(r.gvr).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, obj any) { content(obj) },
			DeleteFunc: content,
		}); err != nil {
			return nil, nil, err
		}
	}
	run := func(ctx context.Context) { runWorker(ctx, c, Namespace, q, nc.syncRequeuing) }
	return q, run, nil
}

// syncRequeuing syncs a namespace and requeues it after the estimate while content remains.
func (nc *namespaceController) syncRequeuing(ctx context.Context, name string) error {
	err := nc.sync(ctx, name)
	var remaining errContentRemaining
	if errors.As(err, &remaining) {
		nc.queue.AddAfter(name, remaining.estimate)
		return nil
	}
	return err
}

// sync mirrors namespacedResourcesDeleter.Delete.
func (nc *namespaceController) sync(ctx context.Context, name string) error {
	ns, err := nc.dynamic.Resource(namespacesGVR).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.GetDeletionTimestamp() == nil || !slices.Contains(specFinalizers(ns), string(corev1.FinalizerKubernetes)) {
		return nil
	}
	nc.logger.Debug("namespace controller: emptying namespace", "namespace", name)
	conditions, estimate, err := nc.deleteAllContent(ctx, name)
	if err := nc.setConditions(ctx, name, conditions); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err != nil {
		return err
	}
	if estimate > 0 {
		return errContentRemaining{estimate: estimate}
	}
	return nc.finalize(ctx, name)
}

// deleteAllContent mirrors deleteAllContent: every namespaced resource that can be listed and
// deleted is emptied; the conditions say what remains, and the estimate is how long to wait
// before looking again (the longest remaining pod grace period, or a second).
func (nc *namespaceController) deleteAllContent(ctx context.Context, namespace string) ([]corev1.NamespaceCondition, time.Duration, error) {
	var remaining, failures []string
	finalizers := map[string]int{}
	var estimate time.Duration
	for _, r := range nc.resources {
		if !r.namespaced || !r.can("list") || !(r.can("delete") || r.can("deletecollection")) {
			continue
		}
		left, err := nc.deleteResourceContent(ctx, r, namespace)
		if err != nil {
			failures = append(failures, err.Error())
			continue
		}
		if len(left) == 0 {
			continue
		}
		remaining = append(remaining, fmt.Sprintf("%s.%s has %d resource instances", r.gvr.Resource, r.gvr.Group, len(left)))
		for _, item := range left {
			for _, f := range item.Finalizers {
				finalizers[f]++
			}
			wait := time.Second
			if g := item.DeletionGracePeriodSeconds; g != nil && time.Duration(*g)*time.Second > wait {
				wait = time.Duration(*g) * time.Second
			}
			estimate = max(estimate, wait)
		}
	}
	conditions := contentConditions(remaining, finalizers, failures)
	if len(failures) > 0 {
		return conditions, 0, fmt.Errorf("deleting the content of namespace %s: %s", namespace, strings.Join(failures, "; "))
	}
	return conditions, estimate, nil
}

// deleteResourceContent mirrors deleteAllContentForGroupVersionResource: deletecollection with
// Background propagation where the resource has it, else a delete of each listed object; then
// what is left.
func (nc *namespaceController) deleteResourceContent(ctx context.Context, r servedResource, namespace string) ([]metav1.PartialObjectMetadata, error) {
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	client := nc.metadata.Resource(r.gvr).Namespace(namespace)
	if r.can("deletecollection") {
		if err := client.DeleteCollection(ctx, opts, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s: %w", r.gvr.GroupResource(), err)
		}
	} else {
		list, err := client.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.gvr.GroupResource(), err)
		}
		for _, item := range list.Items {
			if err := client.Delete(ctx, item.Name, opts); err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("%s: %w", r.gvr.GroupResource(), err)
			}
		}
	}
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.gvr.GroupResource(), err)
	}
	return list.Items, nil
}

// contentConditions mirrors the deleter's namespaceConditionUpdater: the content conditions, each
// True with what is wrong or False with upstream's all-clear reason and message.
func contentConditions(remaining []string, finalizers map[string]int, failures []string) []corev1.NamespaceCondition {
	cond := func(t corev1.NamespaceConditionType, bad bool, badReason, badMessage, okReason, okMessage string) corev1.NamespaceCondition {
		if bad {
			return corev1.NamespaceCondition{Type: t, Status: corev1.ConditionTrue, Reason: badReason, Message: badMessage}
		}
		return corev1.NamespaceCondition{Type: t, Status: corev1.ConditionFalse, Reason: okReason, Message: okMessage}
	}
	sort.Strings(remaining)
	var fs []string
	for f, n := range finalizers {
		fs = append(fs, fmt.Sprintf("%s in %d resource instances", f, n))
	}
	sort.Strings(fs)
	sort.Strings(failures)
	return []corev1.NamespaceCondition{
		cond(corev1.NamespaceDeletionDiscoveryFailure, false, "", "", "ResourcesDiscovered", "All resources successfully discovered"),
		cond(corev1.NamespaceDeletionGVParsingFailure, false, "", "", "ParsedGroupVersions", "All legacy kube types successfully parsed"),
		cond(corev1.NamespaceDeletionContentFailure, len(failures) > 0, "ContentDeletionFailed",
			"Failed to delete all resource types, "+fmt.Sprint(len(failures))+" remaining: "+strings.Join(failures, ", "),
			"ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
		cond(corev1.NamespaceContentRemaining, len(remaining) > 0, "SomeResourcesRemain",
			"Some resources are remaining: "+strings.Join(remaining, ", "),
			"ContentRemoved", "All content successfully removed"),
		cond(corev1.NamespaceFinalizersRemaining, len(fs) > 0, "SomeFinalizersRemain",
			"Some content in the namespace has finalizers remaining: "+strings.Join(fs, ", "),
			"ContentHasNoFinalizers", "All content-preserving finalizers finished"),
	}
}

// setConditions writes the content conditions into the namespace's status, keeping the
// transition time of a condition whose status did not change, as upstream's updater.
func (nc *namespaceController) setConditions(ctx context.Context, name string, conditions []corev1.NamespaceCondition) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := nc.dynamic.Resource(namespacesGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ns := &corev1.Namespace{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ns); err != nil {
			return err
		}
		changed := false
		now := metav1.NewTime(nc.clock.Now())
		for _, c := range conditions {
			i := slices.IndexFunc(ns.Status.Conditions, func(o corev1.NamespaceCondition) bool { return o.Type == c.Type })
			if i < 0 {
				c.LastTransitionTime = now
				ns.Status.Conditions = append(ns.Status.Conditions, c)
				changed = true
				continue
			}
			old := ns.Status.Conditions[i]
			if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
				continue
			}
			c.LastTransitionTime = old.LastTransitionTime
			if old.Status != c.Status {
				c.LastTransitionTime = now
			}
			ns.Status.Conditions[i] = c
			changed = true
		}
		if !changed {
			return nil
		}
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ns)
		if err != nil {
			return err
		}
		_, err = nc.dynamic.Resource(namespacesGVR).UpdateStatus(ctx, &unstructured.Unstructured{Object: content}, metav1.UpdateOptions{})
		return err
	})
}

// finalize mirrors finalizeNamespace: spec.finalizers without "kubernetes", through the finalize
// subresource.
func (nc *namespaceController) finalize(ctx context.Context, name string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := nc.dynamic.Resource(namespacesGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var keep []any
		for _, f := range specFinalizers(u) {
			if f != string(corev1.FinalizerKubernetes) {
				keep = append(keep, f)
			}
		}
		if err := unstructured.SetNestedSlice(u.Object, keep, "spec", "finalizers"); err != nil {
			return err
		}
		_, err = nc.dynamic.Resource(namespacesGVR).Update(ctx, u, metav1.UpdateOptions{}, "finalize")
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		nc.logger.Debug("namespace controller: finalized namespace", "namespace", name)
	}
	return err
}

func specFinalizers(u *unstructured.Unstructured) []string {
	fs, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "finalizers")
	return fs
}

// isEvents reports whether gvr is core/v1 or events.k8s.io events, which the garbage collector
// ignores, as upstream's ignoredResources.
func isEvents(gvr schema.GroupVersionResource) bool {
	return gvr.Resource == "events" && (gvr.Group == "" || gvr.Group == "events.k8s.io")
}
