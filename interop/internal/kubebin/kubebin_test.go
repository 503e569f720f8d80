package kubebin

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
	"github.com/listwatch/listwatch/store"
)

func TestMain(m *testing.M) { kubeapiserver.VerifyTestMain(m) }

// TestOverListwatchEtcd runs a real kube-apiserver on listwatch's etcd API alone and takes built-in
// kinds through it: namespaces, configmaps, secrets, pods, services and deployments created
// (defaulted and validated by kube-apiserver, cluster IP allocated), listed, watched through an
// update and a delete, and found in listwatch's store at kube-apiserver's keys in its protobuf
// encoding.
func TestOverListwatchEtcd(t *testing.T) {
	endpoints, st := kubeapiserver.ListwatchEtcd(t)
	s := StartT(t, Options{EtcdServers: endpoints})
	cs := kubernetes.NewForConfigOrDie(s.RESTConfig())
	ctx := t.Context()
	createBuiltIns(t, ctx, cs)

	cms, err := cs.CoreV1().ConfigMaps("demo").List(ctx, metav1.ListOptions{})
	if err != nil || len(cms.Items) != 1 || cms.Items[0].Data["k"] != "v" {
		t.Fatalf("listing configmaps: %v %+v", err, cms)
	}
	watchUpdateAndDelete(t, cs, cms)

	for _, key := range []string{"/registry/secrets/demo/sec", "/registry/pods/demo/pod", "/registry/deployments/demo/dep",
		"/registry/services/specs/demo/svc", "/registry/namespaces/demo"} {
		res, err := st.Range(&store.RangeRequest{Key: []byte(key)})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Kvs) != 1 || !bytes.HasPrefix(res.Kvs[0].Value, []byte("k8s\x00")) {
			t.Errorf("listwatch's store at %s: %d keys, want 1 in kube-apiserver's protobuf encoding", key, len(res.Kvs))
		}
	}
}

// watchUpdateAndDelete watches the configmaps of cms's namespace from the list's resourceVersion,
// updates and deletes its one item, and requires the two events.
func watchUpdateAndDelete(t *testing.T, cs *kubernetes.Clientset, cms *corev1.ConfigMapList) {
	t.Helper()
	ctx := t.Context()
	w, err := cs.CoreV1().ConfigMaps("demo").Watch(ctx, metav1.ListOptions{ResourceVersion: cms.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cm := cms.Items[0]
	cm.Data["k"] = "w"
	if _, err := cs.CoreV1().ConfigMaps("demo").Update(ctx, &cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps("demo").Delete(ctx, "cm", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []watch.EventType{watch.Modified, watch.Deleted} {
		var e watch.Event
		select {
		case e = <-w.ResultChan():
		case <-time.After(testutil.WaitTimeout):
			t.Fatalf("no %s event within %v", want, testutil.WaitTimeout)
		}
		got, ok := e.Object.(*corev1.ConfigMap)
		if e.Type != want || !ok || got.Data["k"] != "w" {
			t.Fatalf("watch: got %s %#v, want %s of the updated configmap", e.Type, e.Object, want)
		}
	}
}

// createBuiltIns creates a namespace demo and in it a configmap, a secret, a pod, a service and a
// deployment, and checks what kube-apiserver's defaulting and allocation made of them.
func createBuiltIns(t *testing.T, ctx context.Context, cs *kubernetes.Clientset) {
	t.Helper()
	md := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: "demo"} }
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("demo").Create(ctx, &corev1.ConfigMap{ObjectMeta: md("cm"), Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sec, err := cs.CoreV1().Secrets("demo").Create(ctx, &corev1.Secret{ObjectMeta: md("sec"), StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil || sec.Type != corev1.SecretTypeOpaque || string(sec.Data["k"]) != "v" {
		t.Fatalf("secret: %v %+v", err, sec)
	}
	containers := []corev1.Container{{Name: "c", Image: "busybox"}}
	pod, err := cs.CoreV1().Pods("demo").Create(ctx, &corev1.Pod{ObjectMeta: md("pod"), Spec: corev1.PodSpec{Containers: containers}}, metav1.CreateOptions{})
	if err != nil || pod.Spec.RestartPolicy != corev1.RestartPolicyAlways || pod.Status.Phase != corev1.PodPending {
		t.Fatalf("pod: %v %+v", err, pod)
	}
	svc, err := cs.CoreV1().Services("demo").Create(ctx, &corev1.Service{ObjectMeta: md("svc"),
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil || !strings.HasPrefix(svc.Spec.ClusterIP, "10.0.0.") {
		t.Fatalf("service: %v %+v", err, svc)
	}
	labels := map[string]string{"app": "a"}
	dep, err := cs.AppsV1().Deployments("demo").Create(ctx, &appsv1.Deployment{ObjectMeta: md("dep"), Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: containers}},
	}}, metav1.CreateOptions{})
	if err != nil || dep.Generation != 1 || dep.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Fatalf("deployment: %v %+v", err, dep)
	}
	if _, err := cs.CoreV1().ConfigMaps("absent").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); err == nil ||
		!strings.Contains(err.Error(), `namespaces "absent" not found`) {
		t.Errorf("a create in a namespace that does not exist: %v, want NamespaceLifecycle's refusal", err)
	}
}

// TestOverrides keeps configmaps in a second listwatch store (--etcd-servers-overrides) and
// everything else in the first: the differential's layout, where only its requests write the
// second store.
func TestOverrides(t *testing.T) {
	main, mainStore := kubeapiserver.ListwatchEtcd(t)
	cms, cmStore := kubeapiserver.ListwatchEtcd(t)
	s := StartT(t, Options{EtcdServers: main, Overrides: map[string][]string{"/configmaps": cms}})
	cs := kubernetes.NewForConfigOrDie(s.RESTConfig())
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("demo").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		st   *store.Store
		key  string
		want int
	}{{cmStore, "/registry/configmaps/demo/cm", 1}, {mainStore, "/registry/configmaps/demo/cm", 0},
		{mainStore, "/registry/namespaces/demo", 1}, {cmStore, "/registry/namespaces/demo", 0}} {
		res, err := c.st.Range(&store.RangeRequest{Key: []byte(c.key)})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Kvs) != c.want {
			t.Errorf("%s: %d keys, want %d", c.key, len(res.Kvs), c.want)
		}
	}
}

// TestStartFailsOnBadFlag: a flag kube-apiserver refuses ends the process at once, and Start says
// so with the end of its log.
func TestStartFailsOnBadFlag(t *testing.T) {
	endpoints, _ := kubeapiserver.ListwatchEtcd(t)
	p, err := Path()
	if err != nil {
		t.Skip(err)
	}
	_, err = Start(t.Context(), Options{Binary: p, EtcdServers: endpoints, Dir: t.TempDir(), Flags: []string{"--bogus-flag"}})
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "unknown flag: --bogus-flag") {
		t.Fatalf("Start with a bogus flag: %v, want ErrNotReady quoting kube-apiserver's refusal", err)
	}
}

// TestPath: PathVar names the binary; a missing file or a directory is ErrNoBinary naming the path
// and the make target.
func TestPath(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "kube-apiserver")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(PathVar, bin)
	if p, err := Path(); err != nil || p != bin {
		t.Errorf("Path() = %q, %v; want %q", p, err, bin)
	}
	for _, p := range []string{filepath.Join(dir, "absent"), dir} {
		t.Setenv(PathVar, p)
		if _, err := Path(); !errors.Is(err, ErrNoBinary) || !strings.Contains(err.Error(), p) || (p != dir && !strings.Contains(err.Error(), "make kube-apiserver")) {
			t.Errorf("Path() with %s=%s: %v, want ErrNoBinary naming it", PathVar, p, err)
		}
	}
}

// TestStartRefusesBadOptions: Options without an etcd server, a directory or with an override that
// names no group are refused before anything starts.
func TestStartRefusesBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Binary: "/bin/true", Dir: t.TempDir()},
		{Binary: "/bin/true", EtcdServers: []string{"http://127.0.0.1:1"}},
		{Binary: "/bin/true", EtcdServers: []string{"http://127.0.0.1:1"}, Dir: t.TempDir(), Overrides: map[string][]string{"configmaps": {"x"}}},
	} {
		if _, err := Start(t.Context(), o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Start(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
}
