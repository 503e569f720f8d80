package controllers

import (
	"context"
	"fmt"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// objectID names one object of a served resource.
type objectID struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

func (id objectID) String() string {
	return fmt.Sprintf("%s %s/%s", id.gvr.GroupResource(), id.namespace, id.name)
}

// node is what the garbage collector knows of an object: its identity, its owners and whether
// it blocks them.
type node struct {
	id     objectID
	uid    types.UID
	owners []metav1.OwnerReference
}

// garbageCollector mirrors the kube-controller-manager's garbage collector
// (pkg/controller/garbagecollector): a graph of every object of the served resources (events
// excepted) by ownerReferences, kept by metadata informers, and a worker that, for an object:
//   - with owners: deletes it once every owner is gone or waits for its dependents' deletion
//     (foreground), with the propagation its own finalizers ask, and removes the references to
//     owners that are gone when others remain (attemptToDeleteItem);
//   - being deleted with the orphan finalizer: removes its dependents' references to it, then the
//     finalizer (orphanDependents);
//   - being deleted with the foregroundDeletion finalizer: has its dependents deleted and removes
//     the finalizer once no dependent blocks it (blockOwnerDeletion) any more
//     (processDeletingDependentsItem).
//
// Whether an owner is gone is checked against the API, not the informers, as upstream's
// isDangling.
type garbageCollector struct {
	*clients
	mu         sync.Mutex
	nodes      map[types.UID]*node
	dependents map[types.UID]map[types.UID]bool // owner uid -> dependent uids
	enqueue    func(objectID)
}

func newGarbageCollector(c *clients) (interface{ ShutDown() }, func(context.Context), error) {
	q := newQueue[objectID](c, GarbageCollector)
	gc := &garbageCollector{clients: c, nodes: map[types.UID]*node{}, dependents: map[types.UID]map[types.UID]bool{}, enqueue: q.Add}
	for _, r := range c.resources {
		if !r.can("list") || !r.can("watch") || !r.can("delete") || isEvents(r.gvr) {
			continue
		}
		gvr := r.gvr
		if _, err := c.factory.ForResource(gvr).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { gc.observe(gvr, obj, false) },
			UpdateFunc: func(_, obj any) { gc.observe(gvr, obj, false) },
			DeleteFunc: func(obj any) { gc.observe(gvr, obj, true) },
		}); err != nil {
			return nil, nil, err
		}
	}
	return q, func(ctx context.Context) { runWorker(ctx, c, GarbageCollector, q, gc.attemptToDelete) }, nil
}

// observe updates the graph with an informer event and queues what it concerns: the object if it
// has owners or waits on its dependents, its dependents if it is gone or being deleted, and the
// owners it had, which may wait on it.
func (gc *garbageCollector) observe(gvr schema.GroupVersionResource, obj any, deleted bool) {
	m, ok := metaOf(obj)
	if !ok {
		return
	}
	id := objectID{gvr: gvr, namespace: m.Namespace, name: m.Name}
	gc.mu.Lock()
	var touched []objectID
	if old := gc.nodes[m.UID]; old != nil {
		for _, o := range old.owners {
			delete(gc.dependents[o.UID], m.UID)
			if n := gc.nodes[o.UID]; n != nil {
				touched = append(touched, n.id)
			}
		}
	}
	if deleted {
		delete(gc.nodes, m.UID)
	} else {
		gc.nodes[m.UID] = &node{id: id, uid: m.UID, owners: m.OwnerReferences}
		for _, o := range m.OwnerReferences {
			if gc.dependents[o.UID] == nil {
				gc.dependents[o.UID] = map[types.UID]bool{}
			}
			gc.dependents[o.UID][m.UID] = true
		}
	}
	if deleted || m.DeletionTimestamp != nil {
		for uid := range gc.dependents[m.UID] {
			if n := gc.nodes[uid]; n != nil {
				touched = append(touched, n.id)
			}
		}
	}
	gc.mu.Unlock()
	if !deleted && (len(m.OwnerReferences) > 0 || (m.DeletionTimestamp != nil && hasGCFinalizer(m.Finalizers))) {
		gc.enqueue(id)
	}
	for _, t := range touched {
		gc.enqueue(t)
	}
}

func hasGCFinalizer(fs []string) bool {
	return slices.Contains(fs, metav1.FinalizerOrphanDependents) || slices.Contains(fs, metav1.FinalizerDeleteDependents)
}

// dependentsOf returns the graph's dependents of an owner, and whether any of them blocks its
// deletion.
func (gc *garbageCollector) dependentsOf(owner types.UID) (deps []*node, blocking bool) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	for uid := range gc.dependents[owner] {
		n := gc.nodes[uid]
		if n == nil {
			continue
		}
		deps = append(deps, n)
		for _, o := range n.owners {
			if o.UID == owner && o.BlockOwnerDeletion != nil && *o.BlockOwnerDeletion {
				blocking = true
			}
		}
	}
	return deps, blocking
}

// attemptToDelete mirrors attemptToDeleteItem with the orphan and foreground steps of the owner.
func (gc *garbageCollector) attemptToDelete(ctx context.Context, id objectID) error {
	latest, err := gc.get(ctx, id)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if latest.DeletionTimestamp != nil {
		switch {
		case slices.Contains(latest.Finalizers, metav1.FinalizerOrphanDependents):
			return gc.orphanDependents(ctx, id, latest)
		case slices.Contains(latest.Finalizers, metav1.FinalizerDeleteDependents):
			return gc.processDeletingDependents(ctx, id, latest)
		}
		return nil
	}
	if len(latest.OwnerReferences) == 0 {
		return nil
	}
	var solid, dangling, waiting []metav1.OwnerReference
	for _, ref := range latest.OwnerReferences {
		owner, err := gc.owner(ctx, id, ref)
		switch {
		case apierrors.IsNotFound(err) || (err == nil && owner.UID != ref.UID):
			dangling = append(dangling, ref)
		case err != nil:
			return err
		case owner.DeletionTimestamp != nil && slices.Contains(owner.Finalizers, metav1.FinalizerDeleteDependents):
			waiting = append(waiting, ref)
		default:
			solid = append(solid, ref)
		}
	}
	switch {
	case len(solid) > 0:
		if len(dangling) == 0 && len(waiting) == 0 {
			return nil
		}
		// Other owners remain: only the references to owners that are gone or wait on it go.
		remove := map[types.UID]bool{}
		for _, r := range append(dangling, waiting...) {
			remove[r.UID] = true
		}
		return gc.removeOwnerReferences(ctx, id, latest.UID, remove)
	case len(waiting) > 0:
		if deps, _ := gc.dependentsOf(latest.UID); len(deps) > 0 {
			// An owner waits on it and it has dependents of its own: it goes in the foreground too.
			return gc.delete(ctx, id, latest.UID, metav1.DeletePropagationForeground)
		}
	}
	policy := metav1.DeletePropagationBackground
	switch {
	case slices.Contains(latest.Finalizers, metav1.FinalizerOrphanDependents):
		policy = metav1.DeletePropagationOrphan
	case slices.Contains(latest.Finalizers, metav1.FinalizerDeleteDependents):
		policy = metav1.DeletePropagationForeground
	}
	return gc.delete(ctx, id, latest.UID, policy)
}

// orphanDependents mirrors orphanDependents and the orphan finalizer's removal: the dependents
// lose their reference to the owner, then the owner its finalizer.
func (gc *garbageCollector) orphanDependents(ctx context.Context, id objectID, owner *metav1.PartialObjectMetadata) error {
	deps, _ := gc.dependentsOf(owner.UID)
	for _, d := range deps {
		if err := gc.removeOwnerReferences(ctx, d.id, d.uid, map[types.UID]bool{owner.UID: true}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return gc.removeFinalizer(ctx, id, owner.UID, metav1.FinalizerOrphanDependents)
}

// processDeletingDependents mirrors processDeletingDependentsItem: the owner's dependents are
// queued for deletion, and its foregroundDeletion finalizer goes once none blocks it.
func (gc *garbageCollector) processDeletingDependents(ctx context.Context, id objectID, owner *metav1.PartialObjectMetadata) error {
	deps, blocking := gc.dependentsOf(owner.UID)
	for _, d := range deps {
		gc.enqueue(d.id)
	}
	if blocking {
		return nil
	}
	return gc.removeFinalizer(ctx, id, owner.UID, metav1.FinalizerDeleteDependents)
}

func (gc *garbageCollector) get(ctx context.Context, id objectID) (*metav1.PartialObjectMetadata, error) {
	return gc.metadata.Resource(id.gvr).Namespace(id.namespace).Get(ctx, id.name, metav1.GetOptions{})
}

// owner reads an owner as the dependent's reference names it: in the dependent's namespace if
// its kind is namespaced.
func (gc *garbageCollector) owner(ctx context.Context, dependent objectID, ref metav1.OwnerReference) (*metav1.PartialObjectMetadata, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, err
	}
	mapping, err := gc.mapper.RESTMapping(gv.WithKind(ref.Kind).GroupKind(), gv.Version)
	if err != nil {
		return nil, err
	}
	ns := ""
	if r, ok := gc.resource(mapping.Resource); ok && r.namespaced {
		ns = dependent.namespace
	}
	return gc.get(ctx, objectID{gvr: mapping.Resource, namespace: ns, name: ref.Name})
}

// delete deletes an object as the garbage collector does: with its UID as precondition.
func (gc *garbageCollector) delete(ctx context.Context, id objectID, uid types.UID, policy metav1.DeletionPropagation) error {
	err := gc.metadata.Resource(id.gvr).Namespace(id.namespace).Delete(ctx, id.name,
		metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err == nil {
		gc.logger.Debug("garbage collector: deleted", "object", id.String(), "propagation", string(policy))
	}
	return err
}

// removeOwnerReferences drops the references to the given owners from an object, if it is still
// the object of that uid.
func (gc *garbageCollector) removeOwnerReferences(ctx context.Context, id objectID, uid types.UID, owners map[types.UID]bool) error {
	return gc.updateMeta(ctx, id, uid, func(m metav1.Object) bool {
		refs := m.GetOwnerReferences()
		kept := slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool { return owners[r.UID] })
		m.SetOwnerReferences(kept)
		return len(kept) != len(refs)
	})
}

// removeFinalizer drops a finalizer from an object being deleted; the apiserver deletes it when
// it was the last.
func (gc *garbageCollector) removeFinalizer(ctx context.Context, id objectID, uid types.UID, finalizer string) error {
	return gc.updateMeta(ctx, id, uid, func(m metav1.Object) bool {
		fs := m.GetFinalizers()
		kept := slices.DeleteFunc(slices.Clone(fs), func(f string) bool { return f == finalizer })
		m.SetFinalizers(kept)
		return len(kept) != len(fs)
	})
}

// updateMeta changes an object's metadata with an update conditioned on its resourceVersion,
// retried on conflict; an object gone or replaced is left alone.
func (gc *garbageCollector) updateMeta(ctx context.Context, id objectID, uid types.UID, change func(metav1.Object) bool) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		client := gc.dynamic.Resource(id.gvr).Namespace(id.namespace)
		u, err := client.Get(ctx, id.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if u.GetUID() != uid || !change(u) {
			return nil
		}
		_, err = client.Update(ctx, u, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
