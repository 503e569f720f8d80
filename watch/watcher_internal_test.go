package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	grpccodes "google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/internal/storagebackend"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/store"
)

func TestWatchRecursiveKeyNeedsTrailingSlash(t *testing.T) {
	s, _ := newTestStorage(t, Config{})
	_, err := s.watcher.Watch(context.Background(), "/registry/pods/ns", 0, storage.ListOptions{Recursive: true, Predicate: storage.Everything})
	if !errors.Is(err, storage.ErrRecursiveKey) || err.Error() != `recursive key needs to end with "/"` {
		t.Fatalf("got %v, want %v", err, storage.ErrRecursiveKey)
	}
	// Storage.Watch prepares recursive keys, so the same request through it works.
	w := mustWatch(t, s, "/pods/ns", storage.ListOptions{Recursive: true, Predicate: storage.Everything, ResourceVersion: "1"})
	stopAndDrain(w)
}

func TestWatchCurrentRevisionFailure(t *testing.T) {
	s, _ := newTestStorage(t, Config{})
	boom := errors.New("etcd unavailable")
	s.watcher.getCurrentStorageRV = func(context.Context) (uint64, error) { return 0, boom }

	// SendInitialEvents=false from RV 0 starts at the current revision: its failure is Watch's error.
	f := false
	if _, err := s.Watch(context.Background(), "/pods/ns", storage.ListOptions{Recursive: true, Predicate: storage.Everything, SendInitialEvents: &f}); !errors.Is(err, boom) {
		t.Fatalf("Watch error = %v, want %v", err, boom)
	}
	// A watch-list from an RV checks it against the current revision once running: an ERROR event.
	tr := true
	w := mustWatch(t, s, "/pods/ns", storage.ListOptions{Recursive: true, Predicate: storage.Everything, SendInitialEvents: &tr, ResourceVersion: "5"})
	ev := next(t, w)
	st, ok := ev.Object.(*metav1.Status)
	if ev.Type != apiwatch.Error || !ok || st.Code != 500 || st.Reason != metav1.StatusReasonInternalError || !strings.Contains(st.Message, boom.Error()) {
		t.Fatalf("got %s %+v, want ERROR 500 InternalError", ev.Type, ev.Object)
	}
	expectClosed(t, w)
}

func TestStartRevisionRules(t *testing.T) {
	tr, f := true, false
	cur := func(context.Context) (uint64, error) { return 42, nil }
	for _, tc := range []struct {
		gateOff         bool
		rev             int64
		sie             *bool
		bookmarks       bool
		wantStart       int64
		wantInitial     bool
		wantEndBookmark bool
	}{
		{rev: 0, sie: nil, wantStart: 0, wantInitial: true},
		{rev: 0, sie: nil, bookmarks: true, wantStart: 0, wantInitial: true},
		{rev: 0, sie: &tr, wantStart: 0, wantInitial: true},
		{rev: 0, sie: &tr, bookmarks: true, wantStart: 0, wantInitial: true, wantEndBookmark: true},
		{rev: 0, sie: &f, wantStart: 42},
		{rev: 7, sie: nil, wantStart: 7},
		{rev: 7, sie: &tr, bookmarks: true, wantStart: 7, wantInitial: true, wantEndBookmark: true},
		{rev: 7, sie: &f, wantStart: 7},
		{gateOff: true, rev: 0, sie: nil, wantStart: 0, wantInitial: true},
		{gateOff: true, rev: 0, sie: &tr, bookmarks: true, wantStart: 0},
		{gateOff: true, rev: 0, sie: &f, wantStart: 0},
		{gateOff: true, rev: 7, sie: &tr, wantStart: 7},
	} {
		name := fmt.Sprintf("gateOff=%t,rev=%d,sie=%v,bookmarks=%t", tc.gateOff, tc.rev, ptrString(tc.sie), tc.bookmarks)
		w := &watcher{getCurrentStorageRV: cur, features: Features{DisableWatchList: tc.gateOff}}
		opts := storage.ListOptions{SendInitialEvents: tc.sie}
		opts.Predicate.AllowWatchBookmarks = tc.bookmarks
		start, err := w.getStartWatchResourceVersion(context.Background(), tc.rev, opts)
		if err != nil || start != tc.wantStart {
			t.Errorf("%s: start = %d, %v; want %d", name, start, err, tc.wantStart)
		}
		if got := w.areInitialEventsRequired(tc.rev, opts); got != tc.wantInitial {
			t.Errorf("%s: initial events = %t, want %t", name, got, tc.wantInitial)
		}
		if got := w.isInitialEventsEndBookmarkRequired(opts); got != tc.wantEndBookmark {
			t.Errorf("%s: end bookmark = %t, want %t", name, got, tc.wantEndBookmark)
		}
	}
}

func ptrString(b *bool) string {
	if b == nil {
		return "nil"
	}
	return fmt.Sprint(*b)
}

// hookKV records the Get calls of the initial list and runs a hook before each one.
type hookKV struct {
	clientv3.KV
	mu     sync.Mutex
	gets   []clientv3.Op
	before func(n int) (*clientv3.GetResponse, error)
}

func (h *hookKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	h.mu.Lock()
	n := len(h.gets)
	h.gets = append(h.gets, clientv3.OpGet(key, opts...))
	before := h.before
	h.mu.Unlock()
	if before != nil {
		if resp, err := before(n); resp != nil || err != nil {
			return resp, err
		}
	}
	return h.KV.Get(ctx, key, opts...)
}

func (h *hookKV) ops() []clientv3.Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]clientv3.Op(nil), h.gets...)
}

// pagedListStorage creates the pods p0..p4 in ns on a fresh server and returns a storage whose watches
// list them in pages of 2 (RangeStream off) through hook, which calls between(writer, n) before page
// n; writer is another storage on the server.
func pagedListStorage(t *testing.T, between func(writer *Store, b *storagebackend.Backend, n int)) (*Store, *hookKV) {
	t.Helper()
	b := storagebackend.StartInProcess(t, store.Options{})
	s := newStorageOn(t, b, Config{Features: Features{DisableEtcdRangeStream: true}})
	s.watcher.listPageSize = 2
	for i := range 5 {
		mustCreate(t, s, pod("ns", fmt.Sprintf("p%d", i), nil))
	}
	writer := newStorageOn(t, b, Config{})
	hook := &hookKV{KV: b.Client.KV}
	hook.before = func(n int) (*clientv3.GetResponse, error) {
		between(writer, b, n)
		return nil, nil
	}
	s.watcher.client = clientWithKV(t, b.Client, hook)
	return s, hook
}

func TestInitialListPagesArePinned(t *testing.T) {
	// A write between the first and second page must not show in the list: pages are pinned.
	s, hook := pagedListStorage(t, func(writer *Store, _ *storagebackend.Backend, n int) {
		if n == 1 {
			mustCreate(t, writer, pod("ns", "pz-late", nil))
		}
	})
	w := mustWatch(t, s, "/pods/ns", storage.ListOptions{Recursive: true, Predicate: storage.Everything})
	var got []string
	for range 6 {
		got = append(got, eventString(next(t, w)))
	}
	want := []string{"ADDED ns/p0@2", "ADDED ns/p1@3", "ADDED ns/p2@4", "ADDED ns/p3@5", "ADDED ns/p4@6", "ADDED ns/pz-late@7"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	ops := hook.ops()
	if len(ops) != 3 {
		t.Fatalf("%d list pages, want 3", len(ops))
	}
	for i, op := range ops {
		if op.Limit() != 2 {
			t.Errorf("page %d limit %d, want 2", i, op.Limit())
		}
		wantRev := int64(6)
		if i == 0 {
			wantRev = 0
		}
		if op.Rev() != wantRev {
			t.Errorf("page %d at revision %d, want %d", i, op.Rev(), wantRev)
		}
	}
	if k := string(ops[1].KeyBytes()); k != "/registry/pods/ns/p1\x00" {
		t.Errorf("second page starts at %q", k)
	}
}

// clientWithKV returns a client sharing c's connection whose KV is kv.
func clientWithKV(t testing.TB, c *clientv3.Client, kv clientv3.KV) *clientv3.Client {
	t.Helper()
	// Not closed: Close would close the watcher and lessor it shares with c.
	nc := clientv3.NewCtxClient(context.Background())
	nc.KV = kv
	nc.Watcher = c.Watcher
	nc.Lease = c.Lease
	return nc
}

func TestInitialListCompactedBetweenPages(t *testing.T) {
	s, _ := pagedListStorage(t, func(writer *Store, b *storagebackend.Backend, n int) {
		if n == 1 {
			mustCreate(t, writer, pod("other", "x", nil))
			if _, err := b.Client.Compact(context.Background(), 7); err != nil {
				t.Errorf("compact: %v", err)
			}
		}
	})
	w := mustWatch(t, s, "/pods/ns", storage.ListOptions{Recursive: true, Predicate: storage.Everything})
	evs := readAll(t, w)
	// The ERROR is sent as soon as the page fails; list events still queued are dropped (upstream).
	if len(evs) == 0 || len(evs) > 3 {
		t.Fatalf("%d events", len(evs))
	}
	expectAddedPrefix(t, evs[:len(evs)-1], "p0", "p1")
	last := evs[len(evs)-1]
	st, ok := last.Object.(*metav1.Status)
	if last.Type != apiwatch.Error || !ok || st.Code != 410 || st.Reason != metav1.StatusReasonExpired ||
		!strings.HasPrefix(st.Message, "The provided continue parameter is too old") || st.Continue == "" {
		t.Fatalf("got %s %+v, want ERROR 410 Expired with a continue token", last.Type, last.Object)
	}
}

// readAll reads every event up to the close.
func readAll(t testing.TB, w apiwatch.Interface) []apiwatch.Event {
	t.Helper()
	var evs []apiwatch.Event
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return evs
			}
			evs = append(evs, ev)
		case <-time.After(testutil.WaitTimeout):
			t.Fatal("result channel not closed")
		}
	}
}

// expectAddedPrefix checks that evs are ADDED events for a prefix of names.
func expectAddedPrefix(t testing.TB, evs []apiwatch.Event, names ...string) {
	t.Helper()
	if len(evs) > len(names) {
		t.Fatalf("%d events, want at most %d", len(evs), len(names))
	}
	for i, ev := range evs {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if ev.Type != apiwatch.Added || !ok || u.GetName() != names[i] {
			t.Fatalf("event %d: %s, want ADDED %s", i, eventString(ev), names[i])
		}
	}
}

func TestInitialListEmptyPageWithMore(t *testing.T) {
	b := storagebackend.StartInProcess(t, store.Options{})
	s := newStorageOn(t, b, Config{Features: Features{DisableEtcdRangeStream: true}})
	hook := &hookKV{KV: b.Client.KV}
	hook.before = func(int) (*clientv3.GetResponse, error) {
		return &clientv3.GetResponse{Header: &pb.ResponseHeader{Revision: 1}, More: true}, nil
	}
	s.watcher.client = clientWithKV(t, b.Client, hook)
	w := mustWatch(t, s, "/pods/ns", storage.ListOptions{Recursive: true, Predicate: storage.Everything})
	ev := next(t, w)
	st, ok := ev.Object.(*metav1.Status)
	if ev.Type != apiwatch.Error || !ok || st.Code != 500 ||
		st.Message != "Internal error occurred: no results were found, but etcd indicated there were more values remaining" {
		t.Fatalf("got %s %+v", ev.Type, ev.Object)
	}
	expectClosed(t, w)
}

func TestInitialListRangeStream(t *testing.T) {
	b := storagebackend.StartInProcess(t, store.Options{})
	clk := testingclock.NewFakeClock(time.Now())
	s := newStorageOn(t, b, Config{Clock: clk})
	for i := range 25 {
		mustCreate(t, s, pod("ns", fmt.Sprintf("p%02d", i), nil))
	}

	// A server without RangeStream: the list falls back to pages and the RPC is not tried again
	// for ten minutes.
	noStream, attempts := NewNoRangeStreamKV(b.Client)
	s.watcher.client = clientWithKV(t, b.Client, noStream)
	w := mustWatch(t, s, "/pods/ns", storage.ListOptions{Recursive: true, Predicate: storage.Everything})
	for i := range 25 {
		if ev := next(t, w); ev.Type != apiwatch.Added || ev.Object.(*unstructured.Unstructured).GetName() != fmt.Sprintf("p%02d", i) {
			t.Fatalf("event %d: %s", i, eventString(ev))
		}
	}
	if s.rangeStream.supported() {
		t.Fatal("RangeStream still marked supported after Unimplemented")
	}
	stopAndDrain(w)
	// Within the interval the next list pages without asking.
	w = mustWatch(t, s, "/pods/ns", storage.ListOptions{Recursive: true, Predicate: storage.Everything})
	for i := range 25 {
		if ev := next(t, w); ev.Type != apiwatch.Added {
			t.Fatalf("second list, event %d: %s", i, eventString(ev))
		}
	}
	stopAndDrain(w)
	if attempts.Load() != 1 {
		t.Fatalf("%d RangeStream attempts, want the one answered Unimplemented", attempts.Load())
	}
	clk.Step(rangeStreamRecheckInterval)
	if !s.rangeStream.supported() {
		t.Fatal("RangeStream not rechecked after the interval")
	}

	// A server that streams: the chunks (10, 20) become the initial events in order, pinned to the
	// first chunk's revision even if a write lands in between.
	writer := newStorageOn(t, b, Config{})
	kv, streams := NewRangeStreamKV(b.Client, func(chunk int) {
		if chunk == 1 {
			mustCreate(t, writer, pod("ns", "pz-late", nil))
		}
	})
	s.watcher.client = clientWithKV(t, b.Client, kv)
	w = mustWatch(t, s, "/pods/ns", storage.ListOptions{Recursive: true, Predicate: storage.Everything})
	for i := range 25 {
		if ev := next(t, w); ev.Type != apiwatch.Added || ev.Object.(*unstructured.Unstructured).GetName() != fmt.Sprintf("p%02d", i) {
			t.Fatalf("event %d: %s", i, eventString(ev))
		}
	}
	if ev := next(t, w); ev.Object.(*unstructured.Unstructured).GetName() != "pz-late" {
		t.Fatalf("after the list: %s", eventString(ev))
	}
	if streams.Load() != 1 {
		t.Fatalf("%d streams, want 1", streams.Load())
	}
}

func TestInitialListRangeStreamCompacted(t *testing.T) {
	b := storagebackend.StartInProcess(t, store.Options{})
	s := newStorageOn(t, b, Config{})
	for i := range 15 {
		mustCreate(t, s, pod("ns", fmt.Sprintf("p%02d", i), nil))
	}
	writer := newStorageOn(t, b, Config{})
	kv, _ := NewRangeStreamKV(b.Client, func(chunk int) {
		if chunk == 1 {
			out := mustCreate(t, writer, pod("other", "x", nil))
			rv, _ := storage.APIObjectVersioner{}.ObjectResourceVersion(out)
			if _, err := b.Client.Compact(context.Background(), int64(rv)); err != nil {
				t.Errorf("compact: %v", err)
			}
		}
	})
	s.watcher.client = clientWithKV(t, b.Client, kv)
	w := mustWatch(t, s, "/pods/ns", storage.ListOptions{Recursive: true, Predicate: storage.Everything})
	evs := readAll(t, w)
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("p%02d", i))
	}
	expectAddedPrefix(t, evs[:len(evs)-1], names...)
	last := evs[len(evs)-1]
	// A stream cannot be resumed with a continue token: the plain list message.
	st, ok := last.Object.(*metav1.Status)
	if last.Type != apiwatch.Error || !ok || st.Code != 410 || st.Message != msgListExpired || st.Continue != "" {
		t.Fatalf("last %s %+v; want ERROR 410 %q", last.Type, last.Object, msgListExpired)
	}
}

func TestParseEvent(t *testing.T) {
	kv := func(rev, create int64) *mvccpb.KeyValue {
		return &mvccpb.KeyValue{Key: []byte("/k"), Value: []byte("v"), ModRevision: rev, CreateRevision: create}
	}
	created, err := parseEvent(&clientv3.Event{Type: clientv3.EventTypePut, Kv: kv(5, 5)})
	if err != nil || !created.isCreated || created.isDeleted || created.rev != 5 || created.prevValue != nil {
		t.Errorf("create: %+v %v", created, err)
	}
	updated, err := parseEvent(&clientv3.Event{Type: clientv3.EventTypePut, Kv: kv(6, 5), PrevKv: &mvccpb.KeyValue{Value: []byte("old")}})
	if err != nil || updated.isCreated || updated.isDeleted || string(updated.prevValue) != "old" {
		t.Errorf("update: %+v %v", updated, err)
	}
	deleted, err := parseEvent(&clientv3.Event{Type: clientv3.EventTypeDelete, Kv: kv(7, 0), PrevKv: &mvccpb.KeyValue{Value: []byte("old")}})
	if err != nil || !deleted.isDeleted || deleted.isCreated || deleted.rev != 7 {
		t.Errorf("delete: %+v %v", deleted, err)
	}
	for _, tc := range []struct {
		e    *clientv3.Event
		want string
	}{
		{&clientv3.Event{Type: clientv3.EventTypePut, Kv: kv(6, 5)}, `etcd event received with PrevKv=nil (key="/k", modRevision=6, type=PUT)`},
		{&clientv3.Event{Type: clientv3.EventTypeDelete, Kv: kv(7, 0)}, `etcd event received with PrevKv=nil (key="/k", modRevision=7, type=DELETE)`},
	} {
		if _, err := parseEvent(tc.e); err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %s", err, tc.want)
		}
	}
}

func encoded(t testing.TB, u *unstructured.Unstructured) []byte {
	t.Helper()
	b, err := storage.UnstructuredJSON.Encode(u)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newTransformChan is a watchChan for calling transform directly.
func newTransformChan(pred storage.Predicate) *watchChan {
	w := &watcher{codec: storage.UnstructuredJSON, versioner: storage.APIObjectVersioner{}, transformer: storage.IdentityTransformer{},
		newFunc: func() runtime.Object { return &unstructured.Unstructured{} }, logger: testutil.DiscardLogger()}
	wc := &watchChan{watcher: w, internalPred: pred, ctx: context.Background()}
	if pred.Empty() {
		wc.internalPred = storage.Everything
	}
	return wc
}

func TestTransformTransitions(t *testing.T) {
	sel := pod("ns", "a", map[string]string{"select": "true"})
	other := pod("ns", "a", map[string]string{"select": "false"})
	pred := storage.Predicate{Label: labels.SelectorFromSet(labels.Set{"select": "true"})}
	failing := storage.Predicate{Field: fields.OneTermEqualSelector("metadata.name", "a"),
		GetAttrs: func(runtime.Object) (labels.Set, fields.Set, error) { return nil, nil, errors.New("no attrs") }}
	for _, tc := range []struct {
		name      string
		pred      storage.Predicate
		e         event
		want      apiwatch.EventType
		wantLabel string
	}{
		{"create matching", pred, event{value: encoded(t, sel), isCreated: true, rev: 2}, apiwatch.Added, "true"},
		{"create not matching", pred, event{value: encoded(t, other), isCreated: true, rev: 2}, "", ""},
		{"update both match", pred, event{value: encoded(t, sel), prevValue: encoded(t, sel), rev: 3}, apiwatch.Modified, "true"},
		{"update enters", pred, event{value: encoded(t, sel), prevValue: encoded(t, other), rev: 3}, apiwatch.Added, "true"},
		{"update leaves", pred, event{value: encoded(t, other), prevValue: encoded(t, sel), rev: 3}, apiwatch.Deleted, "true"},
		{"update outside", pred, event{value: encoded(t, other), prevValue: encoded(t, other), rev: 3}, "", ""},
		{"update with everything", storage.Everything, event{value: encoded(t, other), prevValue: encoded(t, sel), rev: 3}, apiwatch.Modified, "false"},
		{"delete matching", pred, event{prevValue: encoded(t, sel), isDeleted: true, rev: 4}, apiwatch.Deleted, "true"},
		{"delete not matching", pred, event{prevValue: encoded(t, other), isDeleted: true, rev: 4}, "", ""},
		{"predicate error is no match", failing, event{value: encoded(t, sel), isCreated: true, rev: 2}, "", ""},
	} {
		res, err := newTransformChan(tc.pred).transform(&tc.e)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if tc.want == "" {
			if res != nil {
				t.Errorf("%s: got %s, want nothing", tc.name, eventString(*res))
			}
			continue
		}
		if res == nil || res.Type != tc.want {
			t.Errorf("%s: got %v, want %s", tc.name, res, tc.want)
			continue
		}
		u := res.Object.(*unstructured.Unstructured)
		if u.GetLabels()["select"] != tc.wantLabel || u.GetResourceVersion() != fmt.Sprint(tc.e.rev) {
			t.Errorf("%s: object %v rv %s, want label %s rv %d", tc.name, u.GetLabels(), u.GetResourceVersion(), tc.wantLabel, tc.e.rev)
		}
	}
}

func TestTransformBookmarks(t *testing.T) {
	wc := newTransformChan(storage.Everything)
	res, err := wc.transform(progressNotifyEvent(9))
	if err != nil || res.Type != apiwatch.Bookmark {
		t.Fatalf("got %v, %v", res, err)
	}
	u := res.Object.(*unstructured.Unstructured)
	if u.GetResourceVersion() != "9" || len(u.GetAnnotations()) != 0 {
		t.Errorf("bookmark object %v", u.Object)
	}
	end := progressNotifyEvent(10)
	end.isInitialEventsEndBookmark = true
	res, _ = wc.transform(end)
	if a := res.Object.(*unstructured.Unstructured).GetAnnotations(); a[metav1.InitialEventsAnnotationKey] != "true" || len(a) != 1 {
		t.Errorf("end bookmark annotations %v", a)
	}
	// Without newFunc there is no bookmark object: a broadcast progress answer is dropped.
	wc.watcher.newFunc = nil
	if res, err := wc.transform(progressNotifyEvent(11)); res != nil || err != nil {
		t.Errorf("without newFunc: %v, %v", res, err)
	}
}

func TestPrepareObjsDecodesPreviousOnlyWhenNeeded(t *testing.T) {
	cur := encoded(t, pod("ns", "a", nil))
	garbage := []byte("not json")
	// With Everything an update needs no previous object: a corrupt one does not matter.
	if res, err := newTransformChan(storage.Everything).transform(&event{value: cur, prevValue: garbage, rev: 3}); err != nil || res.Type != apiwatch.Modified {
		t.Fatalf("everything: %v, %v", res, err)
	}
	// A filtering predicate needs it.
	pred := storage.Predicate{Label: labels.SelectorFromSet(labels.Set{"x": "y"})}
	if _, err := newTransformChan(pred).transform(&event{value: cur, prevValue: garbage, rev: 3}); err == nil {
		t.Fatal("filtering: corrupt previous value accepted")
	}
	// A delete always needs it; a corrupt current value always fails.
	if _, err := newTransformChan(storage.Everything).transform(&event{prevValue: garbage, isDeleted: true, rev: 3}); err == nil {
		t.Fatal("delete: corrupt previous value accepted")
	}
	if _, err := newTransformChan(storage.Everything).transform(&event{value: garbage, isCreated: true, rev: 3}); err == nil {
		t.Fatal("create: corrupt value accepted")
	}
}

// failingVersioner cannot stamp resource versions.
type failingVersioner struct{ storage.APIObjectVersioner }

func (failingVersioner) UpdateObject(runtime.Object, uint64) error { return errors.New("no version") }

func TestDecodeObjVersionerFailure(t *testing.T) {
	_, err := decodeObj(storage.UnstructuredJSON, failingVersioner{}, encoded(t, pod("ns", "a", nil)), 5)
	if err == nil || !strings.HasPrefix(err.Error(), "failure to version api object (5)") {
		t.Fatalf("got %v", err)
	}
}

func TestIsCancelError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, true},
		{fmt.Errorf("wrapped: %w", context.Canceled), true},
		{grpcstatus.Error(grpccodes.Canceled, "x"), true},
		{rpctypes.Error(grpcstatus.Error(grpccodes.Canceled, "x")), true},
		{context.DeadlineExceeded, false},
		{rpctypes.ErrCompacted, false},
		{errors.New("x"), false},
	} {
		if got := isCancelError(tc.err); got != tc.want {
			t.Errorf("isCancelError(%v) = %t", tc.err, got)
		}
	}
}

func TestTransformErrorToEvent(t *testing.T) {
	for _, tc := range []struct {
		err     error
		code    int32
		reason  metav1.StatusReason
		message string
	}{
		{rpctypes.ErrCompacted, 410, metav1.StatusReasonExpired, msgWatchExpired},
		{errors.New("boom"), 500, metav1.StatusReasonInternalError, "Internal error occurred: boom"},
		{apierrors.NewBadRequest("bad"), 400, metav1.StatusReasonBadRequest, "bad"},
		{&corruptObjectDeletedError{err: errors.New("x")}, 500, metav1.StatusReasonStoreReadError, "saw a DELETED event, but object data is corrupt - x"},
	} {
		ev := transformErrorToEvent(tc.err)
		st := ev.Object.(*metav1.Status)
		if ev.Type != apiwatch.Error || st.Code != tc.code || st.Reason != tc.reason || st.Message != tc.message || st.Status != metav1.StatusFailure {
			t.Errorf("%v: got %+v", tc.err, st)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for range 1000 {
		if s := retryAfterSeconds(); s < 1 || s > 4 {
			t.Fatalf("retry after %d s", s)
		}
	}
}

func TestSendErrorIsFinal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wc := newTransformChan(storage.Everything)
	wc.resultChan = make(chan apiwatch.Event, 10)
	wc.ctx, wc.cancel = context.WithCancel(ctx)
	wc.resultLogger = newBlockLogger(time.Hour, time.Hour, "", "", wc.watcher.groupResource, testingclock.NewFakeClock(time.Now()), testutil.DiscardLogger())
	wc.watcher.clock = testingclock.NewFakeClock(time.Now())
	if !wc.sendEvent(&apiwatch.Event{Type: apiwatch.Added}) {
		t.Fatal("send before the error failed")
	}
	wc.sendError(errors.New("first"))
	wc.sendError(errors.New("second"))
	if wc.sendEvent(&apiwatch.Event{Type: apiwatch.Added}) {
		t.Fatal("an event was sent after the ERROR")
	}
	if wc.ctx.Err() == nil {
		t.Fatal("sendError did not cancel the watch")
	}
	close(wc.resultChan)
	var got []string
	for ev := range wc.resultChan {
		got = append(got, string(ev.Type))
		if st, ok := ev.Object.(*metav1.Status); ok {
			got[len(got)-1] += " " + st.Message
		}
	}
	if want := "ADDED|ERROR Internal error occurred: first"; strings.Join(got, "|") != want {
		t.Fatalf("got %q, want %q", strings.Join(got, "|"), want)
	}
	// A cancellation sends nothing.
	wc2 := newTransformChan(storage.Everything)
	wc2.resultChan = make(chan apiwatch.Event, 1)
	wc2.ctx, wc2.cancel = context.WithCancel(ctx)
	wc2.sendError(context.Canceled)
	if len(wc2.resultChan) != 0 || wc2.ctx.Err() == nil {
		t.Fatal("cancellation produced an event or did not cancel")
	}
}

func TestBackPressureFillsBothBuffers(t *testing.T) {
	for _, serial := range []bool{false, true} {
		t.Run(fmt.Sprintf("serial=%t", serial), func(t *testing.T) {
			s, _ := newTestStorage(t, Config{Features: Features{DisableConcurrentWatchObjectDecode: serial}})
			w := mustWatch(t, s, "/pods/ns", storage.ListOptions{Recursive: true, Predicate: storage.Everything, ResourceVersion: "1"})
			wc := w.(*watchChan)
			const n = 400
			for i := range n {
				mustCreate(t, s, pod("ns", fmt.Sprintf("p%03d", i), nil))
			}
			// Nobody reads: both buffers fill up and the watch stops taking from etcd.
			testutil.WaitFor(t, "full buffers", func() bool {
				return len(wc.resultChan) == outgoingBufSize && len(wc.incomingEventChan) == incomingBufSize
			})
			for i := range n {
				ev := next(t, w)
				if name := ev.Object.(*unstructured.Unstructured).GetName(); ev.Type != apiwatch.Added || name != fmt.Sprintf("p%03d", i) {
					t.Fatalf("event %d: %s", i, eventString(ev))
				}
			}
		})
	}
}

func TestStopKeepsBufferedEventsAndClosesOnce(t *testing.T) {
	s, _ := newTestStorage(t, Config{})
	for i := range 5 {
		mustCreate(t, s, pod("ns", fmt.Sprintf("p%d", i), nil))
	}
	w, err := s.Watch(context.Background(), "/pods/ns", storage.ListOptions{Recursive: true, Predicate: storage.Everything, ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	wc := w.(*watchChan)
	testutil.WaitFor(t, "buffered events", func() bool { return len(wc.resultChan) == 5 })
	w.Stop()
	w.Stop() // idempotent
	n := 0
	for ev := range w.ResultChan() {
		if ev.Type != apiwatch.Added {
			t.Fatalf("after Stop: %s", eventString(ev))
		}
		n++
	}
	if n != 5 {
		t.Fatalf("%d buffered events read after Stop, want 5", n)
	}
	// Closed: receiving again reports closed (a second close would have panicked in run).
	if _, ok := <-w.ResultChan(); ok {
		t.Fatal("result channel reopened")
	}
	testutil.WaitFor(t, "watch goroutines to exit", func() bool { return len(watchGoroutines()) == 0 })
}

func TestCancelContextClosesWithoutEvents(t *testing.T) {
	s, _ := newTestStorage(t, Config{})
	mustCreate(t, s, pod("ns", "a", nil))
	ctx, cancel := context.WithCancel(context.Background())
	w, err := s.Watch(ctx, "/pods/ns", storage.ListOptions{Recursive: true, Predicate: storage.Everything, ResourceVersion: "2"})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	expectClosed(t, w)
	testutil.WaitFor(t, "watch goroutines to exit", func() bool { return len(watchGoroutines()) == 0 })
}

func TestBlockLogger(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	rec := &recordingHandler{}
	l := newBlockLogger(5*time.Second, 100*time.Millisecond, "slow", "pods", schema.GroupResource{Resource: "pods"}, clk, slog.New(rec))
	l.recordWait(80 * time.Millisecond)
	clk.Step(6 * time.Second)
	l.recordWait(30 * time.Millisecond) // 110 ms in the window: logged
	if got := rec.count(); got != 1 {
		t.Fatalf("%d records after a slow window, want 1", got)
	}
	l.recordWait(time.Second) // within the new window: not yet
	if got := rec.count(); got != 1 {
		t.Fatalf("%d records inside the window, want 1", got)
	}
	clk.Step(5 * time.Second)
	l.recordWait(0)
	clk.Step(5 * time.Second)
	l.recordWait(50 * time.Millisecond) // under the threshold: not logged
	if got := rec.count(); got != 2 {
		t.Fatalf("%d records, want 2", got)
	}
	if r := rec.last(); r.Message != "slow" || r.attrs["eventCount"] != "2" || r.attrs["groupResource"] != "pods" {
		t.Fatalf("record %+v", r)
	}
}

// recordingHandler keeps the log records it is given.
type recordingHandler struct {
	mu      sync.Mutex
	records []loggedRecord
}

type loggedRecord struct {
	Message string
	attrs   map[string]string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler            { return h }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	rec := loggedRecord{Message: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, rec)
	return nil
}

func (h *recordingHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.records)
}

func (h *recordingHandler) last() loggedRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.records[len(h.records)-1]
}

// gatedTransformer blocks every read until its release channel for that value is closed, counting the
// reads in flight.
type gatedTransformer struct {
	mu       sync.Mutex
	inFlight int
	max      int
	started  chan string
	release  map[string]chan struct{}
}

func (g *gatedTransformer) TransformFromStorage(ctx context.Context, data []byte, key string) ([]byte, bool, error) {
	g.mu.Lock()
	g.inFlight++
	g.max = max(g.max, g.inFlight)
	ch := g.release[key]
	g.mu.Unlock()
	g.started <- key
	select {
	case <-ch:
	case <-ctx.Done():
	}
	g.mu.Lock()
	g.inFlight--
	g.mu.Unlock()
	return data, false, nil
}

func (g *gatedTransformer) TransformToStorage(_ context.Context, data []byte, _ string) ([]byte, error) {
	return data, nil
}

// TestConcurrentDecodeIsBoundedAndOrdered: at most processEventConcurrency decodes run at once, and
// events come out in order even when later decodes finish first.
func TestConcurrentDecodeIsBoundedAndOrdered(t *testing.T) {
	b := storagebackend.StartInProcess(t, store.Options{})
	writer := newStorageOn(t, b, Config{})
	const n = 25
	g := &gatedTransformer{started: make(chan string, n), release: map[string]chan struct{}{}}
	for i := range n {
		g.release[fmt.Sprintf("/registry/pods/ns/p%02d", i)] = make(chan struct{})
	}
	s := newStorageOn(t, b, Config{Transformer: g})
	w := mustWatch(t, s, "/pods/ns", storage.ListOptions{Recursive: true, Predicate: storage.Everything, ResourceVersion: "1"})
	for i := range n {
		mustCreate(t, writer, pod("ns", fmt.Sprintf("p%02d", i), nil))
	}
	var got []string
	started := 0
	for started < n {
		// Wait for a full wave of decodes, then release it newest first.
		var wave []string
		for len(wave) < processEventConcurrency && started < n {
			select {
			case k := <-g.started:
				wave = append(wave, k)
				started++
			case <-time.After(testutil.WaitTimeout):
				t.Fatalf("only %d decodes started", started)
			}
		}
		for i := len(wave) - 1; i >= 0; i-- {
			close(g.release[wave[i]])
		}
		for range wave {
			got = append(got, next(t, w).Object.(*unstructured.Unstructured).GetName())
		}
	}
	for i, name := range got {
		if name != fmt.Sprintf("p%02d", i) {
			t.Fatalf("order %v", got)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.max != processEventConcurrency {
		t.Fatalf("at most %d decodes ran at once, want %d", g.max, processEventConcurrency)
	}
}

func TestWatchChanRequestWatchProgress(t *testing.T) {
	s, _ := newTestStorage(t, Config{})
	out := mustCreate(t, s, pod("ns", "a", nil))
	w := mustWatch(t, s, "/pods/ns", storage.ListOptions{Recursive: true, Predicate: storage.Everything, ResourceVersion: out.GetResourceVersion()})
	rp, ok := w.(interface{ RequestWatchProgress() error })
	if !ok {
		t.Fatal("watch has no RequestWatchProgress")
	}
	// etcd does not answer for a watch starting in the future: move the revision past the start.
	bump := mustCreate(t, s, pod("other", "b", nil))
	deadline := time.After(testutil.WaitTimeout)
	for {
		if err := rp.RequestWatchProgress(); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w.ResultChan():
			if ev.Type != apiwatch.Bookmark || ev.Object.(*unstructured.Unstructured).GetResourceVersion() != bump.GetResourceVersion() {
				t.Fatalf("got %s", eventString(ev))
			}
			return
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatal("no bookmark")
		}
	}
}
