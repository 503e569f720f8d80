package cache

import (
	"strings"
	"sync"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// btreeDegree is the degree upstream chose for the cacher's B-tree by benchmark.
const btreeDegree = 16

// element is one object of the cache's current state with its key and the attributes predicates
// match, computed once when the object enters the cache.
//
// Mirrors cacher/store/store.go Element.
type element struct {
	Key    string
	Object runtime.Object
	Labels labels.Set
	Fields fields.Set
}

func elementLess(a, b *element) bool { return a.Key < b.Key }

// objectStore is the current state, ordered by key. It is not safe for concurrent use on its own: the
// watch cache's lock guards it. Snapshots share its nodes copy-on-write and stay valid (and immutable)
// however the store changes afterwards.
//
// Mirrors cacher/store/store_btree.go btreeStore.
type objectStore struct {
	tree *btree.BTreeG[*element]

	// snapMu serializes snapshot(): it is called under the watch cache's read lock, from many
	// goroutines at once, and cloning writes the tree's copy-on-write context.
	snapMu sync.Mutex
	latest *btree.BTreeG[*element]
}

func newObjectStore() *objectStore {
	return &objectStore{tree: btree.NewG(btreeDegree, elementLess)}
}

func (s *objectStore) len() int { return s.tree.Len() }

func (s *objectStore) get(key string) (*element, bool) {
	return s.tree.Get(&element{Key: key})
}

// put adds or replaces the element with e's key. The caller holds the write lock.
func (s *objectStore) put(e *element) {
	s.tree.ReplaceOrInsert(e)
	s.latest = nil
}

// remove deletes key. The caller holds the write lock.
func (s *objectStore) remove(key string) {
	s.tree.Delete(&element{Key: key})
	s.latest = nil
}

// replace makes elems the whole state. The caller holds the write lock.
func (s *objectStore) replace(elems []*element) {
	t := btree.NewG(btreeDegree, elementLess)
	for _, e := range elems {
		t.ReplaceOrInsert(e)
	}
	s.tree = t
	s.latest = nil
}

// listKeys returns every key, in order. The caller holds the read lock.
//
// Mirrors btreeStore.ListKeys.
func (s *objectStore) listKeys() []string {
	keys := make([]string, 0, s.tree.Len())
	s.tree.Ascend(func(e *element) bool {
		keys = append(keys, e.Key)
		return true
	})
	return keys
}

// listPrefix returns, in key order, the elements whose key starts with prefix, from continueKey on
// when it is set.
//
// Mirrors btreeStore.OrderedListPrefix.
func (s *objectStore) listPrefix(prefix, continueKey string) []*element {
	return listTree(s.tree, prefix, continueKey)
}

func listTree(t *btree.BTreeG[*element], prefix, continueKey string) []*element {
	if continueKey == "" {
		continueKey = prefix
	}
	var result []*element
	t.AscendGreaterOrEqual(&element{Key: continueKey}, func(e *element) bool {
		if !strings.HasPrefix(e.Key, prefix) {
			return false
		}
		result = append(result, e)
		return true
	})
	return result
}

// snapshot returns an immutable copy of the current state in O(1). The caller holds at least the
// read lock; the snapshot may be read after the lock is released.
func (s *objectStore) snapshot() *storeSnapshot {
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	if s.latest == nil {
		s.latest = s.tree.Clone()
	}
	return &storeSnapshot{tree: s.latest}
}

// storeSnapshot is a point-in-time copy of the store; many readers may share it.
type storeSnapshot struct {
	tree *btree.BTreeG[*element]
}

// listPrefix returns, in key order, the elements whose key starts with prefix, from continueKey on
// when it is set.
func (s *storeSnapshot) listPrefix(prefix, continueKey string) []*element {
	return listTree(s.tree, prefix, continueKey)
}

// rvSnapshot is the state of the store after the event at resourceVersion (or the list at it).
type rvSnapshot struct {
	resourceVersion uint64
	snapshot        *storeSnapshot
}

// snapshotter keeps the store's snapshots by resourceVersion, so that a list at a past revision the
// cache still holds is answered from the snapshot of the newest revision at or below it. The watch
// cache adds one after every event and at every relist (which first drops them all), and drops the
// ones below the oldest event its history keeps and below the storage's compaction. It has its own
// lock: the compactor drops snapshots without the watch cache's.
//
// Mirrors cacher/store/store_btree.go storeSnapshotter.
type snapshotter struct {
	mu        sync.RWMutex
	snapshots *btree.BTreeG[rvSnapshot]
}

func newSnapshotter() *snapshotter {
	return &snapshotter{snapshots: btree.NewG(btreeDegree, func(a, b rvSnapshot) bool { return a.resourceVersion < b.resourceVersion })}
}

// add records the state at resourceVersion.
func (s *snapshotter) add(resourceVersion uint64, snap *storeSnapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snapshots.ReplaceOrInsert(rvSnapshot{resourceVersion: resourceVersion, snapshot: snap})
}

// getLessOrEqual returns the snapshot of the newest revision at or below resourceVersion.
func (s *snapshotter) getLessOrEqual(resourceVersion uint64) (*storeSnapshot, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var found *storeSnapshot
	s.snapshots.DescendLessOrEqual(rvSnapshot{resourceVersion: resourceVersion}, func(r rvSnapshot) bool {
		found = r.snapshot
		return false
	})
	return found, found != nil
}

// removeLess drops the snapshots of revisions below resourceVersion.
func (s *snapshotter) removeLess(resourceVersion uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		oldest, ok := s.snapshots.Min()
		if !ok || oldest.resourceVersion >= resourceVersion {
			return
		}
		s.snapshots.DeleteMin()
	}
}

// reset drops every snapshot.
func (s *snapshotter) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snapshots.Clear(false)
}

func (s *snapshotter) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.snapshots.Len()
}
