package clientgo

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/chain"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
	"github.com/listwatch/listwatch/watch"
)

// pollInterval is how often a wait re-checks its condition (and steps a fake clock).
const pollInterval = 10 * time.Millisecond

// bookmarkTick steps a fake cache clock past one period of the dispatcher's bookmark timer
// (one second with 25% jitter).
const bookmarkTick = 1250 * time.Millisecond

// User agents tell the requests of the informer under test from the test's own.
const (
	informerAgent = "listwatch-clientgo-informer"
	directAgent   = "listwatch-clientgo-direct"
)

var (
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	podsGVR       = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	widgetsGVR    = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

// envOptions choose how the served resources are stored.
type envOptions struct {
	// uncached serves every resource straight from its etcd3 storage: the apiserver with the watch
	// cache off (--watch-cache=false).
	uncached bool
	// fakeCacheClock gives every watch cache a fake clock that the test steps: it times the
	// periodic bookmarks and the age of the events in the history window.
	fakeCacheClock bool
	// progressNotify is the store's progress notification period; 0 is etcd's default.
	progressNotify time.Duration
}

// env is listwatch's Kubernetes API over an in-memory store, as `listwatch serve` stacks it (a
// chain.Chain: store → in-process etcd client → etcd3 storage → watch cache → httpwatch), on a
// loopback port behind the request log and the watch gate.
type env struct {
	t          *testing.T
	chain      *chain.Chain
	st         *store.Store
	cacheClock *testingclock.FakeClock // nil unless fakeCacheClock
	log        *requestLog
	gate       *watchGate
	// direct is a dynamic client for the test's own reads and writes.
	direct dynamic.Interface
}

func newEnv(t *testing.T, opts envOptions) *env {
	t.Helper()
	e := &env{t: t}
	cfg := chain.Config{
		StoreOptions:      store.Options{ProgressNotifyInterval: opts.progressNotify},
		DisableWatchCache: opts.uncached,
		Logger:            testutil.DiscardLogger(),
		WrapHandler: func(api http.Handler) http.Handler {
			e.gate = newWatchGate(api)
			e.log = newRequestLog(e.gate)
			return e.log
		},
	}
	if opts.fakeCacheClock {
		// Real time as the start: the watch cache compares its clock with the deadline of each
		// watch's context, which the HTTP layer sets on the real clock.
		e.cacheClock = testingclock.NewFakeClock(time.Now())
		cfg.CacheClock = e.cacheClock
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	c, err := chain.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.chain, e.st = c, c.Store()
	t.Cleanup(func() {
		// Held watches first, so that nothing waits on the gate; then the watches end as at an
		// apiserver shutdown, and only after the last handler the storage goes away.
		e.gate.close()
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	e.direct = e.dynamicClient(directAgent)
	return e
}

// storage is the etcd3 storage of a resource ("configmaps", "widgets.example.com").
func (e *env) storage(resource string) *watch.Store { return e.chain.Storage(resource) }

// restConfig is a client configuration for the server; client-side rate limiting is off, since the
// tests write in bursts.
func (e *env) restConfig(userAgent string) *rest.Config {
	return &rest.Config{Host: e.chain.URL(), UserAgent: userAgent, QPS: -1}
}

func (e *env) dynamicClient(userAgent string) dynamic.Interface {
	e.t.Helper()
	c, err := dynamic.NewForConfig(e.restConfig(userAgent))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// ctx is a context for one request of the test.
func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	e.t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds. With a fake cache clock every poll also steps the clock by a
// bookmark period, so that whatever the watch cache times (a watch-list's closing bookmark, the
// progress requests of a consistent read) comes about as it would in real time.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	p := testutil.Poller{Interval: pollInterval}
	if e.cacheClock != nil {
		p.Step = func() { e.cacheClock.Step(bookmarkTick) }
	}
	p.WaitFor(e.t, what, cond)
}

// object builds an object of a served resource.
func object(gvr schema.GroupVersionResource, namespace, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	switch gvr {
	case configMapsGVR:
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.Object["data"] = map[string]any{"k": "v"}
	case podsGVR:
		u.SetAPIVersion("v1")
		u.SetKind("Pod")
		u.Object["spec"] = map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}
	case widgetsGVR:
		u.SetAPIVersion("example.com/v1")
		u.SetKind("Widget")
		u.Object["spec"] = map[string]any{"size": int64(1)}
	}
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

func (e *env) create(gvr schema.GroupVersionResource, namespace, name string) *unstructured.Unstructured {
	e.t.Helper()
	return e.createLabeled(gvr, namespace, name, nil)
}

func (e *env) createLabeled(gvr schema.GroupVersionResource, namespace, name string, labels map[string]string) *unstructured.Unstructured {
	e.t.Helper()
	out, err := e.direct.Resource(gvr).Namespace(namespace).Create(e.ctx(), object(gvr, namespace, name, labels), metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("creating %s %s/%s: %v", gvr.Resource, namespace, name, err)
	}
	return out
}

// touch updates an object's labels, so that its resourceVersion moves.
func (e *env) touch(gvr schema.GroupVersionResource, namespace, name, value string) *unstructured.Unstructured {
	e.t.Helper()
	return e.setLabel(gvr, namespace, name, "touched", value)
}

// setLabel sets one label of an object.
func (e *env) setLabel(gvr schema.GroupVersionResource, namespace, name, label, value string) *unstructured.Unstructured {
	e.t.Helper()
	c := e.direct.Resource(gvr).Namespace(namespace)
	u, err := c.Get(e.ctx(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("getting %s %s/%s: %v", gvr.Resource, namespace, name, err)
	}
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[label] = value
	u.SetLabels(labels)
	out, err := c.Update(e.ctx(), u, metav1.UpdateOptions{})
	if err != nil {
		e.t.Fatalf("updating %s %s/%s: %v", gvr.Resource, namespace, name, err)
	}
	return out
}

func (e *env) remove(gvr schema.GroupVersionResource, namespace, name string) {
	e.t.Helper()
	if err := e.direct.Resource(gvr).Namespace(namespace).Delete(e.ctx(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatalf("deleting %s %s/%s: %v", gvr.Resource, namespace, name, err)
	}
}

// state is a set of objects as namespace/name → resourceVersion.
type state map[string]string

func key(u *unstructured.Unstructured) string { return u.GetNamespace() + "/" + u.GetName() }

// serverState is what a consistent list (resourceVersion unset) with labelSelector returns, and
// the list's resourceVersion.
func (e *env) serverState(gvr schema.GroupVersionResource, namespace, labelSelector string) (state, string) {
	e.t.Helper()
	l, err := e.direct.Resource(gvr).Namespace(namespace).List(e.ctx(), metav1.ListOptions{LabelSelector: labelSelector})
	if err != nil {
		e.t.Fatalf("listing %s: %v", gvr.Resource, err)
	}
	s := state{}
	for i := range l.Items {
		s[key(&l.Items[i])] = l.Items[i].GetResourceVersion()
	}
	return s, l.GetResourceVersion()
}

// informer is a dynamic shared informer under test, started from its own factory.
type informer struct {
	gvr           schema.GroupVersionResource
	namespace     string
	labelSelector string
	inf           toolscache.SharedIndexInformer
	handler       *recordingHandler
}

// startInformer starts a dynamic informer for gvr in namespace ("" for all) and waits until it
// has synced. The informer is stopped, and its goroutines waited for, when the test ends.
func (e *env) startInformer(gvr schema.GroupVersionResource, namespace string) *informer {
	e.t.Helper()
	return e.startFilteredInformer(gvr, namespace, "")
}

// startFilteredInformer is startInformer for the objects labelSelector selects.
func (e *env) startFilteredInformer(gvr schema.GroupVersionResource, namespace, labelSelector string) *informer {
	e.t.Helper()
	client := e.dynamicClient(informerAgent)
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, namespace,
		func(o *metav1.ListOptions) { o.LabelSelector = labelSelector })
	i := &informer{gvr: gvr, namespace: namespace, labelSelector: labelSelector,
		inf: factory.ForResource(gvr).Informer(), handler: &recordingHandler{}}
	if _, err := i.inf.AddEventHandler(i.handler); err != nil {
		e.t.Fatal(err)
	}
	e.startFactory(factory)
	e.waitFor(gvr.Resource+" informer sync", i.inf.HasSynced)
	return i
}

// informerFactory is a typed or a dynamic shared informer factory.
type informerFactory interface {
	Start(stopCh <-chan struct{})
	Shutdown()
}

// startFactory starts the factory's informers; they are stopped, and their goroutines waited for
// (Shutdown), when the test ends.
func (e *env) startFactory(factory informerFactory) {
	stop := make(chan struct{})
	factory.Start(stop)
	e.t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
}

// state is the informer's store.
func (i *informer) state() state {
	s := state{}
	for _, o := range i.inf.GetStore().List() {
		u := o.(*unstructured.Unstructured)
		s[key(u)] = u.GetResourceVersion()
	}
	return s
}

// waitConverged waits until the informer's store holds exactly what a direct list returns.
func (e *env) waitConverged(i *informer) {
	e.t.Helper()
	var got, want state
	deadline := time.Now().Add(testutil.WaitTimeout)
	for {
		want, _ = e.serverState(i.gvr, i.namespace, i.labelSelector)
		got = i.state()
		if cmp.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the %s informer's store did not converge to the server's list (-informer +server):\n%s",
				i.gvr.Resource, cmp.Diff(got, want))
		}
		if e.cacheClock != nil {
			e.cacheClock.Step(bookmarkTick)
		}
		time.Sleep(pollInterval)
	}
}

// recordingHandler records the notifications an informer hands out, as "ADD ns/name rv".
type recordingHandler struct {
	mu     sync.Mutex
	events []string
}

func (h *recordingHandler) record(verb string, obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u := obj.(*unstructured.Unstructured)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, verb+" "+key(u)+" "+u.GetResourceVersion())
}

func (h *recordingHandler) OnAdd(obj any, _ bool) { h.record("ADD", obj) }
func (h *recordingHandler) OnUpdate(_, obj any)   { h.record("UPDATE", obj) }
func (h *recordingHandler) OnDelete(obj any)      { h.record("DELETE", obj) }

// snapshot returns the notifications so far.
func (h *recordingHandler) snapshot() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

// hasPrefix reports whether the handler was given an event starting with prefix.
func (h *recordingHandler) hasPrefix(prefix string) bool {
	return slices.ContainsFunc(h.snapshot(), func(e string) bool { return strings.HasPrefix(e, prefix) })
}

// waitResourceVersion waits until the informer's reflector is at rv. (The store can have an event
// a moment before the reflector records its resourceVersion.)
func (i *informer) waitResourceVersion(e *env, rv string) {
	e.t.Helper()
	e.waitFor("the informer at rv "+rv, func() bool { return i.inf.LastSyncResourceVersion() == rv })
}

// waitNotified waits until the informer's handler was given an event starting with each prefix.
func (i *informer) waitNotified(e *env, prefixes ...string) {
	e.t.Helper()
	deadline := time.Now().Add(testutil.WaitTimeout)
	for {
		var missing []string
		for _, p := range prefixes {
			if !i.handler.hasPrefix(p) {
				missing = append(missing, p)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the event handler was not given %q; it got %v", missing, i.handler.snapshot())
		}
		time.Sleep(pollInterval)
	}
}

// sortedKeys returns a state's keys in order.
func (s state) sortedKeys() []string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
