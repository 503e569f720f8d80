package cache

// Ports of the storage conformance cases upstream runs against the cacher (k8s.io/apiserver
// pkg/storage/testing/watcher_tests.go, spec section 5, cases 1–5, 9, 10, 13–20).

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
)

// step is one write of a transition scenario and the event it must cause ("" for none).
type step struct {
	obj  *unstructured.Unstructured // nil deletes the previous object of the same key
	want watch.EventType
}

// runSteps applies the steps and checks each expected event; a write that must cause none is
// checked by the next expected event (events arrive in revision order) or, at the end, by a fence.
// The watch is then stopped and must close with nothing more.
func runSteps(t *testing.T, e *env, r *recorder, delKey string, steps []step) {
	t.Helper()
	current := map[string]*unstructured.Unstructured{}
	for _, s := range steps {
		var want string
		if s.obj == nil {
			prev := current[delKey]
			out := e.remove(prev)
			delete(current, delKey)
			want = ev(watch.Deleted, atRV(prev, rvOf(t, out)))
		} else {
			k := keyOf(s.obj)
			prev := current[k]
			out := e.put(s.obj)
			current[k] = out
			switch s.want {
			case watch.Deleted:
				want = ev(watch.Deleted, atRV(prev, rvOf(t, out)))
			default:
				want = ev(s.want, out)
			}
		}
		if s.want != "" {
			r.expect(want)
		}
	}
	r.expectNothing()
	r.w.Stop()
	// Nothing written after Stop may be delivered, even a write every predicate but one selects.
	ns, name, _ := strings.Cut(strings.TrimPrefix(delKey, "/pods/"), "/")
	e.put(storagetest.Pod(ns, name, storagetest.Node("bar"), storagetest.Labels("select=true")))
	r.expectClosed()
}

// listRV is the resourceVersion of a consistent list, from which the cases start watching.
func listRV(t *testing.T, e *env, key string, p storage.Predicate, recursive bool) string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	if err := e.cacher.GetList(e.ctx, key, storage.ListOptions{Predicate: p, Recursive: recursive}, list); err != nil {
		t.Fatalf("list %s: %v", key, err)
	}
	return list.GetResourceVersion()
}

// TestConformanceWatch ports RunTestWatch (case 1): predicate transitions on one key, watched alone or
// through its namespace, while a write in another namespace is never seen. Failure mode: a wrong
// transition or the other namespace's event shows up in place of the expected event.
func TestConformanceWatch(t *testing.T) {
	t.Parallel()
	base := func(ns string) *unstructured.Unstructured { return storagetest.Pod(ns, "foo") }
	assigned := func(ns string) *unstructured.Unstructured { return storagetest.Pod(ns, "foo", storagetest.Node("bar")) }
	selected := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		storagetest.Labels("select=true")(u)
		return u
	}
	cases := []struct {
		name  string
		pred  storage.Predicate
		steps func(ns string) []step
	}{
		{"create a key", storage.Everything, func(ns string) []step { return []step{{base(ns), watch.Added}} }},
		{"key updated to match predicate", storagetest.PodPredicate("", "spec.nodeName=bar"), func(ns string) []step {
			return []step{{base(ns), ""}, {assigned(ns), watch.Added}}
		}},
		{"update", storage.Everything, func(ns string) []step {
			return []step{{base(ns), watch.Added}, {assigned(ns), watch.Modified}}
		}},
		{"delete because of being filtered", storagetest.PodPredicate("", "spec.nodeName!=bar"), func(ns string) []step {
			return []step{{base(ns), watch.Added}, {assigned(ns), watch.Deleted}}
		}},
		{"filtering", storagetest.PodPredicate("select=true", ""), func(ns string) []step {
			return []step{
				{selected(base(ns)), watch.Added},
				{base(ns), watch.Deleted},
				{selected(base(ns)), watch.Added},
				{selected(assigned(ns)), watch.Modified},
				{nil, watch.Deleted},
			}
		}},
	}
	for _, recursive := range []bool{false, true} {
		for i, tc := range cases {
			t.Run(fmt.Sprintf("%s/recursive=%t", tc.name, recursive), func(t *testing.T) {
				t.Parallel()
				// As upstream, the cacher starts with a failed list, so the cases run after a relist.
				e := newEnv(t, withListErrors(1))
				ns := fmt.Sprintf("test-ns-%d-%t", i+1, recursive)
				watchKey := "/pods/" + ns
				key := watchKey + "/foo"
				if !recursive {
					watchKey = key
				}
				rv := listRV(t, e, watchKey, tc.pred, recursive)
				r := e.watch(watchKey, storage.ListOptions{ResourceVersion: rv, Predicate: tc.pred, Recursive: recursive})
				e.put(storagetest.Pod(ns+"-bad", "foo"))
				runSteps(t, e, r, key, tc.steps(ns))
			})
		}
	}
}

// compactCache drops the history up to rv and compacts etcd at rv, as upstream's compactWatch does for
// the cacher (which has no compaction of its own). No watcher may be open.
func compactCache(t *testing.T, e *env, rv uint64) {
	t.Helper()
	e.waitForCache(rv)
	wc := e.cacher.watchCache
	wc.Lock()
	e.cacher.mu.Lock()
	if len(e.cacher.watchers.allWatchers) > 0 || len(e.cacher.watchers.valueWatchers) > 0 {
		t.Error("open watchers during compaction")
	}
	for wc.history.startIndex < wc.history.endIndex && wc.history.at(wc.history.startIndex).ResourceVersion <= rv {
		wc.history.startIndex++
	}
	wc.listResourceVersion = rv
	e.cacher.mu.Unlock()
	wc.Unlock()
	if _, err := e.client.Compact(e.ctx, int64(rv)); err != nil {
		t.Fatal(err)
	}
}

// TestConformanceWatchFromZero ports RunTestWatchFromZero (case 2): RV=0 starts with the current state
// as ADDED, also after a compaction; an RV older than the history is 410 Expired.
func TestConformanceWatchFromZero(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stored := e.create(storagetest.Pod("test-ns", "foo"))
	e.syncCache()
	w := e.watch(keyOf(stored), storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything})
	w.expect(ev(watch.Added, stored))
	out := e.put(storagetest.Pod("test-ns", "foo", storagetest.Labels("a=1")))
	w.expect(ev(watch.Modified, out))
	w.stop()

	w = e.watch(keyOf(stored), storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything})
	w.expect(ev(watch.Added, out))
	w.stop()

	newOut := e.put(storagetest.Pod("test-ns", "foo"))
	compactCache(t, e, rvOf(t, newOut))

	w = e.watch(keyOf(stored), storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything})
	w.expect(ev(watch.Added, newOut))
	w.stop()

	tooOld := e.watch(keyOf(stored), storage.ListOptions{ResourceVersion: out.GetResourceVersion(), Predicate: storage.Everything})
	tooOld.expect(fmt.Sprintf("ERROR %d %s: too old resource version: %s (%d)", http.StatusGone, metav1.StatusReasonExpired,
		out.GetResourceVersion(), rvOf(t, newOut)))
	tooOld.expectClosed()
}

// TestConformanceDeleteTriggerWatch ports RunTestDeleteTriggerWatch (case 3).
func TestConformanceDeleteTriggerWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stored := e.create(storagetest.Pod("test-ns", "foo"))
	w := e.watch(keyOf(stored), storage.ListOptions{ResourceVersion: stored.GetResourceVersion(), Predicate: storage.Everything})
	deleted := e.remove(stored)
	w.expect(ev(watch.Deleted, atRV(stored, rvOf(t, deleted))))
}

// TestConformanceWatchFromNonZero ports RunTestWatchFromNonZero (case 4): watching from an object's RV
// delivers only what follows it.
func TestConformanceWatchFromNonZero(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stored := e.create(storagetest.Pod("test-ns", "foo"))
	w := e.watch(keyOf(stored), storage.ListOptions{ResourceVersion: stored.GetResourceVersion(), Predicate: storage.Everything})
	out := e.put(storagetest.Pod("test-ns", "foo", storagetest.Labels("version=2")))
	w.expect(ev(watch.Modified, out))
	w.expectNothing()
}

// TestConformanceDelayedWatchDelivery ports RunTestDelayedWatchDelivery (case 5): with 21 events
// queued for a watcher that read one, Stop lets the buffered ones drain, in order and without gaps.
// Failure mode: a name out of sequence, or fewer than the 10 buffered results plus the one read.
func TestConformanceDelayedWatchDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stored := e.create(storagetest.Pod("test-ns", "foo"))
	w := e.watch("/pods/test-ns", storage.ListOptions{ResourceVersion: stored.GetResourceVersion(), Predicate: storage.Everything, Recursive: true})
	for i := range 21 {
		e.put(storagetest.Pod("test-ns", fmt.Sprintf("foo-%d", i)))
	}
	watched := 0
	check := func(ev watch.Event) {
		u := plainObject(ev.Object).(*unstructured.Unstructured)
		if want := fmt.Sprintf("foo-%d", watched); u.GetName() != want || ev.Type != watch.Added {
			t.Fatalf("event %d: got %s, want ADDED %s", watched, describe(ev), want)
		}
		watched++
	}
	first, ok := w.next()
	if !ok {
		t.Fatal("closed before the first event")
	}
	check(first)
	// The pause of the upstream test: let every event reach the watcher and fill its result buffer.
	cw := w.w.(*cacheWatcher)
	e.waitProcessed(e.lastRV)
	e.eventually("the result buffer fills", func() bool { return len(cw.result) == cap(cw.result) })
	w.w.Stop()
	for {
		ev, ok := w.next()
		if !ok {
			break
		}
		check(ev)
	}
	if watched < cap(cw.result)+1 {
		t.Fatalf("watched %d events, want at least %d", watched, cap(cw.result)+1)
	}
}

// TestConformanceWatcherTimeout ports RunTestWatcherTimeout (case 9): 50 watchers that never read must
// not hold back the one that does. They are closed for slowness, without an ERROR event.
func TestConformanceWatcherTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rv := listRV(t, e, "/pods/", storage.Everything, true)
	opts := storage.ListOptions{ResourceVersion: rv, Predicate: storage.Everything, Recursive: true}
	var idle []*recorder
	for range 50 {
		idle = append(idle, e.watch("/pods/test-ns", opts))
	}
	reader := e.watch("/pods/test-ns", opts)
	var created []*unstructured.Unstructured
	for i := range 22 {
		out := e.create(storagetest.Pod("test-ns", fmt.Sprintf("foo-%d", i)))
		created = append(created, out)
		reader.expect(ev(watch.Added, out))
	}
	// Reading an idle watcher while the dispatcher still waits for it would rescue it.
	e.waitProcessed(e.lastRV)
	for _, w := range idle {
		// Each idle watcher delivers a gap-free prefix of the creations, then closes without an ERROR.
		i := 0
		for {
			got, ok := w.next()
			if !ok {
				break
			}
			if want := ev(watch.Added, created[i]); describe(got) != want {
				t.Fatalf("idle watcher event %d: got %s, want %s", i, describe(got), want)
			}
			i++
		}
		if i == len(created) {
			t.Fatalf("an idle watcher was never closed for slowness")
		}
	}
}

// TestConformanceDeleteEventObjectHaveLatestRV ports RunTestWatchDeleteEventObjectHaveLatestRV (case
// 10): the DELETED object carries the deletion's RV, not its last write's.
func TestConformanceDeleteEventObjectHaveLatestRV(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stored := e.create(storagetest.Pod("test-ns", "foo"))
	ctx, cancel := context.WithTimeout(e.ctx, testutil.WaitTimeout)
	defer cancel()
	w := e.watchCtx(ctx, keyOf(stored), storage.ListOptions{ResourceVersion: stored.GetResourceVersion(), Predicate: storage.Everything})
	deleted := e.remove(stored)
	if deleted.GetResourceVersion() == stored.GetResourceVersion() {
		t.Fatalf("resourceVersion didn't change on deletion: %s", deleted.GetResourceVersion())
	}
	got, _ := w.next()
	if got.Type != watch.Deleted || rvOf(t, got.Object) != rvOf(t, deleted) {
		t.Fatalf("got %s, want DELETED at %s", describe(got), deleted.GetResourceVersion())
	}
}

type scopedCase struct {
	name          string
	requestedName string
	requestedNS   string
	recursive     bool
	field         fields.Selector
	steps         []step
}

func runScopedCase(t *testing.T, tc scopedCase, clusterScoped bool) {
	opts := []envOption{withNodeNameTrigger}
	if clusterScoped {
		opts = append(opts, withClusterScopedKeys)
	}
	e := newEnv(t, opts...)
	watchKey := "/pods/"
	if clusterScoped {
		watchKey += tc.requestedName
	} else if tc.requestedNS != "" {
		watchKey += tc.requestedNS + "/" + tc.requestedName
	}
	p := storage.Predicate{Label: storagetest.PodPredicate("", "").Label, Field: tc.field}
	lo := storage.ListOptions{Predicate: p, Recursive: true}
	lo.ResourceVersion = listRV(t, e, "/pods/", p, true)
	lo.Recursive = tc.recursive
	r := e.watch(watchKey, lo)
	current := map[string]*unstructured.Unstructured{}
	for _, s := range tc.steps {
		k := keyOf(s.obj)
		out := e.put(s.obj)
		want := ev(s.want, out)
		if s.want == watch.Deleted {
			want = ev(watch.Deleted, atRV(current[k], rvOf(t, out)))
		}
		current[k] = out
		if s.want != "" {
			r.expect(want)
		}
	}
	r.expectNothing()
	r.w.Stop()
	r.expectClosed()
}

// TestConformanceClusterScopedWatch ports RunTestClusterScopedWatch (case 13) with the spec.nodeName
// trigger configured: scope and trigger indexing must not lose or invent transitions.
func TestConformanceClusterScopedWatch(t *testing.T) {
	t.Parallel()
	p := func(name string, mods ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
		return storagetest.Pod("", name, mods...)
	}
	upd := storagetest.Phase("Running")
	cases := []scopedCase{
		{"without name, without field selector", "", "", true, fields.Everything(), []step{
			{p("t1-foo1"), watch.Added}, {p("t1-foo1", upd), watch.Modified}, {p("t1-foo2", storagetest.Node("t1-bar1")), watch.Added}}},
		{"without name, spec.nodeName", "", "", true, fields.ParseSelectorOrDie("spec.nodeName=t2-bar1"), []step{
			{p("t2-foo1"), ""}, {p("t2-foo1", storagetest.Node("t2-bar1")), watch.Added}}},
		{"without name, spec.nodeName filters out", "", "", true, fields.ParseSelectorOrDie("spec.nodeName!=t3-bar1"), []step{
			{p("t3-foo1"), watch.Added}, {p("t3-foo2"), watch.Added}, {p("t3-foo1", upd), watch.Modified},
			{p("t3-foo1", storagetest.Node("t3-bar1")), watch.Deleted}}},
		{"with name, metadata.name", "t4-foo1", "", false, fields.ParseSelectorOrDie("metadata.name=t4-foo1"), []step{
			{p("t4-foo1"), watch.Added}, {p("t4-foo2"), ""}, {p("t4-foo1", upd), watch.Modified}, {p("t4-foo2", upd), ""}}},
		{"with name, metadata.name and spec.nodeName", "t5-foo1", "", false,
			fields.SelectorFromSet(fields.Set{"metadata.name": "t5-foo1", "spec.nodeName": "t5-bar1"}), []step{
				{p("t5-foo1"), ""}, {p("t5-foo2"), ""}, {p("t5-foo1", upd), ""}, {p("t5-foo2", upd), ""},
				{p("t5-foo1", storagetest.Node("t5-bar1")), watch.Added}}},
		{"with name, metadata.name, spec.nodeName filters out", "t6-foo1", "", false,
			fields.AndSelectors(fields.ParseSelectorOrDie("spec.nodeName!=t6-bar1"), fields.SelectorFromSet(fields.Set{"metadata.name": "t6-foo1"})), []step{
				{p("t6-foo1"), watch.Added}, {p("t6-foo2"), ""}, {p("t6-foo1", upd), watch.Modified},
				{p("t6-foo1", storagetest.Node("t6-bar1")), watch.Deleted}, {p("t6-foo2", storagetest.Node("t6-bar1")), ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runScopedCase(t, tc, true)
		})
	}
}

// TestConformanceNamespaceScopedWatch ports RunTestNamespaceScopedWatch (case 14).
func TestConformanceNamespaceScopedWatch(t *testing.T) {
	t.Parallel()
	p := func(name, ns string, mods ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
		return storagetest.Pod(ns, name, mods...)
	}
	upd := storagetest.Phase("Running")
	sel := fields.ParseSelectorOrDie
	set := func(kv ...string) fields.Selector {
		s := fields.Set{}
		for i := 0; i < len(kv); i += 2 {
			s[kv[i]] = kv[i+1]
		}
		return fields.SelectorFromSet(s)
	}
	cases := []scopedCase{
		{"no name, no namespace, no selector", "", "", true, fields.Everything(), []step{
			{p("t1-foo1", "t1-ns1"), watch.Added}, {p("t1-foo2", "t1-ns2"), watch.Added},
			{p("t1-foo1", "t1-ns1", upd), watch.Modified}, {p("t1-foo2", "t1-ns2", upd), watch.Modified}}},
		{"no name, no namespace, metadata.namespace", "", "", true, sel("metadata.namespace=t2-ns1"), []step{
			{p("t2-foo1", "t2-ns1"), watch.Added}, {p("t2-foo1", "t2-ns2"), ""},
			{p("t2-foo1", "t2-ns1", upd), watch.Modified}, {p("t2-foo1", "t2-ns2", upd), ""}}},
		{"no name, no namespace, spec.nodeName", "", "", true, sel("spec.nodeName=t3-bar1"), []step{
			{p("t3-foo1", "t3-ns1"), ""}, {p("t3-foo2", "t3-ns2"), ""},
			{p("t3-foo1", "t3-ns1", storagetest.Node("t3-bar1")), watch.Added}, {p("t3-foo2", "t3-ns2", storagetest.Node("t3-bar1")), watch.Added}}},
		{"no name, no namespace, spec.nodeName filters out", "", "", true, sel("spec.nodeName!=t4-bar1"), []step{
			{p("t4-foo1", "t4-ns1"), watch.Added}, {p("t4-foo2", "t4-ns1"), watch.Added},
			{p("t4-foo1", "t4-ns1", upd), watch.Modified}, {p("t4-foo1", "t4-ns1", storagetest.Node("t4-bar1")), watch.Deleted}}},
		{"no name, namespace, no selector", "", "t5-ns1", true, fields.Everything(), []step{
			{p("t5-foo1", "t5-ns1"), watch.Added}, {p("t5-foo1", "t5-ns2"), ""}, {p("t5-foo2", "t5-ns1"), watch.Added},
			{p("t5-foo1", "t5-ns1", upd), watch.Modified}, {p("t5-foo1", "t5-ns2", upd), ""}}},
		{"no name, namespace, matching metadata.namespace", "", "t6-ns1", true, sel("metadata.namespace=t6-ns1"), []step{
			{p("t6-foo1", "t6-ns1"), watch.Added}, {p("t6-foo1", "t6-ns2"), ""}, {p("t6-foo1", "t6-ns1", upd), watch.Modified}}},
		{"no name, namespace, other metadata.namespace", "", "t7-ns1", true, sel("metadata.namespace=t7-ns2"), []step{
			{p("t7-foo1", "t7-ns1"), ""}, {p("t7-foo1", "t7-ns2"), ""}, {p("t7-foo1", "t7-ns1", upd), ""}, {p("t7-foo1", "t7-ns2", upd), ""}}},
		{"no name, namespace, spec.nodeName", "", "t8-ns1", true, sel("spec.nodeName=t8-bar2"), []step{
			{p("t8-foo1", "t8-ns1"), ""}, {p("t8-foo1", "t8-ns1", storagetest.Node("t8-bar1")), ""},
			{p("t8-foo1", "t8-ns2", storagetest.Node("t8-bar2")), ""}, {p("t8-foo1", "t8-ns1", storagetest.Node("t8-bar2")), watch.Added}}},
		{"no name, namespace, spec.nodeName filters out", "", "t9-ns2", true, sel("spec.nodeName!=t9-bar1"), []step{
			{p("t9-foo1", "t9-ns1"), ""}, {p("t9-foo1", "t9-ns2"), watch.Added},
			{p("t9-foo1", "t9-ns2", storagetest.Node("t9-bar1")), watch.Deleted}, {p("t9-foo1", "t9-ns2", storagetest.Node("t9-bar2")), watch.Added}}},
		{"name, no namespace, metadata.name", "t10-foo1", "", true, sel("metadata.name=t10-foo1"), []step{
			{p("t10-foo1", "t10-ns1"), watch.Added}, {p("t10-foo1", "t10-ns2"), watch.Added}, {p("t10-foo2", "t10-ns1"), ""},
			{p("t10-foo1", "t10-ns1", upd), watch.Modified}, {p("t10-foo1", "t10-ns1", storagetest.Node("t10-bar1")), watch.Modified}}},
		{"name, no namespace, metadata.name and metadata.namespace", "t11-foo1", "", true, set("metadata.name", "t11-foo1", "metadata.namespace", "t11-ns1"), []step{
			{p("t11-foo1", "t11-ns1"), watch.Added}, {p("t11-foo2", "t11-ns1"), ""}, {p("t11-foo1", "t11-ns2"), ""},
			{p("t11-foo1", "t11-ns1", upd), watch.Modified}, {p("t11-foo1", "t11-ns1", storagetest.Node("t11-bar1")), watch.Modified}}},
		{"name, no namespace, metadata.name and spec.nodeName", "t12-foo1", "", true, set("metadata.name", "t12-foo1", "spec.nodeName", "t12-bar1"), []step{
			{p("t12-foo1", "t12-ns1"), ""}, {p("t12-foo1", "t12-ns1", upd), ""}, {p("t12-foo1", "t12-ns1", storagetest.Node("t12-bar1")), watch.Added}}},
		{"name, no namespace, metadata.name, spec.nodeName filters out", "t15-foo1", "", true,
			fields.AndSelectors(sel("spec.nodeName!=t15-bar1"), set("metadata.name", "t15-foo1")), []step{
				{p("t15-foo1", "t15-ns1"), watch.Added}, {p("t15-foo2", "t15-ns1"), ""}, {p("t15-foo1", "t15-ns1", upd), watch.Modified},
				{p("t15-foo1", "t15-ns1", storagetest.Node("t15-bar1")), watch.Deleted}, {p("t15-foo1", "t15-ns1", storagetest.Node("t15-bar2")), watch.Added}}},
		{"name, namespace, metadata.name", "t16-foo1", "t16-ns1", false, sel("metadata.name=t16-foo1"), []step{
			{p("t16-foo1", "t16-ns1"), watch.Added}, {p("t16-foo2", "t16-ns1"), ""},
			{p("t16-foo1", "t16-ns1", upd), watch.Modified}, {p("t16-foo1", "t16-ns1", storagetest.Node("t16-bar1")), watch.Modified}}},
		{"name, namespace, metadata.name and metadata.namespace", "t17-foo2", "t17-ns1", false, set("metadata.name", "t17-foo2", "metadata.namespace", "t17-ns1"), []step{
			{p("t17-foo1", "t17-ns1"), ""}, {p("t17-foo2", "t17-ns1"), watch.Added},
			{p("t17-foo1", "t17-ns1", upd), ""}, {p("t17-foo2", "t17-ns1", storagetest.Node("t17-bar1")), watch.Modified}}},
		{"name, namespace, metadata.name, metadata.namespace and spec.nodeName", "t18-foo1", "t18-ns1", false,
			set("metadata.name", "t18-foo1", "metadata.namespace", "t18-ns1", "spec.nodeName", "t18-bar1"), []step{
				{p("t18-foo1", "t18-ns1"), ""}, {p("t18-foo2", "t18-ns1"), ""}, {p("t18-foo1", "t18-ns2"), ""},
				{p("t18-foo1", "t18-ns1", upd), ""}, {p("t18-foo1", "t18-ns1", storagetest.Node("t18-bar1")), watch.Added}}},
		{"name, namespace, metadata.name, metadata.namespace, spec.nodeName filters out", "t19-foo2", "t19-ns1", false,
			fields.AndSelectors(sel("spec.nodeName!=t19-bar1"), set("metadata.name", "t19-foo2", "metadata.namespace", "t19-ns1")), []step{
				{p("t19-foo1", "t19-ns1"), ""}, {p("t19-foo2", "t19-ns2"), ""}, {p("t19-foo2", "t19-ns1"), watch.Added},
				{p("t19-foo2", "t19-ns1", upd), watch.Modified}, {p("t19-foo2", "t19-ns1", storagetest.Node("t19-bar1")), watch.Deleted}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runScopedCase(t, tc, false)
		})
	}
}

// TestConformanceDispatchBookmarkEvents ports RunTestWatchDispatchBookmarkEvents (case 15): a watch
// with AllowWatchBookmarks gets a BOOKMARK (2 s before its deadline), one without never does.
func TestConformanceDispatchBookmarkEvents(t *testing.T) {
	t.Parallel()
	for i, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allowWatchBookmarks=%t", allow), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, withFakeClock)
			stored := e.create(storagetest.Pod("test-ns", "foo"))
			p := storage.Everything
			p.AllowWatchBookmarks = allow
			ctx := fakeDeadline(e.ctx, e.clock.Now().Add(3*time.Second))
			w := e.watchCtx(ctx, keyOf(stored), storage.ListOptions{ResourceVersion: stored.GetResourceVersion(), Predicate: p})
			other := e.create(storagetest.Pod(fmt.Sprintf("other-ns-%d", i), "foo"))
			e.waitProcessed(rvOf(t, other))
			if allow {
				// Stepping the fake clock passes deadline−2 s and fires the dispatcher's bookmark timer.
				w.expectStepping(bookmark(rvOf(t, other), false))
				return
			}
			for range 30 {
				e.clock.Step(100 * time.Millisecond)
			}
			w.expectNothing()
		})
	}
}

// TestConformanceBookmarksWithCorrectResourceVersion ports
// RunTestOptionalWatchBookmarksWithCorrectResourceVersion (case 16): while pods are created, event RVs
// strictly increase and bookmark RVs never decrease. Failure mode: the check names the offending RV.
func TestConformanceBookmarksWithCorrectResourceVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withFakeClock)
	rv := listRV(t, e, "/pods/", storage.Everything, true)
	p := storage.Everything
	p.AllowWatchBookmarks = true
	w := e.watch("/pods/test-ns", storage.ListOptions{ResourceVersion: rv, Predicate: p, Recursive: true})
	var last uint64
	bookmarks := 0
	observe := func(got watch.Event) {
		r := rvOf(t, got.Object)
		if got.Type == watch.Bookmark {
			bookmarks++
			if r < last {
				t.Fatalf("bookmark rv %d below %d", r, last)
			}
		} else if r <= last {
			t.Fatalf("event rv %d not above %d", r, last)
		}
		last = r
	}
	for i := range 100 {
		out := e.create(storagetest.Pod("test-ns", fmt.Sprintf("foo-%d", i)))
		for {
			got, ok := w.nextStepping()
			if !ok {
				t.Fatal("watch closed")
			}
			observe(got)
			if got.Type == watch.Added && rvOf(t, got.Object) == rvOf(t, out) {
				break
			}
		}
		if i%10 == 9 {
			// A minute passes: the watcher's bookmark is due.
			e.clock.Step(61 * time.Second)
		}
	}
	for bookmarks == 0 {
		got, ok := w.nextStepping()
		if !ok {
			t.Fatal("watch closed")
		}
		observe(got)
	}
}

// TestConformanceSendInitialEventsBackwardCompatibility ports RunSendInitialEventsBackwardCompatibility
// (case 17): SendInitialEvents without bookmarks and with RV unset is accepted.
func TestConformanceSendInitialEventsBackwardCompatibility(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w, err := e.cacher.Watch(e.ctx, "/pods/", storage.ListOptions{Predicate: storage.Everything, SendInitialEvents: ptrTo(true)})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
}

// TestConformanceWatchSemantics ports RunWatchSemantics (case 18): RV unset, 0, 1 and current ×
// AllowWatchBookmarks × SendInitialEvents, plus the two legacy watches.
func TestConformanceWatchSemantics(t *testing.T) {
	t.Parallel()
	type scenario struct {
		name         string
		bookmarks    bool
		sie          *bool
		rv           string
		useCurrentRV bool
		initial      bool // the three initial pods are replayed as ADDED
		endBookmark  bool
	}
	var scenarios []scenario
	for _, rv := range []string{"unset", "0", "1", "current"} {
		for _, bookmarks := range []bool{true, false} {
			for _, sie := range []bool{true, false} {
				s := scenario{name: fmt.Sprintf("allowWatchBookmarks=%t, sendInitialEvents=%t, RV=%s", bookmarks, sie, rv),
					bookmarks: bookmarks, sie: ptrTo(sie)}
				switch rv {
				case "0", "1":
					s.rv = rv
				case "current":
					s.useCurrentRV = true
				}
				// SIE=true always replays; SIE=false replays only from RV=1 (history).
				s.initial = sie || rv == "1"
				s.endBookmark = sie && bookmarks
				scenarios = append(scenarios, s)
			}
		}
	}
	scenarios = append(scenarios,
		scenario{name: "legacy, RV=0", rv: "0", initial: true},
		scenario{name: "legacy, RV=unset", initial: true})
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ns := "ns"
			var created []*unstructured.Unstructured
			for _, n := range []string{"1", "2", "3"} {
				created = append(created, e.create(storagetest.Pod(ns, "pod-"+n)))
			}
			// As upstream: make sure the cache has seen the pods, so the watch below is deterministic.
			list := &unstructured.UnstructuredList{}
			if err := e.cacher.GetList(e.ctx, "/pods/"+ns, storage.ListOptions{Predicate: storage.Everything, Recursive: true,
				ResourceVersion: created[2].GetResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}, list); err != nil {
				t.Fatal(err)
			}
			opts := storage.ListOptions{Predicate: storage.Everything, Recursive: true, SendInitialEvents: s.sie, ResourceVersion: s.rv}
			opts.Predicate.AllowWatchBookmarks = s.bookmarks
			if s.useCurrentRV {
				opts.ResourceVersion = strconv.FormatUint(e.currentRV(), 10)
			}
			w := e.watch("/pods/"+ns, opts)
			if s.initial {
				var want []string
				for _, c := range created {
					want = append(want, ev(watch.Added, c))
				}
				w.expect(want...)
			}
			if s.endBookmark {
				got, _ := w.next()
				if describe(got) != bookmark(rvOf(t, got.Object), true) || rvOf(t, got.Object) < rvOf(t, created[2]) {
					t.Fatalf("got %s, want an end bookmark at or after %s", describe(got), created[2].GetResourceVersion())
				}
			}
			var after []string
			for _, n := range []string{"4", "5"} {
				after = append(after, ev(watch.Added, e.create(storagetest.Pod(ns, "pod-"+n))))
			}
			w.expect(after...)
			w.expectNothing()
		})
	}
}

// TestConformanceInitialEventsExtended ports RunWatchSemanticInitialEventsExtended (case 19): the end
// bookmark carries the global RV, raised by a write in another namespace, not the last pod's.
func TestConformanceInitialEventsExtended(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var want []string
	for i := 1; i <= 5; i++ {
		want = append(want, ev(watch.Added, e.create(storagetest.Pod("ns-foo", fmt.Sprintf("pod-%d", i)))))
	}
	other := e.create(storagetest.Pod("other-ns-foo", "pod-1"))
	opts := storage.ListOptions{Predicate: storage.Everything, Recursive: true, SendInitialEvents: ptrTo(true)}
	opts.Predicate.AllowWatchBookmarks = true
	w := e.watch("/pods/ns-foo", opts)
	w.expect(append(want, bookmark(rvOf(t, other), true))...)
	w.expectNothing()
}

// TestConformanceWatchListMatchSingle ports RunWatchListMatchSingle (case 20): a metadata.name
// selector replays one pod, then the end bookmark at the global RV.
func TestConformanceWatchListMatchSingle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expected := e.create(storagetest.Pod("ns-foo", "pod-1"))
	var last *unstructured.Unstructured
	for i := 2; i <= 5; i++ {
		last = e.create(storagetest.Pod("ns-foo", fmt.Sprintf("pod-%d", i)))
	}
	opts := storage.ListOptions{Predicate: storagetest.PodPredicate("", "metadata.name=pod-1"), Recursive: true, SendInitialEvents: ptrTo(true)}
	opts.Predicate.AllowWatchBookmarks = true
	w := e.watch("/pods/", opts)
	w.expect(ev(watch.Added, expected), bookmark(rvOf(t, last), true))
	w.expectNothing()
}
