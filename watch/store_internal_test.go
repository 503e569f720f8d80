package watch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/internal/storagebackend"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/store"
)

func TestNewValidatesConfig(t *testing.T) {
	b := storagebackend.StartInProcess(t, store.Options{})
	for _, tc := range []struct {
		prefix, want string
	}{
		{"", "resourcePrefix cannot be empty"},
		{"/", "resourcePrefix cannot be /"},
		{"pods", "resourcePrefix needs to start from /"},
	} {
		if _, err := New(b.Client, Config{ResourcePrefix: tc.prefix}); err == nil || err.Error() != tc.want {
			t.Errorf("%q: got %v, want %q", tc.prefix, err, tc.want)
		}
	}
	if _, err := New(nil, Config{ResourcePrefix: "/pods/"}); err == nil {
		t.Error("nil client accepted")
	}
	for _, tc := range []struct{ prefix, want string }{
		{"", "/registry/"}, {"registry", "/registry/"}, {"/a/b/", "/a/b/"}, {"/", "/"},
	} {
		s, err := New(b.Client, Config{Prefix: tc.prefix, ResourcePrefix: "/pods/"})
		if err != nil {
			t.Fatalf("prefix %q: %v", tc.prefix, err)
		}
		if s.PathPrefix() != tc.want {
			t.Errorf("prefix %q: path prefix %q; want %q", tc.prefix, s.PathPrefix(), tc.want)
		}
		s.Close()
	}
	s := newStorageOn(t, b, Config{})
	if k, err := s.EtcdKey("/pods/ns/a", false); err != nil || k != "/registry/pods/ns/a" {
		t.Errorf("EtcdKey = %q, %v", k, err)
	}
}

// TestTTLExpiryManualTick drives lease expiry with a fake clock: nothing happens until the clock
// passes the lease's TTL (raised to the store's 2 s minimum), then the watch sees DELETED.
func TestTTLExpiryManualTick(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	b := storagebackend.StartInProcess(t, store.Options{Clock: clk, ManualTick: true})
	s := newStorageOn(t, b, Config{Clock: clk})
	out := &unstructured.Unstructured{}
	if err := s.Create(context.Background(), "/pods/ns/a", pod("ns", "a", nil), out, 1); err != nil {
		t.Fatal(err)
	}
	w := mustWatch(t, s, "/pods/ns/a", storage.ListOptions{ResourceVersion: out.GetResourceVersion(), Predicate: storage.Everything})
	clk.Step(time.Second)
	b.Store.Tick()
	if err := s.Get(context.Background(), "/pods/ns/a", storage.GetOptions{}, &unstructured.Unstructured{}); err != nil {
		t.Fatalf("object gone before its TTL: %v", err)
	}
	var ev apiwatch.Event
	deadline := time.Now().Add(testutil.WaitTimeout)
	for ev.Type == "" {
		clk.Step(500 * time.Millisecond)
		b.Store.Tick()
		select {
		case ev = <-w.ResultChan():
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no DELETED event")
		}
	}
	u := ev.Object.(*unstructured.Unstructured)
	if ev.Type != apiwatch.Deleted || u.GetName() != "a" || u.GetResourceVersion() != "3" {
		t.Fatalf("got %s", eventString(ev))
	}
	if err := s.Get(context.Background(), "/pods/ns/a", storage.GetOptions{}, &unstructured.Unstructured{}); !storage.IsNotFound(err) {
		t.Fatalf("after expiry: %v", err)
	}
}

func TestLeaseReuse(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	b := storagebackend.StartInProcess(t, store.Options{})
	lm := newLeaseManager(b.Client, clk, 60, 0.05, 3)
	ctx := context.Background()
	first, err := lm.GetLease(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	ttl, err := b.Client.TimeToLive(ctx, first)
	if err != nil || ttl.GrantedTTL != 630 {
		t.Fatalf("granted %d, %v; want 600 + 5%%", ttl.GrantedTTL, err)
	}
	clk.Step(10 * time.Second)
	if id, _ := lm.GetLease(ctx, 600); id != first {
		t.Fatal("lease within the reuse window not reused")
	}
	if id, _ := lm.GetLease(ctx, 600); id != first {
		t.Fatal("third object not attached to the lease")
	}
	fourth, _ := lm.GetLease(ctx, 600)
	if fourth == first {
		t.Fatal("lease reused past its object count")
	}
	clk.Step(31 * time.Second)
	if id, _ := lm.GetLease(ctx, 600); id == fourth {
		t.Fatal("lease reused past its reuse window")
	}
}

// TestPeriodicProgressNotify: with ProgressNotify the store's periodic progress notifications become
// BOOKMARKs with an empty object; they never precede an event they should follow.
func TestPeriodicProgressNotify(t *testing.T) {
	b := storagebackend.StartInProcess(t, store.Options{ProgressNotifyInterval: store.MinProgressNotifyInterval})
	s := newStorageOn(t, b, Config{})
	out := mustCreate(t, s, pod("ns", "a", nil))
	mustCreate(t, s, pod("other", "b", nil))
	w := mustWatch(t, s, "/pods/ns/a", storage.ListOptions{ResourceVersion: out.GetResourceVersion(), Predicate: storage.Everything, ProgressNotify: true})
	var last uint64
	for range 3 {
		ev := next(t, w)
		u := ev.Object.(*unstructured.Unstructured)
		rv, _ := storage.APIObjectVersioner{}.ObjectResourceVersion(u)
		if ev.Type != apiwatch.Bookmark || rv < 3 || rv < last || len(u.Object) != 1 {
			t.Fatalf("got %s %v", ev.Type, u.Object)
		}
		last = rv
	}
}

func TestGetListStreamsLikePages(t *testing.T) {
	b := storagebackend.StartInProcess(t, store.Options{})
	paged := newStorageOn(t, b, Config{Features: Features{DisableEtcdRangeStream: true}})
	for i := range 35 {
		l := map[string]string{"even": fmt.Sprint(i%2 == 0)}
		mustCreate(t, paged, pod(fmt.Sprintf("ns%d", i%3), fmt.Sprintf("p%02d", i), l))
	}
	kv, streams := NewRangeStreamKV(b.Client, nil)
	streamed := newStorageOn(t, b, Config{})
	streamed.client = clientWithKV(t, b.Client, kv)
	even := storage.Predicate{Label: labels.SelectorFromSet(labels.Set{"even": "true"})}
	cases := []storage.ListOptions{
		{Recursive: true, Predicate: storage.Everything},
		{Recursive: true, Predicate: storage.Predicate{Limit: 7}},
		{Recursive: true, Predicate: storage.Predicate{Limit: 100}},
		{Recursive: true, Predicate: even},
		{Recursive: true, Predicate: storage.Predicate{Label: even.Label, Limit: 4}},
		{Recursive: true, Predicate: storage.Everything, ResourceVersion: "10", ResourceVersionMatch: metav1.ResourceVersionMatchExact},
		{Recursive: true, Predicate: storage.Predicate{Limit: 5}, ResourceVersion: "20"},
	}
	for i, opts := range cases {
		for page := 0; ; page++ {
			var a, c unstructured.UnstructuredList
			errA := paged.GetList(context.Background(), "/pods/", opts, &a)
			errC := streamed.GetList(context.Background(), "/pods/", opts, &c)
			if errA != nil || errC != nil {
				t.Fatalf("case %d page %d: %v / %v", i, page, errA, errC)
			}
			if !reflect.DeepEqual(a.Object, c.Object) || !reflect.DeepEqual(a.Items, c.Items) {
				t.Fatalf("case %d page %d: paged %v %d items, streamed %v %d items", i, page, a.Object, len(a.Items), c.Object, len(c.Items))
			}
			if a.GetContinue() == "" {
				break
			}
			opts.Predicate.Continue = a.GetContinue()
			opts.ResourceVersion = ""
		}
	}
	if streams.Load() == 0 {
		t.Fatal("nothing streamed")
	}
}

func TestGetListAggregatesCorruptObjects(t *testing.T) {
	b := storagebackend.StartInProcess(t, store.Options{})
	good := newStorageOn(t, b, Config{GroupResource: grPods})
	for i := range 3 {
		mustCreate(t, good, pod("ns", fmt.Sprintf("p%d", i), nil))
	}
	if _, err := b.Client.Put(context.Background(), "/registry/pods/ns/p1", "not json"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Client.Put(context.Background(), "/registry/pods/ns/p2", "{}"); err != nil {
		t.Fatal(err)
	}
	err := good.GetList(context.Background(), "/pods/", storage.ListOptions{Recursive: true, Predicate: storage.Everything}, &unstructured.UnstructuredList{})
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("got %v", err)
	}
	st := se.ErrStatus
	if st.Code != 500 || st.Reason != metav1.StatusReasonStoreReadError || len(st.Details.Causes) != 2 ||
		st.Details.Causes[0].Field != "/registry/pods/ns/p1" || !strings.HasSuffix(st.Message, "(and 1 more)") ||
		!strings.HasPrefix(st.Message, "failed to read one or more pods from the storage: StorageError: corrupt object") {
		t.Fatalf("status %+v", st)
	}
	// With the gate off the first bad item aborts the list with its own error.
	off := newStorageOn(t, b, Config{Features: Features{DisableUnsafeMalformedObjectDeletion: true}})
	err = off.GetList(context.Background(), "/pods/", storage.ListOptions{Recursive: true, Predicate: storage.Everything}, &unstructured.UnstructuredList{})
	if err == nil || errors.As(err, &se) || storage.IsCorruptObject(err) {
		t.Fatalf("gate off: %v", err)
	}
	// Get of a corrupt object: CorruptObj with the gate on, the decode error with it off.
	if err := good.Get(context.Background(), "/pods/ns/p1", storage.GetOptions{}, &unstructured.Unstructured{}); !storage.IsCorruptObject(err) || !errors.Is(err, storage.ErrCorruptObj) {
		t.Fatalf("get: %v", err)
	}
	if err := off.Get(context.Background(), "/pods/ns/p1", storage.GetOptions{}, &unstructured.Unstructured{}); err == nil || storage.IsCorruptObject(err) {
		t.Fatalf("get, gate off: %v", err)
	}
	// Unsafe deletion is refused with the gate off: the option is ignored and the decode fails.
	if err := off.Delete(context.Background(), "/pods/ns/p1", &unstructured.Unstructured{}, nil, nil, nil, storage.DeleteOptions{ExpectTransformOrDecodeError: true}); err == nil {
		t.Fatal("unsafe delete with the gate off succeeded")
	}
	if err := good.Delete(context.Background(), "/pods/ns/p1", &unstructured.Unstructured{}, nil, nil, nil, storage.DeleteOptions{ExpectTransformOrDecodeError: true}); err != nil {
		t.Fatalf("unsafe delete: %v", err)
	}
}

func TestCompactRevision(t *testing.T) {
	s, _ := newTestStorage(t, Config{})
	if s.CompactRevision() != 0 {
		t.Fatal("compacted before any compaction")
	}
	for i := range 3 {
		mustCreate(t, s, pod("ns", fmt.Sprint(i), nil))
	}
	if err := s.Compact(context.Background(), 3); err != nil || s.CompactRevision() != 3 {
		t.Fatalf("compact: %v, revision %d", err, s.CompactRevision())
	}
	if err := s.Compact(context.Background(), 2); err == nil || s.CompactRevision() != 3 {
		t.Fatalf("compacting backwards: %v, revision %d", err, s.CompactRevision())
	}
}

func TestGetCurrentResourceVersionFailure(t *testing.T) {
	b := storagebackend.StartInProcess(t, store.Options{})
	s := newStorageOn(t, b, Config{})
	rv, err := s.GetCurrentResourceVersion(context.Background())
	if err != nil || rv != 1 {
		t.Fatalf("fresh store: %d, %v", rv, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.GetCurrentResourceVersion(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestBadArgumentsAreErrors(t *testing.T) {
	s, _ := newTestStorage(t, Config{})
	ctx := context.Background()
	mustCreate(t, s, pod("ns", "a", nil))
	for name, err := range map[string]error{
		"create nil":            s.Create(ctx, "/pods/ns/b", nil, nil, 0),
		"update nil":            s.Update(ctx, "/pods/ns/a", nil, &unstructured.Unstructured{}),
		"guaranteed update nil": s.GuaranteedUpdate(ctx, "/pods/ns/a", &unstructured.Unstructured{}, false, nil, nil, nil),
		"update into nil":       s.GuaranteedUpdate(ctx, "/pods/ns/a", nil, false, nil, storage.SimpleUpdate(func(o runtime.Object) (runtime.Object, error) { return o, nil }), nil),
		"update returns nil":    s.GuaranteedUpdate(ctx, "/pods/ns/a", &unstructured.Unstructured{}, false, nil, storage.SimpleUpdate(func(runtime.Object) (runtime.Object, error) { return nil, nil }), nil),
		"get into nil":          s.Get(ctx, "/pods/ns/a", storage.GetOptions{}, nil),
		"get missing into nil":  s.Get(ctx, "/pods/ns/zz", storage.GetOptions{IgnoreNotFound: true}, nil),
		"delete into nil":       s.Delete(ctx, "/pods/ns/a", nil, nil, nil, nil, storage.DeleteOptions{}),
		"list into non-list":    s.GetList(ctx, "/pods/", storage.ListOptions{Recursive: true}, &unstructured.Unstructured{}),
		"list into nil":         s.GetList(ctx, "/pods/", storage.ListOptions{Recursive: true}, nil),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// Nothing was written by the failed calls.
	list := &unstructured.UnstructuredList{}
	if err := s.GetList(ctx, "/pods/", storage.ListOptions{Recursive: true, Predicate: storage.Everything}, list); err != nil || len(list.Items) != 1 || list.Items[0].GetResourceVersion() != "2" {
		t.Fatalf("after bad calls: %v %v", list.Items, err)
	}
}
