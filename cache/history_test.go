package cache

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
)

// TestHistoryResize ports TestDynamicCache: the buffer doubles when full and younger than the window,
// halves when its newest quarter is older than the window, and otherwise keeps its size; the live
// events keep their positions.
func TestHistoryResize(t *testing.T) {
	w := DefaultEventFreshDuration
	tests := []struct {
		name                    string
		eventCount, capacity    int
		startIndex              int
		lower, upper            int
		interval                time.Duration
		wantCapacity, wantStart int
	}{
		{"grow", 5, 5, 0, 2, 10, w / 6, 10, 0},
		{"keep", 5, 5, 0, 2, 10, w / 4, 5, 0},
		{"shrink", 5, 5, 0, 2, 10, w + time.Second, 2, 3},
		{"shrink to lower bound", 5, 5, 0, 3, 10, w + time.Second, 3, 2},
		{"grow to upper bound", 5, 5, 0, 2, 8, w / 6, 8, 0},
		{"grow, offset", 5, 5, 3, 2, 10, w / 6, 10, 3},
		{"keep, offset", 5, 5, 3, 2, 10, w / 4, 5, 3},
		{"shrink, offset", 5, 5, 3, 2, 10, w + time.Second, 2, 6},
		{"shrink to lower bound, offset", 5, 5, 3, 3, 10, w + time.Second, 3, 5},
		{"grow to upper bound, offset", 5, 5, 3, 2, 8, w / 6, 8, 3},
		{"4n grow", 8, 8, 0, 4, 16, w / 9, 16, 0},
		{"4n keep", 8, 8, 0, 4, 16, w / 8, 8, 0},
		{"4n shrink", 8, 8, 0, 4, 16, w/2 + time.Second, 4, 4},
		{"4n shrink to lower bound", 8, 8, 0, 7, 16, w/2 + time.Second, 7, 1},
		{"4n grow to upper bound", 8, 8, 0, 4, 10, w / 9, 10, 0},
		{"4n grow, offset", 8, 8, 3, 4, 16, w / 9, 16, 3},
		{"4n keep, offset", 8, 8, 3, 4, 16, w / 8, 8, 3},
		{"4n shrink, offset", 8, 8, 3, 4, 16, w/2 + time.Second, 4, 7},
		{"4n shrink to lower bound, offset", 8, 8, 3, 7, 16, w/2 + time.Second, 7, 4},
		{"4n grow to upper bound, offset", 8, 8, 3, 4, 10, w / 9, 10, 3},
	}
	now := time.Unix(1000, 0)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newWatchCacheHistory(w)
			h.capacity, h.cache = tc.capacity, make([]*watchCacheEvent, tc.capacity)
			h.startIndex, h.endIndex = tc.startIndex, tc.startIndex+tc.eventCount
			h.lowerBoundCapacity, h.upperBoundCapacity = tc.lower, tc.upper
			for i := range tc.eventCount {
				idx := tc.startIndex + i
				h.cache[idx%h.capacity] = &watchCacheEvent{Key: fmt.Sprintf("event-%d", idx), RecordTime: now.Add(tc.interval * time.Duration(i))}
			}
			h.resizeLocked(now.Add(tc.interval * time.Duration(tc.eventCount)))
			if h.capacity != tc.wantCapacity || h.startIndex != tc.wantStart || h.endIndex != tc.startIndex+tc.eventCount {
				t.Fatalf("capacity, start, end = %d, %d, %d; want %d, %d, %d", h.capacity, h.startIndex, h.endIndex,
					tc.wantCapacity, tc.wantStart, tc.startIndex+tc.eventCount)
			}
			for i := h.startIndex; i < h.endIndex; i++ {
				if got := h.at(i).Key; got != fmt.Sprintf("event-%d", i) {
					t.Fatalf("slot of index %d holds %s", i, got)
				}
			}
		})
	}
}

func addEvents(h *watchCacheHistory, from, to uint64, at func(rv uint64) time.Time) {
	for rv := from; rv <= to; rv++ {
		h.add(&watchCacheEvent{Type: watch.Added, Key: fmt.Sprintf("/pods/ns/p%d", rv), ResourceVersion: rv, RecordTime: at(rv)})
	}
}

// TestHistoryGrowsToUpperBoundThenEvicts: events inside the window double the capacity from 100 up to
// 102400; past that the oldest event is evicted.
func TestHistoryGrowsToUpperBoundThenEvicts(t *testing.T) {
	h := newWatchCacheHistory(DefaultEventFreshDuration)
	if h.capacity != 100 {
		t.Fatalf("initial capacity %d", h.capacity)
	}
	now := time.Unix(1000, 0)
	same := func(uint64) time.Time { return now }
	addEvents(h, 1, 100, same)
	if h.capacity != 100 || h.removedEventSinceRelist {
		t.Fatalf("full buffer: capacity %d, evicted %t", h.capacity, h.removedEventSinceRelist)
	}
	addEvents(h, 101, 101, same)
	if h.capacity != 200 || h.len() != 101 {
		t.Fatalf("after the 101st event: capacity %d, len %d; want 200, 101", h.capacity, h.len())
	}
	addEvents(h, 102, 102400, same)
	if h.capacity != 102400 || h.removedEventSinceRelist {
		t.Fatalf("capacity %d, evicted %t; want 102400 without eviction", h.capacity, h.removedEventSinceRelist)
	}
	addEvents(h, 102401, 102402, same)
	if h.capacity != 102400 || !h.removedEventSinceRelist || h.at(h.startIndex).ResourceVersion != 3 {
		t.Fatalf("capacity %d, evicted %t, oldest %d; want 102400, true, 3", h.capacity, h.removedEventSinceRelist, h.at(h.startIndex).ResourceVersion)
	}
}

// TestHistoryShrinksWhenStale: once even the newest quarter is older than the window, the buffer halves
// down to 100, keeping the newest events.
func TestHistoryShrinksWhenStale(t *testing.T) {
	h := newWatchCacheHistory(DefaultEventFreshDuration)
	now := time.Unix(1000, 0)
	addEvents(h, 1, 400, func(uint64) time.Time { return now })
	if h.capacity != 400 {
		t.Fatalf("capacity %d, want 400", h.capacity)
	}
	later := now.Add(2 * DefaultEventFreshDuration)
	addEvents(h, 401, 401, func(uint64) time.Time { return later })
	if h.capacity != 200 || h.at(h.startIndex).ResourceVersion != 202 {
		t.Fatalf("capacity %d, oldest %d; want 200 from 202", h.capacity, h.at(h.startIndex).ResourceVersion)
	}
}

// TestCacheIncreaseDoesNotBreakWatch ports the upstream test: after an eviction and a resize, a watch
// from an evicted RV is still refused.
func TestCacheIncreaseDoesNotBreakWatch(t *testing.T) {
	h := newWatchCacheHistory(DefaultEventFreshDuration)
	h.capacity, h.cache, h.lowerBoundCapacity = 2, make([]*watchCacheEvent, 2), 2
	now := time.Unix(1000, 0)
	h.reset()
	listRV := uint64(10)
	h.add(&watchCacheEvent{Key: "key1", ResourceVersion: 20, RecordTime: now})
	later := now.Add(2 * DefaultEventFreshDuration)
	h.add(&watchCacheEvent{Key: "key2", ResourceVersion: 30, RecordTime: later})
	h.add(&watchCacheEvent{Key: "key3", ResourceVersion: 40, RecordTime: later})
	h.add(&watchCacheEvent{Key: "key4", ResourceVersion: 50, RecordTime: later.Add(time.Second)})
	_, err := h.intervalLocked(15, listRV, &sync.RWMutex{})
	if !apierrors.IsResourceExpired(err) {
		t.Fatalf("got %v, want too old resource version", err)
	}
}

// TestHistoryIntervalBounds: the oldest deliverable RV is listRV+1 until an eviction, then the first
// buffered event; one below it is allowed (watching from RV N means events after N), two below is
// 410 with upstream's message; a future RV is an empty interval; a never-listed empty buffer is an
// initialization error.
func TestHistoryIntervalBounds(t *testing.T) {
	var mu sync.RWMutex
	h := newWatchCacheHistory(DefaultEventFreshDuration)
	if _, err := h.intervalLocked(0, 0, mu.RLocker()); !errors.Is(err, errCacheNotInitialized) {
		t.Fatalf("empty never-listed history: got %v", err)
	}
	h.reset()
	const listRV = 10
	if _, err := h.intervalLocked(10, listRV, mu.RLocker()); err != nil {
		t.Fatalf("watch from the list RV: %v", err)
	}
	_, err := h.intervalLocked(9, listRV, mu.RLocker())
	if !apierrors.IsResourceExpired(err) || err.Error() != "too old resource version: 9 (10)" {
		t.Fatalf("watch from below the list RV: got %v", err)
	}
	now := time.Unix(1000, 0)
	old := func(rv uint64) time.Time { return now.Add(time.Duration(rv) * DefaultEventFreshDuration) }
	addEvents(h, 11, 110, old)
	got := collect(t, mustInterval(t, h, 10, listRV))
	if len(got) != 100 || got[0] != 11 {
		t.Fatalf("history from 10: %d events from %v", len(got), got[:1])
	}
	if got := collect(t, mustInterval(t, h, 200, listRV)); len(got) != 0 {
		t.Fatalf("future RV: got %v", got)
	}
	// Events older than the window: no growth, so the 101st evicts the oldest.
	addEvents(h, 111, 111, old)
	if !h.removedEventSinceRelist {
		t.Fatal("no eviction")
	}
	if _, err := h.intervalLocked(10, listRV, mu.RLocker()); err == nil || err.Error() != "too old resource version: 10 (11)" {
		t.Fatalf("after eviction: got %v", err)
	}
	if got := collect(t, mustInterval(t, h, 11, listRV)); len(got) != 100 || got[0] != 12 {
		t.Fatalf("history from 11 after eviction: %d events from %v", len(got), got[:1])
	}
}

func mustInterval(t *testing.T, h *watchCacheHistory, rv, listRV uint64) *watchCacheInterval {
	t.Helper()
	var mu sync.RWMutex
	i, err := h.intervalLocked(rv, listRV, mu.RLocker())
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func collect(t *testing.T, i *watchCacheInterval) []uint64 {
	t.Helper()
	var rvs []uint64
	for {
		e, err := i.next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			return rvs
		}
		rvs = append(rvs, e.ResourceVersion)
	}
}

// countingLocker counts the locks an interval takes.
type countingLocker struct {
	mu    sync.Mutex
	locks int
}

func (l *countingLocker) Lock()   { l.mu.Lock(); l.locks++ }
func (l *countingLocker) Unlock() { l.mu.Unlock() }

// TestHistoryIntervalCopiesInBatches: an interval takes the lock once per 100 events.
func TestHistoryIntervalCopiesInBatches(t *testing.T) {
	h := newWatchCacheHistory(DefaultEventFreshDuration)
	h.reset()
	now := time.Unix(1000, 0)
	addEvents(h, 2, 251, func(uint64) time.Time { return now })
	l := &countingLocker{}
	i, err := h.intervalLocked(1, 1, l)
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, i); len(got) != 250 {
		t.Fatalf("got %d events", len(got))
	}
	if l.locks != 3 {
		t.Fatalf("took the lock %d times, want 3", l.locks)
	}
}

// TestHistoryResetInvalidatesIntervals: a relist moves the start index forward, never back, and an
// interval that still has events to copy fails with errIntervalInvalidated; so does one whose events
// were evicted before it copied them.
func TestHistoryResetInvalidatesIntervals(t *testing.T) {
	h := newWatchCacheHistory(DefaultEventFreshDuration)
	h.reset()
	now := time.Unix(1000, 0)
	addEvents(h, 2, 51, func(uint64) time.Time { return now })
	var mu sync.RWMutex
	i, err := h.intervalLocked(1, 1, mu.RLocker())
	if err != nil {
		t.Fatal(err)
	}
	end := h.endIndex
	h.reset()
	if h.startIndex != end || h.endIndex != end {
		t.Fatalf("reset: start %d end %d, want both %d", h.startIndex, h.endIndex, end)
	}
	if _, err := i.next(); !errors.Is(err, errIntervalInvalidated) {
		t.Fatalf("interval after reset: got %v", err)
	}

	old := func(rv uint64) time.Time { return now.Add(time.Duration(rv) * DefaultEventFreshDuration) }
	addEvents(h, 100, 150, old)
	i, err = h.intervalLocked(99, 99, mu.RLocker())
	if err != nil {
		t.Fatal(err)
	}
	addEvents(h, 151, 260, old) // evicts 100..160
	if _, err := i.next(); !errors.Is(err, errIntervalInvalidated) {
		t.Fatalf("interval after eviction: got %v", err)
	}
}

// TestSuggestedWatchChannelSize ports the upstream table.
func TestSuggestedWatchChannelSize(t *testing.T) {
	d := DefaultEventFreshDuration
	tests := []struct {
		capacity       int
		index, trigger bool
		window         time.Duration
		want           int
	}{
		{100, true, true, d, 10}, {100, true, false, d, 10}, {100, false, false, d, 10},
		{750, true, true, d, 10}, {750, true, false, d, 10}, {750, false, false, d, 10},
		{7500, true, true, d, 10}, {7500, true, false, d, 100}, {7500, true, false, 2 * d, 50},
		{7500, false, false, d, 100}, {7500, false, false, 2 * d, 50},
		{75000, true, true, d, 10}, {75000, true, false, d, 1000}, {75000, true, false, 2 * d, 500},
		{75000, false, false, d, 100},
		{750000, true, true, d, 10}, {750000, true, false, d, 1000}, {750000, false, false, d, 100},
	}
	for _, tc := range tests {
		h := newWatchCacheHistory(tc.window)
		h.capacity = tc.capacity
		if got := h.suggestedWatchChannelSize(tc.index, tc.trigger); got != tc.want {
			t.Errorf("capacity %d index %t trigger %t window %v: got %d, want %d", tc.capacity, tc.index, tc.trigger, tc.window, got, tc.want)
		}
	}
}

// TestCapacityUpperBound ports the upstream table.
func TestCapacityUpperBound(t *testing.T) {
	tests := []struct {
		window time.Duration
		want   int
	}{
		{DefaultEventFreshDuration, upperBoundCapacity},
		{45 * time.Second, upperBoundCapacity},
		{4 * DefaultEventFreshDuration, 4 * upperBoundCapacity},
		{3 * DefaultEventFreshDuration, 4 * upperBoundCapacity},
		{DefaultEventFreshDuration << 20, upperBoundCapacity << 14},
	}
	for _, tc := range tests {
		if got := capacityUpperBound(tc.window); got != tc.want {
			t.Errorf("window %v: got %d, want %d", tc.window, got, tc.want)
		}
	}
}
