package cache

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
)

func names(l *unstructured.UnstructuredList) []string {
	var n []string
	for _, i := range l.Items {
		n = append(n, i.GetNamespace()+"/"+i.GetName())
	}
	return n
}

func (e *env) list(key string, opts storage.ListOptions) (*unstructured.UnstructuredList, error) {
	l := &unstructured.UnstructuredList{}
	err := e.cacher.GetList(e.ctx, key, opts, l)
	return l, err
}

// TestListAnyStaleness: RV "0" is served from the cache as it is, however stale, and ignores the limit.
// Failure mode: a consistent read would see the write the cache has not applied.
func TestListAnyStaleness(t *testing.T) {
	e := newEnv(t)
	a := e.create(storagetest.Pod("ns", "a"))
	e.create(storagetest.Pod("ns", "b"))
	cacheRV := e.syncCache()
	e.storage.gate.pause()
	e.create(storagetest.Pod("ns", "c"))
	p := storage.Everything
	p.Limit = 1
	delegated := e.storage.delegatedLists.Load()
	l, err := e.list("/pods/", storage.ListOptions{ResourceVersion: "0", Predicate: p, Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names(l)) != "[ns/a ns/b]" || l.GetResourceVersion() != strconv.FormatUint(cacheRV, 10) || l.GetContinue() != "" {
		t.Fatalf("got %v at %s continue %q", names(l), l.GetResourceVersion(), l.GetContinue())
	}
	if e.storage.delegatedLists.Load() != delegated {
		t.Fatal("read the storage")
	}
	// Items are copies: changing them leaves the cache alone.
	l.Items[0].SetLabels(map[string]string{"mutated": "yes"})
	got := &unstructured.Unstructured{}
	if err := e.cacher.Get(e.ctx, keyOf(a), storage.GetOptions{ResourceVersion: "0"}, got); err != nil || got.GetLabels() != nil {
		t.Fatalf("cached object changed: %v %v", err, got.GetLabels())
	}
}

// TestListConsistent: RV "" reads etcd's revision and waits for the cache; fresh, it is served from the
// cache; stale for 3 s, it falls back to the storage.
func TestListConsistent(t *testing.T) {
	e := newEnv(t, withFakeClock)
	e.create(storagetest.Pod("ns", "a"))
	rv := e.syncCache()
	delegated := e.storage.delegatedLists.Load()
	l, err := e.list("/pods/", storage.ListOptions{Predicate: storage.Everything, Recursive: true})
	if err != nil || fmt.Sprint(names(l)) != "[ns/a]" || l.GetResourceVersion() != strconv.FormatUint(rv, 10) {
		t.Fatalf("fresh: %v %v at %s", err, names(l), l.GetResourceVersion())
	}
	if e.storage.delegatedLists.Load() != delegated {
		t.Fatal("a fresh consistent list read the storage")
	}

	e.storage.gate.pause()
	b := e.create(storagetest.Pod("ns", "b"))
	type result struct {
		l   *unstructured.UnstructuredList
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := e.list("/pods/", storage.ListOptions{Predicate: storage.Everything, Recursive: true})
		done <- result{l, err}
	}()
	e.waitForProgressWaiter(e.storage.progressRequests.Load())
	e.clock.Step(blockTimeout)
	res := <-done
	if res.err != nil || fmt.Sprint(names(res.l)) != "[ns/a ns/b]" || res.l.GetResourceVersion() != b.GetResourceVersion() {
		t.Fatalf("stale: %v %v at %s", res.err, names(res.l), res.l.GetResourceVersion())
	}
	if e.storage.delegatedLists.Load() != delegated+1 {
		t.Fatal("the stale consistent list did not fall back to the storage")
	}
}

// TestListNotOlderThan: NotOlderThan waits for the cache and, unlike a consistent read, does not fall
// back: after 3 s it is 504 TooLargeResourceVersion.
func TestListNotOlderThan(t *testing.T) {
	e := newEnv(t, withFakeClock)
	a := e.create(storagetest.Pod("ns", "a"))
	e.syncCache()
	l, err := e.list("/pods/", storage.ListOptions{ResourceVersion: a.GetResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		Predicate: storage.Everything, Recursive: true})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("%v %v", err, names(l))
	}
	e.storage.gate.pause()
	b := e.create(storagetest.Pod("ns", "b"))
	done := make(chan error, 1)
	go func() {
		_, err := e.list("/pods/", storage.ListOptions{ResourceVersion: b.GetResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
			Predicate: storage.Everything, Recursive: true})
		done <- err
	}()
	e.waitForProgressWaiter(e.storage.progressRequests.Load())
	e.clock.Step(blockTimeout)
	if err := <-done; !storage.IsTooLargeResourceVersion(err) {
		t.Fatalf("got %v, want TooLargeResourceVersion", err)
	}
}

// TestListDelegation: what the cache leaves to the storage (cacher.go ShouldDelegateExactRV and
// ShouldDelegateContinue: "Not Recursive is not supported"): Exact and legacy exact lists of one key,
// with etcd's answer (the state at the revision for Exact, the current one for legacy exact).
func TestListDelegation(t *testing.T) {
	e := newEnv(t)
	a := e.create(storagetest.Pod("ns", "a"))
	e.put(storagetest.Pod("ns", "a", storagetest.Labels("x=1")))
	e.syncCache()
	limited := storage.Everything
	limited.Limit = 1
	for _, opts := range []storage.ListOptions{
		{ResourceVersion: a.GetResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchExact, Predicate: storage.Everything},
		{ResourceVersion: a.GetResourceVersion(), Predicate: limited},
	} {
		before := e.storage.delegatedLists.Load()
		l, err := e.list(keyOf(a), opts)
		if err != nil {
			t.Fatalf("%+v: %v", opts, err)
		}
		if e.storage.delegatedLists.Load() != before+1 {
			t.Fatalf("%+v was not read from the storage", opts)
		}
		want, err := e.storageList(keyOf(a), opts)
		if err != nil || describeList(t, l) != describeList(t, want) {
			t.Fatalf("%+v: %s, etcd answers %v %s", opts, describeList(t, l), err, describeList(t, want))
		}
	}
}

// TestListPagination: a limited list from the cache has the cache's RV and a continue token; the next
// pages, read from the cache's snapshot at that RV, complete it consistently despite later writes.
func TestListPagination(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		e.create(storagetest.Pod("ns", n))
	}
	rv := e.syncCache()
	p := storage.Everything
	p.Limit = 2
	l, err := e.list("/pods/", storage.ListOptions{Predicate: p, Recursive: true})
	if err != nil || fmt.Sprint(names(l)) != "[ns/a ns/b]" || l.GetResourceVersion() != strconv.FormatUint(rv, 10) || l.GetContinue() == "" {
		t.Fatalf("first page: %v %v at %s continue %q", err, names(l), l.GetResourceVersion(), l.GetContinue())
	}
	if n := l.GetRemainingItemCount(); n == nil || *n != 3 {
		t.Fatalf("remaining %v", n)
	}
	e.create(storagetest.Pod("ns", "aa"))
	e.remove(storagetest.Pod("ns", "c"))
	var all []string
	all = append(all, names(l)...)
	delegated := e.storage.delegatedLists.Load()
	for l.GetContinue() != "" {
		p.Continue = l.GetContinue()
		if l, err = e.list("/pods/", storage.ListOptions{Predicate: p, Recursive: true}); err != nil {
			t.Fatal(err)
		}
		if e.storage.delegatedLists.Load() != delegated {
			t.Fatal("a page was read from the storage")
		}
		if l.GetResourceVersion() != strconv.FormatUint(rv, 10) {
			t.Fatalf("page at %s, want %d", l.GetResourceVersion(), rv)
		}
		all = append(all, names(l)...)
	}
	if fmt.Sprint(all) != "[ns/a ns/b ns/c ns/d ns/e]" {
		t.Fatalf("pages: %v", all)
	}

	// A filtered page: limit counts selected items, no remaining count.
	e.put(storagetest.Pod("ns", "d", storagetest.Labels("x=1")))
	e.put(storagetest.Pod("ns", "e", storagetest.Labels("x=1")))
	e.syncCache()
	fp := storagetest.PodPredicate("x=1", "")
	fp.Limit = 1
	l, err = e.list("/pods/", storage.ListOptions{Predicate: fp, Recursive: true})
	if err != nil || fmt.Sprint(names(l)) != "[ns/d]" || l.GetContinue() == "" || l.GetRemainingItemCount() != nil {
		t.Fatalf("filtered page: %v %v continue %q remaining %v", err, names(l), l.GetContinue(), l.GetRemainingItemCount())
	}
}

// TestListArgumentErrors: the storage's validation errors come before any routing.
func TestListArgumentErrors(t *testing.T) {
	e := newEnv(t)
	p := storage.Everything
	p.Continue = "not-a-token"
	if _, err := e.list("/pods/", storage.ListOptions{Predicate: p, Recursive: true}); !apierrors.IsBadRequest(err) {
		t.Fatalf("bad continue: %v", err)
	}
	tok, _ := storage.EncodeContinue("/pods/ns/a\x00", "/pods/", 5)
	p.Continue = tok
	if _, err := e.list("/pods/", storage.ListOptions{ResourceVersion: "5", Predicate: p, Recursive: true}); !apierrors.IsBadRequest(err) ||
		err.Error() != "specifying resource version is not allowed when using continue" {
		t.Fatalf("RV with continue: %v", err)
	}
	if _, err := e.list("/pods/", storage.ListOptions{ResourceVersion: "x", Predicate: storage.Everything, Recursive: true}); !apierrors.IsBadRequest(err) {
		t.Fatalf("bad RV: %v", err)
	}
	if _, err := e.list("/pods/", storage.ListOptions{ResourceVersion: "1", ResourceVersionMatch: "Sometimes", Predicate: storage.Everything, Recursive: true}); err == nil ||
		err.Error() != "unknown ResourceVersionMatch value: Sometimes" {
		t.Fatalf("bad match: %v", err)
	}
	if _, err := e.list("", storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything, Recursive: true}); !errors.Is(err, storage.ErrEmptyKey) {
		t.Fatalf("empty key: %v", err)
	}
}

// TestListSingleObject: a non-recursive list from the cache holds the one object (or none).
func TestListSingleObject(t *testing.T) {
	e := newEnv(t)
	a := e.create(storagetest.Pod("ns", "a"))
	e.create(storagetest.Pod("ns", "ab"))
	rv := e.syncCache()
	l, err := e.list(keyOf(a), storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything})
	if err != nil || fmt.Sprint(names(l)) != "[ns/a]" || l.GetResourceVersion() != strconv.FormatUint(rv, 10) {
		t.Fatalf("%v %v", err, names(l))
	}
	l, err = e.list("/pods/ns/zz", storage.ListOptions{Predicate: storage.Everything})
	if err != nil || len(l.Items) != 0 || l.Items == nil {
		t.Fatalf("missing object: %v %v", err, l.Items)
	}
}

// TestGet: without an RV Get reads the storage; with one it waits for the cache and reads it, a missing
// key being KeyNotFound at the cache's RV (or a zero object with IgnoreNotFound); a stale cache is 504
// after 3 s; the returned object is a copy.
func TestGet(t *testing.T) {
	e := newEnv(t, withFakeClock)
	a := e.create(storagetest.Pod("ns", "a"))
	rv := e.syncCache()
	gets := e.storage.getCalls.Load()
	got := &unstructured.Unstructured{}
	if err := e.cacher.Get(e.ctx, keyOf(a), storage.GetOptions{}, got); err != nil || got.GetResourceVersion() != a.GetResourceVersion() {
		t.Fatalf("%v %v", err, got)
	}
	if e.storage.getCalls.Load() != gets+1 {
		t.Fatal("Get without RV did not read the storage")
	}
	got = &unstructured.Unstructured{}
	if err := e.cacher.Get(e.ctx, keyOf(a), storage.GetOptions{ResourceVersion: a.GetResourceVersion()}, got); err != nil || describeObject(got) != describeObject(a) {
		t.Fatalf("%v %v", err, got)
	}
	if e.storage.getCalls.Load() != gets+1 {
		t.Fatal("Get with RV read the storage")
	}
	got.SetLabels(map[string]string{"mutated": "yes"})
	again := &unstructured.Unstructured{}
	if err := e.cacher.Get(e.ctx, keyOf(a), storage.GetOptions{ResourceVersion: "0"}, again); err != nil || again.GetLabels() != nil {
		t.Fatal("the cached object was shared")
	}
	err := e.cacher.Get(e.ctx, "/pods/ns/missing", storage.GetOptions{ResourceVersion: "0"}, got)
	var se *storage.StorageError
	if !errors.Is(err, storage.ErrKeyNotFound) || !errors.As(err, &se) || se.ResourceVersion != int64(rv) {
		t.Fatalf("missing: %v", err)
	}
	if err := e.cacher.Get(e.ctx, "/pods/ns/missing", storage.GetOptions{ResourceVersion: "0", IgnoreNotFound: true}, got); err != nil || len(got.Object) != 0 {
		t.Fatalf("IgnoreNotFound: %v %v", err, got.Object)
	}
	if err := e.cacher.Get(e.ctx, keyOf(a), storage.GetOptions{ResourceVersion: "x"}, got); !storage.IsInvalidError(err) {
		t.Fatalf("bad RV: %v", err)
	}

	e.storage.gate.pause()
	b := e.create(storagetest.Pod("ns", "b"))
	done := make(chan error, 1)
	go func() {
		done <- e.cacher.Get(e.ctx, keyOf(b), storage.GetOptions{ResourceVersion: b.GetResourceVersion()}, &unstructured.Unstructured{})
	}()
	e.waitForProgressWaiter(e.storage.progressRequests.Load())
	e.clock.Step(blockTimeout)
	if err := <-done; !storage.IsTooLargeResourceVersion(err) {
		t.Fatalf("stale: %v", err)
	}
}

// TestWritesPassThrough: writes go to the storage; GuaranteedUpdate and Delete offer it the cached
// object (a copy) as the current state.
func TestWritesPassThrough(t *testing.T) {
	e := newEnv(t)
	a := e.create(storagetest.Pod("ns", "a"))
	e.syncCache()
	upd := e.put(storagetest.Pod("ns", "a", storagetest.Labels("v=2")))
	sugg, ok := e.storage.lastSuggestion().(*unstructured.Unstructured)
	if !ok || describeObject(sugg) != describeObject(a) {
		t.Fatalf("update suggestion: %v", e.storage.lastSuggestion())
	}
	e.waitForCache(rvOf(t, upd))
	out := e.put(storagetest.Pod("ns", "a", storagetest.Labels("v=3")))
	e.waitForCache(rvOf(t, out))
	del := e.remove(storagetest.Pod("ns", "a"))
	if sugg, ok := e.storage.lastSuggestion().(*unstructured.Unstructured); !ok || describeObject(sugg) != describeObject(out) {
		t.Fatalf("delete suggestion: %v", e.storage.lastSuggestion())
	}
	if del.GetLabels()["v"] != "3" {
		t.Fatalf("deleted %v", del)
	}
	e.waitForCache(rvOf(t, del))
	err := e.cacher.Delete(e.ctx, keyOf(a), &unstructured.Unstructured{}, nil, storage.ValidateAllObjectFunc, nil, storage.DeleteOptions{})
	if !errors.Is(err, storage.ErrKeyNotFound) {
		t.Fatalf("delete of a deleted object: %v", err)
	}
	if e.storage.lastSuggestion() != nil {
		t.Fatal("suggested a deleted object")
	}
}
