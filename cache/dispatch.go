package cache

import (
	"time"

	"k8s.io/apimachinery/pkg/watch"
)

// maxDispatchBatch bounds how many queued events the dispatcher takes at once: what incoming holds.
const maxDispatchBatch = incomingBufferSize

// watcherGroup names one set of the watcher registry: the watchers of one namespace/name scope, or
// of one trigger value. Every watcher is in exactly one group.
type watcherGroup struct {
	byValue bool
	scope   namespacedName
	value   string
}

// triggerSelection is the trigger values of an event's object now and before, if the trigger applies.
type triggerSelection struct {
	values    []string
	supported bool
}

// delivery is what one watcher is owed from a batch: the events its group selects, in order, and how
// many of them its input has taken.
type delivery struct {
	w      *cacheWatcher
	events []*watchCacheEvent
	next   int
}

// dispatchBatch offers the events the dispatcher took from incoming together (in resourceVersion
// order; storage bookmarks only move lastProcessedRV and are skipped) to the watchers that may want
// them. Each event is offered as upstream's dispatchEvent offers it, first without blocking and then,
// to a watcher whose input stayed full, blocking within the shared time budget, after which the
// watcher is closed. What differs is the order of the offers: watcher by watcher rather than event by
// event. A watcher therefore gets all its events of the batch with one wake-up of its goroutine, where
// event-major offers wake every parked watcher once per event; with thousands of watchers that
// wake-up (a goroutine switch whose stack and channels are out of the CPU caches) is most of the cost
// of a delivery, and the dispatcher, preempted among thousands of runnable watchers, no longer gets
// ahead of them. A watcher whose input fills up part way is offered the rest again without blocking
// once every other watcher had its turn (its goroutine runs meanwhile), and only when a round of such
// offers makes no progress does the dispatcher block on it: a batch never turns room that one event at
// a time would have found into a blocked watcher. Each watcher still receives exactly its events, in
// order; one that is closed receives a gap-free prefix of them.
//
// Mirrors Cacher.dispatchEvent for each event of the batch.
func (c *Cacher) dispatchBatch(batch []*watchCacheEvent) {
	events := c.batchEvents[:0]
	triggers := c.batchTriggers[:0]
	for _, event := range batch {
		if event.Type == watch.Bookmark {
			continue
		}
		// The trigger functions see the objects as stored, not their caching wrappers.
		values, supported := c.triggerValues(event)
		triggers = append(triggers, triggerSelection{values: values, supported: supported})
		events = append(events, cachingCopy(event, c.versioner, c.logger))
	}
	c.batchEvents, c.batchTriggers = events, triggers
	defer func() {
		clear(c.batchEvents)
		clear(c.batchTriggers)
	}()
	if len(events) == 0 {
		return
	}
	c.startDispatchingBatch(events, triggers)
	defer c.finishDispatching()

	// Offers without blocking, in rounds, while a round makes progress.
	pending := c.deliveries
	for {
		progressed := false
		still := pending[:0]
		for i := range pending {
			d := pending[i]
			for d.next < len(d.events) && d.w.nonblockingAdd(d.events[d.next]) {
				d.next++
				progressed = true
			}
			if d.next < len(d.events) {
				still = append(still, d)
			}
		}
		pending = still
		if len(pending) == 0 || !progressed {
			break
		}
	}
	if len(pending) > 0 {
		c.blockingDeliver(pending)
	}
	// Drop references to watchers and events so that the reused slice keeps nothing alive.
	clear(c.deliveries)
	c.deliveries = c.deliveries[:0]
	clear(c.batchGroups)
}

// blockingDeliver waits, within the time budget, for the watchers whose input stayed full; once the
// budget is spent (or the Cacher stops) every watcher still full is closed. Every blocked watcher gets
// its chance while the timer runs, not only the first.
//
// Mirrors the blocking half of Cacher.dispatchEvent.
func (c *Cacher) blockingDeliver(pending []delivery) {
	start := c.clock.Now()
	timeout := c.budget.takeAvailable()
	var timerC <-chan time.Time
	if timeout > 0 {
		if c.timer == nil {
			c.timer = c.clock.NewTimer(timeout)
		} else {
			c.timer.Reset(timeout)
		}
		timerC = c.timer.C()
	}
	for i := range pending {
		d := &pending[i]
		for ; d.next < len(d.events); d.next++ {
			if !d.w.add(d.events[d.next], timerC, c.ctx.Done()) {
				c.metrics.watcherTerminated()
				// Closed: the rest of its events are not its to get.
				timerC = nil
				break
			}
		}
	}
	if c.timer != nil && !c.timer.Stop() {
		// Fired but not received (a stop came first): drain it so a fake clock never blocks on it.
		select {
		case <-c.timer.C():
		default:
		}
	}
	c.budget.returnUnused(timeout - c.clock.Since(start))
}

// startDispatchingBatch works out, under the registry lock, which watchers may want which events of
// the batch, and marks a dispatch in flight: stops are deferred until finishDispatching.
//
// Mirrors Cacher.startDispatching for each event of the batch.
func (c *Cacher) startDispatchingBatch(events []*watchCacheEvent, triggers []triggerSelection) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dispatching = true
	groups := c.batchGroups
	clear(groups)
	add := func(g watcherGroup, event *watchCacheEvent) {
		if g.byValue {
			if len(c.watchers.valueWatchers[g.value]) == 0 {
				return
			}
		} else if len(c.watchers.allWatchers[g.scope]) == 0 {
			return
		}
		groups[g] = append(groups[g], event)
	}
	for i, event := range events {
		namespace := event.ObjFields["metadata.namespace"]
		name := event.ObjFields["metadata.name"]
		if namespace != "" {
			if name != "" {
				add(watcherGroup{scope: namespacedName{namespace: namespace, name: name}}, event)
			}
			add(watcherGroup{scope: namespacedName{namespace: namespace}}, event)
		}
		if name != "" {
			add(watcherGroup{scope: namespacedName{name: name}}, event)
		}
		add(watcherGroup{}, event)
		if triggers[i].supported {
			for _, v := range triggers[i].values {
				add(watcherGroup{byValue: true, value: v}, event)
			}
		} else {
			// Without a trigger no watcher should be indexed by value; offer to all to be safe.
			for v := range c.watchers.valueWatchers {
				add(watcherGroup{byValue: true, value: v}, event)
			}
		}
	}
	for g, evs := range groups {
		ws := c.watchers.allWatchers[g.scope]
		if g.byValue {
			ws = c.watchers.valueWatchers[g.value]
		}
		for _, w := range ws {
			c.deliveries = append(c.deliveries, delivery{w: w, events: evs})
		}
	}
}
