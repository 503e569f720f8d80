package httpwatch

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// How a delete propagates to an object's dependents, as the generic registry store marks it for
// the garbage collector: Foreground adds the foregroundDeletion finalizer (the owner stays until
// its blocking dependents are gone), Orphan (or orphanDependents=true) the orphan finalizer (the
// dependents lose their ownerReference first), Background neither (the garbage collector deletes
// the dependents once the owner is gone). The finalizers are added whether or not a garbage
// collector runs, as kube-apiserver adds them whether or not a controller manager runs.

// gcSupported reports whether the resource's objects take part in garbage collection: every kind
// but those whose strategy's DefaultGarbageCollectionPolicy is Unsupported (events).
func (h *resourceHandler) gcSupported() bool {
	return h.res.strategy == nil || !h.res.strategy.noGarbageCollection
}

// shouldOrphanDependents mirrors registry.shouldOrphanDependents with the default policy
// DeleteDependents (every served kind's but events', Unsupported): the options decide, then the
// object's finalizers.
func (h *resourceHandler) shouldOrphanDependents(obj *unstructured.Unstructured, options *metav1.DeleteOptions) bool {
	if !h.gcSupported() {
		return false
	}
	//nolint:staticcheck // OrphanDependents is deprecated but still honoured, as upstream.
	if options.OrphanDependents != nil {
		return *options.OrphanDependents
	}
	if p := options.PropagationPolicy; p != nil {
		return *p == metav1.DeletePropagationOrphan
	}
	for _, f := range obj.GetFinalizers() {
		switch f {
		case metav1.FinalizerOrphanDependents:
			return true
		case metav1.FinalizerDeleteDependents:
			return false
		}
	}
	return false
}

// shouldDeleteDependents mirrors registry.shouldDeleteDependents: Foreground, or an object already
// marked foregroundDeletion, unless the options say otherwise.
func (h *resourceHandler) shouldDeleteDependents(obj *unstructured.Unstructured, options *metav1.DeleteOptions) bool {
	if !h.gcSupported() {
		return false
	}
	//nolint:staticcheck // OrphanDependents is deprecated but still honoured, as upstream.
	if options.OrphanDependents != nil {
		return false
	}
	if p := options.PropagationPolicy; p != nil {
		return *p == metav1.DeletePropagationForeground
	}
	for _, f := range obj.GetFinalizers() {
		switch f {
		case metav1.FinalizerDeleteDependents:
			return true
		case metav1.FinalizerOrphanDependents:
			return false
		}
	}
	return false
}

// deletionFinalizersForGarbageCollection mirrors registry.deletionFinalizersForGarbageCollection:
// the object's finalizers with the orphan and foregroundDeletion finalizers as the options and the
// object ask, and whether they differ from the object's. A kind without garbage collection
// (events) asks for neither, so a delete strips them as upstream's does: an event holding only
// the orphan finalizer is deleted, not marked.
func (h *resourceHandler) deletionFinalizersForGarbageCollection(obj *unstructured.Unstructured, options *metav1.DeleteOptions) (bool, []string) {
	old := obj.GetFinalizers()
	var out []string
	for _, f := range old {
		if f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
			out = append(out, f)
		}
	}
	if h.shouldOrphanDependents(obj, options) {
		out = append(out, metav1.FinalizerOrphanDependents)
	}
	if h.shouldDeleteDependents(obj, options) {
		out = append(out, metav1.FinalizerDeleteDependents)
	}
	if sameSet(old, out) {
		return false, old
	}
	return true, out
}

// sameSet reports whether a and b hold the same strings, ignoring order and repeats.
func sameSet(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	for _, s := range b {
		if !slices.Contains(a, s) {
			return false
		}
	}
	return true
}
