package cache

import (
	"log/slog"
	"sync"
	"weak"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/listwatch/listwatch/storage"
)

// replaySharing lets the watchers that replay one stored element (initial events, from
// resourceVersion 0 or with sendInitialEvents) or one history event (a watch from a past
// resourceVersion) at the same time share what they deliver of it: one CachingObject per element,
// one caching copy per event, so that a large object is encoded once per encoding, and copied by
// none of them, however many watchers start from it. Upstream wraps only the live event, for its
// dispatch, and lets every replaying watcher copy and encode the object itself.
//
// Only weak pointers are kept, to both the stored and the shared values: a wrapper and its
// encodings are released with the last watcher delivering it, and the cache's memory per element or
// event does not grow.
type replaySharing struct {
	versioner storage.Versioner
	logger    *slog.Logger
	objects   sharer[element, CachingObject]
	events    sharer[watchCacheEvent, watchCacheEvent]
}

// object is what a replay of e delivers: the shared CachingObject of e's object (e's object itself
// without sharing, or if it cannot be wrapped).
func (r *replaySharing) object(e *element) runtime.Object {
	if r == nil {
		return e.Object
	}
	co := r.objects.get(e, func() *CachingObject {
		co, err := newCachingObject(e.Object)
		if err != nil {
			return nil
		}
		return co
	})
	if co == nil {
		return e.Object
	}
	return co
}

// event is what a replay of the history event e delivers: the shared caching copy of e (e itself
// without sharing).
func (r *replaySharing) event(e *watchCacheEvent) *watchCacheEvent {
	if r == nil {
		return e
	}
	return r.events.get(e, func() *watchCacheEvent { return cachingCopy(e, r.versioner, r.logger) })
}

// sharer hands out, per key, one value for as long as anybody holds it, and makes a new one once
// every holder dropped the last. Keys and values are held weakly: an entry whose value was collected
// only takes its map slot until the next sweep, which the map's growth triggers.
type sharer[K, V any] struct {
	mu      sync.Mutex
	m       map[weak.Pointer[K]]weak.Pointer[V]
	sweepAt int
}

// minSweep is the smallest map size at which a sharer sweeps out its dead entries.
const minSweep = 64

// get returns the live value for key, or the one newValue makes (nil: none, and nothing is kept).
func (s *sharer[K, V]) get(key *K, newValue func() *V) *V {
	k := weak.Make(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.m[k].Value(); v != nil {
		return v
	}
	v := newValue()
	if v == nil {
		delete(s.m, k)
		return nil
	}
	if s.m == nil {
		s.m = map[weak.Pointer[K]]weak.Pointer[V]{}
	}
	s.m[k] = weak.Make(v)
	if len(s.m) >= max(s.sweepAt, minSweep) {
		s.sweepLocked()
	}
	return v
}

// sweepLocked drops the entries whose key or value was collected; the next sweep comes when the
// map has doubled again, so sweeping costs O(1) per get.
func (s *sharer[K, V]) sweepLocked() {
	for k, v := range s.m {
		if k.Value() == nil || v.Value() == nil {
			delete(s.m, k)
		}
	}
	s.sweepAt = 2 * len(s.m)
}

// len is how many entries the map holds, dead ones included.
func (s *sharer[K, V]) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
