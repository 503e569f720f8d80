package cache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage/storagetest"
)

// TestTimeBudget: the budget starts empty, refills 50 ms per second up to 100 ms, is taken whole and
// gets back what was not used (capped too).
func TestTimeBudget(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	b := newTimeBudget(clk)
	if got := b.takeAvailable(); got != 0 {
		t.Fatalf("initial budget %v, want 0", got)
	}
	clk.Step(time.Second)
	if got := b.takeAvailable(); got != 50*time.Millisecond {
		t.Fatalf("after 1 s: %v, want 50ms", got)
	}
	if got := b.takeAvailable(); got != 0 {
		t.Fatalf("taken twice: %v, want 0", got)
	}
	b.returnUnused(30 * time.Millisecond)
	if got := b.takeAvailable(); got != 30*time.Millisecond {
		t.Fatalf("after returning 30ms: %v", got)
	}
	b.returnUnused(-time.Millisecond)
	clk.Step(10 * time.Second)
	if got := b.takeAvailable(); got != 100*time.Millisecond {
		t.Fatalf("after 10 s: %v, want the 100ms cap", got)
	}
	b.returnUnused(time.Second)
	if got := b.takeAvailable(); got != 100*time.Millisecond {
		t.Fatalf("returned beyond the cap: %v, want 100ms", got)
	}
}

// TestReady: Pending ↔ Ready → Stopped; every Ready is a new generation; waiters are released by Ready
// and by Stop; the not-ready message names the last error.
func TestReady(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	r := newReady(clk)
	if _, _, err := r.check(); err == nil || err.Error() != "storage is (re)initializing" {
		t.Fatalf("pending: %v", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- r.wait(context.Background()) }()
	r.setReady()
	if err := <-waited; err != nil {
		t.Fatalf("wait: %v", err)
	}
	g1, _, err := r.check()
	if err != nil || g1 != 1 {
		t.Fatalf("ready: generation %d, %v", g1, err)
	}
	r.setReady() // already ready: no new generation
	clk.Step(5 * time.Second)
	r.setError(errors.New("boom"))
	_, downtime, err := r.check()
	if err == nil || err.Error() != "storage is (re)initializing: boom" || downtime != 0 {
		t.Fatalf("pending again: %v after %v", err, downtime)
	}
	clk.Step(7 * time.Second)
	if _, downtime, _ := r.check(); downtime != 7*time.Second {
		t.Fatalf("downtime %v, want 7s", downtime)
	}
	r.setReady()
	if g2, _, _ := r.check(); g2 != 2 {
		t.Fatalf("generation %d, want 2", g2)
	}
	r.setError(nil)
	go func() { waited <- r.wait(context.Background()) }()
	r.stop()
	if err := <-waited; !errors.Is(err, ErrStopped) {
		t.Fatalf("wait after stop: %v", err)
	}
	r.setReady()
	if _, _, err := r.check(); !errors.Is(err, ErrStopped) {
		t.Fatalf("stopped is final: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r2 := newReady(clk)
	if err := r2.wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

// TestRetryAfterForUnreadyCache ports the upstream table: clamp(e^(0.06·s), 1, 30).
func TestRetryAfterForUnreadyCache(t *testing.T) {
	for _, tc := range []struct {
		downtime time.Duration
		want     int
	}{{0, 1}, {time.Second, 1}, {30 * time.Second, 6}, {50 * time.Second, 20}, {56 * time.Second, 28}, {57 * time.Second, 30}, {time.Hour, 30}} {
		if got := retryAfterForUnreadyCache(tc.downtime); got != tc.want {
			t.Errorf("downtime %v: got %d, want %d", tc.downtime, got, tc.want)
		}
	}
}

// TestHasPathPrefix: prefixes match on "/" boundaries only.
func TestHasPathPrefix(t *testing.T) {
	for _, tc := range []struct {
		s, prefix string
		want      bool
	}{
		{"/pods/ns/a", "/pods/ns/a", true},
		{"/pods/ns/a", "/pods/ns", true},
		{"/pods/ns/a", "/pods/ns/", true},
		{"/pods/ns2/a", "/pods/ns", false},
		{"/pods/ns/ab", "/pods/ns/a", false},
		{"/pods/ns/a/b", "/pods/ns/a", true},
		{"/pod", "/pods/", false},
	} {
		if got := hasPathPrefix(tc.s, tc.prefix); got != tc.want {
			t.Errorf("hasPathPrefix(%q, %q) = %t", tc.s, tc.prefix, got)
		}
	}
}

// countingEncoder encodes JSON and counts its calls.
type countingEncoder struct{ calls atomic.Int64 }

func (c *countingEncoder) encode(obj runtime.Object, w io.Writer) error {
	c.calls.Add(1)
	return json.NewEncoder(w).Encode(obj.(*unstructured.Unstructured).Object)
}

// TestCachingObjectEncodesOnce: concurrent writers of one object per encoder identifier share one
// encoding; another identifier encodes again; apimachinery's JSON scheme uses the cache.
func TestCachingObjectEncodesOnce(t *testing.T) {
	obj := storagetest.Pod("ns", "a", storagetest.Labels("x=y"))
	obj.SetResourceVersion("7")
	co, err := newCachingObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	enc := &countingEncoder{}
	want, _ := json.Marshal(obj.Object)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			var buf bytes.Buffer
			if err := co.CacheEncode("json", enc.encode, &buf); err != nil {
				t.Error(err)
			}
			if strings.TrimSpace(buf.String()) != string(want) {
				t.Errorf("got %s", buf.String())
			}
		})
	}
	wg.Wait()
	if n := enc.calls.Load(); n != 1 {
		t.Fatalf("encoded %d times, want 1", n)
	}
	if err := co.CacheEncode("other", enc.encode, io.Discard); err != nil || enc.calls.Load() != 2 {
		t.Fatalf("second identifier: %v, %d calls", err, enc.calls.Load())
	}
	if err := co.CacheEncode("json", enc.encode, io.Discard); err != nil || enc.calls.Load() != 2 {
		t.Fatalf("first identifier again: %d calls", enc.calls.Load())
	}
	var buf bytes.Buffer
	if err := unstructured.UnstructuredJSONScheme.Encode(co, &buf); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(buf.String()) != string(want) {
		t.Fatalf("UnstructuredJSONScheme: %s", buf.String())
	}

	failing := func(runtime.Object, io.Writer) error { return errors.New("cannot encode") }
	if err := co.CacheEncode("failing", failing, io.Discard); err == nil || err.Error() != "cannot encode" {
		t.Fatalf("encoder error: %v", err)
	}
}

// TestCachingObjectAccessors: meta.Accessor works on a CachingObject; GetObject is a private copy; a
// no-op setter keeps the cached encoding, a real change copies the wrapped object first (the original
// is untouched) and drops the cache.
func TestCachingObjectAccessors(t *testing.T) {
	obj := storagetest.Pod("ns", "a")
	obj.SetResourceVersion("7")
	co, err := newCachingObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	m, err := meta.Accessor(co)
	if err != nil || m.GetName() != "a" || m.GetNamespace() != "ns" || m.GetResourceVersion() != "7" {
		t.Fatalf("accessor: %v %v", m, err)
	}
	cp := co.GetObject().(*unstructured.Unstructured)
	cp.SetName("changed")
	if co.GetName() != "a" {
		t.Fatal("GetObject is not a copy")
	}
	enc := &countingEncoder{}
	_ = co.CacheEncode("json", enc.encode, io.Discard)
	co.SetResourceVersion("7")
	_ = co.CacheEncode("json", enc.encode, io.Discard)
	if enc.calls.Load() != 1 {
		t.Fatal("a no-op set dropped the cache")
	}
	co.SetResourceVersion("8")
	var buf bytes.Buffer
	_ = co.CacheEncode("json", enc.encode, &buf)
	if enc.calls.Load() != 2 || !strings.Contains(buf.String(), `"resourceVersion":"8"`) {
		t.Fatalf("after a change: %d calls, %s", enc.calls.Load(), buf.String())
	}
	if obj.GetResourceVersion() != "7" {
		t.Fatal("the setter changed the wrapped original")
	}
	if _, err := newCachingObject(&runtime.Unknown{}); err == nil {
		t.Fatal("an object without metadata was wrapped")
	}
	dc := co.DeepCopyObject().(*CachingObject)
	if dc.GetResourceVersion() != "8" || dc == co {
		t.Fatal("DeepCopyObject")
	}
}

// TestObjectStore: key order, prefix lists (string prefix), continue keys, O(1) snapshots that do not
// see later writes.
func TestObjectStore(t *testing.T) {
	s := newObjectStore()
	for _, k := range []string{"/pods/b/1", "/pods/a/2", "/pods/a/1", "/pods/ab/1", "/pods/c/1"} {
		s.put(&element{Key: k})
	}
	keys := func(es []*element) string {
		var ks []string
		for _, e := range es {
			ks = append(ks, e.Key)
		}
		return strings.Join(ks, " ")
	}
	if got := keys(s.listPrefix("/pods/", "")); got != "/pods/a/1 /pods/a/2 /pods/ab/1 /pods/b/1 /pods/c/1" {
		t.Fatalf("list: %s", got)
	}
	if got := keys(s.listPrefix("/pods/a/", "")); got != "/pods/a/1 /pods/a/2" {
		t.Fatalf("list /pods/a/: %s", got)
	}
	if got := keys(s.listPrefix("/pods/", "/pods/a/2\x00")); got != "/pods/ab/1 /pods/b/1 /pods/c/1" {
		t.Fatalf("continue: %s", got)
	}
	snap := s.snapshot()
	if s.snapshot() != snap && s.snapshot().tree != snap.tree {
		t.Fatal("snapshot not reused while unchanged")
	}
	s.remove("/pods/a/1")
	s.put(&element{Key: "/pods/d/1"})
	if got := keys(snap.listPrefix("/pods/", "")); got != "/pods/a/1 /pods/a/2 /pods/ab/1 /pods/b/1 /pods/c/1" {
		t.Fatalf("snapshot saw later writes: %s", got)
	}
	if got := keys(s.listPrefix("/pods/", "")); got != "/pods/a/2 /pods/ab/1 /pods/b/1 /pods/c/1 /pods/d/1" {
		t.Fatalf("store after writes: %s", got)
	}
	s.replace([]*element{{Key: "/pods/z/1"}})
	if got := keys(s.listPrefix("/pods/", "")); got != "/pods/z/1" || s.len() != 1 {
		t.Fatalf("after replace: %s", got)
	}
}

// TestBookmarkBuckets ports TestTimeBucketWatchersBasic: watchers pop in the second their bookmark is
// due; a watcher with no bookmark before its deadline is not queued.
func TestBookmarkBuckets(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	newW := func(deadline time.Time) *cacheWatcher {
		w := newCacheWatcher(10, passAll, nil, deadline, true, clk, testutil.DiscardLogger(), "")
		w.setBookmarkAfterResourceVersion(0)
		return w
	}
	b := newBookmarkBuckets(clk, time.Minute)
	now := clk.Now()
	w1, w2, w3 := newW(time.Time{}), newW(now.Add(10*time.Second)), newW(now.Add(time.Second))
	if !b.add(w1) || !b.add(w2) {
		t.Fatal("watchers not queued")
	}
	if b.add(w3) {
		t.Fatal("a watcher whose deadline is within 2 s was queued")
	}
	if got := b.popExpired(); len(got) != 0 {
		t.Fatalf("popped %d buckets at once", len(got))
	}
	clk.Step(8 * time.Second)
	if got := b.popExpired(); len(got) != 1 || len(got[0]) != 1 || got[0][0] != w2 {
		t.Fatalf("at +8s: %v", got)
	}
	clk.Step(52 * time.Second)
	if got := b.popExpired(); len(got) != 1 || got[0][0] != w1 {
		t.Fatalf("at +60s: %v", got)
	}
	// A watch-list waiting for its bookmark is due at once: in the first bucket not yet popped.
	w4 := newW(time.Time{})
	w4.setBookmarkAfterResourceVersion(5)
	b.add(w4)
	clk.Step(time.Second)
	if got := b.popExpired(); len(got) != 1 || got[0][0] != w4 {
		t.Fatalf("waiting watch-list: %v", got)
	}
}

// TestNextBookmarkTime: every minute, 2 s before the deadline if sooner, none if that passed, at once
// while the watch-list's bookmark is awaited.
func TestNextBookmarkTime(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		deadline time.Time
		after    uint64
		want     time.Time
		ok       bool
	}{
		{time.Time{}, 0, now.Add(time.Minute), true},
		{now.Add(2 * time.Minute), 0, now.Add(time.Minute), true},
		{now.Add(30 * time.Second), 0, now.Add(28 * time.Second), true},
		{now.Add(time.Second), 0, time.Time{}, false},
		{now.Add(time.Second), 7, time.Time{}, true},
	} {
		w := newCacheWatcher(10, passAll, nil, tc.deadline, true, nil, testutil.DiscardLogger(), "")
		w.setBookmarkAfterResourceVersion(tc.after)
		got, ok := w.nextBookmarkTime(now, time.Minute)
		if !got.Equal(tc.want) || ok != tc.ok {
			t.Errorf("deadline %v after %d: got %v %t, want %v %t", tc.deadline, tc.after, got, ok, tc.want, tc.ok)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	s := &testStorage{}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{ResourcePrefix: "/pods/"}, "storage cannot be nil"},
		{Config{Storage: s}, "resourcePrefix cannot be empty"},
		{Config{Storage: s, ResourcePrefix: "/"}, "resourcePrefix cannot be /"},
		{Config{Storage: s, ResourcePrefix: "pods/"}, "resourcePrefix needs to start from /"},
		{Config{Storage: s, ResourcePrefix: "/pods/", EventsHistoryWindow: 74 * time.Second}, "config.EventsHistoryWindow (1m14s) must not be below 1m15s"},
		{Config{Storage: s, ResourcePrefix: "/pods/", IndexerFuncs: map[string]IndexerFunc{"a": nodeNameOf, "b": nodeNameOf}}, "doesn't support more than one IndexerFunc"},
	} {
		c, err := New(tc.cfg)
		if c != nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

func TestIdentifier(t *testing.T) {
	if got, want := identifierFor("/pods/ns/", storagetest.PodPredicate("a=b", "")), fmt.Sprintf("key: %q, labels: %q, fields: %q", "/pods/ns/", "a=b", ""); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
