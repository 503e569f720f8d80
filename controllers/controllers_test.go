package controllers_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/listwatch/listwatch/controllers"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/listwatchtest"
)

// poll waits for a condition the controllers bring about, checking every 10 ms.
var poll = testutil.Poller{Interval: 10 * time.Millisecond}

func start(t *testing.T, names ...string) (*kubernetes.Clientset, context.Context) {
	t.Helper()
	env := listwatchtest.Start(t, listwatchtest.WithControllers(names...))
	return kubernetes.NewForConfigOrDie(env.Config()), t.Context()
}

func gone(t *testing.T, get func() error) func() bool {
	return func() bool {
		err := get()
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return apierrors.IsNotFound(err)
	}
}

func cm(ns, name string, owners ...metav1.OwnerReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: owners}}
}

func ownerRef(owner *corev1.ConfigMap, block bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, BlockOwnerDeletion: ptr.To(block)}
}

func mustCreate(t *testing.T, ctx context.Context, cs *kubernetes.Clientset, c *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	out, err := cs.CoreV1().ConfigMaps(c.Namespace).Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func deleteWith(t *testing.T, ctx context.Context, cs *kubernetes.Clientset, c *corev1.ConfigMap, p metav1.DeletionPropagation) {
	t.Helper()
	if err := cs.CoreV1().ConfigMaps(c.Namespace).Delete(ctx, c.Name, metav1.DeleteOptions{PropagationPolicy: &p}); err != nil {
		t.Fatal(err)
	}
}

func getCM(ctx context.Context, cs *kubernetes.Clientset, ns, name string) func() error {
	return func() error { _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); return err }
}

// TestStartRefused refuses an unknown controller and a missing REST config.
func TestStartRefused(t *testing.T) {
	if _, err := controllers.Start(t.Context(), controllers.Config{}); !errors.Is(err, controllers.ErrInvalidConfig) {
		t.Errorf("no REST config: %v", err)
	}
	if _, err := listwatchtest.New(t.Context(), listwatchtest.WithControllers("replicaset")); !errors.Is(err, listwatchtest.ErrInvalidOption) {
		t.Errorf("unknown controller: %v", err)
	}
}

// TestNamespaceDeletion deletes a namespace with content: the namespace controller empties it
// (the kubelet confirms its bound pod's deletion), finalizes it, and it is gone.
func TestNamespaceDeletion(t *testing.T) {
	cs, ctx := start(t)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, ctx, cs, cm("n", "a"))
	mustCreate(t, ctx, cs, cm("n", "b"))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "p"},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	if _, err := cs.CoreV1().Pods("n").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, "n", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.WaitFor(t, "namespace n gone", gone(t, func() error { _, err := cs.CoreV1().Namespaces().Get(ctx, "n", metav1.GetOptions{}); return err }))
	for _, name := range []string{"a", "b"} {
		if err := getCM(ctx, cs, "n", name)(); !apierrors.IsNotFound(err) {
			t.Errorf("configmap %s after its namespace went: %v", name, err)
		}
	}
}

// TestNamespaceKeptByFinalizer: content with a finalizer nobody removes keeps its namespace
// Terminating, its conditions saying why, and new content is refused; once the finalizer goes,
// so does the namespace.
func TestNamespaceKeptByFinalizer(t *testing.T) {
	cs, ctx := start(t)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	held := cm("n", "held")
	held.Finalizers = []string{"example.com/never"}
	mustCreate(t, ctx, cs, held)
	if err := cs.CoreV1().Namespaces().Delete(ctx, "n", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[corev1.NamespaceConditionType]string{
		corev1.NamespaceContentRemaining:    "Some resources are remaining: configmaps. has 1 resource instances",
		corev1.NamespaceFinalizersRemaining: "Some content in the namespace has finalizers remaining: example.com/never in 1 resource instances",
	}
	var ns *corev1.Namespace
	poll.WaitFor(t, "the namespace's conditions naming the finalizer", func() bool {
		var err error
		if ns, err = cs.CoreV1().Namespaces().Get(ctx, "n", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, c := range ns.Status.Conditions {
			if msg, ok := want[c.Type]; ok && c.Status == corev1.ConditionTrue && c.Message == msg {
				found++
			}
		}
		return found == len(want)
	})
	if ns.Status.Phase != corev1.NamespaceTerminating || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		t.Errorf("namespace %+v", ns)
	}
	got, err := cs.CoreV1().ConfigMaps("n").Get(ctx, "held", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("the held configmap: %v %+v", err, got)
	}
	if _, err := cs.CoreV1().ConfigMaps("n").Create(ctx, cm("n", "new"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create in a terminating namespace: %v", err)
	}
	got.Finalizers = nil
	if _, err := cs.CoreV1().ConfigMaps("n").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.WaitFor(t, "namespace n gone", gone(t, func() error { _, err := cs.CoreV1().Namespaces().Get(ctx, "n", metav1.GetOptions{}); return err }))
}

// TestGarbageCollectorBackground: the dependents of a deleted owner are deleted; a dependent with
// another owner that remains only loses its reference to the deleted one.
func TestGarbageCollectorBackground(t *testing.T) {
	cs, ctx := start(t, controllers.GarbageCollector)
	owner := mustCreate(t, ctx, cs, cm("default", "owner"))
	other := mustCreate(t, ctx, cs, cm("default", "other"))
	mustCreate(t, ctx, cs, cm("default", "dep", ownerRef(owner, false)))
	mustCreate(t, ctx, cs, cm("default", "shared", ownerRef(owner, false), ownerRef(other, false)))
	deleteWith(t, ctx, cs, owner, metav1.DeletePropagationBackground)
	poll.WaitFor(t, "the dependent deleted", gone(t, getCM(ctx, cs, "default", "dep")))
	poll.WaitFor(t, "the shared dependent's reference to the deleted owner removed", func() bool {
		got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "shared", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(got.OwnerReferences) == 1 && got.OwnerReferences[0].UID == other.UID
	})
}

// TestGarbageCollectorForeground: an owner deleted in the foreground stays until its blocking
// dependents are gone; a blocking dependent held by a finalizer holds it, a non-blocking one does
// not.
func TestGarbageCollectorForeground(t *testing.T) {
	cs, ctx := start(t, controllers.GarbageCollector)
	owner := mustCreate(t, ctx, cs, cm("default", "owner"))
	blocker := cm("default", "blocker", ownerRef(owner, true))
	blocker.Finalizers = []string{"example.com/hold"}
	mustCreate(t, ctx, cs, blocker)
	mustCreate(t, ctx, cs, cm("default", "free", ownerRef(owner, false)))
	deleteWith(t, ctx, cs, owner, metav1.DeletePropagationForeground)
	poll.WaitFor(t, "the non-blocking dependent deleted", gone(t, getCM(ctx, cs, "default", "free")))
	var held *corev1.ConfigMap
	poll.WaitFor(t, "the blocking dependent being deleted", func() bool {
		var err error
		if held, err = cs.CoreV1().ConfigMaps("default").Get(ctx, "blocker", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		return held.DeletionTimestamp != nil
	})
	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "owner", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil || !slices.Contains(got.Finalizers, metav1.FinalizerDeleteDependents) {
		t.Fatalf("the owner while a blocking dependent remains: %v %+v", err, got)
	}
	held.Finalizers = nil
	if _, err := cs.CoreV1().ConfigMaps("default").Update(ctx, held, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.WaitFor(t, "the owner deleted once its blocking dependent went", gone(t, getCM(ctx, cs, "default", "owner")))
}

// TestGarbageCollectorOrphan: an owner deleted with Orphan goes, its dependents stay without
// their reference to it.
func TestGarbageCollectorOrphan(t *testing.T) {
	cs, ctx := start(t, controllers.GarbageCollector)
	owner := mustCreate(t, ctx, cs, cm("default", "owner"))
	mustCreate(t, ctx, cs, cm("default", "dep", ownerRef(owner, true)))
	deleteWith(t, ctx, cs, owner, metav1.DeletePropagationOrphan)
	poll.WaitFor(t, "the owner deleted", gone(t, getCM(ctx, cs, "default", "owner")))
	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "dep", metav1.GetOptions{})
	if err != nil || len(got.OwnerReferences) != 0 {
		t.Fatalf("the orphaned dependent: %v %+v", err, got)
	}
}

// TestKubeletConfirmsBoundPodDeletion: a bound pod deleted gracefully is gone once the kubelet
// confirms it; without the kubelet it stays Terminating.
func TestKubeletConfirmsBoundPodDeletion(t *testing.T) {
	for _, withKubelet := range []bool{true, false} {
		names := []string{controllers.Kubelet}
		if !withKubelet {
			names = []string{controllers.GarbageCollector}
		}
		cs, ctx := start(t, names...)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
		created, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.CoreV1().Pods("default").Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		getPod := func() error { _, err := cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{}); return err }
		if withKubelet {
			poll.WaitFor(t, "the bound pod deleted", gone(t, getPod))
			continue
		}
		got, err := cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
		if err != nil || got.DeletionTimestamp == nil || got.UID != types.UID(created.UID) {
			t.Errorf("without the kubelet: %v %+v", err, got)
		}
	}
}

// gearsCRD serves gears.example.net at v1 (storage) and v1beta1.
const gearsCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gears.example.net}
spec:
  group: example.net
  names: {plural: gears, singular: gear, kind: Gear}
  scope: Namespaced
  versions:
  - {name: v1beta1, served: true, storage: false, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`

// TestNamespaceCRDVersionsOnce: a custom resource served at two versions is one resource to the
// namespace controller, at its preferred version, as upstream's discovery of preferred resources
// gives it: its held object is counted once in the namespace's conditions.
func TestNamespaceCRDVersionsOnce(t *testing.T) {
	env := listwatchtest.Start(t, listwatchtest.WithControllers(), listwatchtest.WithCRDs(gearsCRD))
	cs, ctx := kubernetes.NewForConfigOrDie(env.Config()), t.Context()
	dc := dynamic.NewForConfigOrDie(env.Config())
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gear := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.net/v1beta1", "kind": "Gear",
		"metadata": map[string]any{"name": "g", "finalizers": []any{"example.net/never"}}}}
	gears := dc.Resource(schema.GroupVersionResource{Group: "example.net", Version: "v1beta1", Resource: "gears"}).Namespace("n")
	if _, err := gears.Create(ctx, gear, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, "n", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	const want = "Some resources are remaining: gears.example.net has 1 resource instances"
	var last string
	poll.WaitFor(t, "the namespace's condition counting the gear once", func() bool {
		ns, err := cs.CoreV1().Namespaces().Get(ctx, "n", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ns.Status.Conditions {
			if c.Type == corev1.NamespaceContentRemaining && c.Status == corev1.ConditionTrue {
				last = c.Message
			}
		}
		return last == want
	})
	if err := gears.Delete(ctx, "g", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := gears.Patch(ctx, "g", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.WaitFor(t, "namespace n gone", gone(t, func() error { _, err := cs.CoreV1().Namespaces().Get(ctx, "n", metav1.GetOptions{}); return err }))
}
