package cache

import (
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// errIntervalInvalidated means the history moved past an interval before it was read: the watcher
// closes without an ERROR event and its client re-watches.
var errIntervalInvalidated = errors.New("cache interval invalidated")

// intervalBufferSize is how many events an interval copies out of the history per lock.
const intervalBufferSize = 100

// intervalSource yields the events of an interval; nil means the end.
type intervalSource interface {
	next() (*watchCacheEvent, error)
}

// watchCacheInterval is what a new watcher replays before its live events: history events, or the
// current state as ADDED events at the snapshot's resourceVersion.
//
// Mirrors watch_cache_interval.go watchCacheInterval.
type watchCacheInterval struct {
	source intervalSource
	// resourceVersion is the one the interval was built for: the requested one for history, the
	// snapshot's for the current state.
	resourceVersion uint64
	// initialEventsEndBookmark, if set, is sent after the interval's events.
	initialEventsEndBookmark *watchCacheEvent
}

func (i *watchCacheInterval) next() (*watchCacheEvent, error) { return i.source.next() }

// historyInterval serves [startIndex, endIndex) of the cyclic buffer. It copies up to
// intervalBufferSize events at a time under the read lock; if the buffer evicted or reset past
// startIndex in the meantime, the interval is invalid.
//
// Mirrors watch_cache_interval.go historyCacheIntervalSource.
type historyInterval struct {
	history    *watchCacheHistory
	startIndex int
	endIndex   int
	lock       sync.Locker
	buffer     []*watchCacheEvent
	pos        int
	// replays, if set, gives the event the watchers replaying it at the same time share.
	replays *replaySharing
}

func newHistoryInterval(h *watchCacheHistory, start, end int, resourceVersion uint64, locker sync.Locker) *watchCacheInterval {
	return &watchCacheInterval{
		source:          &historyInterval{history: h, startIndex: start, endIndex: end, lock: locker},
		resourceVersion: resourceVersion,
	}
}

func (s *historyInterval) next() (*watchCacheEvent, error) {
	e, err := s.nextStored()
	if e == nil || err != nil {
		return e, err
	}
	return s.replays.event(e), nil
}

// nextStored is the next event as the history holds it.
func (s *historyInterval) nextStored() (*watchCacheEvent, error) {
	if s.pos < len(s.buffer) {
		e := s.buffer[s.pos]
		// Drop the reference so an evicted event is not kept alive by a slow watcher.
		s.buffer[s.pos] = nil
		s.pos++
		return e, nil
	}
	if s.startIndex >= s.endIndex {
		return nil, nil
	}
	s.lock.Lock()
	defer s.lock.Unlock()
	if !s.history.isIndexValid(s.startIndex) {
		return nil, fmt.Errorf("%w, interval startIndex: %d", errIntervalInvalidated, s.startIndex)
	}
	if s.buffer == nil {
		s.buffer = make([]*watchCacheEvent, 0, intervalBufferSize)
	}
	s.buffer = s.buffer[:0]
	s.pos = 0
	for s.startIndex < s.endIndex && len(s.buffer) < intervalBufferSize {
		s.buffer = append(s.buffer, s.history.at(s.startIndex))
		s.startIndex++
	}
	e := s.buffer[0]
	s.buffer[0] = nil
	s.pos = 1
	return e, nil
}

// snapshotInterval serves the current state, in key order, as ADDED events carrying the snapshot's
// resourceVersion. Building the events walks the snapshot, which happens off the watch cache's lock.
//
// Mirrors watch_cache_interval.go lazySnapshotCacheIntervalSource and newCacheIntervalFromStore.
type snapshotInterval struct {
	snapshot        *storeSnapshot
	prefix          string
	resourceVersion uint64
	elems           []*element
	loaded          bool
	pos             int
	// replays, if set, gives the object the watchers replaying an element at the same time share.
	replays *replaySharing
}

func newSnapshotInterval(snap *storeSnapshot, prefix string, resourceVersion uint64) *watchCacheInterval {
	return &watchCacheInterval{
		source:          &snapshotInterval{snapshot: snap, prefix: prefix, resourceVersion: resourceVersion},
		resourceVersion: resourceVersion,
	}
}

// newElementsInterval serves the given elements (at most one object, for a watch of a single name).
func newElementsInterval(elems []*element, resourceVersion uint64) *watchCacheInterval {
	return &watchCacheInterval{
		source:          &snapshotInterval{elems: elems, loaded: true, resourceVersion: resourceVersion},
		resourceVersion: resourceVersion,
	}
}

func (s *snapshotInterval) next() (*watchCacheEvent, error) {
	if !s.loaded {
		s.elems = s.snapshot.listPrefix(s.prefix, "")
		s.snapshot = nil
		s.loaded = true
	}
	if s.pos >= len(s.elems) {
		return nil, nil
	}
	e := s.elems[s.pos]
	s.elems[s.pos] = nil
	s.pos++
	return elementToEvent(e, s.replays.object(e), s.resourceVersion), nil
}

// elementToEvent is a current-state object as an initial ADDED event, carrying obj (the element's
// object, or the wrapper of it the replaying watchers share). The event carries the snapshot
// resourceVersion; the object keeps its own.
func elementToEvent(e *element, obj runtime.Object, resourceVersion uint64) *watchCacheEvent {
	return &watchCacheEvent{
		Type:            watch.Added,
		Object:          obj,
		ObjLabels:       e.Labels,
		ObjFields:       e.Fields,
		Key:             e.Key,
		ResourceVersion: resourceVersion,
	}
}
