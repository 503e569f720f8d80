package cache

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
)

// TestSnapshotter ports store_btree_test.go TestStoreSnapshotter: the snapshot of the newest
// revision at or below the one asked for; none below the first; removeLess keeps its bound; reset
// drops all.
func TestSnapshotter(t *testing.T) {
	s := newSnapshotter()
	snaps := map[uint64]*storeSnapshot{}
	for _, rv := range []uint64{10, 20, 30, 40} {
		snaps[rv] = &storeSnapshot{}
		s.add(rv, snaps[rv])
	}
	if s.len() != 4 {
		t.Fatalf("len %d", s.len())
	}
	check := func(rv uint64, want uint64) {
		t.Helper()
		got, ok := s.getLessOrEqual(rv)
		switch {
		case want == 0 && ok:
			t.Errorf("snapshot found for %d", rv)
		case want != 0 && (!ok || got != snaps[want]):
			t.Errorf("snapshot for %d: found %t, want the one of %d", rv, ok, want)
		}
	}
	check(9, 0)
	check(10, 10)
	check(11, 10)
	check(22, 20)
	check(100, 40)
	s.removeLess(30)
	if s.len() != 2 {
		t.Fatalf("len after removeLess(30): %d", s.len())
	}
	check(10, 0)
	check(20, 0)
	check(30, 30)
	s.reset()
	if s.len() != 0 {
		t.Fatalf("len after reset: %d", s.len())
	}
	check(30, 0)
	check(40, 0)
}

// newTestWatchCache is a watch cache on its own (no Cacher, no reflector) for the unit tests of its
// snapshots, over pods keyed /pods/<ns>/<name>.
func newTestWatchCache(t *testing.T) *watchCache {
	t.Helper()
	return newTestWatchCacheWith(t, true)
}

// newTestWatchCacheWith is newTestWatchCache with or without snapshots (ListFromCacheSnapshot).
func newTestWatchCacheWith(t *testing.T, snapshotting bool) *watchCache {
	t.Helper()
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	stop := make(chan struct{})
	w := newWatchCache(func(obj runtime.Object) (string, error) { return storage.NamespaceKeyFunc("/pods/", obj) },
		storagetest.PodAttrs, storage.APIObjectVersioner{}, clk, DefaultEventFreshDuration, nil,
		newProgressRequester(func(context.Context) error { return nil }, clk, testutil.DiscardLogger()),
		func(context.Context) (uint64, error) { return 0, nil }, stop, snapshotting)
	t.Cleanup(func() {
		close(stop)
		w.helpers.closeAndWait()
	})
	return w
}

func podAt(ns, name string, rv uint64, mods ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	p := storagetest.Pod(ns, name, mods...)
	p.SetResourceVersion(strconv.FormatUint(rv, 10))
	return p
}

// TestWatchCacheSnapshots ports watch_cache_storage_test.go TestWatchCacheStorageSnapshots and
// TestWatchCacheStorageMatchExactResourceVersionFallback: every event leaves a snapshot of the state
// after it, the relist one of its state (after dropping all others); a list at a revision is answered
// from the newest snapshot at or below it; a revision below every snapshot, or below the storage's
// compaction once the compactor has dropped it, is 410.
func TestWatchCacheSnapshots(t *testing.T) {
	w := newTestWatchCache(t)
	listAt := func(rv uint64) (string, error) {
		t.Helper()
		snap, err := w.exactSnapshot(rv)
		if err != nil {
			return "", err
		}
		var s []string
		for _, e := range snap.listPrefix("/pods/", "") {
			s = append(s, describeObject(e.Object.(*unstructured.Unstructured)))
		}
		return strings.Join(s, "; "), nil
	}
	expect := func(rv uint64, want string) {
		t.Helper()
		got, err := listAt(rv)
		if err != nil || got != want {
			t.Errorf("list at %d: %q %v, want %q", rv, got, err, want)
		}
	}
	expectExpired := func(rv uint64) {
		t.Helper()
		if _, err := listAt(rv); !apierrors.IsResourceExpired(err) || err.Error() != fmt.Sprintf("too old resource version: %d", rv) {
			t.Errorf("list at %d: %v, want 410 too old resource version", rv, err)
		}
	}
	expectExpired(100)
	if err := w.Add(podAt("ns", "foo", 100)); err != nil {
		t.Fatal(err)
	}
	if err := w.Update(podAt("ns", "foo", 200, storagetest.Labels("v=200"))); err != nil {
		t.Fatal(err)
	}
	if err := w.Delete(podAt("ns", "foo", 300, storagetest.Labels("v=200"))); err != nil {
		t.Fatal(err)
	}
	expectExpired(99)
	expect(100, "ns/foo rv=100")
	expect(150, "ns/foo rv=100")
	w.compact(200)
	expectExpired(100)
	expectExpired(199)
	expect(200, "ns/foo rv=200 labels=v=200")
	expect(300, "")
	if err := w.Add(podAt("ns", "foo", 400)); err != nil {
		t.Fatal(err)
	}
	expect(400, "ns/foo rv=400")
	// As a capacity downsize compacts the snapshots below the oldest event kept.
	w.compact(500)
	expectExpired(499)
	if err := w.Update(podAt("ns", "foo", 500, storagetest.Labels("v=500"))); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(podAt("ns", "bar", 600)); err != nil {
		t.Fatal(err)
	}
	expect(500, "ns/foo rv=500 labels=v=500")
	expect(600, "ns/bar rv=600; ns/foo rv=500 labels=v=500")
	if err := w.Replace([]runtime.Object{podAt("ns", "foo", 600)}, "700"); err != nil {
		t.Fatal(err)
	}
	expectExpired(500)
	expectExpired(600)
	expect(700, "ns/foo rv=600")
	// A list at a revision the cache has is answered at that revision; a continue key starts it after
	// the last key of the previous page.
	if err := w.Add(podAt("ns", "bar", 800)); err != nil {
		t.Fatal(err)
	}
	elems, rv, err := w.waitAndListExactRV("/pods/", "/pods/ns/bar\x00", 750)
	if err != nil || rv != 750 || len(elems) != 1 || elems[0].Key != "/pods/ns/foo" {
		t.Errorf("list at 750 after ns/bar: %v at %d: %v", err, rv, elems)
	}
}

// TestShouldDelegateList ports cacher_whitebox_test.go TestShouldDelegateList with consistent reads
// supported: which lists go to the storage, for a cache at 100 whose snapshots start at 100 (or at
// 80), a revision 80 before them and 120 beyond them, and for one without snapshots
// (ListFromCacheSnapshot off: every exact list and continue token goes to the storage); every
// combination of options that passes validation is covered.
func TestShouldDelegateList(t *testing.T) {
	type opts struct {
		Recursive            bool
		ResourceVersion      string
		ResourceVersionMatch metav1.ResourceVersionMatch
		Limit                int64
		Continue             string
	}
	toInternal := func(o opts) *internalversion.ListOptions {
		return &internalversion.ListOptions{ResourceVersion: o.ResourceVersion, ResourceVersionMatch: o.ResourceVersionMatch, Limit: o.Limit, Continue: o.Continue}
	}
	toStorage := func(o opts) storage.ListOptions {
		return storage.ListOptions{Recursive: o.Recursive, ResourceVersion: o.ResourceVersion, ResourceVersionMatch: o.ResourceVersionMatch,
			Predicate: storage.Predicate{Continue: o.Continue, Limit: o.Limit}}
	}
	const oldRV, cacheRV, etcdRV = "80", "100", "120"
	token := func(rv int64) string {
		tok, err := storage.EncodeContinue("/pods/foo", "/pods/", rv)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	onOld, onCache, onEtcd, onNegative := token(80), token(100), token(120), token(-1)

	cases := map[opts]bool{}
	cases[opts{}] = true
	cases[opts{Limit: 100}] = true
	cases[opts{ResourceVersion: "0"}] = false
	cases[opts{ResourceVersion: "0", Limit: 100}] = false
	cases[opts{ResourceVersion: "0", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}] = false
	cases[opts{ResourceVersion: "0", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, Limit: 100}] = false
	for _, tok := range []string{onOld, onCache, onEtcd, onNegative} {
		cases[opts{Continue: tok}] = true
		cases[opts{Limit: 100, Continue: tok}] = true
		cases[opts{ResourceVersion: "0", Continue: tok}] = true
		cases[opts{ResourceVersion: "0", Limit: 100, Continue: tok}] = true
	}
	for _, rv := range []string{oldRV, cacheRV, etcdRV} {
		cases[opts{ResourceVersion: rv}] = false
		cases[opts{ResourceVersion: rv, Limit: 100}] = true
		cases[opts{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact}] = true
		cases[opts{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Limit: 100}] = true
		cases[opts{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}] = false
		cases[opts{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, Limit: 100}] = false
	}
	for o, bypass := range cases {
		o.Recursive = true
		cases[o] = bypass
	}
	// A continue token on a non-recursive list passes validation with a resourceVersion.
	for _, rv := range []string{oldRV, etcdRV} {
		for _, tok := range []string{onOld, onCache, onEtcd, onNegative} {
			cases[opts{ResourceVersion: rv, Continue: tok}] = true
			cases[opts{ResourceVersion: rv, Continue: tok, Limit: 100}] = true
		}
	}
	valid := func(o opts) bool {
		return len(validation.ValidateListOptions(toInternal(o), false)) == 0 &&
			validateListOptions("/pods/", storage.APIObjectVersioner{}, toStorage(o)) == nil
	}
	for _, rv := range []string{"", "0", oldRV, etcdRV} {
		for _, match := range []metav1.ResourceVersionMatch{"", metav1.ResourceVersionMatchExact, metav1.ResourceVersionMatchNotOlderThan} {
			for _, tok := range []string{"", onOld, onCache, onEtcd, onNegative} {
				for _, limit := range []int64{0, 100} {
					for _, recursive := range []bool{true, false} {
						o := opts{Recursive: recursive, ResourceVersion: rv, ResourceVersionMatch: match, Limit: limit, Continue: tok}
						if _, found := cases[o]; valid(o) && !found {
							t.Errorf("not covered, but passes validation: %+v", o)
						}
					}
				}
			}
		}
	}
	for o := range cases {
		if !valid(o) {
			t.Errorf("does not pass validation: %+v", o)
		}
	}

	// The overrides of ListFromCacheSnapshot=true with consistent reads from the cache.
	consistentFromCache := map[opts]bool{}
	for _, recursive := range []bool{true, false} {
		consistentFromCache[opts{Recursive: recursive}] = false
		consistentFromCache[opts{Limit: 100, Recursive: recursive}] = false
	}
	onCacheRV := map[opts]bool{
		{Recursive: true, ResourceVersion: cacheRV, Limit: 100}:                                                         false,
		{Recursive: true, ResourceVersion: cacheRV, ResourceVersionMatch: metav1.ResourceVersionMatchExact}:             false,
		{Recursive: true, ResourceVersion: cacheRV, Limit: 100, ResourceVersionMatch: metav1.ResourceVersionMatchExact}: false,
		{Recursive: true, ResourceVersion: "0", Limit: 100, Continue: onCache}:                                          false,
		{Recursive: true, ResourceVersion: "0", Continue: onCache}:                                                      false,
		{Recursive: true, Limit: 100, Continue: onCache}:                                                                false,
		{Recursive: true, Continue: onCache}:                                                                            false,
	}
	consistentOrFuture := map[opts]bool{
		{Recursive: true, Continue: onNegative}:                                                                        false,
		{Recursive: true, Limit: 100, Continue: onNegative}:                                                            false,
		{Recursive: true, ResourceVersion: "0", Continue: onNegative}:                                                  false,
		{Recursive: true, ResourceVersion: "0", Limit: 100, Continue: onNegative}:                                      false,
		{Recursive: true, ResourceVersion: etcdRV, Limit: 100}:                                                         false,
		{Recursive: true, ResourceVersion: etcdRV, ResourceVersionMatch: metav1.ResourceVersionMatchExact}:             false,
		{Recursive: true, ResourceVersion: etcdRV, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Limit: 100}: false,
		{Recursive: true, Continue: onEtcd}:                                                                            false,
		{Recursive: true, ResourceVersion: "0", Continue: onEtcd}:                                                      false,
		{Recursive: true, Continue: onEtcd, Limit: 100}:                                                                false,
		{Recursive: true, ResourceVersion: "0", Continue: onEtcd, Limit: 100}:                                          false,
	}
	snapshotAvailable := map[opts]bool{
		{Recursive: true, Continue: onOld}:                                                                            false,
		{Recursive: true, Limit: 100, Continue: onOld}:                                                                false,
		{Recursive: true, ResourceVersion: "0", Continue: onOld}:                                                      false,
		{Recursive: true, ResourceVersion: "0", Limit: 100, Continue: onOld}:                                          false,
		{Recursive: true, ResourceVersion: oldRV, Limit: 100}:                                                         false,
		{Recursive: true, ResourceVersion: oldRV, ResourceVersionMatch: metav1.ResourceVersionMatchExact}:             false,
		{Recursive: true, ResourceVersion: oldRV, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Limit: 100}: false,
	}
	for _, run := range []struct {
		name                    string
		snapshotting, available bool
	}{
		{"ListFromCacheSnapshot=false", false, false},
		{"ListFromCacheSnapshot=true/SnapshotAvailable=false", true, false},
		{"ListFromCacheSnapshot=true/SnapshotAvailable=true", true, true},
	} {
		snapshotting, available := run.snapshotting, run.available
		t.Run(run.name, func(t *testing.T) {
			w := newTestWatchCacheWith(t, snapshotting)
			// As upstream's test cacher: listed at 100, then the pod's events.
			if err := w.Replace(nil, cacheRV); err != nil {
				t.Fatal(err)
			}
			if available {
				if err := w.Add(podAt("ns", "pod1", 80)); err != nil {
					t.Fatal(err)
				}
				if err := w.Update(podAt("ns", "pod1", 100)); err != nil {
					t.Fatal(err)
				}
			} else if err := w.Add(podAt("ns", "pod1", 100)); err != nil {
				t.Fatal(err)
			}
			c := &Cacher{watchCache: w, resourcePrefix: "/pods/", versioner: storage.APIObjectVersioner{}}
			// Without snapshots only consistent reads come from the cache (upstream's
			// ListFromCacheSnapshot=false run: testCases with consistentListFromCacheOverrides).
			overrides := []map[opts]bool{consistentFromCache}
			if snapshotting {
				overrides = append(overrides, onCacheRV, consistentOrFuture)
			}
			if available {
				overrides = append(overrides, snapshotAvailable)
			}
			for o, want := range cases {
				for _, ov := range overrides {
					if b, ok := ov[o]; ok {
						want = b
					}
				}
				got, consistent, err := c.shouldDelegateList(toStorage(o))
				if err != nil {
					t.Fatalf("%+v: %v", o, err)
				}
				if got != want {
					t.Errorf("%+v: delegated %t, want %t", o, got, want)
				}
				// A consistent read: no resourceVersion, or a recursive continue of one (negative).
				wantConsistent := false
				if o.ResourceVersionMatch == "" {
					switch {
					case o.Continue != "":
						wantConsistent = o.Recursive && o.Continue == onNegative && snapshotting
					case o.Limit > 0 && o.ResourceVersion != "" && o.ResourceVersion != "0":
					default:
						wantConsistent = o.ResourceVersion == ""
					}
				}
				if consistent != wantConsistent {
					t.Errorf("%+v: consistent read %t, want %t", o, consistent, wantConsistent)
				}
			}
		})
	}
}
