package cache

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
	"github.com/listwatch/listwatch/store"
	"github.com/listwatch/listwatch/watch"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// errInjected is the list failure testStorage injects.
var errInjected = errors.New("injected list error")

// gate holds back the events of the reflector's watches while closed.
type gate struct {
	mu     sync.Mutex
	closed chan struct{} // nil while open
}

func (g *gate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed == nil {
		g.closed = make(chan struct{})
	}
}

func (g *gate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed != nil {
		close(g.closed)
		g.closed = nil
	}
}

// opened returns a channel closed when the gate opens (nil if it is open).
func (g *gate) opened() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// testStorage wraps *watch.Store to inject list errors, hold back or break the reflector's watch,
// and record what the Cacher asks of the storage.
type testStorage struct {
	*watch.Store
	gate gate

	mu          sync.Mutex
	listErrors  int
	watches     []*injectableWatch
	suggestions []runtime.Object

	failCurrentRV    atomic.Bool
	lists            atomic.Int64
	progressRequests atomic.Int64
	getCalls         atomic.Int64
	listCalls        atomic.Int64 // the reflector's, failed ones included
	delegatedLists   atomic.Int64
}

// GetList injects the configured errors into the reflector's lists (those with its page size) and
// counts the reflector's lists and the delegated ones apart.
func (s *testStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if opts.Predicate.Limit != storageListPageSize {
		s.delegatedLists.Add(1)
		return s.Store.GetList(ctx, key, opts, listObj)
	}
	s.mu.Lock()
	inject := s.listErrors > 0
	if inject {
		s.listErrors--
	}
	s.mu.Unlock()
	s.listCalls.Add(1)
	if inject {
		return errInjected
	}
	s.lists.Add(1)
	return s.Store.GetList(ctx, key, opts, listObj)
}

func (s *testStorage) Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	s.getCalls.Add(1)
	return s.Store.Get(ctx, key, opts, out)
}

func (s *testStorage) GetCurrentResourceVersion(ctx context.Context) (uint64, error) {
	if s.failCurrentRV.Load() {
		return 0, errors.New("injected current revision failure")
	}
	return s.Store.GetCurrentResourceVersion(ctx)
}

func (s *testStorage) RequestWatchProgress(ctx context.Context) error {
	s.progressRequests.Add(1)
	return s.Store.RequestWatchProgress(ctx)
}

func (s *testStorage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	s.mu.Lock()
	s.suggestions = append(s.suggestions, cachedExistingObject)
	s.mu.Unlock()
	return s.Store.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, cachedExistingObject)
}

func (s *testStorage) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	s.mu.Lock()
	s.suggestions = append(s.suggestions, cachedExistingObject)
	s.mu.Unlock()
	return s.Store.Delete(ctx, key, out, preconditions, validateDeletion, cachedExistingObject, opts)
}

func (s *testStorage) lastSuggestion() runtime.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.suggestions) == 0 {
		return nil
	}
	return s.suggestions[len(s.suggestions)-1]
}

func (s *testStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (apiwatch.Interface, error) {
	inner, err := s.Store.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	w := &injectableWatch{inner: inner, out: make(chan apiwatch.Event), inject: make(chan apiwatch.Event),
		stop: make(chan struct{}), done: make(chan struct{}), gate: &s.gate}
	go w.run()
	s.mu.Lock()
	s.watches = append(s.watches, w)
	s.mu.Unlock()
	return w, nil
}

// breakWatch ends the reflector's current watch with an ERROR event carrying err, waiting for the
// reflector to have one open. It returns how many watches the reflector had opened by then: a re-watch
// is the next one.
func (s *testStorage) breakWatch(t tb, err *metav1.Status) int {
	t.Helper()
	deadline := time.Now().Add(testutil.WaitTimeout)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		var w *injectableWatch
		opened := len(s.watches)
		if opened > 0 {
			w = s.watches[opened-1]
		}
		s.mu.Unlock()
		if w == nil {
			time.Sleep(time.Millisecond)
			continue
		}
		select {
		case w.inject <- apiwatch.Event{Type: apiwatch.Error, Object: err}:
			return opened
		case <-w.done:
			time.Sleep(time.Millisecond)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("the reflector has no watch to break")
	return 0
}

// injectableWatch forwards a storage watch through the gate and can interject events.
type injectableWatch struct {
	inner    apiwatch.Interface
	out      chan apiwatch.Event
	inject   chan apiwatch.Event
	gate     *gate
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func (w *injectableWatch) run() {
	defer close(w.done)
	defer close(w.out)
	for {
		select {
		case e, ok := <-w.inner.ResultChan():
			if !ok {
				return
			}
			// Injected events overtake the one held back by the gate.
			for ch := w.gate.opened(); ch != nil; ch = w.gate.opened() {
				select {
				case inj := <-w.inject:
					if !w.send(inj) {
						return
					}
				case <-ch:
				case <-w.stop:
					return
				}
			}
			if !w.send(e) {
				return
			}
		case inj := <-w.inject:
			if !w.send(inj) {
				return
			}
		case <-w.stop:
			return
		}
	}
}

func (w *injectableWatch) send(ev apiwatch.Event) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.stop:
		return false
	}
}

func (w *injectableWatch) ResultChan() <-chan apiwatch.Event { return w.out }

func (w *injectableWatch) Stop() {
	w.stopOnce.Do(func() { close(w.stop) })
	w.inner.Stop()
	<-w.done
}

// tb is what the helpers need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// env is a fresh in-process etcd, the watch storage over it and a Cacher on top.
type env struct {
	t       tb
	ctx     context.Context
	st      *store.Store
	client  *clientv3.Client
	storage *testStorage
	cacher  *Cacher
	clock   *testingclock.FakeClock // nil with the real clock
	// lastRV is the resourceVersion of the last write made through the helpers.
	lastRV uint64
	// cleanups run, last first, when the env is closed.
	cleanups []func()
}

type envOptions struct {
	fakeClock  bool
	listErrors int
	keyFunc    func(runtime.Object) (string, error)
	indexers   map[string]IndexerFunc
	noWait     bool
	group      string
	// noSnapshots sets Config.DisableListFromCacheSnapshot.
	noSnapshots bool
	// noSizeEstimate sets Config.DisableSizeBasedListCostEstimate.
	noSizeEstimate bool
	// metrics set Config.Metrics.
	metrics *Metrics
}

type envOption func(*envOptions)

func withFakeClock(o *envOptions)          { o.fakeClock = true }
func withListErrors(n int) envOption       { return func(o *envOptions) { o.listErrors = n } }
func withoutWaitingForReady(o *envOptions) { o.noWait = true }
func withNodeNameTrigger(o *envOptions) {
	o.indexers = map[string]IndexerFunc{"spec.nodeName": nodeNameOf}
}
func withResource(resource string) envOption { return func(o *envOptions) { o.group = resource } }
func withoutSnapshots(o *envOptions)         { o.noSnapshots = true }
func withoutSizeEstimate(o *envOptions)      { o.noSizeEstimate = true }
func withMetrics(m *Metrics) envOption       { return func(o *envOptions) { o.metrics = m } }

func nodeNameOf(obj runtime.Object) string {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return ""
	}
	n, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName")
	return n
}

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	e, closeEnv := openEnv(t, opts...)
	t.Cleanup(closeEnv)
	return e
}

// openEnv builds an env; the returned function closes it.
func openEnv(t tb, opts ...envOption) (*env, func()) {
	t.Helper()
	var o envOptions
	for _, f := range opts {
		f(&o)
	}
	e := &env{t: t, ctx: context.Background()}
	e.st = store.New(store.Options{})
	client, closeClient, err := etcdgrpc.NewClient(e.st, etcdgrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.client = client
	s, err := watch.New(client, watch.Config{ResourcePrefix: "/pods/", Logger: testutil.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	e.storage = &testStorage{Store: s, listErrors: o.listErrors}
	var clk clock.Clock = clock.RealClock{}
	if o.fakeClock {
		e.clock = testingclock.NewFakeClock(time.Unix(1_000_000, 0))
		clk = e.clock
	}
	cfg := Config{
		Storage:        e.storage,
		ResourcePrefix: "/pods/",
		GetAttrsFunc:   storagetest.PodAttrs,
		KeyFunc:        o.keyFunc,
		IndexerFuncs:   o.indexers,
		Clock:          clk,
		Logger:         testutil.DiscardLogger(),

		DisableListFromCacheSnapshot:     o.noSnapshots,
		DisableSizeBasedListCostEstimate: o.noSizeEstimate,
		Metrics:                          o.metrics,
		Kind:                             schema.GroupVersionKind{Version: "v1", Kind: "Pod"},
	}
	if o.group != "" {
		cfg.GroupResource.Resource = o.group
	}
	e.cacher, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.cleanups = append(e.cleanups, func() {
		e.cacher.Stop()
		s.Close()
		e.storage.gate.resume()
		if err := closeClient(); err != nil {
			t.Errorf("close client: %v", err)
		}
		if err := e.st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	closeEnv := func() {
		for i := len(e.cleanups) - 1; i >= 0; i-- {
			e.cleanups[i]()
		}
		e.cleanups = nil
	}
	if o.listErrors > 0 && !o.noWait {
		// The injected list error makes the first round fail; the next starts 1 s later.
		e.eventually("the injected list error is consumed", func() bool { return e.storage.listCalls.Load() > int64(o.listErrors) })
	}
	if !o.noWait {
		e.waitReady()
	}
	return e, closeEnv
}

// eventually waits for cond, stepping the fake clock (if any) by 100 ms between checks so that the
// Cacher's timers (restarts, progress requests) make progress.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	e.poll(what, true, cond)
}

// waitFor waits for cond without touching the clock.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	e.poll(what, false, cond)
}

func (e *env) poll(what string, step bool, cond func() bool) {
	e.t.Helper()
	p := testutil.Poller{}
	if step && e.clock != nil {
		p.Step = func() { e.clock.Step(100 * time.Millisecond) }
	}
	p.WaitFor(e.t, what, cond)
}

func (e *env) waitReady() {
	e.t.Helper()
	e.eventually("the cacher is ready", e.cacher.Ready)
}

// cacheRV is the watch cache's resourceVersion.
func (e *env) cacheRV() uint64 {
	e.cacher.watchCache.RLock()
	defer e.cacher.watchCache.RUnlock()
	return e.cacher.watchCache.resourceVersion
}

// waitForCache waits until the watch cache has applied rv.
func (e *env) waitForCache(rv uint64) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("the cache reaches %d", rv), func() bool { return e.cacheRV() >= rv })
}

func (e *env) currentRV() uint64 {
	rv, err := e.storage.GetCurrentResourceVersion(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return rv
}

// syncCache waits until the cache has every write made so far.
func (e *env) syncCache() uint64 {
	e.t.Helper()
	rv := e.currentRV()
	e.waitForCache(rv)
	return rv
}

func (e *env) generation() int {
	e.cacher.ready.mu.RLock()
	defer e.cacher.ready.mu.RUnlock()
	return e.cacher.ready.generation
}

func keyOf(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return "/pods/" + u.GetName()
	}
	return "/pods/" + u.GetNamespace() + "/" + u.GetName()
}

func rvOf(t tb, obj runtime.Object) uint64 {
	t.Helper()
	rv, err := storage.APIObjectVersioner{}.ObjectResourceVersion(obj)
	if err != nil {
		t.Fatalf("resourceVersion of %T: %v", obj, err)
	}
	return rv
}

// create writes a new object through the Cacher and returns what was stored.
func (e *env) create(u *unstructured.Unstructured) *unstructured.Unstructured {
	e.t.Helper()
	out := &unstructured.Unstructured{}
	if err := e.cacher.Create(e.ctx, keyOf(u), u.DeepCopy(), out, 0); err != nil {
		e.t.Fatalf("create %s: %v", keyOf(u), err)
	}
	e.lastRV = max(e.lastRV, rvOf(e.t, out))
	return out
}

// put creates or replaces an object through the Cacher.
func (e *env) put(u *unstructured.Unstructured) *unstructured.Unstructured {
	e.t.Helper()
	out := &unstructured.Unstructured{}
	err := e.cacher.GuaranteedUpdate(e.ctx, keyOf(u), out, true, nil,
		storage.SimpleUpdate(func(runtime.Object) (runtime.Object, error) { return u.DeepCopy(), nil }), nil)
	if err != nil {
		e.t.Fatalf("put %s: %v", keyOf(u), err)
	}
	e.lastRV = max(e.lastRV, rvOf(e.t, out))
	return out
}

// remove deletes an object through the Cacher and returns the deleted state.
func (e *env) remove(u *unstructured.Unstructured) *unstructured.Unstructured {
	e.t.Helper()
	out := &unstructured.Unstructured{}
	if err := e.cacher.Delete(e.ctx, keyOf(u), out, nil, storage.ValidateAllObjectFunc, nil, storage.DeleteOptions{}); err != nil {
		e.t.Fatalf("delete %s: %v", keyOf(u), err)
	}
	e.lastRV = max(e.lastRV, rvOf(e.t, out))
	return out
}

// touch writes a key outside /pods/, only to move etcd's revision.
func (e *env) touch() uint64 {
	e.t.Helper()
	resp, err := e.client.Put(e.ctx, "/unrelated", "x")
	if err != nil {
		e.t.Fatal(err)
	}
	return uint64(resp.Header.Revision)
}

func (e *env) watch(key string, opts storage.ListOptions) *recorder {
	e.t.Helper()
	return e.watchCtx(e.ctx, key, opts)
}

func (e *env) watchCtx(ctx context.Context, key string, opts storage.ListOptions) *recorder {
	e.t.Helper()
	w, err := e.cacher.Watch(ctx, key, opts)
	if err != nil {
		e.t.Fatalf("watch %s: %v", key, err)
	}
	r := &recorder{t: e.t, w: w, env: e}
	e.cleanups = append(e.cleanups, r.stop)
	return r
}

// recorder reads a watch in the test goroutine.
type recorder struct {
	t      tb
	w      apiwatch.Interface
	env    *env
	closed bool
}

func (r *recorder) stop() {
	r.w.Stop()
	for range r.w.ResultChan() {
	}
}

// next returns the next event; ok is false when the watch closed.
func (r *recorder) next() (apiwatch.Event, bool) {
	r.t.Helper()
	select {
	case ev, ok := <-r.w.ResultChan():
		if !ok {
			r.closed = true
		}
		return ev, ok
	case <-time.After(testutil.WaitTimeout):
		r.t.Fatalf("no event within %v; %s", testutil.WaitTimeout, r.state())
	}
	return apiwatch.Event{}, false
}

// nextStepping is next, stepping the fake clock by 100 ms while it waits.
func (r *recorder) nextStepping() (apiwatch.Event, bool) {
	r.t.Helper()
	deadline := time.After(testutil.WaitTimeout)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case ev, ok := <-r.w.ResultChan():
			if !ok {
				r.closed = true
			}
			return ev, ok
		case <-tick.C:
			r.env.clock.Step(100 * time.Millisecond)
		case <-deadline:
			r.t.Fatalf("no event within %v; %s", testutil.WaitTimeout, r.state())
		}
	}
}

// state describes the watcher and the dispatcher for failure messages.
func (r *recorder) state() string {
	cw, ok := r.w.(*cacheWatcher)
	if !ok {
		return fmt.Sprintf("watch %T", r.w)
	}
	c := r.env.cacher
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("watcher stopped=%t input=%d result=%d; dispatcher dispatching=%t lastProcessed=%d incoming=%d; cache rv=%d; last write %d",
		cw.stopped, len(cw.input), len(cw.result), c.dispatching, c.lastProcessedRV.Load(), len(c.incoming), r.env.cacheRV(), r.env.lastRV)
}

// expectStepping is expect, stepping the fake clock while it waits.
func (r *recorder) expectStepping(want ...string) {
	r.t.Helper()
	r.expectFrom(r.nextStepping, want)
}

// expect reads len(want) events and compares their descriptions.
func (r *recorder) expect(want ...string) {
	r.t.Helper()
	r.expectFrom(r.next, want)
}

// expectFrom reads len(want) events with next and compares their descriptions.
func (r *recorder) expectFrom(next func() (apiwatch.Event, bool), want []string) {
	r.t.Helper()
	var got []string
	for range want {
		ev, ok := next()
		if !ok {
			got = append(got, "closed")
			break
		}
		got = append(got, describe(ev))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		r.t.Fatalf("events:\n got: %s\nwant: %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}

// expectClosed reads until the watch closes and fails on any event.
func (r *recorder) expectClosed() {
	r.t.Helper()
	for {
		ev, ok := r.next()
		if !ok {
			return
		}
		r.t.Fatalf("unexpected event before close: %s", describe(ev))
	}
}

// drainAfterStop stops the watch and returns the events still delivered before the close.
func (r *recorder) drainAfterStop() []string {
	r.t.Helper()
	r.w.Stop()
	var got []string
	for {
		ev, ok := r.next()
		if !ok {
			return got
		}
		got = append(got, describe(ev))
	}
}

// waitForProgressWaiter waits until a request waits for freshness, then steps the fake clock by one
// progress period so that a progress request goes out.
func (e *env) waitForProgressWaiter(before int64) {
	e.t.Helper()
	e.waitFor("a request waits for freshness", func() bool {
		e.cacher.progress.mu.Lock()
		defer e.cacher.progress.mu.Unlock()
		return e.cacher.progress.waiting > 0
	})
	e.clock.Step(progressRequestPeriod)
	e.waitFor("progress is requested", func() bool { return e.storage.progressRequests.Load() > before })
}

// fenceRV is the resourceVersion of the bookmarks fence injects, above every real one.
const fenceRV = 1 << 62

// waitProcessed waits until the dispatcher is done with every event up to rv.
func (e *env) waitProcessed(rv uint64) {
	e.t.Helper()
	e.waitForCache(rv)
	e.waitFor(fmt.Sprintf("the dispatcher processes %d", rv), func() bool { return e.cacher.lastProcessedRV.Load() >= rv })
}

// fence returns every event the watch delivers for the writes made so far: once the dispatcher is
// done with the last write, it queues a marker bookmark on the watcher's input behind everything
// dispatched, and reads up to it. The watcher must not be a watch-list still owing its end bookmark.
func (r *recorder) fence() []string {
	r.t.Helper()
	cw, ok := r.w.(*cacheWatcher)
	if !ok {
		r.t.Fatalf("fence needs a cache watcher, got %T", r.w)
	}
	r.env.waitProcessed(r.env.lastRV)
	marker := &unstructured.Unstructured{}
	marker.SetResourceVersion(strconv.FormatUint(fenceRV, 10))
	c := r.env.cacher
	c.mu.Lock()
	if cw.stopped {
		c.mu.Unlock()
		r.t.Fatal("fence on a stopped watcher")
	}
	select {
	case cw.input <- &watchCacheEvent{Type: apiwatch.Bookmark, Object: marker, ResourceVersion: fenceRV}:
	default:
		c.mu.Unlock()
		r.t.Fatal("fence: watcher input is full")
	}
	c.mu.Unlock()
	var got []string
	for {
		ev, ok := r.next()
		if !ok {
			r.t.Fatalf("watch closed before the fence; got %v", got)
		}
		if ev.Type == apiwatch.Bookmark && rvOf(r.t, ev.Object) == fenceRV {
			return got
		}
		got = append(got, describe(ev))
	}
}

// expectNothing fails if the watch delivers anything for the writes made so far.
func (r *recorder) expectNothing() {
	r.t.Helper()
	if got := r.fence(); len(got) > 0 {
		r.t.Fatalf("unexpected events: %v", got)
	}
}

// plainObject unwraps a CachingObject.
func plainObject(obj runtime.Object) runtime.Object {
	if co, ok := obj.(runtime.CacheableObject); ok {
		return co.GetObject()
	}
	return obj
}

// describe renders an event: type, object (ns/name, resourceVersion, distinguishing fields) or a
// bookmark's resourceVersion and annotation, or an error's Status.
func describe(ev apiwatch.Event) string {
	if st, ok := ev.Object.(*metav1.Status); ok {
		return fmt.Sprintf("%s %d %s: %s", ev.Type, st.Code, st.Reason, st.Message)
	}
	u, ok := plainObject(ev.Object).(*unstructured.Unstructured)
	if !ok {
		return fmt.Sprintf("%s %T", ev.Type, ev.Object)
	}
	if ev.Type == apiwatch.Bookmark {
		s := fmt.Sprintf("BOOKMARK rv=%s", u.GetResourceVersion())
		if u.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			s += " end"
		}
		return s
	}
	return string(ev.Type) + " " + describeObject(u)
}

func describeObject(u *unstructured.Unstructured) string {
	var b strings.Builder
	if ns := u.GetNamespace(); ns != "" {
		b.WriteString(ns + "/")
	}
	b.WriteString(u.GetName())
	b.WriteString(" rv=" + u.GetResourceVersion())
	if n, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName"); n != "" {
		b.WriteString(" node=" + n)
	}
	if p, _, _ := unstructured.NestedString(u.Object, "status", "phase"); p != "" {
		b.WriteString(" phase=" + p)
	}
	if l := u.GetLabels(); len(l) > 0 {
		keys := make([]string, 0, len(l))
		for k := range l {
			keys = append(keys, k+"="+l[k])
		}
		sort.Strings(keys)
		b.WriteString(" labels=" + strings.Join(keys, ","))
	}
	return b.String()
}

// ev renders the expected description of an event of u.
func ev(t apiwatch.EventType, u *unstructured.Unstructured) string {
	return string(t) + " " + describeObject(u)
}

// atRV is u as delivered at another resourceVersion (a DELETED object at the deletion's).
func atRV(u *unstructured.Unstructured, rv uint64) *unstructured.Unstructured {
	c := u.DeepCopy()
	c.SetResourceVersion(strconv.FormatUint(rv, 10))
	return c
}

func bookmark(rv uint64, end bool) string {
	s := fmt.Sprintf("BOOKMARK rv=%d", rv)
	if end {
		s += " end"
	}
	return s
}

func ptrTo[T any](v T) *T { return &v }
