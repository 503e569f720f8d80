package etcd3_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"pgregory.net/rapid"

	"github.com/listwatch/listwatch/etcd3"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
	"github.com/listwatch/listwatch/store"
)

// change is one write of the model history: prev and cur are nil for a create and a delete.
type change struct {
	rev       int64
	key       string
	prev, cur *unstructured.Unstructured
}

// model is the store's history as the test wrote it.
type model struct {
	state   map[string]*unstructured.Unstructured // key "ns/name" -> object at its mod revision
	history []change
}

func (m *model) stateAt(rev int64) map[string]*unstructured.Unstructured {
	st := map[string]*unstructured.Unstructured{}
	for _, c := range m.history {
		if c.rev > rev {
			break
		}
		if c.cur == nil {
			delete(st, c.key)
		} else {
			st[c.key] = c.cur
		}
	}
	return st
}

var propNamespaces = []string{"a", "b", "c"}

// genObject draws the labels and node of a pod.
func genObject(t *rapid.T, ns, name string) *unstructured.Unstructured {
	var mods []func(*unstructured.Unstructured)
	var ls []string
	if app := rapid.SampledFrom([]string{"", "web", "db"}).Draw(t, "app"); app != "" {
		ls = append(ls, "app="+app)
	}
	if tier := rapid.SampledFrom([]string{"", "a", "b", "c"}).Draw(t, "tier"); tier != "" {
		ls = append(ls, "tier="+tier)
	}
	if len(ls) > 0 {
		mods = append(mods, storagetest.Labels(ls...))
	}
	if node := rapid.SampledFrom([]string{"", "n1", "n2"}).Draw(t, "node"); node != "" {
		mods = append(mods, storagetest.Node(node))
	}
	return storagetest.Pod(ns, name, mods...)
}

// write performs one drawn write (create, update or delete) and records it.
func (m *model) write(t *rapid.T, s *etcd3.Store) {
	ctx := context.Background()
	ns := rapid.SampledFrom(propNamespaces).Draw(t, "ns")
	name := fmt.Sprintf("p%d", rapid.IntRange(0, 4).Draw(t, "name"))
	k := ns + "/" + name
	prev := m.state[k]
	out := &unstructured.Unstructured{}
	var cur *unstructured.Unstructured
	switch {
	case prev == nil:
		obj := genObject(t, ns, name)
		if err := s.Create(ctx, storagetest.Key(ns, name), obj, out, 0); err != nil {
			t.Fatalf("create %s: %v", k, err)
		}
		cur = out
	case rapid.IntRange(0, 3).Draw(t, "delete") == 0:
		if err := s.Delete(ctx, storagetest.Key(ns, name), out, nil, nil, nil, storage.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s: %v", k, err)
		}
	default:
		obj := genObject(t, ns, name)
		// The write must take a revision: a no-op update is skipped by GuaranteedUpdate.
		obj.SetAnnotations(map[string]string{"seq": strconv.Itoa(len(m.history))})
		if err := s.GuaranteedUpdate(ctx, storagetest.Key(ns, name), out, false, nil,
			storage.SimpleUpdate(func(runtime.Object) (runtime.Object, error) { return obj, nil }), nil); err != nil {
			t.Fatalf("update %s: %v", k, err)
		}
		cur = out
	}
	rev, _ := strconv.ParseInt(out.GetResourceVersion(), 10, 64)
	if cur != nil {
		m.state[k] = cur
	} else {
		delete(m.state, k)
	}
	m.history = append(m.history, change{rev: rev, key: k, prev: prev, cur: cur})
}

// watchScope is the key a watch covers.
type watchScope struct {
	key       string // storage key
	recursive bool
	ns, name  string // "" for all
}

func (w watchScope) covers(k string) bool {
	ns, name, _ := strings.Cut(k, "/")
	return (w.ns == "" || w.ns == ns) && (w.name == "" || w.name == name)
}

func render(ev watch.Event) string {
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		if st, ok := ev.Object.(*metav1.Status); ok {
			return fmt.Sprintf("%s %d %s", ev.Type, st.Code, st.Reason)
		}
		return fmt.Sprintf("%s %T", ev.Type, ev.Object)
	}
	return renderObj(ev.Type, u, u.GetResourceVersion())
}

func renderObj(t watch.EventType, u *unstructured.Unstructured, rv string) string {
	if t == watch.Bookmark {
		end := ""
		if u.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			end = " end"
		}
		return fmt.Sprintf("BOOKMARK rv=%s%s", rv, end)
	}
	node, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName")
	return fmt.Sprintf("%s %s/%s rv=%s labels=%v node=%s seq=%s", t, u.GetNamespace(), u.GetName(), rv, u.GetLabels(), node, u.GetAnnotations()["seq"])
}

// expected computes the events a watch must deliver from the model: with initial events, the state at
// listRev in key order (then the end bookmark if asked), then every change after the start revision
// that the predicate lets through, as transitions.
func (m *model) expected(scope watchScope, pred storage.Predicate, initial, endBookmark bool, listRev, startRev int64) []string {
	match := func(u *unstructured.Unstructured) bool {
		ok, err := pred.Matches(u)
		return err == nil && ok
	}
	var out []string
	after := startRev
	if initial {
		st := m.stateAt(listRev)
		keys := make([]string, 0, len(st))
		for k := range st {
			if scope.covers(k) {
				keys = append(keys, k)
			}
		}
		// Keys sort as etcd keys do: by namespace, then name ("/" sorts before letters and digits).
		sort.Slice(keys, func(i, j int) bool {
			return strings.ReplaceAll(keys[i], "/", "\x00") < strings.ReplaceAll(keys[j], "/", "\x00")
		})
		for _, k := range keys {
			if match(st[k]) {
				out = append(out, renderObj(watch.Added, st[k], st[k].GetResourceVersion()))
			}
		}
		if endBookmark {
			out = append(out, fmt.Sprintf("BOOKMARK rv=%d end", listRev))
		}
		after = listRev
	}
	for _, c := range m.history {
		if c.rev <= after || !scope.covers(c.key) {
			continue
		}
		rv := strconv.FormatInt(c.rev, 10)
		switch {
		case c.prev == nil:
			if match(c.cur) {
				out = append(out, renderObj(watch.Added, c.cur, rv))
			}
		case c.cur == nil:
			if match(c.prev) {
				out = append(out, renderObj(watch.Deleted, c.prev, rv))
			}
		case pred.Empty():
			out = append(out, renderObj(watch.Modified, c.cur, rv))
		default:
			cur, prev := match(c.cur), match(c.prev)
			switch {
			case cur && prev:
				out = append(out, renderObj(watch.Modified, c.cur, rv))
			case cur:
				out = append(out, renderObj(watch.Added, c.cur, rv))
			case prev:
				out = append(out, renderObj(watch.Deleted, c.prev, rv))
			}
		}
	}
	return out
}

var propPrefixes atomic.Int64

// TestWatchMatchesModel: for random write histories and random watches (scope, label and field
// selectors, resourceVersion unset/0/past/current/future, SendInitialEvents unset/true/false, bookmarks
// on or off, serial or concurrent decoding) the watch delivers exactly what the model of the history
// says, filter transitions included; progress bookmarks never go backwards nor precede an event at or
// below them. Raise -rapid.checks for a longer run.
func TestWatchMatchesModel(t *testing.T) {
	b := newInProcess(t, store.Options{})
	labelSelectors := []string{"", "app=web", "app!=web", "tier in (a,b)", "!tier", "app=db,tier=c"}
	fieldSelectors := []string{"", "metadata.namespace=a", "metadata.name=p1", "spec.nodeName=n1", "spec.nodeName!=n1", "metadata.namespace!=b,spec.nodeName="}
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		s, err := etcd3.New(b.Client, etcd3.Config{
			Prefix:         fmt.Sprintf("/prop-%d", propPrefixes.Add(1)),
			ResourcePrefix: "/pods/",
			Logger:         slog.New(slog.DiscardHandler),
			Features:       etcd3.Features{DisableConcurrentWatchObjectDecode: rapid.Bool().Draw(rt, "serial")},
		})
		if err != nil {
			rt.Fatal(err)
		}
		m := &model{state: map[string]*unstructured.Unstructured{}}
		base, err := s.GetCurrentResourceVersion(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		for range rapid.IntRange(0, 12).Draw(rt, "phase1") {
			m.write(rt, s)
		}
		r1, err := s.GetCurrentResourceVersion(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		phase2 := rapid.IntRange(0, 12).Draw(rt, "phase2")

		var scope watchScope
		switch rapid.IntRange(0, 2).Draw(rt, "scope") {
		case 0:
			scope = watchScope{key: "/pods/", recursive: true}
		case 1:
			ns := rapid.SampledFrom(propNamespaces).Draw(rt, "scopeNS")
			scope = watchScope{key: "/pods/" + ns, recursive: true, ns: ns}
		case 2:
			ns := rapid.SampledFrom(propNamespaces).Draw(rt, "scopeNS")
			name := fmt.Sprintf("p%d", rapid.IntRange(0, 4).Draw(rt, "scopeName"))
			scope = watchScope{key: storagetest.Key(ns, name), ns: ns, name: name}
		}
		pred := storagetest.PodPredicate(rapid.SampledFrom(labelSelectors).Draw(rt, "labels"), rapid.SampledFrom(fieldSelectors).Draw(rt, "fields"))
		pred.AllowWatchBookmarks = rapid.Bool().Draw(rt, "bookmarks")
		var sie *bool
		switch rapid.IntRange(0, 2).Draw(rt, "sie") {
		case 1:
			v := true
			sie = &v
		case 2:
			v := false
			sie = &v
		}
		futureRV := int64(r1) + int64(phase2) + 3
		var rv int64
		rvString := ""
		switch rapid.IntRange(0, 4).Draw(rt, "rvKind") {
		case 1:
			rvString = "0"
		case 2:
			rv = rapid.Int64Range(int64(base), int64(r1)).Draw(rt, "pastRV")
			rvString = strconv.FormatInt(rv, 10)
		case 3:
			rv = int64(r1)
			rvString = strconv.FormatInt(rv, 10)
		case 4:
			rv = futureRV
			rvString = strconv.FormatInt(rv, 10)
		}
		w, err := s.Watch(ctx, scope.key, storage.ListOptions{ResourceVersion: rvString, Predicate: pred, Recursive: scope.recursive, SendInitialEvents: sie})
		if err != nil {
			rt.Fatalf("watch: %v", err)
		}
		defer func() {
			w.Stop()
			for range w.ResultChan() {
			}
		}()
		for range phase2 {
			m.write(rt, s)
		}

		initial := (sie == nil && rv == 0) || (sie != nil && *sie)
		endBookmark := sie != nil && *sie && pred.AllowWatchBookmarks
		if rv == futureRV {
			if initial {
				// A watch-list from a future RV is one ERROR 504.
				evs := readUntilClosed(rt, w)
				if len(evs) != 1 || render(evs[0]) != "ERROR 504 Timeout" {
					rt.Fatalf("future RV watch-list: %v", renderAll(evs))
				}
				return
			}
			// An ordinary watch from a future RV sees only what comes after it.
			for range 3 {
				m.write(rt, s)
			}
		}
		got := syncAndCollect(rt, b.Client, s, w)

		// The list of a watch that lists runs concurrently with phase 2, at any revision from r1 on;
		// every other start is fixed.
		start := rv
		if sie != nil && !*sie && rv == 0 {
			start = int64(r1)
		}
		candidates := []int64{0}
		if initial {
			// The sync writes lie outside the watched range: a list at one of them sees the final state.
			final, err := s.GetCurrentResourceVersion(ctx)
			if err != nil {
				rt.Fatal(err)
			}
			candidates = candidates[:0]
			for l := int64(r1); l <= int64(final); l++ {
				candidates = append(candidates, l)
			}
		}
		var want []string
		for _, l := range candidates {
			want = m.expected(scope, pred, initial, endBookmark, l, start)
			if cmp.Equal(want, got.events) {
				return
			}
		}
		rt.Fatalf("watch %s recursive=%t rv=%q sie=%v bookmarks=%t pred=%v/%v (r1=%d):\n%s",
			scope.key, scope.recursive, rvString, ptrBool(sie), pred.AllowWatchBookmarks, pred.Label, pred.Field, r1,
			cmp.Diff(want, got.events))
	})
}

func ptrBool(b *bool) string {
	if b == nil {
		return "nil"
	}
	return strconv.FormatBool(*b)
}

type collected struct {
	events []string // every event but progress bookmarks
}

func readUntilClosed(t *rapid.T, w watch.Interface) []watch.Event {
	var evs []watch.Event
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return evs
			}
			evs = append(evs, ev)
		case <-timeout:
			t.Fatalf("watch not closed; got %v", renderAll(evs))
		}
	}
}

func renderAll(evs []watch.Event) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, render(ev))
	}
	return out
}

// syncAndCollect writes outside the watched range and requests progress until a progress bookmark at
// or past that write arrives, collecting the events before it and checking that progress bookmarks never
// go backwards and that no event at or below one follows it. The write is repeated while no answer
// comes: a watch whose list ran after the first write starts in the future of it.
func syncAndCollect(t *rapid.T, client *clientv3.Client, s *etcd3.Store, w watch.Interface) collected {
	ctx := context.Background()
	deadline := time.After(30 * time.Second)
	var got collected
	var lastBookmark int64
	for {
		resp, err := client.Put(ctx, "listwatch-sync", "")
		if err != nil {
			t.Fatalf("sync write: %v", err)
		}
		target := resp.Header.Revision
		rebump := time.After(200 * time.Millisecond)
		retry := time.NewTicker(10 * time.Millisecond)
	wait:
		for {
			if err := s.RequestWatchProgress(ctx); err != nil {
				t.Fatalf("request progress: %v", err)
			}
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					retry.Stop()
					t.Fatalf("watch closed; got %v", got.events)
				}
				u, _ := ev.Object.(*unstructured.Unstructured)
				rv := int64(0)
				if u != nil {
					rv, _ = strconv.ParseInt(u.GetResourceVersion(), 10, 64)
				}
				if ev.Type == watch.Bookmark && u.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
					if rv < lastBookmark {
						t.Fatalf("progress bookmark %d after %d", rv, lastBookmark)
					}
					lastBookmark = rv
					if rv >= target {
						retry.Stop()
						return got
					}
					continue
				}
				if ev.Type != watch.Bookmark && ev.Type != watch.Error && rv <= lastBookmark {
					t.Fatalf("%s after a progress bookmark at %d", render(ev), lastBookmark)
				}
				got.events = append(got.events, render(ev))
			case <-retry.C:
			case <-rebump:
				retry.Stop()
				break wait
			case <-deadline:
				retry.Stop()
				t.Fatalf("no progress bookmark; got %v", got.events)
			}
		}
	}
}
