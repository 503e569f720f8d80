package clientgo

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/listwatch/listwatch/internal/testutil"
)

const protobuf = "application/vnd.kubernetes.protobuf"

// TestProtobufClient: client-go's generated clientset with its defaults (protobuf bodies, Accept
// protobuf then JSON) creates, reads, lists, watches, updates, patches (strategic merge), applies
// (apply configurations), updates the status of, and deletes (one and a collection) built-in
// objects, every request and answer in protobuf; a typed informer over protobuf converges.
func TestProtobufClient(t *testing.T) {
	e := newEnv(t, envOptions{})
	cs, err := kubernetes.NewForConfig(e.restConfig(directAgent))
	if err != nil {
		t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps("pb")
	w, err := cms.Watch(e.ctx(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created, err := cms.Create(e.ctx(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"app": "pb"}}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.UID == "" || created.Data["k"] != "v" {
		t.Errorf("created %+v", created)
	}
	creates := e.log.requests(directAgent, func(r *request) bool { return r.method == "POST" })
	if len(creates) != 1 || creates[0].contentType != protobuf || creates[0].response() != protobuf {
		t.Errorf("the create was not protobuf both ways: %s", describe(creates))
	}
	patched, err := cms.Patch(e.ctx(), "a", types.StrategicMergePatchType, []byte(`{"data":{"s":"smp"}}`), metav1.PatchOptions{})
	if err != nil || patched.Data["s"] != "smp" || patched.Data["k"] != "v" {
		t.Errorf("strategic merge patch: %v %v", patched.Data, err)
	}
	patched.Data["u"] = "update"
	updated, err := cms.Update(e.ctx(), patched, metav1.UpdateOptions{})
	if err != nil || updated.Data["u"] != "update" {
		t.Errorf("update: %v", err)
	}
	list, err := cms.List(e.ctx(), metav1.ListOptions{LabelSelector: "app=pb"})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("list: %v %v", list, err)
	}
	for _, want := range []watch.EventType{watch.Added, watch.Modified, watch.Modified} {
		select {
		case ev := <-w.ResultChan():
			if cm, ok := ev.Object.(*corev1.ConfigMap); ev.Type != want || !ok || cm.Name != "a" {
				t.Errorf("watch event %s %T, want %s of a", ev.Type, ev.Object, want)
			}
		case <-time.After(testutil.WaitTimeout):
			t.Fatalf("no %s event", want)
		}
	}
	watches := e.log.requests(directAgent, func(r *request) bool { return r.isWatch() })
	if len(watches) != 1 || watches[0].response() != protobuf+";stream=watch" {
		t.Errorf("watch not in protobuf: %s", describe(watches))
	}

	// Server-side apply with apply configurations: a second manager conflicts, then forces.
	applied, err := cms.Apply(e.ctx(), corev1ac.ConfigMap("b", "pb").WithData(map[string]string{"x": "1"}), metav1.ApplyOptions{FieldManager: "one"})
	if err != nil || applied.Data["x"] != "1" {
		t.Fatalf("apply: %v", err)
	}
	_, err = cms.Apply(e.ctx(), corev1ac.ConfigMap("b", "pb").WithData(map[string]string{"x": "2"}), metav1.ApplyOptions{FieldManager: "two"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("conflicting apply: %v, want Conflict", err)
	}
	if causes := err.(apierrors.APIStatus).Status().Details.Causes; len(causes) != 1 || causes[0].Type != metav1.CauseTypeFieldManagerConflict || causes[0].Field != ".data.x" {
		t.Errorf("conflict causes %+v", causes)
	}
	if forced, err := cms.Apply(e.ctx(), corev1ac.ConfigMap("b", "pb").WithData(map[string]string{"x": "2"}), metav1.ApplyOptions{FieldManager: "two", Force: true}); err != nil || forced.Data["x"] != "2" {
		t.Errorf("forced apply: %v", err)
	}

	// The other built-in kinds, with their subresources.
	deploys := cs.AppsV1().Deployments("pb")
	d, err := deploys.Apply(e.ctx(), appsv1ac.Deployment("d", "pb").WithSpec(appsv1ac.DeploymentSpec().WithReplicas(2).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app": "d"})).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(map[string]string{"app": "d"}).
			WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("c").WithImage("busybox"))))), metav1.ApplyOptions{FieldManager: "test"})
	if err != nil || d.Generation != 1 {
		t.Fatalf("apply deployment: %v %+v", err, d)
	}
	d.Status = appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 2, ObservedGeneration: 1}
	if st, err := deploys.UpdateStatus(e.ctx(), d, metav1.UpdateOptions{}); err != nil || st.Status.ReadyReplicas != 2 || st.Generation != 1 {
		t.Errorf("deployment status: %v %+v", err, st)
	}
	pods := cs.CoreV1().Pods("pb")
	p, err := pods.Create(e.ctx(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "pb"}},
		Spec: corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil || p.Status.Phase != corev1.PodPending {
		t.Fatalf("create pod: %v %+v", err, p)
	}
	p.Status.Phase = corev1.PodRunning
	if st, err := pods.UpdateStatus(e.ctx(), p, metav1.UpdateOptions{}); err != nil || st.Status.Phase != corev1.PodRunning {
		t.Errorf("pod status: %v", err)
	}
	// A bound pod is deleted gracefully: marked, then gone with a zero grace period.
	if err := pods.Delete(e.ctx(), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := pods.Get(e.ctx(), "p", metav1.GetOptions{}); err != nil || got.DeletionTimestamp == nil {
		t.Errorf("gracefully deleted pod: %v %+v", err, got)
	}
	if err := pods.Delete(e.ctx(), "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(e.ctx(), "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("force-deleted pod: %v", err)
	}
	for _, create := range []func() error{
		func() error {
			_, err := cs.CoreV1().Secrets("pb").Create(e.ctx(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"p": "q"}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().Services("pb").Create(e.ctx(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			ns, err := cs.CoreV1().Namespaces().Create(e.ctx(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pb"}}, metav1.CreateOptions{})
			if err == nil && ns.Status.Phase != corev1.NamespaceActive {
				t.Errorf("namespace phase %q", ns.Status.Phase)
			}
			return err
		},
	} {
		if err := create(); err != nil {
			t.Errorf("create: %v", err)
		}
	}
	// deletecollection by label.
	if err := cms.DeleteCollection(e.ctx(), metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=pb"}); err != nil {
		t.Fatal(err)
	}
	if left, err := cms.List(e.ctx(), metav1.ListOptions{}); err != nil || len(left.Items) != 1 || left.Items[0].Name != "b" {
		t.Errorf("after deletecollection: %v %v", left, err)
	}

	// A typed informer over protobuf.
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("pb"))
	inf := factory.Core().V1().ConfigMaps().Informer()
	e.startFactory(factory)
	e.waitFor("protobuf informer sync", inf.HasSynced)
	if _, err := cms.Create(e.ctx(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the informer to see c", func() bool { _, ok, _ := inf.GetStore().GetByKey("pb/c"); return ok })

	// Failure mode: a protobuf body of a kind the endpoint does not serve.
	_, err = cs.CoreV1().RESTClient().Post().Namespace("pb").Resource("configmaps").SetHeader("Content-Type", protobuf).
		Body([]byte("k8s\x00garbage")).Do(e.ctx()).Get()
	if !apierrors.IsBadRequest(err) {
		t.Errorf("garbage protobuf: %v, want BadRequest", err)
	}
}

// TestMetadataAndDiscovery: client-go's metadata client (PartialObjectMetadata, as controllers'
// metadata-only informers and the garbage collector use it) and its aggregated discovery, with a
// RESTMapper that maps the built-in kinds and finds their short names.
func TestMetadataAndDiscovery(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.create(configMapsGVR, "meta", "a")
	mc, err := metadata.NewForConfig(e.restConfig(directAgent))
	if err != nil {
		t.Fatal(err)
	}
	m, err := mc.Resource(configMapsGVR).Namespace("meta").Get(e.ctx(), "a", metav1.GetOptions{})
	if err != nil || m.Name != "a" || m.UID == "" {
		t.Errorf("metadata get: %v %+v", err, m)
	}
	ml, err := mc.Resource(configMapsGVR).Namespace("meta").List(e.ctx(), metav1.ListOptions{})
	if err != nil || len(ml.Items) != 1 {
		t.Errorf("metadata list: %v %+v", err, ml)
	}
	mw, err := mc.Resource(configMapsGVR).Namespace("meta").Watch(e.ctx(), metav1.ListOptions{ResourceVersion: ml.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Stop()
	e.create(configMapsGVR, "meta", "b")
	select {
	case ev := <-mw.ResultChan():
		if p, ok := ev.Object.(*metav1.PartialObjectMetadata); !ok || p.Name != "b" {
			t.Errorf("metadata watch event %T %v", ev.Object, ev.Object)
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("no metadata watch event")
	}

	dc, err := discovery.NewDiscoveryClientForConfig(e.restConfig(directAgent))
	if err != nil {
		t.Fatal(err)
	}
	groups, resources, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 4 { // core, apps, events.k8s.io, example.com
		t.Errorf("groups %v", groups)
	}
	aggregated := e.log.requests(directAgent, func(r *request) bool { return r.path == "/apis" })
	if len(aggregated) == 0 || !strings.Contains(aggregated[0].response(), "as=APIGroupDiscoveryList") {
		t.Errorf("discovery did not get the aggregated document: %s", describe(aggregated))
	}
	found := map[string]bool{}
	for _, l := range resources {
		for _, r := range l.APIResources {
			found[l.GroupVersion+"/"+r.Name] = true
		}
	}
	for _, want := range []string{"v1/configmaps", "v1/secrets", "v1/pods", "v1/pods/status", "v1/services", "v1/namespaces", "apps/v1/deployments", "apps/v1/deployments/status", "example.com/v1/widgets"} {
		if !found[want] {
			t.Errorf("discovery lacks %s", want)
		}
	}
	apiGroups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewShortcutExpander(restmapper.NewDiscoveryRESTMapper(apiGroups), dc, nil)
	for short, want := range map[string]schema.GroupVersionResource{
		"deploy": {Group: "apps", Version: "v1", Resource: "deployments"},
		"cm":     configMapsGVR,
		"ns":     {Version: "v1", Resource: "namespaces"},
	} {
		if got, err := mapper.ResourceFor(schema.GroupVersionResource{Resource: short}); err != nil || got != want {
			t.Errorf("short name %s: %v %v, want %v", short, got, err, want)
		}
	}
	if mapping, err := mapper.RESTMapping(schema.GroupKind{Kind: "Namespace"}); err != nil || mapping.Scope.Name() != "root" {
		t.Errorf("namespace mapping %+v %v", mapping, err)
	}
	// Failure mode: a kind nothing serves.
	if _, err := mapper.RESTMapping(schema.GroupKind{Group: "batch", Kind: "Job"}); err == nil {
		t.Error("a mapping for batch Jobs")
	}
}
