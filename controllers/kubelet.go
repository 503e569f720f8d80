package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

// podKey names a pod and the incarnation the confirmation is for.
type podKey struct {
	namespace, name string
	uid             types.UID
}

// kubelet plays the part of the kubelets of every node: a pod bound to a node that is being
// deleted gracefully (a deletionTimestamp and a grace period left) has, with no containers to
// stop, stopped at once, and its kubelet confirms the deletion as the status manager does
// (pkg/kubelet/status status_manager.go syncPod): a delete with gracePeriodSeconds=0 and the pod's
// UID as precondition. A pod that is still kept by finalizers stays until they go.
type kubelet struct {
	*clients
}

func newKubelet(c *clients) (interface{ ShutDown() }, func(context.Context), error) {
	if _, ok := c.resource(podsGVR); !ok {
		return nil, nil, fmt.Errorf("%w: the kubelet needs core/v1 pods served", ErrInvalidConfig)
	}
	q := newQueue[podKey](c, Kubelet)
	k := &kubelet{clients: c}
	enqueue := func(obj any) {
		m, ok := metaOf(obj)
		if !ok || m.DeletionTimestamp == nil || m.DeletionGracePeriodSeconds == nil || *m.DeletionGracePeriodSeconds == 0 {
			return
		}
		q.Add(podKey{namespace: m.Namespace, name: m.Name, uid: m.UID})
	}
	if _, err := c.factory.ForResource(podsGVR).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return nil, nil, err
	}
	return q, func(ctx context.Context) { runWorker(ctx, c, Kubelet, q, k.confirm) }, nil
}

// confirm deletes the pod with a grace period of 0, if it is still the pod being deleted.
func (k *kubelet) confirm(ctx context.Context, p podKey) error {
	zero := int64(0)
	uid := p.uid
	err := k.metadata.Resource(podsGVR).Namespace(p.namespace).Delete(ctx, p.name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone, or another pod of the same name: nothing left to confirm.
		return nil
	}
	if err == nil {
		k.logger.Debug("kubelet: confirmed the deletion of a pod", "namespace", p.namespace, "name", p.name)
	}
	return err
}
