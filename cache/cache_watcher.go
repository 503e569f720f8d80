package cache

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/storage"
)

// The bookmark states of a watcher. An ordinary watch starts in bookmarkSent (it never gets the
// initial-events-end annotation); a watch-list starts in bookmarkWaiting until the dispatcher accepts
// a bookmark at or after bookmarkAfterResourceVersion, then bookmarkReceived until it is sent.
const (
	bookmarkWaiting = iota
	bookmarkReceived
	bookmarkSent
)

// watchFilter selects the objects under prefix (on a "/" boundary) that pred's selectors match. It is
// kept inline in the watcher, not behind a closure: with thousands of watchers every pointer chased
// per delivery is a cache miss.
//
// Mirrors cacher.go filterWithAttrsAndPrefixFunction.
type watchFilter struct {
	prefix     string
	pred       storage.Predicate
	everything bool
}

func newWatchFilter(prefix string, pred storage.Predicate) watchFilter {
	return watchFilter{prefix: prefix, pred: pred, everything: pred.Empty()}
}

func (f *watchFilter) matches(key string, l labels.Set, fs fields.Set) bool {
	return hasPathPrefix(key, f.prefix) && (f.everything || f.pred.MatchesObjectAttributes(l, fs))
}

// cacheWatcher is one watch served by the Cacher. The dispatcher feeds input; the watcher's goroutine
// replays its interval, then turns input into result, sending only events newer than what it already
// sent. done aborts the goroutine.
//
// Mirrors cacher/cache_watcher.go cacheWatcher.
type cacheWatcher struct {
	input  chan *watchCacheEvent
	result chan watch.Event
	done   chan struct{}
	filter watchFilter
	// stopped and drainInputBuffer are guarded by the Cacher's lock.
	stopped          bool
	drainInputBuffer bool
	// forget unregisters the watcher from the Cacher and stops it; drain asks to deliver what is
	// already in input first. It is set under the Cacher's lock before the watcher goroutine starts.
	forget    func(drain bool)
	versioner storage.Versioner
	// deadline is the watch context's deadline (zero if none): a bookmark is sent 2 s before it.
	deadline            time.Time
	allowWatchBookmarks bool
	clock               clock.PassiveClock
	logger              *slog.Logger
	identifier          string

	// bookmarkAfterResourceVersion is the resourceVersion the first (initial-events-end) bookmark
	// must reach; 0 when no such bookmark is due. Set before the goroutine starts.
	bookmarkAfterResourceVersion uint64
	stateMu                      sync.Mutex
	state                        int
	// metrics count the initial events sent; set before the goroutine starts.
	metrics *resourceMetrics
}

func newCacheWatcher(chanSize int, filter watchFilter, versioner storage.Versioner, deadline time.Time,
	allowWatchBookmarks bool, clk clock.PassiveClock, logger *slog.Logger, identifier string) *cacheWatcher {
	return &cacheWatcher{
		input:               make(chan *watchCacheEvent, chanSize),
		result:              make(chan watch.Event, chanSize),
		done:                make(chan struct{}),
		filter:              filter,
		forget:              func(bool) {},
		versioner:           versioner,
		deadline:            deadline,
		allowWatchBookmarks: allowWatchBookmarks,
		clock:               clk,
		logger:              logger,
		identifier:          identifier,
	}
}

// ResultChan implements watch.Interface.
func (c *cacheWatcher) ResultChan() <-chan watch.Event { return c.result }

// Backlog is how many events the dispatcher has queued for the watcher that ResultChan does not show
// yet: a consumer that flushes its output whenever ResultChan is empty (the HTTP watch handler) can
// let the watcher's goroutine move them first, and write them together. Some may be filtered out
// and never appear.
func (c *cacheWatcher) Backlog() int { return len(c.input) }

// Stop implements watch.Interface. It is idempotent; ResultChan is closed once the watcher's goroutine
// has exited, and events buffered before may still be read.
func (c *cacheWatcher) Stop() { c.forget(false) }

// stopLocked closes input (and done, unless draining). The caller holds the Cacher's lock and no
// dispatch is adding to input. Calling it again only closes done if draining was turned off since.
//
// Mirrors cacheWatcher.stopLocked.
func (c *cacheWatcher) stopLocked() {
	if !c.stopped {
		c.stopped = true
		if !c.drainInputBuffer {
			close(c.done)
		}
		close(c.input)
	}
	if !c.drainInputBuffer && !c.isDoneClosed() {
		close(c.done)
	}
}

func (c *cacheWatcher) isDoneClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// nonblockingAdd offers event to input without waiting. A bookmark older than the one the watch-list
// waits for is refused, so it cannot clog input.
//
// Mirrors cacheWatcher.nonblockingAdd.
func (c *cacheWatcher) nonblockingAdd(event *watchCacheEvent) bool {
	if event.Type == watch.Bookmark && event.ResourceVersion < c.bookmarkAfterResourceVersion {
		return false
	}
	select {
	case c.input <- event:
		c.markBookmarkReceived(event)
		return true
	default:
		return false
	}
}

// add offers event to input, waiting until timer fires (a nil timer: not at all) or stop closes. A
// watcher that still has no room is closed without an ERROR: its client re-watches from the last
// resourceVersion it saw. Bookmarks never come here.
//
// Mirrors cacheWatcher.add; stop (the Cacher stopping) is an addition, so that Stop never waits for a
// timer.
func (c *cacheWatcher) add(event *watchCacheEvent, timer <-chan time.Time, stop <-chan struct{}) bool {
	if c.nonblockingAdd(event) {
		return true
	}
	if timer != nil {
		select {
		case c.input <- event:
			return true
		case <-timer:
		case <-stop:
		}
	}
	// A watch-list that got its bookmark but has not sent it yet is drained rather than cut, so that the
	// client still receives the bookmark and can resume from it.
	c.stateMu.Lock()
	graceful := c.state == bookmarkReceived
	c.stateMu.Unlock()
	c.logger.Info("forcing watcher close due to unresponsiveness", "watcher", c.identifier,
		"input", len(c.input), "result", len(c.result), "graceful", graceful)
	c.forget(graceful)
	return false
}

// nextBookmarkTime is when the next bookmark is due: about every bookmarkFrequency, but 2 s before the
// deadline if that comes first, and at once while the watch-list's bookmark has not been accepted.
// ok is false when no bookmark fits before the deadline.
//
// Mirrors cacheWatcher.nextBookmarkTime.
func (c *cacheWatcher) nextBookmarkTime(now time.Time, bookmarkFrequency time.Duration) (time.Time, bool) {
	if !c.wasBookmarkReceived() {
		return time.Time{}, true
	}
	heartbeat := now.Add(bookmarkFrequency)
	if c.deadline.IsZero() {
		return heartbeat, true
	}
	if pre := c.deadline.Add(-2 * time.Second); pre.Before(heartbeat) {
		heartbeat = pre
	}
	if heartbeat.Before(now) {
		return time.Time{}, false
	}
	return heartbeat, true
}

func (c *cacheWatcher) wasBookmarkReceived() bool {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	return c.state != bookmarkWaiting
}

func (c *cacheWatcher) wasBookmarkSent() bool {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	return c.state == bookmarkSent
}

func (c *cacheWatcher) markBookmarkReceived(event *watchCacheEvent) {
	if event.Type != watch.Bookmark {
		return
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	if c.state == bookmarkWaiting {
		c.state = bookmarkReceived
	}
}

func (c *cacheWatcher) markBookmarkSent(event *watchCacheEvent) {
	if event.Type != watch.Bookmark {
		return
	}
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	c.state = bookmarkSent
}

// setBookmarkAfterResourceVersion arms the initial-events-end bookmark; 0 means none is due.
func (c *cacheWatcher) setBookmarkAfterResourceVersion(rv uint64) {
	c.stateMu.Lock()
	defer c.stateMu.Unlock()
	c.state = bookmarkWaiting
	if rv == 0 {
		c.state = bookmarkSent
	}
	c.bookmarkAfterResourceVersion = rv
}

// mutableObject is the object a watcher hands out: a CachingObject is shared as it is (it copies
// itself before any change), anything else is deep-copied.
func mutableObject(obj runtime.Object) runtime.Object {
	if _, ok := obj.(*CachingObject); ok {
		return obj
	}
	return obj.DeepCopyObject()
}

func (c *cacheWatcher) setResourceVersion(obj runtime.Object, rv uint64) {
	if err := c.versioner.UpdateObject(obj, rv); err != nil {
		c.logger.Error("failure to version api object", "resourceVersion", rv, "err", err)
	}
}

// convertToWatchEvent turns a cache event into what this watcher delivers, if anything. The filter
// runs on both states: entering the selection is ADDED, staying MODIFIED, leaving DELETED (of the
// previous state, at the event's resourceVersion).
//
// Mirrors cacheWatcher.convertToWatchEvent.
func (c *cacheWatcher) convertToWatchEvent(event *watchCacheEvent) (watch.Event, bool) {
	if event.Type == watch.Bookmark {
		obj := event.Object.DeepCopyObject()
		if !c.wasBookmarkSent() {
			if err := storage.AnnotateInitialEventsEndBookmark(obj); err != nil {
				c.logger.Error("error while annotating the initial-events-end bookmark", "watcher", c.identifier, "err", err)
				return watch.Event{}, false
			}
		}
		return watch.Event{Type: watch.Bookmark, Object: obj}, true
	}
	curPasses := event.Type != watch.Deleted && c.filter.matches(event.Key, event.ObjLabels, event.ObjFields)
	oldPasses := event.PrevObject != nil && c.filter.matches(event.Key, event.PrevObjLabels, event.PrevObjFields)
	switch {
	case curPasses && !oldPasses:
		return watch.Event{Type: watch.Added, Object: mutableObject(event.Object)}, true
	case curPasses && oldPasses:
		return watch.Event{Type: watch.Modified, Object: mutableObject(event.Object)}, true
	case oldPasses:
		old := mutableObject(event.PrevObject)
		c.setResourceVersion(old, event.ResourceVersion)
		return watch.Event{Type: watch.Deleted, Object: old}, true
	}
	return watch.Event{}, false
}

// sendWatchCacheEvent delivers event if this watcher wants it. Checking done first, then selecting,
// means that once done is closed at most one more event goes out, and only the next one in order:
// the delivered events are always a gap-free prefix. A plain select on both could skip an event and
// deliver the one after it.
//
// Mirrors cacheWatcher.sendWatchCacheEvent.
func (c *cacheWatcher) sendWatchCacheEvent(event *watchCacheEvent) {
	ev, ok := c.convertToWatchEvent(event)
	if !ok {
		return
	}
	select {
	case <-c.done:
		return
	default:
	}
	// Room in result: deliver at once. This is one of the choices the select below could make, and it
	// avoids locking both channels on the common path.
	select {
	case c.result <- ev:
		c.markBookmarkSent(event)
		return
	default:
	}
	select {
	case c.result <- ev:
		c.markBookmarkSent(event)
	case <-c.done:
	}
}

// processInterval is the watcher's goroutine: it replays the interval, sends the initial-events-end
// bookmark if one is due, then serves live events. It stops the watcher and closes result on exit.
//
// Mirrors cacheWatcher.processInterval.
func (c *cacheWatcher) processInterval(ctx context.Context, interval *watchCacheInterval, resourceVersion uint64) {
	defer close(c.result)
	defer c.Stop()

	// The interval may be fresher than asked for (a snapshot): never go back below it.
	if interval.resourceVersion > resourceVersion {
		resourceVersion = interval.resourceVersion
	}
	initEvents := 0
	for {
		event, err := interval.next()
		if err != nil {
			// An invalidated interval ends the watch without an ERROR, as upstream: the client's re-watch
			// then gets the explicit answer (events or 410).
			c.logger.Warn("couldn't retrieve watch event to serve", "watcher", c.identifier, "err", err)
			c.metrics.initEventsSent(initEvents)
			return
		}
		if event == nil {
			break
		}
		c.sendWatchCacheEvent(event)
		initEvents++
		// Initial events all carry the snapshot RV; history events rise. Either way nothing at or below
		// the highest RV sent may come again from input.
		if event.ResourceVersion > resourceVersion {
			resourceVersion = event.ResourceVersion
		}
	}
	c.metrics.initEventsSent(initEvents)
	if interval.initialEventsEndBookmark != nil {
		c.sendWatchCacheEvent(interval.initialEventsEndBookmark)
	}
	c.process(ctx, resourceVersion)
}

// process serves live events: only those newer than resourceVersion, and a bookmark at exactly
// resourceVersion while the initial-events-end bookmark is still unsent.
//
// Mirrors cacheWatcher.process.
func (c *cacheWatcher) process(ctx context.Context, resourceVersion uint64) {
	// The initial events are sent (or buffered): the watch is initialized, as upstream signals API
	// Priority and Fairness here.
	storage.WatchInitialized(ctx)
	for {
		var event *watchCacheEvent
		var ok bool
		// Take what input already holds without a two-way select; wait on both only when it is empty.
		// The context is looked at first, so an input kept full never hides a cancellation.
		select {
		case <-ctx.Done():
			return
		default:
		}
		select {
		case event, ok = <-c.input:
		default:
			select {
			case event, ok = <-c.input:
			case <-ctx.Done():
				return
			}
		}
		if !ok {
			return
		}
		if event.ResourceVersion > resourceVersion ||
			(event.Type == watch.Bookmark && event.ResourceVersion == resourceVersion && !c.wasBookmarkSent()) {
			c.sendWatchCacheEvent(event)
		}
	}
}

// identifierFor names a watcher in logs.
func identifierFor(key string, pred storage.Predicate) string {
	return fmt.Sprintf("key: %q, labels: %q, fields: %q", key, selectorString(pred.Label), selectorString(pred.Field))
}

func selectorString(s fmt.Stringer) string {
	if s == nil {
		return ""
	}
	return s.String()
}
