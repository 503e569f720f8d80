package cache

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

const (
	// lowerBoundCapacity is the smallest and the initial capacity of the event history.
	lowerBoundCapacity = 100
	// upperBoundCapacity is the largest capacity of the history for the default freshness window.
	upperBoundCapacity = 100 * 1024
)

// errCacheNotInitialized is the 500 of a watch from history when nothing was ever listed or buffered.
var errCacheNotInitialized = errors.New("watch cache isn't correctly initialized")

// capacityUpperBound is the largest capacity the history may grow to: upperBoundCapacity for the
// default window, scaled by the window's ratio to it rounded up to a power of two, within 32 bits.
//
// Mirrors watch_cache_history.go capacityUpperBound.
func capacityUpperBound(eventFreshDuration time.Duration) int {
	if eventFreshDuration <= DefaultEventFreshDuration {
		return upperBoundCapacity
	}
	exponent := int(math.Ceil(math.Log2(eventFreshDuration.Seconds() / DefaultEventFreshDuration.Seconds())))
	if maxExponent := int(math.Floor(math.Log2(math.MaxInt32 / upperBoundCapacity))); exponent > maxExponent {
		exponent = maxExponent
	}
	return upperBoundCapacity << exponent
}

// watchCacheHistory is the cyclic buffer of recent events. The live events are
// cache[startIndex%capacity .. endIndex%capacity), endIndex−startIndex of them; both indexes only ever
// grow, so an interval that remembers an index can tell whether its events are still there.
//
// Mirrors watch_cache_history.go watchCacheHistory.
type watchCacheHistory struct {
	capacity           int
	lowerBoundCapacity int
	upperBoundCapacity int
	eventFreshDuration time.Duration

	cache      []*watchCacheEvent
	startIndex int
	endIndex   int
	// removedEventSinceRelist records that an event was evicted since the last relist, after which the
	// list resourceVersion no longer bounds what the buffer can replay.
	removedEventSinceRelist bool
	// metrics follow the capacity.
	metrics *resourceMetrics
}

func newWatchCacheHistory(eventFreshDuration time.Duration) *watchCacheHistory {
	return &watchCacheHistory{
		capacity:           lowerBoundCapacity,
		lowerBoundCapacity: lowerBoundCapacity,
		upperBoundCapacity: capacityUpperBound(eventFreshDuration),
		eventFreshDuration: eventFreshDuration,
		cache:              make([]*watchCacheEvent, lowerBoundCapacity),
	}
}

// add appends an event: when the buffer is full it first resizes, then evicts the oldest event.
//
// Mirrors watchCacheHistory.updateCache.
func (h *watchCacheHistory) add(event *watchCacheEvent) {
	h.resizeLocked(event.RecordTime)
	if h.isFull() {
		h.cache[h.startIndex%h.capacity] = nil
		h.startIndex++
		h.removedEventSinceRelist = true
	}
	h.cache[h.endIndex%h.capacity] = event
	h.endIndex++
}

func (h *watchCacheHistory) isFull() bool { return h.endIndex == h.startIndex+h.capacity }

func (h *watchCacheHistory) len() int { return h.endIndex - h.startIndex }

// resizeLocked runs only when the buffer is full: it doubles the capacity (up to the upper bound) if
// the whole buffer is younger than the freshness window, and halves it (down to the lower bound) if
// even the newest quarter of it is older than the window, which keeps the size from flapping.
//
// Mirrors watchCacheHistory.resizeCacheLocked.
func (h *watchCacheHistory) resizeLocked(eventTime time.Time) {
	if !h.isFull() {
		return
	}
	if eventTime.Sub(h.cache[h.startIndex%h.capacity].RecordTime) < h.eventFreshDuration {
		if c := min(h.capacity*2, h.upperBoundCapacity); c > h.capacity {
			h.doResize(c)
		}
		return
	}
	if eventTime.Sub(h.cache[(h.endIndex-h.capacity/4)%h.capacity].RecordTime) > h.eventFreshDuration {
		if c := max(h.capacity/2, h.lowerBoundCapacity); c < h.capacity {
			h.doResize(c)
		}
	}
}

// doResize moves the live events into a buffer of the given capacity; shrinking drops the oldest.
func (h *watchCacheHistory) doResize(capacity int) {
	newCache := make([]*watchCacheEvent, capacity)
	if capacity < h.capacity {
		h.startIndex = h.endIndex - capacity
	}
	for i := h.startIndex; i < h.endIndex; i++ {
		newCache[i%capacity] = h.cache[i%h.capacity]
	}
	h.cache = newCache
	h.metrics.capacityChanged(h.capacity, capacity)
	h.capacity = capacity
}

// isIndexValid reports whether the event at index is still in the buffer.
func (h *watchCacheHistory) isIndexValid(index int) bool { return index >= h.startIndex }

// reset empties the buffer after a relist. startIndex jumps to endIndex and never goes back, so every
// interval built before it finds its next index invalid.
//
// Mirrors watchCacheHistory.ResetLocked.
func (h *watchCacheHistory) reset() {
	h.startIndex = h.endIndex
	h.removedEventSinceRelist = false
	clear(h.cache)
}

const (
	minWatchChanSize                        = 10
	maxWatchChanSizeWithIndexAndTrigger     = 10
	maxWatchChanSizeWithIndexWithoutTrigger = 1000
	maxWatchChanSizeWithoutIndex            = 100
)

// suggestedWatchChannelSize sizes a watcher's channels to hold about one second of history:
// capacity / window seconds, at least 10, capped by how the watcher is indexed.
//
// Mirrors watchCacheHistory.suggestedWatchChannelSize.
func (h *watchCacheHistory) suggestedWatchChannelSize(indexExists, triggerUsed bool) int {
	size := max(int(math.Ceil(float64(h.capacity)/h.eventFreshDuration.Seconds())), minWatchChanSize)
	var maxSize int
	switch {
	case indexExists && triggerUsed:
		maxSize = maxWatchChanSizeWithIndexAndTrigger
	case indexExists:
		maxSize = maxWatchChanSizeWithIndexWithoutTrigger
	default:
		maxSize = maxWatchChanSizeWithoutIndex
	}
	return min(size, maxSize)
}

// intervalLocked returns the events after resourceVersion. The oldest event the buffer can vouch for
// is listResourceVersion+1 while nothing was evicted since the relist, else the first buffered event;
// a resourceVersion below that minus one is gone (410). A resourceVersion beyond the buffer gives an
// empty interval: the watch then waits for newer events.
//
// Mirrors watchCacheHistory.GetIntervalLocked.
func (h *watchCacheHistory) intervalLocked(resourceVersion, listResourceVersion uint64, locker sync.Locker) (*watchCacheInterval, error) {
	size := h.len()
	var oldest uint64
	switch {
	case listResourceVersion > 0 && !h.removedEventSinceRelist:
		oldest = listResourceVersion + 1
	case size > 0:
		oldest = h.cache[h.startIndex%h.capacity].ResourceVersion
	default:
		return nil, errCacheNotInitialized
	}
	if resourceVersion < oldest-1 {
		return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", resourceVersion, oldest-1))
	}
	first := sort.Search(size, func(i int) bool {
		return h.cache[(h.startIndex+i)%h.capacity].ResourceVersion > resourceVersion
	})
	return newHistoryInterval(h, h.startIndex+first, h.endIndex, resourceVersion, locker), nil
}

// at returns the event at index; the caller checked the index is valid.
func (h *watchCacheHistory) at(index int) *watchCacheEvent { return h.cache[index%h.capacity] }
