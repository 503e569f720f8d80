package clientgo

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/listwatch/listwatch/internal/testutil"
)

// TestEventVersionsClient: client-go's typed clients (protobuf) see the two versions of events as
// one resource: an events.k8s.io/v1 event is watched and listed at core/v1 with kubectl describe's
// field selector, and one without eventTime is refused as kube-apiserver refuses it.
func TestEventVersionsClient(t *testing.T) {
	e := newEnv(t, envOptions{})
	cs, err := kubernetes.NewForConfig(e.restConfig(directAgent))
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().Events("ev").Watch(e.ctx(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	regarding := corev1.ObjectReference{Kind: "Pod", Namespace: "ev", Name: "p", UID: "u1"}
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Regarding: regarding, Reason: "Pulled", Note: "pulled",
		Type: corev1.EventTypeNormal, EventTime: metav1.NewMicroTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
		ReportingController: "kubelet", ReportingInstance: "n1", Action: "Pull"}
	if _, err := cs.EventsV1().Events("ev").Create(e.ctx(), ev, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create at events.k8s.io/v1: %v", err)
	}
	select {
	case got := <-w.ResultChan():
		core, ok := got.Object.(*corev1.Event)
		if got.Type != watch.Added || !ok || core.Message != "pulled" || core.ReportingController != "kubelet" || core.InvolvedObject != regarding {
			t.Errorf("core/v1 watch: %s %+v", got.Type, got.Object)
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("no core/v1 watch event")
	}
	// As kubectl describe's searchEvents selects an object's events.
	selector := fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": "p", "involvedObject.namespace": "ev", "involvedObject.uid": "u1"}
	list, err := cs.CoreV1().Events("ev").List(e.ctx(), metav1.ListOptions{FieldSelector: selector.AsSelector().String()})
	if err != nil || len(list.Items) != 1 || list.Items[0].Message != "pulled" {
		t.Errorf("describe's events: %+v %v", list, err)
	}

	ev.Name, ev.EventTime = "b", metav1.MicroTime{}
	_, err = cs.EventsV1().Events("ev").Create(e.ctx(), ev, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `Event "b" is invalid: eventTime: Required value`) {
		t.Errorf("an events.k8s.io/v1 event without eventTime: %v", err)
	}
}
