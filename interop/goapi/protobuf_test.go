package goapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/listwatch/listwatch/internal/testutil"
)

const protobuf = "application/vnd.kubernetes.protobuf"

// contentLog records the Content-Type of every request body a client sends and of every answer it
// gets.
type contentLog struct {
	mu        sync.Mutex
	sent, got []string
}

func (l *contentLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		l.mu.Lock()
		defer l.mu.Unlock()
		if req.Body != nil {
			l.sent = append(l.sent, req.Method+" "+req.Header.Get("Content-Type"))
		}
		if err == nil {
			l.got = append(l.got, req.Method+" "+req.URL.Path+" "+resp.Header.Get("Content-Type"))
		}
		return resp, err
	})
}

// answers counts the answers logged.
func (l *contentLog) answers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.got)
}

// notProtobuf returns what was sent or answered in another format.
func (l *contentLog) notProtobuf() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range append(append([]string(nil), l.sent...), l.got...) {
		if !strings.Contains(s, protobuf) && !strings.Contains(s, "application/json-patch+json") && !strings.Contains(s, "application/strategic-merge-patch+json") {
			out = append(out, s)
		}
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestProtobufClientset: client-go's typed clientset, configured for protobuf only (bodies and
// answers, watch streams included), creates, gets, lists, updates, patches, updates the status of,
// watches and deletes built-in objects, and a typed informer over protobuf converges.
func TestProtobufClientset(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg *target) {
		log := &contentLog{}
		cfg := tg.restConfig()
		cfg.ContentType = protobuf
		cfg.AcceptContentTypes = protobuf
		cfg.Wrap(log.wrap)
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, ns := ctxFor(t), tg.namespace
		cms := cs.CoreV1().ConfigMaps(ns)

		list, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()

		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pb"}, Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"bin": {0, 1, 2}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := cms.Get(ctx, "pb", metav1.GetOptions{}); err != nil || got.Data["a"] != "1" || string(got.BinaryData["bin"]) != "\x00\x01\x02" || got.UID != cm.UID {
			t.Fatalf("get: %v %v", got, err)
		}
		cm.Data["b"] = "2"
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if cm, err = cms.Patch(ctx, "pb", types.StrategicMergePatchType, []byte(`{"data":{"c":"3"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if cm.Data["a"] != "1" || cm.Data["b"] != "2" || cm.Data["c"] != "3" {
			t.Errorf("after update and patch: %v", cm.Data)
		}
		stale := cm.DeepCopy()
		stale.ResourceVersion = list.ResourceVersion
		if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Errorf("an update at a stale resourceVersion: %v, want a Conflict", err)
		}
		secret, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{})
		if err != nil || string(secret.Data["k"]) != "v" {
			t.Fatalf("secret: %v %v", secret, err)
		}
		if err := cms.Delete(ctx, "pb", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}

		// The watch saw every change, in order, decoded from protobuf.
		var got []string
		for len(got) < 4 {
			ev, ok := <-w.ResultChan()
			if !ok {
				t.Fatalf("the watch ended after %v", got)
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", apierrors.FromObject(ev.Object))
			}
			c, isCM := ev.Object.(*corev1.ConfigMap)
			if !isCM {
				t.Fatalf("watch object %T", ev.Object)
			}
			if c.Name != "pb" {
				continue // a cluster's controllers add kube-root-ca.crt to new namespaces
			}
			got = append(got, fmt.Sprintf("%s %d", ev.Type, len(c.Data)))
		}
		if want := "[ADDED 1 MODIFIED 2 MODIFIED 3 DELETED 3]"; fmt.Sprint(got) != want {
			t.Errorf("watch events %v, want %s", got, want)
		}

		// A typed informer over protobuf.
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "inf"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
		inf := factory.Core().V1().ConfigMaps().Informer()
		stop, cancel := context.WithCancel(context.Background())
		factory.Start(stop.Done())
		defer func() {
			cancel()
			factory.Shutdown()
		}()
		testutil.WaitFor(t, "the protobuf informer to sync", inf.HasSynced)
		// Eventually rather than at sync: a kube-apiserver over an etcd without progress requests
		// (before 3.4.31) serves a watch-list from a cache that may not have the latest write yet.
		testutil.WaitFor(t, "the protobuf informer to hold "+ns+"/inf", func() bool {
			_, ok, _ := inf.GetStore().GetByKey(ns + "/inf")
			return ok
		})
		if n := log.answers(); n < 10 {
			t.Errorf("only %d answers logged", n)
		}
		if other := log.notProtobuf(); len(other) > 0 {
			t.Errorf("not protobuf: %v", other)
		}
	})
}
