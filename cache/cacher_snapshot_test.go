package cache

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
)

// The lists upstream's Cacher answers from its snapshots (ListFromCacheSnapshot, beta and on by
// default in k8s.io/apiserver v0.37): Exact lists, legacy exact lists (a resourceVersion with a limit)
// and continue tokens, while the revision is still retained (cacher.go ShouldDelegateExactRV,
// ShouldDelegateContinue; watch_cache.go waitAndListExactRV).

// describeList renders a list for comparison: its resourceVersion, items, remaining count and continue
// token (decoded: start key and resourceVersion).
func describeList(t *testing.T, l *unstructured.UnstructuredList) string {
	t.Helper()
	s := fmt.Sprintf("rv=%s items=[", l.GetResourceVersion())
	for i, u := range l.Items {
		if i > 0 {
			s += "; "
		}
		s += describeObject(&u)
	}
	s += "]"
	if n := l.GetRemainingItemCount(); n != nil {
		s += fmt.Sprintf(" remaining=%d", *n)
	}
	if c := l.GetContinue(); c != "" {
		s += " continue=" + decodeToken(t, c)
	}
	return s
}

// decodeToken is a continue token's content.
func decodeToken(t *testing.T, token string) string {
	t.Helper()
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		t.Fatalf("continue token %q: %v", token, err)
	}
	var c struct {
		RV    int64  `json:"rv"`
		Start string `json:"start"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("continue token %s: %v", data, err)
	}
	return fmt.Sprintf("%q@%d", c.Start, c.RV)
}

// storageList lists straight from the etcd3 storage under the Cacher.
func (e *env) storageList(key string, opts storage.ListOptions) (*unstructured.UnstructuredList, error) {
	l := &unstructured.UnstructuredList{}
	err := e.storage.Store.GetList(e.ctx, key, opts, l)
	return l, err
}

// TestListExactFromCacheSnapshots: Exact lists, legacy exact lists (resourceVersion and limit) and
// the pages of a continue token are answered from the cache's snapshots at every revision the cache
// still holds, with what etcd answers (the same items, the requested resourceVersion, the same
// remaining count) and without reading the storage. Failure mode: they read the storage, as without
// snapshots.
func TestListExactFromCacheSnapshots(t *testing.T) {
	e := newEnv(t)
	var revs []uint64
	revs = append(revs, rvOf(t, e.create(storagetest.Pod("ns", "a"))))
	revs = append(revs, rvOf(t, e.create(storagetest.Pod("ns", "b", storagetest.Labels("x=1")))))
	revs = append(revs, e.touch())
	revs = append(revs, rvOf(t, e.put(storagetest.Pod("ns", "a", storagetest.Labels("x=1")))))
	revs = append(revs, rvOf(t, e.create(storagetest.Pod("ns", "c"))))
	revs = append(revs, rvOf(t, e.remove(storagetest.Pod("ns", "b"))))
	revs = append(revs, rvOf(t, e.create(storagetest.Pod("other", "d"))))
	e.syncCache()
	limited := func(p storage.Predicate, limit int64) storage.Predicate {
		p.Limit = limit
		return p
	}
	for _, rev := range revs {
		rv := strconv.FormatUint(rev, 10)
		for _, tc := range []struct {
			name string
			key  string
			opts storage.ListOptions
		}{
			{"exact", "/pods/", storage.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Predicate: storage.Everything, Recursive: true}},
			{"exact in a namespace", "/pods/ns", storage.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Predicate: storage.Everything, Recursive: true}},
			{"exact filtered", "/pods/", storage.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Predicate: storagetest.PodPredicate("x=1", ""), Recursive: true}},
			{"exact with limit", "/pods/", storage.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Predicate: limited(storage.Everything, 1), Recursive: true}},
			{"legacy exact", "/pods/", storage.ListOptions{ResourceVersion: rv, Predicate: limited(storage.Everything, 2), Recursive: true}},
			{"legacy exact filtered", "/pods/", storage.ListOptions{ResourceVersion: rv, Predicate: limited(storagetest.PodPredicate("x=1", ""), 1), Recursive: true}},
		} {
			delegated := e.storage.delegatedLists.Load()
			got, err := e.list(tc.key, tc.opts)
			if err != nil {
				t.Fatalf("%s at %d: %v", tc.name, rev, err)
			}
			if e.storage.delegatedLists.Load() != delegated {
				t.Errorf("%s at %d was read from the storage, not from the cache's snapshot", tc.name, rev)
			}
			want, err := e.storageList(tc.key, tc.opts)
			if err != nil {
				t.Fatalf("%s at %d from etcd: %v", tc.name, rev, err)
			}
			// The cache's token names the start key relative to the caller's key, etcd's relative
			// to its own prefix; both resume at the same object.
			if g, w := describeList(t, got), describeList(t, want); stripTokens(g) != stripTokens(w) {
				t.Errorf("%s at %d:\n cache: %s\n  etcd: %s", tc.name, rev, g, w)
			}
		}
	}

	// The pages of a continue token from an old revision come from that revision's snapshot.
	first := strconv.FormatUint(revs[3], 10)
	p := limited(storage.Everything, 1)
	var pages []string
	l, err := e.list("/pods/", storage.ListOptions{ResourceVersion: first, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Predicate: p, Recursive: true})
	for {
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, describeList(t, l))
		if l.GetContinue() == "" {
			break
		}
		p.Continue = l.GetContinue()
		delegated := e.storage.delegatedLists.Load()
		l, err = e.list("/pods/", storage.ListOptions{Predicate: p, Recursive: true})
		if e.storage.delegatedLists.Load() != delegated {
			t.Errorf("the page after %s was read from the storage", pages[len(pages)-1])
		}
	}
	want := []string{
		fmt.Sprintf(`rv=%d items=[ns/a rv=%d labels=x=1] remaining=1 continue="ns/a\x00"@%d`, revs[3], revs[3], revs[3]),
		fmt.Sprintf(`rv=%d items=[ns/b rv=%d labels=x=1]`, revs[3], revs[1]),
	}
	if fmt.Sprint(pages) != fmt.Sprint(want) {
		t.Errorf("pages at %d:\n got: %q\nwant: %q", revs[3], pages, want)
	}
}

// stripTokens drops the continue token's start key, which is relative to a prefix.
func stripTokens(s string) string {
	for i := 0; i+len(" continue=") <= len(s); i++ {
		if s[i:i+len(" continue=")] == " continue=" {
			rest := s[i+len(" continue="):]
			for j := len(rest) - 1; j >= 0; j-- {
				if rest[j] == '@' {
					return s[:i] + " continue=@" + rest[j+1:]
				}
			}
		}
	}
	return s
}

// TestListContinueTokenRelativeToCallerKey: a list from the cache writes its continue token relative
// to the key it was given (cacher.go GetList passes the caller's key to PrepareContinueToken), so a
// list of /pods/ns resumes at "/a\x00" where etcd writes "a\x00"; either decodes to the same key.
func TestListContinueTokenRelativeToCallerKey(t *testing.T) {
	e := newEnv(t)
	e.create(storagetest.Pod("ns", "a"))
	e.create(storagetest.Pod("ns", "b"))
	rv := e.syncCache()
	p := storage.Everything
	p.Limit = 1
	for _, tc := range []struct{ key, want string }{
		{"/pods/ns", fmt.Sprintf(`"/a\x00"@%d`, rv)},
		{"/pods/ns/", fmt.Sprintf(`"a\x00"@%d`, rv)},
		{"/pods", fmt.Sprintf(`"/ns/a\x00"@%d`, rv)},
	} {
		l, err := e.list(tc.key, storage.ListOptions{ResourceVersion: strconv.FormatUint(rv, 10), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, Predicate: p, Recursive: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeToken(t, l.GetContinue()); got != tc.want {
			t.Errorf("list of %s: token %s, want %s", tc.key, got, tc.want)
		}
		q := p
		q.Continue = l.GetContinue()
		next, err := e.list(tc.key, storage.ListOptions{Predicate: q, Recursive: true})
		if err != nil || fmt.Sprint(names(next)) != "[ns/b]" {
			t.Errorf("page after the token of %s: %v %v", tc.key, err, names(next))
		}
	}
}

// TestListExactFutureResourceVersion: an Exact list at a revision the cache has not reached waits for
// it (requesting progress), then is answered from the cache; at a revision beyond etcd's, after 3 s it
// is 504 "Too large resource version" with Retry-After 1 and the cache's revision, without reading the
// storage (watch_cache.go waitAndGetExactSnapshot, waitUntilFreshLocked; the delegator returns the
// error of a non-consistent read as it is).
func TestListExactFutureResourceVersion(t *testing.T) {
	e := newEnv(t, withFakeClock)
	e.create(storagetest.Pod("ns", "a"))
	cacheRV := e.syncCache()
	e.storage.gate.pause()
	b := e.create(storagetest.Pod("ns", "b"))
	type result struct {
		l   *unstructured.UnstructuredList
		err error
	}
	delegated := e.storage.delegatedLists.Load()
	exact := func(rv uint64) chan result {
		done := make(chan result, 1)
		go func() {
			l, err := e.list("/pods/", storage.ListOptions{ResourceVersion: strconv.FormatUint(rv, 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact,
				Predicate: storage.Everything, Recursive: true})
			done <- result{l, err}
		}()
		return done
	}
	done := exact(rvOf(t, b))
	e.waitForProgressWaiter(e.storage.progressRequests.Load())
	e.storage.gate.resume()
	res := <-done
	if res.err != nil || fmt.Sprint(names(res.l)) != "[ns/a ns/b]" || res.l.GetResourceVersion() != b.GetResourceVersion() {
		t.Fatalf("exact at %d once the cache caught up: %v %v at %s", rvOf(t, b), res.err, names(res.l), res.l.GetResourceVersion())
	}
	cacheRV = e.syncCache()
	future := cacheRV + 5
	done = exact(future)
	e.waitForProgressWaiter(e.storage.progressRequests.Load())
	e.clock.Step(blockTimeout)
	res = <-done
	var se *apierrors.StatusError
	if !storage.IsTooLargeResourceVersion(res.err) || !apierrors.IsTimeout(res.err) {
		t.Fatalf("exact at %d beyond etcd's revision: %v", future, res.err)
	}
	if !asStatus(res.err, &se) || se.ErrStatus.Details == nil || se.ErrStatus.Details.RetryAfterSeconds != 1 ||
		se.ErrStatus.Message != fmt.Sprintf("Timeout: Too large resource version: %d, current: %d", future, cacheRV) {
		t.Fatalf("exact at %d: %v (%+v)", future, res.err, se)
	}
	if e.storage.delegatedLists.Load() != delegated {
		t.Fatal("an exact list at a revision the cache had not reached read the storage")
	}
}

func asStatus(err error, se **apierrors.StatusError) bool {
	s, ok := err.(*apierrors.StatusError)
	*se = s
	return ok
}

// TestListFromSnapshotsNotReady: while the cache is not ready, a list it would answer from a snapshot
// is 429 "storage is (re)initializing" with Retry-After, except an unfiltered list with a limit, which
// reads the storage (delegator.go GetList, shouldDelegateListOnNotReadyCache; cacher.go GetList).
func TestListFromSnapshotsNotReady(t *testing.T) {
	e := newEnv(t, withListErrors(1), withoutWaitingForReady, withFakeClock)
	// The clock stands still: the relist a second later does not come.
	e.waitFor("the first list to fail", func() bool { return e.storage.listCalls.Load() >= 1 })
	if e.cacher.Ready() {
		t.Fatal("ready after a failed list")
	}
	a := e.create(storagetest.Pod("ns", "a"))
	rv := a.GetResourceVersion()
	filtered := storagetest.PodPredicate("", "metadata.name=a")
	filtered.Limit = 5
	token, err := storage.EncodeContinue("/pods/ns/a\x00", "/pods/", int64(rvOf(t, a)))
	if err != nil {
		t.Fatal(err)
	}
	withToken := filtered
	withToken.Continue = token
	for _, opts := range []storage.ListOptions{
		{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Predicate: storagetest.PodPredicate("", "metadata.name=a"), Recursive: true},
		{ResourceVersion: rv, Predicate: filtered, Recursive: true},
		{Predicate: withToken, Recursive: true},
	} {
		_, err := e.list("/pods/", opts)
		if !apierrors.IsTooManyRequests(err) || !strings.HasPrefix(err.Error(), "storage is (re)initializing") {
			t.Errorf("%+v: %v, want 429 storage is (re)initializing", opts, err)
		}
		if d, ok := apierrors.SuggestsClientDelay(err); !ok || d < 1 {
			t.Errorf("%+v: Retry-After %d %t", opts, d, ok)
		}
	}
	unfiltered := storage.Everything
	unfiltered.Limit = 5
	delegated := e.storage.delegatedLists.Load()
	l, err := e.list("/pods/", storage.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Predicate: unfiltered, Recursive: true})
	if err != nil || fmt.Sprint(names(l)) != "[ns/a]" || e.storage.delegatedLists.Load() != delegated+1 {
		t.Fatalf("unfiltered exact list with a limit: %v %v, delegated %d", err, names(l), e.storage.delegatedLists.Load()-delegated)
	}
}

// TestListExactAtCompactedRevision: the snapshots end where the cache's history ends and where the
// storage's compaction is (the cache's compactor reads the storage's CompactRevision every 15 s,
// compactor.go); an Exact list below them reads the storage, which answers 410 if etcd compacted it
// (RunTestCompactRevision). Until the compactor has seen a compaction, the cache still answers from
// its snapshot, as upstream's does.
func TestListExactAtCompactedRevision(t *testing.T) {
	e := newEnv(t, withFakeClock)
	a := e.create(storagetest.Pod("ns", "a"))
	b := e.put(storagetest.Pod("ns", "a", storagetest.Labels("x=1")))
	e.syncCache()
	exact := storage.ListOptions{ResourceVersion: a.GetResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchExact,
		Predicate: storage.Everything, Recursive: true}
	if err := e.storage.Store.Compact(e.ctx, int64(rvOf(t, b))); err != nil {
		t.Fatal(err)
	}
	delegated := e.storage.delegatedLists.Load()
	l, err := e.list("/pods/", exact)
	if err != nil || describeList(t, l) != fmt.Sprintf("rv=%s items=[ns/a rv=%s]", a.GetResourceVersion(), a.GetResourceVersion()) ||
		e.storage.delegatedLists.Load() != delegated {
		t.Fatalf("before the compactor saw the compaction: %v %s (delegated %d)", err, describeList(t, l), e.storage.delegatedLists.Load()-delegated)
	}
	e.clock.Step(compactorPollPeriod)
	e.waitFor("the compactor to see the compaction", func() bool { return e.cacher.CompactRevision() == int64(rvOf(t, b)) })
	_, err = e.list("/pods/", exact)
	if !apierrors.IsResourceExpired(err) || err.Error() != "The resourceVersion for the provided list is too old." || e.storage.delegatedLists.Load() != delegated+1 {
		t.Fatalf("after the compactor saw the compaction: %v (delegated %d)", err, e.storage.delegatedLists.Load()-delegated)
	}
	l, err = e.list("/pods/", storage.ListOptions{ResourceVersion: b.GetResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchExact,
		Predicate: storage.Everything, Recursive: true})
	if err != nil || l.GetResourceVersion() != b.GetResourceVersion() || e.storage.delegatedLists.Load() != delegated+1 {
		t.Fatalf("exact at the compacted revision itself: %v %s", err, describeList(t, l))
	}
}

// TestListExactAtEvictedRevision: the snapshots end where the cache's history begins: once the history
// evicts its oldest event (full, and all of it older than its window), the snapshot of that revision
// goes with it (watch_cache.go processEvent, CompactSnapshotsLocked) and an Exact list at it reads the
// storage, while one at the next event's revision is still answered from the cache.
func TestListExactAtEvictedRevision(t *testing.T) {
	e := newEnv(t, withFakeClock)
	var created []*unstructured.Unstructured
	for i := range lowerBoundCapacity {
		created = append(created, e.create(storagetest.Pod("ns", fmt.Sprintf("p%03d", i))))
	}
	e.syncCache()
	e.clock.Step(DefaultEventFreshDuration + time.Second)
	e.create(storagetest.Pod("ns", "last"))
	e.syncCache()
	exactAt := func(u *unstructured.Unstructured) (int, bool) {
		t.Helper()
		delegated := e.storage.delegatedLists.Load()
		l, err := e.list("/pods/", storage.ListOptions{ResourceVersion: u.GetResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchExact,
			Predicate: storage.Everything, Recursive: true})
		if err != nil {
			t.Fatalf("exact at %s: %v", u.GetResourceVersion(), err)
		}
		return len(l.Items), e.storage.delegatedLists.Load() != delegated
	}
	if n, fromStorage := exactAt(created[0]); n != 1 || !fromStorage {
		t.Errorf("exact at the evicted revision: %d items, from the storage %t", n, fromStorage)
	}
	if n, fromStorage := exactAt(created[1]); n != 2 || fromStorage {
		t.Errorf("exact at the oldest revision still held: %d items, from the storage %t", n, fromStorage)
	}
}

// TestListWithoutSnapshots: with Config.DisableListFromCacheSnapshot, as upstream with its
// ListFromCacheSnapshot gate off (cacher.go NewCacherFromConfig, ShouldDelegateExactRV,
// ShouldDelegateContinue; store/watch_cache_storage.go NewWatchCacheStorage), the cache keeps no
// snapshot and runs no compactor: Exact lists, legacy exact lists and the pages of every continue
// token (a consistent list's too) are read from the storage, with the storage's answer, while lists
// at any staleness, not older than a revision, and consistent ones are still the cache's. Failure
// mode: a snapshot kept, or one of those lists answered by the cache.
func TestListWithoutSnapshots(t *testing.T) {
	e := newEnv(t, withoutSnapshots, withFakeClock)
	e.create(storagetest.Pod("ns", "a"))
	b := e.create(storagetest.Pod("ns", "b"))
	e.put(storagetest.Pod("ns", "a", storagetest.Labels("x=1")))
	e.syncCache()
	if e.cacher.watchCache.snapshots != nil || e.cacher.watchCache.snapshottingEnabled() {
		t.Fatal("the cache keeps snapshots")
	}
	if e.cacher.compactor != nil {
		t.Fatal("the cache runs a compactor")
	}
	rv := b.GetResourceVersion()
	limited := storage.Everything
	limited.Limit = 1
	fromStorage := []struct {
		name string
		opts storage.ListOptions
	}{
		{"exact", storage.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Predicate: storage.Everything, Recursive: true}},
		{"exact with limit", storage.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Predicate: limited, Recursive: true}},
		{"legacy exact", storage.ListOptions{ResourceVersion: rv, Predicate: limited, Recursive: true}},
	}
	for _, tc := range fromStorage {
		delegated := e.storage.delegatedLists.Load()
		got, err := e.list("/pods/", tc.opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if e.storage.delegatedLists.Load() != delegated+1 {
			t.Errorf("%s was answered by the cache", tc.name)
		}
		want, err := e.storageList("/pods/", tc.opts)
		if err != nil {
			t.Fatalf("%s from etcd: %v", tc.name, err)
		}
		if g, w := describeList(t, got), describeList(t, want); g != w {
			t.Errorf("%s:\n cache: %s\n  etcd: %s", tc.name, g, w)
		}
	}

	// The continue tokens of an exact list, of a consistent list from the cache (at the cache's
	// revision) and of a consistent read (a negative revision, which the cache would serve with
	// snapshots).
	var tokens []string
	for _, first := range []storage.ListOptions{
		{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Predicate: limited, Recursive: true},
		{Predicate: limited, Recursive: true},
	} {
		l, err := e.list("/pods/", first)
		if err != nil || l.GetContinue() == "" {
			t.Fatalf("first page of %+v: %v %s", first, err, describeList(t, l))
		}
		tokens = append(tokens, l.GetContinue())
	}
	negative, err := storage.EncodeContinue("/pods/ns/a\x00", "/pods/", -1)
	if err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, negative)
	for _, token := range tokens {
		next := limited
		next.Continue = token
		delegated := e.storage.delegatedLists.Load()
		got, err := e.list("/pods/", storage.ListOptions{Predicate: next, Recursive: true})
		if err != nil {
			t.Fatalf("the page after %s: %v", decodeToken(t, token), err)
		}
		if e.storage.delegatedLists.Load() != delegated+1 {
			t.Errorf("the page after %s was answered by the cache", decodeToken(t, token))
		}
		if len(got.Items) != 1 || keyOf(&got.Items[0]) != "/pods/ns/b" {
			t.Errorf("the page after %s: %s", decodeToken(t, token), describeList(t, got))
		}
	}

	for _, tc := range []struct {
		name string
		opts storage.ListOptions
	}{
		{"any staleness", storage.ListOptions{ResourceVersion: "0", Predicate: storage.Everything, Recursive: true}},
		{"not older than", storage.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, Predicate: storage.Everything, Recursive: true}},
		{"consistent", storage.ListOptions{Predicate: storage.Everything, Recursive: true}},
	} {
		delegated := e.storage.delegatedLists.Load()
		if _, err := e.list("/pods/", tc.opts); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if e.storage.delegatedLists.Load() != delegated {
			t.Errorf("%s was read from the storage", tc.name)
		}
	}

	// No compactor: a compaction stays unseen, however long the cache waits.
	if err := e.storage.Store.Compact(e.ctx, int64(e.currentRV())); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(2 * compactorPollPeriod)
	if got := e.cacher.CompactRevision(); got != 0 {
		t.Errorf("CompactRevision without snapshots: %d, want 0", got)
	}
	if _, err := e.list("/pods/", fromStorage[0].opts); !apierrors.IsResourceExpired(err) {
		t.Errorf("exact list below the compaction: %v, want 410 from the storage", err)
	}
}

// TestListFromCacheSnapshotDefault: the zero Config keeps upstream's v0.37 default, the gate on: the
// cache keeps a snapshot per event and runs its compactor. Failure mode: the switch's zero value
// turning snapshots off.
func TestListFromCacheSnapshotDefault(t *testing.T) {
	e := newEnv(t)
	e.create(storagetest.Pod("ns", "a"))
	e.create(storagetest.Pod("ns", "b"))
	e.syncCache()
	if !e.cacher.watchCache.snapshottingEnabled() {
		t.Fatal("the zero Config keeps no snapshots")
	}
	if n := e.cacher.watchCache.snapshots.len(); n != 3 {
		t.Errorf("%d snapshots, want 3 (the list's and one per event)", n)
	}
	if e.cacher.compactor == nil {
		t.Error("the zero Config runs no compactor")
	}
}
