package listwatchtest_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/listwatchtest"
	"github.com/listwatch/listwatch/store"
)

// next returns the next event of w, failing the test if none comes; ok is false when w closed.
func next(t *testing.T, w watch.Interface) (watch.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		return ev, ok
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("no watch event")
		return watch.Event{}, false
	}
}

// watchConfigMaps watches the configmaps of a namespace through the Kubernetes API.
func watchConfigMaps(t *testing.T, e *listwatchtest.Env, namespace string, opts metav1.ListOptions) watch.Interface {
	t.Helper()
	w, err := clientsetFor(t, e).CoreV1().ConfigMaps(namespace).Watch(ctxFor(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// expectClosed expects w to close without an ERROR event.
func expectClosed(t *testing.T, w watch.Interface) {
	t.Helper()
	for {
		ev, ok := next(t, w)
		if !ok {
			return
		}
		if ev.Type == watch.Error {
			t.Fatalf("the watch ended with an ERROR: %v", apierrors.FromObject(ev.Object))
		}
	}
}

// expectExpired expects the next event of w to be a 410 Expired ERROR.
func expectExpired(t *testing.T, w watch.Interface) {
	t.Helper()
	ev, ok := next(t, w)
	if !ok || ev.Type != watch.Error {
		t.Fatalf("got %v (open %v), want an ERROR", ev, ok)
	}
	if err := apierrors.FromObject(ev.Object); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Fatalf("got ERROR %v, want 410 Expired", err)
	}
}

// requestLog records the requests a client sends.
type requestLog struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.reqs = append(l.reqs, req)
		l.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// relists counts the requests that read a collection afresh: lists, and watches that start with
// the current state (sendInitialEvents) rather than from a resourceVersion.
func (l *requestLog) relists() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.reqs {
		q := r.URL.Query()
		if q.Get("watch") != "true" && q.Get("watch") != "1" || q.Get("sendInitialEvents") == "true" {
			n++
		}
	}
	return n
}

// watchesFrom returns the resourceVersions the watches that resume from one started at.
func (l *requestLog) watchesFrom() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var rvs []string
	for _, r := range l.reqs {
		q := r.URL.Query()
		if (q.Get("watch") == "true" || q.Get("watch") == "1") && q.Get("sendInitialEvents") != "true" {
			rvs = append(rvs, q.Get("resourceVersion"))
		}
	}
	return rvs
}

// informerFor runs a configmaps informer over e whose requests are logged, until the test ends.
func informerFor(t *testing.T, e *listwatchtest.Env) (toolscache.SharedIndexInformer, *requestLog) {
	t.Helper()
	log := &requestLog{}
	cfg := e.Config()
	cfg.WrapTransport = log.wrap
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().ConfigMaps().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	testutil.WaitFor(t, "the informer to sync", inf.HasSynced)
	return inf, log
}

// hasKey reports whether the informer's store holds namespace/name.
func hasKey(inf toolscache.SharedIndexInformer, key string) func() bool {
	return func() bool { _, ok, _ := inf.GetStore().GetByKey(key); return ok }
}

// TestInjectExpired: every open watch of the resource gets a 410 Expired ERROR and ends; client-go's
// informer then lists again and keeps up. Other resources' watches are left alone.
func TestInjectExpired(t *testing.T) {
	t.Parallel()
	e := listwatchtest.Start(t)
	raw := watchConfigMaps(t, e, "default", metav1.ListOptions{})
	widgets, err := dynamicFor(t, e).Resource(widgetsGVR).Namespace("default").Watch(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer widgets.Stop()
	inf, log := informerFor(t, e)
	relists := log.relists()

	n, err := e.InjectExpired("configmaps")
	if err != nil || n != 2 {
		t.Fatalf("InjectExpired = %d, %v; want the 2 open configmaps watches", n, err)
	}
	expectExpired(t, raw)
	if _, ok := next(t, raw); ok {
		t.Fatal("the watch went on after its ERROR")
	}
	testutil.WaitFor(t, "the informer to list again", func() bool { return log.relists() > relists })
	if err := e.Seed(ctxFor(t), configMap("default", "after", nil)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the informer to see a write after the 410", hasKey(inf, "default/after"))
	// The widgets watch is still open and sees its own events.
	if err := e.Seed(ctxFor(t), widget("default", "w")); err != nil {
		t.Fatal(err)
	}
	if ev, ok := next(t, widgets); !ok || ev.Type != watch.Added {
		t.Fatalf("the widgets watch got %v (open %v)", ev, ok)
	}
}

// TestDropWatches: every open watch of the resource ends without an event; client-go's informer
// watches again from the last resourceVersion it saw, without listing.
func TestDropWatches(t *testing.T) {
	t.Parallel()
	e := listwatchtest.Start(t, listwatchtest.WithObjects(configMap("default", "a", nil)))
	raw := watchConfigMaps(t, e, "default", metav1.ListOptions{ResourceVersion: "0"})
	if ev, ok := next(t, raw); !ok || ev.Type != watch.Added {
		t.Fatalf("initial event %v (open %v)", ev, ok)
	}
	inf, log := informerFor(t, e)
	// A watch that ends within a second having delivered nothing is an error to client-go, which then
	// lists again: the informer's watch delivers an event first, as a long-running one would have.
	if err := e.Seed(ctxFor(t), configMap("default", "seen", nil)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the informer to see a write", hasKey(inf, "default/seen"))
	relists, watches := log.relists(), len(log.watchesFrom())

	n, err := e.DropWatches("configmaps")
	if err != nil || n != 2 {
		t.Fatalf("DropWatches = %d, %v; want the 2 open watches", n, err)
	}
	expectClosed(t, raw)
	testutil.WaitFor(t, "the informer to watch again", func() bool { return len(log.watchesFrom()) > watches })
	if got := log.watchesFrom()[watches]; got == "" || got == "0" {
		t.Errorf("the informer watched again from %q, not from the last resourceVersion it saw", got)
	}
	if log.relists() != relists {
		t.Error("the informer listed again after a dropped watch")
	}
	if err := e.Seed(ctxFor(t), configMap("default", "b", nil)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the informer to see a write after the drop", hasKey(inf, "default/b"))
}

// TestFaultsRefused: the fault controls name what they cannot do: an unknown resource, and no
// watch open is no watch ended.
func TestFaultsRefused(t *testing.T) {
	t.Parallel()
	e := listwatchtest.Start(t)
	if _, err := e.InjectExpired("nodes"); !errors.Is(err, listwatchtest.ErrUnknownResource) {
		t.Errorf("InjectExpired(nodes) = %v, want ErrUnknownResource", err)
	}
	if _, err := e.DropWatches("pods.apps"); !errors.Is(err, listwatchtest.ErrUnknownResource) {
		t.Errorf("DropWatches(pods.apps) = %v, want ErrUnknownResource", err)
	}
	if err := e.Relist(ctxFor(t), "nodes"); !errors.Is(err, listwatchtest.ErrUnknownResource) {
		t.Errorf("Relist(nodes) = %v, want ErrUnknownResource", err)
	}
	if n, err := e.InjectExpired("pods"); n != 0 || err != nil {
		t.Errorf("InjectExpired with no watch open = %d, %v", n, err)
	}
	uncached := listwatchtest.Start(t, listwatchtest.WithoutWatchCache())
	if err := uncached.Relist(ctxFor(t), "configmaps"); !errors.Is(err, listwatchtest.ErrNoWatchCache) {
		t.Errorf("Relist without a watch cache = %v, want ErrNoWatchCache", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Relist(ctx, "configmaps"); !errors.Is(err, context.Canceled) {
		t.Errorf("Relist with a cancelled context = %v, want context.Canceled", err)
	}
}

// TestRelist: the watch cache relists: the watches it serves end without an ERROR, its history is
// gone (a watch from before the relist gets 410 Expired), and it serves the current state and new
// writes.
func TestRelist(t *testing.T) {
	t.Parallel()
	a, b := configMap("default", "a", nil), configMap("default", "b", nil)
	e := listwatchtest.Start(t, listwatchtest.WithObjects(a, b))
	// Before the relist, the history replays b after a.
	w := watchConfigMaps(t, e, "default", metav1.ListOptions{ResourceVersion: a.ResourceVersion})
	if ev, ok := next(t, w); !ok || ev.Type != watch.Added {
		t.Fatalf("replay from a: %v (open %v)", ev, ok)
	}
	before := e.Clock().Now()
	if err := e.Relist(ctxFor(t), "configmaps"); err != nil {
		t.Fatal(err)
	}
	if d := e.Clock().Since(before); d < time.Second {
		t.Errorf("the clock moved %v during Relist, want at least the cache's one-second restart delay", d)
	}
	expectClosed(t, w)
	expectExpired(t, watchConfigMaps(t, e, "default", metav1.ListOptions{ResourceVersion: a.ResourceVersion}))

	list, err := clientsetFor(t, e).CoreV1().ConfigMaps("default").List(ctxFor(t), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("list from the relisted cache: %v %v", list, err)
	}
	w = watchConfigMaps(t, e, "default", metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err := e.Seed(ctxFor(t), configMap("default", "c", nil)); err != nil {
		t.Fatal(err)
	}
	if ev, ok := next(t, w); !ok || ev.Type != watch.Added {
		t.Fatalf("a write after the relist: %v (open %v)", ev, ok)
	}
}

// TestCompact: Compact compacts the store at its current revision: an etcd read or watch from
// before it fails with ErrCompacted; compacting again with nothing written since fails as etcd.
func TestCompact(t *testing.T) {
	t.Parallel()
	e := listwatchtest.Start(t, listwatchtest.EtcdOnly())
	cli, ctx := etcdFor(t, e), ctxFor(t)
	first, err := cli.Put(ctx, "k", "1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "k", "2"); err != nil {
		t.Fatal(err)
	}
	rev, err := e.Compact()
	if err != nil || rev != e.Store().Rev() {
		t.Fatalf("Compact = %d, %v; want the current revision %d", rev, err, e.Store().Rev())
	}
	if _, err := cli.Get(ctx, "k", clientv3.WithRev(first.Header.Revision)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("a read before the compaction = %v, want ErrCompacted", err)
	}
	resp := <-cli.Watch(ctx, "k", clientv3.WithRev(first.Header.Revision))
	if resp.CompactRevision != rev {
		t.Errorf("a watch from before the compaction: compact revision %d, want %d (%v)", resp.CompactRevision, rev, resp.Err())
	}
	if got, err := cli.Get(ctx, "k"); err != nil || string(got.Kvs[0].Value) != "2" {
		t.Errorf("the current value after the compaction: %v %v", got, err)
	}
	if _, err := e.Compact(); err == nil || !errors.Is(err, store.ErrCompacted) {
		t.Errorf("a second Compact with nothing written = %v, want the store's ErrCompacted", err)
	}
}

// TestClockLeaseExpiry: Step past a lease's TTL expires it: its keys are deleted and an etcd watch
// sees the deletion, at once rather than a minute later.
func TestClockLeaseExpiry(t *testing.T) {
	t.Parallel()
	e := listwatchtest.Start(t, listwatchtest.EtcdOnly())
	cli, ctx := etcdFor(t, e), ctxFor(t)
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	put, err := cli.Put(ctx, "/lease/k", "v", clientv3.WithLease(lease.ID))
	if err != nil {
		t.Fatal(err)
	}
	w := cli.Watch(ctx, "/lease/k", clientv3.WithRev(put.Header.Revision+1))
	// Half the TTL later the lease is alive.
	if err := e.Clock().Step(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if ttl, err := cli.TimeToLive(ctx, lease.ID); err != nil || ttl.TTL <= 0 || ttl.TTL > 30 {
		t.Fatalf("TTL after 30 s: %v %v", ttl, err)
	}
	if err := e.Clock().Step(31 * time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-w:
		if len(resp.Events) != 1 || resp.Events[0].Type != clientv3.EventTypeDelete {
			t.Fatalf("watch after the lease expired: %+v %v", resp.Events, resp.Err())
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("the lease did not expire")
	}
	if got, err := cli.Get(ctx, "/lease/k"); err != nil || len(got.Kvs) != 0 {
		t.Errorf("the key outlived its lease: %v %v", got, err)
	}
}

// TestClockProgressNotify: Step past the progress-notify interval sends a progress notification to
// an etcd watch that asked for them.
func TestClockProgressNotify(t *testing.T) {
	t.Parallel()
	e := listwatchtest.Start(t, listwatchtest.EtcdOnly(), listwatchtest.WithProgressNotifyInterval(time.Hour))
	cli, ctx := etcdFor(t, e), ctxFor(t)
	w := cli.Watch(ctx, "/idle", clientv3.WithProgressNotify(), clientv3.WithCreatedNotify())
	if resp := <-w; !resp.Created {
		t.Fatalf("first response %+v, want created", resp)
	}
	// Past the interval and its 10% jitter.
	if err := e.Clock().Step(2 * time.Hour); err != nil {
		t.Fatal(err)
	}
	select {
	case resp := <-w:
		if !resp.IsProgressNotify() || resp.Header.Revision != e.Store().Rev() {
			t.Fatalf("got %+v, want a progress notification at revision %d", resp, e.Store().Rev())
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("no progress notification")
	}
}

// TestClockBookmarks: Step past the watch cache's one-minute bookmark period delivers a BOOKMARK to
// a Kubernetes watch that allows them, at the resourceVersion of a write it did not see.
func TestClockBookmarks(t *testing.T) {
	t.Parallel()
	e := listwatchtest.Start(t)
	list, err := clientsetFor(t, e).CoreV1().ConfigMaps("watched").List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := watchConfigMaps(t, e, "watched", metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
	other := configMap("other", "x", nil)
	if err := e.Seed(ctxFor(t), other); err != nil {
		t.Fatal(err)
	}
	// The cache has seen the write before the clock moves.
	if _, err := clientsetFor(t, e).CoreV1().ConfigMaps("other").List(ctxFor(t), metav1.ListOptions{
		ResourceVersion: other.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}); err != nil {
		t.Fatal(err)
	}
	if err := e.Clock().Step(61 * time.Second); err != nil {
		t.Fatal(err)
	}
	ev, ok := next(t, w)
	if !ok || ev.Type != watch.Bookmark {
		t.Fatalf("got %v (open %v), want a BOOKMARK", ev, ok)
	}
	if m, err := meta.Accessor(ev.Object); err != nil || m.GetResourceVersion() != other.ResourceVersion {
		t.Errorf("bookmark %v (%v), want one at the write's resourceVersion %s", ev.Object, err, other.ResourceVersion)
	}
}

// TestClockWatchTimeout: Step past a watch's timeoutSeconds ends it cleanly, as the real time would.
func TestClockWatchTimeout(t *testing.T) {
	t.Parallel()
	e := listwatchtest.Start(t)
	timeout := int64(600)
	short := watchConfigMaps(t, e, "default", metav1.ListOptions{TimeoutSeconds: &timeout})
	long := int64(3600)
	kept := watchConfigMaps(t, e, "default", metav1.ListOptions{TimeoutSeconds: &long})
	if err := e.Clock().Step(time.Duration(timeout+1) * time.Second); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, short)
	// The longer watch is still open: it sees a write.
	if err := e.Seed(ctxFor(t), configMap("default", "a", nil)); err != nil {
		t.Fatal(err)
	}
	if ev, ok := next(t, kept); !ok || ev.Type != watch.Added {
		t.Fatalf("the hour-long watch: %v (open %v)", ev, ok)
	}
}

// TestClockStampsObjects: the API stamps creationTimestamp with the environment's clock.
func TestClockStampsObjects(t *testing.T) {
	t.Parallel()
	e := listwatchtest.Start(t)
	if err := e.Clock().Step(24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	cm := configMap("default", "a", nil)
	if err := e.Seed(ctxFor(t), cm); err != nil {
		t.Fatal(err)
	}
	if d := cm.CreationTimestamp.Sub(time.Now()); d < 23*time.Hour {
		t.Errorf("creationTimestamp %v is %v from the real time, want a day ahead", cm.CreationTimestamp, d)
	}
}
