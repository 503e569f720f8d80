package goapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// gizmoFinalizer is the finalizer the reconciler keeps on every live Gizmo, so that it sees its
// deletion and deletes the Gizmo's ConfigMap itself.
const gizmoFinalizer = "goapi.listwatch.dev/cleanup"

func newGizmo(namespace, name string, size int64) *unstructured.Unstructured {
	g := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": size}}}
	g.SetGroupVersionKind(gizmosGVR.GroupVersion().WithKind("Gizmo"))
	g.SetNamespace(namespace)
	g.SetName(name)
	return g
}

// gizmoReconciler is a controller as controller-runtime users write one: for each Gizmo it keeps a
// finalizer (a merge patch), a ConfigMap owned by the Gizmo holding its size (created, then
// patched), and the status (observedSize, child) through the status subresource; on deletion it
// deletes the ConfigMap and removes the finalizer (an update).
type gizmoReconciler struct {
	client client.Client
}

func (r *gizmoReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	g := newGizmo(req.Namespace, req.Name, 0)
	if err := r.client.Get(ctx, req.NamespacedName, g); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	child := types.NamespacedName{Namespace: g.GetNamespace(), Name: "gizmo-" + g.GetName()}
	if g.GetDeletionTimestamp() != nil {
		if !controllerutil.ContainsFinalizer(g, gizmoFinalizer) {
			return ctrl.Result{}, nil
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: child.Namespace, Name: child.Name}}
		if err := r.client.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		controllerutil.RemoveFinalizer(g, gizmoFinalizer)
		return ctrl.Result{}, r.client.Update(ctx, g)
	}
	if !controllerutil.ContainsFinalizer(g, gizmoFinalizer) {
		patch := client.MergeFrom(g.DeepCopy())
		controllerutil.AddFinalizer(g, gizmoFinalizer)
		if err := r.client.Patch(ctx, g, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	size, _, _ := unstructured.NestedInt64(g.Object, "spec", "size")
	want := fmt.Sprint(size)
	var cm corev1.ConfigMap
	switch err := r.client.Get(ctx, child, &cm); {
	case apierrors.IsNotFound(err):
		cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: child.Namespace, Name: child.Name}, Data: map[string]string{"size": want}}
		if err := controllerutil.SetControllerReference(g, &cm, r.client.Scheme()); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.client.Create(ctx, &cm); err != nil {
			return ctrl.Result{}, err
		}
	case err != nil:
		return ctrl.Result{}, err
	case cm.Data["size"] != want:
		patch := client.MergeFrom(cm.DeepCopy())
		cm.Data = map[string]string{"size": want}
		if err := r.client.Patch(ctx, &cm, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	observed, _, _ := unstructured.NestedInt64(g.Object, "status", "observedSize")
	if name, _, _ := unstructured.NestedString(g.Object, "status", "child"); observed != size || name != child.Name {
		if err := unstructured.SetNestedField(g.Object, map[string]any{"observedSize": size, "child": child.Name}, "status"); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.client.Status().Update(ctx, g)
	}
	return ctrl.Result{}, nil
}

// startManager starts a controller-runtime manager, as a controller's main would, with the Gizmo
// controller, watching one namespace; it stops at the test's cleanup, which waits for it.
func startManager(t *testing.T, tg *target) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(tg.restConfig(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  ctrlcache.Options{DefaultNamespaces: map[string]ctrlcache.Config{tg.namespace: {}}},
		// Each subtest runs its own manager with the same controller name.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("gizmo").
		For(newGizmo("", "", 0)).
		Owns(&corev1.ConfigMap{}).
		Complete(&gizmoReconciler{client: mgr.GetClient()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := mgr.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the manager: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// TestControllerRuntime: a controller-runtime manager (its cache, its client, a reconciler that
// creates, patches, updates status and removes a finalizer) runs unchanged against the target and
// converges: on a new Gizmo, on a change of its spec and on its deletion.
func TestControllerRuntime(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		startManager(t, tg)
		c, err := client.New(tg.restConfig(), client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxFor(t)
		g := newGizmo(tg.namespace, "g", 3)
		if err := c.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
		key := client.ObjectKeyFromObject(g)
		converged := func(size int64) func() error {
			return func() error {
				got := newGizmo("", "", 0)
				if err := c.Get(ctx, key, got); err != nil {
					return err
				}
				if !controllerutil.ContainsFinalizer(got, gizmoFinalizer) {
					return fmt.Errorf("no finalizer: %v", got.GetFinalizers())
				}
				if observed, _, _ := unstructured.NestedInt64(got.Object, "status", "observedSize"); observed != size {
					return fmt.Errorf("status %v, want observedSize %d", got.Object["status"], size)
				}
				var cm corev1.ConfigMap
				if err := c.Get(ctx, client.ObjectKey{Namespace: tg.namespace, Name: "gizmo-g"}, &cm); err != nil {
					return err
				}
				if cm.Data["size"] != fmt.Sprint(size) {
					return fmt.Errorf("child data %v, want size %d", cm.Data, size)
				}
				if owner := metav1.GetControllerOf(&cm); owner == nil || owner.UID != got.GetUID() {
					return fmt.Errorf("child controller %v, want the gizmo %s", owner, got.GetUID())
				}
				if spec, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); spec != size {
					return fmt.Errorf("the status update changed the spec: %v", got.Object["spec"])
				}
				return nil
			}
		}
		eventually(t, "the controller to reconcile the new gizmo", converged(3))

		// A change of spec: the child is patched and the status follows.
		eventually(t, "the spec change to be written", func() error {
			got := newGizmo("", "", 0)
			if err := c.Get(ctx, key, got); err != nil {
				return err
			}
			if err := unstructured.SetNestedField(got.Object, int64(5), "spec", "size"); err != nil {
				return err
			}
			return c.Update(ctx, got) // a conflict with the controller's own writes is retried
		})
		eventually(t, "the controller to reconcile the change", converged(5))

		// Deletion: the controller deletes the child and removes its finalizer, which lets the
		// Gizmo go.
		if err := c.Delete(ctx, newGizmo(tg.namespace, "g", 0)); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the gizmo and its child to be gone", func() error {
			if err := c.Get(ctx, key, newGizmo("", "", 0)); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the gizmo: %v", err)
			}
			if err := c.Get(ctx, client.ObjectKey{Namespace: tg.namespace, Name: "gizmo-g"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("its child: %v", err)
			}
			return nil
		})
	})
}
