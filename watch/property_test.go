package watch_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"pgregory.net/rapid"

	"github.com/listwatch/listwatch/internal/storagebackend"
	"github.com/listwatch/listwatch/proptest/kubemodel"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
	"github.com/listwatch/listwatch/store"
	"github.com/listwatch/listwatch/watch"
)

// model is the store's history as the test wrote it, in the model the watch is judged by.
type model struct {
	h *kubemodel.History
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
func (m *model) write(t *rapid.T, s *watch.Store) {
	ctx := context.Background()
	ns := rapid.SampledFrom(propNamespaces).Draw(t, "ns")
	name := fmt.Sprintf("p%d", rapid.IntRange(0, 4).Draw(t, "name"))
	key := storagetest.Key(ns, name)
	prev := m.h.State(key)
	out := &unstructured.Unstructured{}
	deleted := false
	switch {
	case prev == nil:
		obj := genObject(t, ns, name)
		if err := s.Create(ctx, key, obj, out, 0); err != nil {
			t.Fatalf("create %s: %v", key, err)
		}
	case rapid.IntRange(0, 3).Draw(t, "delete") == 0:
		if err := s.Delete(ctx, key, out, nil, nil, nil, storage.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s: %v", key, err)
		}
		deleted = true
	default:
		obj := genObject(t, ns, name)
		// The write must take a revision: a no-op update is skipped by GuaranteedUpdate.
		obj.SetAnnotations(map[string]string{"seq": strconv.Itoa(len(m.h.Writes))})
		if err := s.GuaranteedUpdate(ctx, key, out, false, nil,
			storage.SimpleUpdate(func(runtime.Object) (runtime.Object, error) { return obj, nil }), nil); err != nil {
			t.Fatalf("update %s: %v", key, err)
		}
	}
	rev, _ := strconv.ParseInt(out.GetResourceVersion(), 10, 64)
	var cur *kubemodel.Object
	if !deleted {
		var err error
		if cur, err = kubemodel.FromUnstructured(key, out, storagetest.PodAttrs); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.h.Apply(rev, key, cur); err != nil {
		t.Fatal(err)
	}
}

var propPrefixes atomic.Int64

// TestWatchMatchesModel: for random write histories and random watches (scope, label and field
// selectors, resourceVersion unset/0/past/current/future, SendInitialEvents unset/true/false, bookmarks
// on or off, serial or concurrent decoding) the watch delivers exactly what kubemodel's
// ExpectStorage says of the history, objects and filter transitions included; the progress
// bookmarks the test requests never go backwards, never fall below a delivered event and never pass
// a pending one. Raise -rapid.checks for a longer run.
func TestWatchMatchesModel(t *testing.T) {
	b := storagebackend.StartInProcess(t, store.Options{})
	labelSelectors := []string{"", "app=web", "app!=web", "tier in (a,b)", "!tier", "app=db,tier=c"}
	fieldSelectors := []string{"", "metadata.namespace=a", "metadata.name=p1", "spec.nodeName=n1", "spec.nodeName!=n1", "metadata.namespace!=b,spec.nodeName="}
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		s, err := watch.New(b.Client, watch.Config{
			Prefix:         fmt.Sprintf("/prop-%d", propPrefixes.Add(1)),
			ResourcePrefix: "/pods/",
			Logger:         slog.New(slog.DiscardHandler),
			Features:       watch.Features{DisableConcurrentWatchObjectDecode: rapid.Bool().Draw(rt, "serial")},
		})
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		base, err := s.GetCurrentResourceVersion(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		m := &model{h: kubemodel.NewHistory(int64(base))}
		for range rapid.IntRange(0, 12).Draw(rt, "phase1") {
			m.write(rt, s)
		}
		r1, err := s.GetCurrentResourceVersion(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		phase2 := rapid.IntRange(0, 12).Draw(rt, "phase2")

		var sel kubemodel.Selection
		switch rapid.IntRange(0, 2).Draw(rt, "scope") {
		case 0:
			sel = kubemodel.Selection{Key: "/pods/", Recursive: true}
		case 1:
			sel = kubemodel.Selection{Key: "/pods/" + rapid.SampledFrom(propNamespaces).Draw(rt, "scopeNS"), Recursive: true}
		case 2:
			ns := rapid.SampledFrom(propNamespaces).Draw(rt, "scopeNS")
			name := fmt.Sprintf("p%d", rapid.IntRange(0, 4).Draw(rt, "scopeName"))
			sel = kubemodel.Selection{Key: storagetest.Key(ns, name)}
		}
		sel.Predicate = storagetest.PodPredicate(rapid.SampledFrom(labelSelectors).Draw(rt, "labels"), rapid.SampledFrom(fieldSelectors).Draw(rt, "fields"))
		sel.Predicate.AllowWatchBookmarks = rapid.Bool().Draw(rt, "bookmarks")
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
		req := kubemodel.Request{ResourceVersion: rvString, SendInitialEvents: sie, AllowWatchBookmarks: sel.Predicate.AllowWatchBookmarks}
		// etcd's revision when Watch is called is r1; the test requests progress while it reads.
		exp, err := m.h.ExpectStorage(req, sel, kubemodel.Storage{Rev: int64(r1), ProgressRequested: true})
		if err != nil {
			rt.Fatal(err)
		}
		w, err := s.Watch(ctx, sel.Key, storage.ListOptions{ResourceVersion: rvString, Predicate: sel.Predicate, Recursive: sel.Recursive, SendInitialEvents: sie})
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

		var got []kubemodel.Event
		if exp.Refusal != nil {
			// The refusal is all the watch delivers: it closes after it.
			got = readUntilClosed(rt, w)
		} else {
			if rv == futureRV {
				// An ordinary watch from a future RV sees only what comes after it.
				for range 3 {
					m.write(rt, s)
				}
			}
			got = syncAndCollect(rt, b.Client, s, w)
			// The sync writes lie outside the watched range; a watch-list may list at one of them.
			final, err := s.GetCurrentResourceVersion(ctx)
			if err != nil {
				rt.Fatal(err)
			}
			if err := m.h.Advance(int64(final)); err != nil {
				rt.Fatal(err)
			}
		}
		v, err := m.h.Check(exp, got)
		if err != nil {
			rt.Fatal(err)
		}
		if !v.Complete {
			rt.Fatalf("%s: delivered %d events of what it owes, from %d:\n%s", exp, v.Events, v.Start, m.h)
		}
	})
}

// eventOf reads a delivered event for the model.
func eventOf(t *rapid.T, ev apiwatch.Event) kubemodel.Event {
	e, err := kubemodel.EventOf(ev)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func readUntilClosed(t *rapid.T, w apiwatch.Interface) []kubemodel.Event {
	var evs []kubemodel.Event
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return evs
			}
			evs = append(evs, eventOf(t, ev))
		case <-timeout:
			t.Fatalf("watch not closed; got %v", evs)
		}
	}
}

// syncAndCollect writes outside the watched range and requests progress until a progress bookmark at
// or past that write arrives, collecting every event up to it. The write is repeated while no answer
// comes: a watch whose list ran after the first write starts in the future of it.
func syncAndCollect(t *rapid.T, client *clientv3.Client, s *watch.Store, w apiwatch.Interface) []kubemodel.Event {
	ctx := context.Background()
	deadline := time.After(30 * time.Second)
	var got []kubemodel.Event
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
					t.Fatalf("watch closed; got %v", got)
				}
				e := eventOf(t, ev)
				got = append(got, e)
				if e.Type == apiwatch.Bookmark && !e.InitialEventsEnd && e.RV >= target {
					retry.Stop()
					return got
				}
			case <-retry.C:
			case <-rebump:
				retry.Stop()
				break wait
			case <-deadline:
				retry.Stop()
				t.Fatalf("no progress bookmark; got %v", got)
			}
		}
	}
}
