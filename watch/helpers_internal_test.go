package watch

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/storagebackend"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/store"
)

// newTestStorage returns a pods storage over a fresh in-process server.
func newTestStorage(t testing.TB, cfg Config) (*Store, *storagebackend.Backend) {
	t.Helper()
	b := storagebackend.StartInProcess(t, store.Options{})
	return newStorageOn(t, b, cfg), b
}

func newStorageOn(t testing.TB, b *storagebackend.Backend, cfg Config) *Store {
	t.Helper()
	if cfg.ResourcePrefix == "" {
		cfg.ResourcePrefix = "/pods/"
	}
	if cfg.Logger == nil {
		cfg.Logger = testutil.DiscardLogger()
	}
	s, err := New(b.Client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func pod(ns, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]interface{}{"name": name, "namespace": ns},
	}}
	if labels != nil {
		u.SetLabels(labels)
	}
	return u
}

func mustCreate(t testing.TB, s *Store, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	out := &unstructured.Unstructured{}
	if err := s.Create(context.Background(), "/pods/"+u.GetNamespace()+"/"+u.GetName(), u.DeepCopy(), out, 0); err != nil {
		t.Fatalf("create %s: %v", u.GetName(), err)
	}
	return out
}

func mustWatch(t testing.TB, s *Store, key string, opts storage.ListOptions) apiwatch.Interface {
	t.Helper()
	w, err := s.Watch(context.Background(), key, opts)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	t.Cleanup(func() { stopAndDrain(w) })
	return w
}

func stopAndDrain(w apiwatch.Interface) {
	w.Stop()
	for range w.ResultChan() {
	}
}

func next(t testing.TB, w apiwatch.Interface) apiwatch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("result channel closed")
		}
		return ev
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("no event")
	}
	return apiwatch.Event{}
}

// expectClosed reads up to the close and fails on any event.
func expectClosed(t testing.TB, w apiwatch.Interface) {
	t.Helper()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			t.Errorf("unexpected event %s %s", ev.Type, describe(ev.Object))
		case <-time.After(testutil.WaitTimeout):
			t.Fatal("result channel not closed")
		}
	}
}

func describe(obj interface{}) string {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return fmt.Sprintf("%s/%s@%s", o.GetNamespace(), o.GetName(), o.GetResourceVersion())
	}
	return fmt.Sprintf("%v", obj)
}

func eventString(ev apiwatch.Event) string { return string(ev.Type) + " " + describe(ev.Object) }

// watchGoroutines returns the stacks of goroutines running watchChan code.
func watchGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "listwatch/watch.(*watchChan)") || strings.Contains(g, "listwatch/watch.(*concurrentOrderedEventProcessing)") {
			out = append(out, g)
		}
	}
	return out
}

var grPods = schema.GroupResource{Resource: "pods"}
