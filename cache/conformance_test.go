package cache

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/storagebackend"
	"github.com/listwatch/listwatch/internal/storagebackend/watchsuite"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
	"github.com/listwatch/listwatch/store"
	"github.com/listwatch/listwatch/watch"
)

// The storage conformance cases (package storagetest, ported from k8s.io/apiserver
// pkg/storage/testing) played against the watch cache: a Cacher over a watch.Store on a fresh
// in-process server for each case, as upstream's cacher_test.go plays them against its Cacher. The
// Cacher starts as upstream's testSetup starts it: its first list fails, so every case runs after a
// relist (not with -short, where that relist's 1 s on the real clock would be most of the run).

// notForCache are the cases not played against the cache, with the reason: those upstream does not
// play against its Cacher because a cache cannot be given what they need (a storage that cannot
// decode, etcd's progress notifications), and listwatch's cases of etcd3-only behaviour or
// configuration. Every other case plays, with upstream's expectations; that includes
// WatchContextCancel and InconsistentContinue, which upstream's cacher_test.go leaves as TODOs.
var notForCache = map[string]string{
	"WatchError":                       "RunTestWatchError is a TODO in cacher_test.go: the cache of a storage that cannot decode never lists",
	"WatchWithUnsafeDelete":            "RunTestWatchWithUnsafeDelete runs against etcd3 only: a corrupt object never reaches the cache",
	"ErrorIsBlockingFurtherEvents":     "RunWatchErrorIsBlockingFurtherEvents runs against etcd3 only: the cache of storages that cannot decode never lists",
	"ProgressNotify":                   "RunOptionalTestProgressNotify runs against etcd3 only: the Cacher does not forward the storage's progress notifications",
	"ProgressBroadcast":                "etcd answers RequestWatchProgress on the watches of its client; the Cacher forwards no storage progress",
	"WatchListGateOff":                 "the WatchList gate of watch.Features configures the etcd3 storage, not the cache",
	"BackPressure":                     "the etcd3 watch never drops; the cache closes a watcher that does not read (WatcherTimeout, DelayedWatchDelivery)",
	"Update":                           "watch.Store.Update is not part of storage.Interface; the Cacher does not have it",
	"WatchErrorIncorrectConfiguration": "an etcd3 storage without NewFunc cannot be cached: the reflector's watch asks for progress notifications",
}

// realTimeOnCache are the cases that wait real time on the cache, besides the Slow ones (a lease's
// expiry, a 3 s watch deadline): the watch cache's 3 s freshness timeout, five times over in
// HugeResourceVersion. With -short they are skipped; the fake-clock tests named cover the same
// behaviour of the cache.
var realTimeOnCache = map[string]bool{"HugeResourceVersion": true, "WatchListTooLargeRV": true}

// shortSkip is why a case does not play with -short, or "".
func shortSkip(c storagetest.Case) string {
	switch {
	case !testing.Short():
		return ""
	case c.Slow:
		return "-short: waits real time (a lease's expiry, a 3 s watch deadline); TestBookmarksFollowTheClock, " +
			"TestNextBookmarkTime and TestBookmarkBuckets check the cache's bookmarks on a fake clock"
	case realTimeOnCache[c.Name]:
		return "-short: waits the cache's 3 s freshness timeout; TestGet, TestListNotOlderThan, " +
			"TestListExactFutureResourceVersion and TestWatchListWaitsForFreshness check it on a fake clock"
	}
	return ""
}

// cacheEdits are upstream's expectations for the cache where they differ from etcd's: lines of the
// case's Want replaced by the cache's (a replacement of several lines is joined by "\n"), with the
// upstream behaviour they follow.
var cacheEdits = map[string][][2]string{
	// RunTestWatchDispatchBookmarkEvents(expectedWatchBookmarks=true): the Cacher's dispatcher sends a
	// watch with AllowWatchBookmarks a bookmark 2 s before its deadline (cache_watcher.go
	// nextBookmarkTime); the etcd3 watch sends none.
	"WatchDispatchBookmarkEvents": {
		{"allowWatchBookmarks=true no event", "allowWatchBookmarks=true BOOKMARK"},
	},
	// RunTestOptionalWatchBookmarksWithCorrectResourceVersion, which upstream runs against the Cacher
	// only, requires a bookmark.
	"WatchBookmarksWithCorrectResourceVersion": {
		{"w sent no BOOKMARK", "w sent a BOOKMARK"},
	},
	// RunTestWatchFromZero accepts 410 Expired or etcd's missing-PrevKv 500. After compactWatch the
	// history starts after the compaction, and watch_cache.go getAllEventsSinceLocked answers an RV
	// below it with "too old resource version: RV (oldest-1)".
	"WatchFromZero": {
		{`w4 ERROR 500 InternalError: Internal error occurred: etcd event received with PrevKv=nil (key="/registry/pods/test-ns/foo", modRevision=+5, type=PUT)`,
			"w4 ERROR 410 Expired: too old resource version: +4 (+5)"},
		{"w5 ERROR 410 Expired: The resourceVersion for the provided watch is too old.", "w5 ERROR 410 Expired: too old resource version: +1 (+5)"},
	},
	// The same answer of getAllEventsSinceLocked: the cache replays from its list RV (here the
	// compaction's), not from one revision below it as etcd can.
	"WatchCompacted": {
		{"w ERROR 410 Expired: The resourceVersion for the provided watch is too old.", "w ERROR 410 Expired: too old resource version: +1 (+3)"},
		{"at-compact ADDED ns/b rv=+3", "at-compact ERROR 410 Expired: too old resource version: +2 (+3)"},
	},
	// RunTestGet: CacheDelegator.Get returns the Versioner's InvalidError as it is, where the etcd3
	// store's validateMinimumResourceVersion turns it into a 400.
	"Get": {
		{`bad rv error: 400 BadRequest: invalid resource version: resourceVersion: Invalid value: "x": strconv.ParseUint: parsing "x": invalid syntax`,
			`bad rv error: resourceVersion: Invalid value: "x": strconv.ParseUint: parsing "x": invalid syntax`},
	},
	// RunTestConsistentList(cacheEnabled, consistentReadsSupported, listFromCacheSnapshot): RV "0" is
	// served from whatever the cache holds, at most the last write before the first consistent read,
	// and after it the RV of the last consistent read, which with cache snapshots is the continue
	// token's of RV -1 (the cache serves it, and syncs to it).
	"ConsistentList": {
		{"rv=0 list rv=+2 items=0", "rv=0 list rv=<=+1 items=0"},
		{"rv=0 again list rv=+5 items=0", "rv=0 again list rv=+4 items=0"},
	},
	// RunTestGet and RunTestList: the watch cache waits 3 s for the RV, then answers 504 with
	// Retry-After 1 (watch_cache.go waitUntilFreshLocked); with cache snapshots the Exact list at a
	// revision the cache has not reached is the cache's too ("test List with future resource version,
	// match=Exact": no request reaches etcd).
	"HugeResourceVersion": {
		{"get error: 504 Timeout: Timeout: Too large resource version: 9223372036854775807, current: +1 cause=ResourceVersionTooLarge",
			"get error: 504 Timeout: Timeout: Too large resource version: 9223372036854775807, current: +1 cause=ResourceVersionTooLarge retry=1..4"},
		{"not-older-than list error: 504 Timeout: Timeout: Too large resource version: 9223372036854775807, current: +1 cause=ResourceVersionTooLarge",
			"not-older-than list error: 504 Timeout: Timeout: Too large resource version: 9223372036854775807, current: +1 cause=ResourceVersionTooLarge retry=1..4"},
		{"legacy list error: 504 Timeout: Timeout: Too large resource version: 9223372036854775807, current: +1 cause=ResourceVersionTooLarge",
			"legacy list error: 504 Timeout: Timeout: Too large resource version: 9223372036854775807, current: +1 cause=ResourceVersionTooLarge retry=1..4"},
		{"exact list error: 504 Timeout: Timeout: Too large resource version: 9223372036854775807, current: +1 cause=ResourceVersionTooLarge",
			"exact list error: 504 Timeout: Timeout: Too large resource version: 9223372036854775807, current: +1 cause=ResourceVersionTooLarge retry=1..4"},
		{"non-recursive list error: 504 Timeout: Timeout: Too large resource version: 9223372036854775807, current: +1 cause=ResourceVersionTooLarge",
			"non-recursive list error: 504 Timeout: Timeout: Too large resource version: 9223372036854775807, current: +1 cause=ResourceVersionTooLarge retry=1..4"},
	},
}

// cacheWant is c.Want with the cache's edits; an edit of a line the Want lacks is an error.
func cacheWant(c storagetest.Case) ([]string, error) {
	edits := cacheEdits[c.Name]
	var want []string
	used := map[int]bool{}
	for _, line := range c.Want {
		replaced := false
		for i, e := range edits {
			if line == e[0] {
				want = append(want, strings.Split(e[1], "\n")...)
				used[i], replaced = true, true
				break
			}
		}
		if !replaced {
			want = append(want, line)
		}
	}
	for i, e := range edits {
		if !used[i] {
			return nil, fmt.Errorf("%s: the Want has no line %q to replace", c.Name, e[0])
		}
	}
	return want, nil
}

// caseGroup is the name of a case without its sub-case.
func caseGroup(name string) string {
	group, _, _ := strings.Cut(name, "/")
	return group
}

// conformanceKey is storagetest.Key's layout: namespaced pods under /pods/<ns>/, cluster-scoped ones
// (the cases of RunTestClusterScopedWatch, as upstream's withClusterScopedKeyFunc) under /pods/.
func conformanceKey(obj runtime.Object) (string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", err
	}
	if m.GetNamespace() == "" {
		return storage.NoNamespaceKeyFunc("/pods/", obj)
	}
	return storage.NamespaceKeyFunc("/pods/", obj)
}

// conformanceCachers builds the Cachers of one case and stops them when it ends.
type conformanceCachers struct {
	client *clientv3.Client
	// trigger configures the spec.nodeName trigger, as upstream's withNodeNameAndNamespaceIndex.
	trigger bool

	mu      sync.Mutex
	cachers []*Cacher
	stores  []*watch.Store
}

// newStorage is storagetest.Env.NewStorage: a ready Cacher over watch.New(client, cfg).
func (cc *conformanceCachers) newStorage(cfg storagetest.Config) (storage.Interface, error) {
	s, err := watch.New(cc.client, watchsuite.Config(cfg))
	if err != nil {
		return nil, err
	}
	cc.mu.Lock()
	cc.stores = append(cc.stores, s)
	cc.mu.Unlock()
	// With -short the first list succeeds: the relist waits the Cacher's 1 s restart period on the
	// real clock, in every case; TestNotReady and TestRelist check it on a fake clock.
	listErrors := 1
	if testing.Short() {
		listErrors = 0
	}
	ts := &testStorage{Store: s, listErrors: listErrors}
	ccfg := Config{
		Storage:        ts,
		ResourcePrefix: cfg.ResourcePrefix,
		GroupResource:  cfg.GroupResource,
		KeyFunc:        conformanceKey,
		GetAttrsFunc:   storagetest.PodAttrs,
		Logger:         testutil.DiscardLogger(),
	}
	if cc.trigger {
		ccfg.IndexerFuncs = map[string]IndexerFunc{"spec.nodeName": nodeNameOf}
	}
	c, err := New(ccfg)
	if err != nil {
		return nil, err
	}
	cc.mu.Lock()
	cc.cachers = append(cc.cachers, c)
	cc.mu.Unlock()
	// As upstream's testSetup: wait until the injected list error is consumed and the cache is ready.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ts.listCalls.Load() <= int64(listErrors) {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("the cacher never relisted: %w", ctx.Err())
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.Wait(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (cc *conformanceCachers) stop() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, c := range cc.cachers {
		c.Stop()
	}
	for _, s := range cc.stores {
		s.Close()
	}
}

// requestProgress is storagetest.Env.RequestProgress for a Cacher: once the dispatcher has processed
// rev (a progress request makes etcd tell the reflector that nothing under the prefix changed up to
// it), a marker bookmark queued on the watcher's input follows every event dispatched to it. The
// marker is not queued into a watch-list that still owes its initial-events-end bookmark, which it
// would become.
func requestProgress(ctx context.Context, s storage.Interface, w apiwatch.Interface, rev int64) error {
	c, ok := s.(*Cacher)
	if !ok {
		return fmt.Errorf("not a Cacher: %T", s)
	}
	if err := c.RequestWatchProgress(ctx); err != nil {
		return err
	}
	cw, ok := w.(*cacheWatcher)
	if !ok {
		// An error watch or one closed at once: the harness reads its close.
		return nil
	}
	processed := c.lastProcessedRV.Load()
	if processed < uint64(rev) || !cw.wasBookmarkSent() {
		return nil
	}
	marker := c.newFunc()
	if err := c.versioner.UpdateObject(marker, processed); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cw.stopped {
		return nil
	}
	select {
	case cw.input <- &watchCacheEvent{Type: apiwatch.Bookmark, Object: marker, ResourceVersion: processed}:
	default:
	}
	return nil
}

// compact is storagetest.Env.Compact for a Cacher, as upstream's cacher_testing_utils_test.go
// compactWatch and compactStore together: once the cache has reached rev, its history up to rev is
// dropped (the Cacher has no compaction of its own), then etcd is compacted at rev through the etcd3
// storage, whose CompactRevision the Cacher's compactor reads (here at once, where upstream's test
// calls compactIfNeeded), so that lists below rev go to etcd. No watcher may be open.
func (cc *conformanceCachers) compact(ctx context.Context, s storage.Interface, rev int64) error {
	c, ok := s.(*Cacher)
	if !ok {
		return fmt.Errorf("not a Cacher: %T", s)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.watchCache.RLock()
		reached := c.watchCache.resourceVersion >= uint64(rev)
		c.watchCache.RUnlock()
		if reached {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cache never reached %d", rev)
		}
		if err := c.RequestWatchProgress(ctx); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	wc := c.watchCache
	wc.Lock()
	c.mu.Lock()
	open := len(c.watchers.allWatchers) + len(c.watchers.valueWatchers)
	for open == 0 && wc.history.startIndex < wc.history.endIndex && wc.history.at(wc.history.startIndex).ResourceVersion <= uint64(rev) {
		wc.history.startIndex++
	}
	if open == 0 {
		wc.listResourceVersion = uint64(rev)
	}
	c.mu.Unlock()
	wc.Unlock()
	if open > 0 {
		return fmt.Errorf("%d watchers open during compaction", open)
	}
	ts, ok := c.storage.(*testStorage)
	if !ok {
		return fmt.Errorf("the Cacher's storage is %T", c.storage)
	}
	if err := ts.Store.Compact(ctx, rev); err != nil {
		return err
	}
	c.compactor.compactIfNeeded()
	return nil
}

// TestConformance plays every storagetest case against the watch cache. A case passes when its
// transcript equals its Want, or the cache's expectation in cacheWant where upstream's differs.
// Failure mode: a deviation from upstream's Cacher shows as a transcript diff naming the event.
func TestConformance(t *testing.T) {
	for _, c := range storagetest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if reason, ok := notForCache[caseGroup(c.Name)]; ok {
				t.Skip(reason)
			}
			if reason := shortSkip(c); reason != "" {
				t.Skip(reason)
			}
			t.Parallel()
			b, err := storagebackend.NewInProcess(store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := b.Close(); err != nil {
					t.Errorf("close backend: %v", err)
				}
			}()
			group := caseGroup(c.Name)
			cc := &conformanceCachers{client: b.Client, trigger: group == "ClusterScopedWatch" || group == "NamespaceScopedWatch"}
			defer cc.stop()
			env := storagetest.Env{Client: b.Client, NewStorage: cc.newStorage, RequestProgress: requestProgress, Compact: cc.compact}
			want, err := cacheWant(c)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Play(context.Background(), env)
			if err != nil {
				t.Fatalf("%v\ntranscript so far:\n%s", err, strings.Join(got, "\n"))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("transcript mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
