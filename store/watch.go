package store

import (
	"time"

	"github.com/listwatch/listwatch/etcdrules"
)

// watcher is one watch on a stream. It lives in exactly one place: the synced group, the unsynced
// group, a victim batch, or nowhere once compacted or canceled (mvcc/watcher.go watcher).
type watcher struct {
	ws       *WatchStream
	id       int64
	kr       keyRange
	startRev int64
	// minRev is the lowest revision the watcher still has to receive
	minRev   int64
	prevKV   bool
	noPut    bool
	noDelete bool
	progress bool // progress_notify was asked for

	// creating: the created answer is not on the channel yet. The watcher is registered, but
	// nothing is sent for it until then (v3rpc's sendLoop holds such responses back as pending).
	creating  bool
	victim    bool
	compacted bool
	canceled  bool

	// quietSinceTick is etcd's sendLoop progress[id]: no events went out since the last progress tick
	quietSinceTick bool

	groupPos int
	setPos   int

	// per-notify scratch: indexes of the txn's changes this watcher matches
	matched []int
	chosen  bool // per-sync scratch
}

func (w *watcher) filtered() bool { return w.noPut || w.noDelete }

func (w *watcher) drops(ev *Event) bool {
	return (w.noPut && ev.Type == etcdrules.EventPut) || (w.noDelete && ev.Type == etcdrules.EventDelete)
}

// eventBatch is the events a watcher is owed from one sync pass: at most watchBatchMaxRevs revisions;
// moreRev is the first revision left out (mvcc/watcher_group.go eventBatch).
type eventBatch struct {
	evs     []*Event
	revs    int
	moreRev int64
}

func (eb *eventBatch) add(ev *Event) {
	if eb.revs > watchBatchMaxRevs {
		return
	}
	if len(eb.evs) == 0 {
		eb.revs = 1
		eb.evs = append(eb.evs, ev)
		return
	}
	if ev.Kv.ModRevision > eb.evs[len(eb.evs)-1].Kv.ModRevision {
		eb.revs++
		if eb.revs > watchBatchMaxRevs {
			eb.moreRev = ev.Kv.ModRevision
			return
		}
	}
	eb.evs = append(eb.evs, ev)
}

func (eb *eventBatch) full() bool { return eb.revs > watchBatchMaxRevs }

type watcherBatch map[*watcher]*eventBatch

// watchState is the watchable store's bookkeeping, guarded by Store.mu.
type watchState struct {
	synced   *watcherGroup
	unsynced *watcherGroup
	victims  []watcherBatch
	streams  map[*WatchStream]struct{}
	// streams with at least one progress_notify watcher
	progressStreams map[*WatchStream]struct{}
	// streams with control answers waiting for room in their channel
	ctrlPending map[*WatchStream]struct{}
	touched     []*watcher // notify scratch
}

func newWatchState() watchState {
	return watchState{
		synced:          newWatcherGroup(),
		unsynced:        newWatcherGroup(),
		streams:         make(map[*WatchStream]struct{}),
		progressStreams: make(map[*WatchStream]struct{}),
		ctrlPending:     make(map[*WatchStream]struct{}),
	}
}

func (st *watchState) allStreams() []*WatchStream {
	out := make([]*WatchStream, 0, len(st.streams))
	for ws := range st.streams {
		out = append(out, ws)
	}
	return out
}

func (st *watchState) nextProgressTick() (time.Time, bool) {
	var next time.Time
	ok := false
	for ws := range st.progressStreams {
		if !ok || ws.nextProgress.Before(next) {
			next, ok = ws.nextProgress, true
		}
	}
	return next, ok
}

// register places a new watcher as mvcc/watchable_store.go watch does: synced if it starts after the
// current revision (so always when it starts at 0), otherwise unsynced to be caught up from history.
// fromRev is the revision the watcher's created answer reports; a watcher with start revision 0
// receives everything after it.
func (s *Store) registerLocked(w *watcher, fromRev int64) {
	if w.startRev == 0 {
		w.minRev = fromRev + 1
	} else {
		w.minRev = w.startRev
	}
	if w.minRev > s.currentRev {
		s.watch.synced.add(w)
	} else {
		s.watch.unsynced.add(w)
	}
}

// cancelWatcherLocked removes a watcher from wherever it is (watchable_store.go cancelWatcher).
func (s *Store) cancelWatcherLocked(w *watcher) {
	w.canceled = true
	if s.watch.unsynced.remove(w) || s.watch.synced.remove(w) {
		return
	}
	if w.victim {
		for _, wb := range s.watch.victims {
			if _, ok := wb[w]; ok {
				delete(wb, w)
				return
			}
		}
	}
}

// offer puts a response on the watcher's stream without blocking; nothing goes out for a watcher
// whose created answer has not.
func offer(w *watcher, wr WatchResponse) bool {
	return !w.creating && w.ws.offerLocked(wr)
}

// eventCache builds, once per pass, the variant of an event that carries prev_kv.
type eventCache map[*Event]*Event

// withPrev returns ev with PrevKV filled as v3rpc's sendLoop fills it: from a range at mod-1, skipped for
// a creating put and silently missing once that revision is compacted.
func (s *Store) withPrev(ev *Event, cache eventCache) *Event {
	if ev.IsCreate() {
		return ev
	}
	if p, ok := cache[ev]; ok {
		return p
	}
	out := ev
	rev := ev.Kv.ModRevision - 1
	if rev >= s.compactRev {
		if ki := s.idx.get(string(ev.Kv.Key)); ki != nil {
			if rc := ki.at(rev); rc != nil {
				out = &Event{Type: ev.Type, Kv: ev.Kv, PrevKV: s.idx.keyValue(rc, false)}
			}
		}
	}
	cache[ev] = out
	return out
}

// prepare applies a watcher's filters and prev_kv to events it is owed. It returns the events to send
// and false if the filters left nothing (mvcc/watcher.go send treats that as sent).
func (s *Store) prepare(w *watcher, evs []*Event, cache eventCache) ([]*Event, bool) {
	if !w.filtered() && !w.prevKV {
		return evs, true
	}
	out := make([]*Event, 0, len(evs))
	for _, ev := range evs {
		if w.drops(ev) {
			continue
		}
		if w.prevKV {
			ev = s.withPrev(ev, cache)
		}
		out = append(out, ev)
	}
	return out, len(out) > 0
}

// sendEventsLocked offers an events response; a response the filters emptied counts as sent.
func (s *Store) sendEventsLocked(w *watcher, evs []*Event, rev int64, cache eventCache) bool {
	evs, any := s.prepare(w, evs, cache)
	if !any {
		return true
	}
	if !offer(w, WatchResponse{WatchID: w.id, Events: evs, Revision: rev}) {
		return false
	}
	w.quietSinceTick = false
	return true
}

// notifyLocked tells synced watchers about one committed write txn (watchable_store.go notify): every
// matching watcher gets one response with all its events of the revision; one whose stream is full
// becomes a victim and keeps the response to retry. Writers never wait for readers.
func (s *Store) notifyLocked(rev int64, changes []*rec) {
	g := s.watch.synced
	if g.size() == 0 {
		return
	}
	if len(changes) == 1 {
		s.notifyOneLocked(rev, changes[0])
		return
	}
	touched := s.watch.touched[:0]
	for i, c := range changes {
		g.forEach(s.idx.keyOf(c), func(w *watcher) {
			if rev < w.minRev {
				return // a watcher that starts in the future
			}
			if len(w.matched) == 0 {
				touched = append(touched, w)
			}
			w.matched = append(w.matched, i)
		})
	}
	if len(touched) == 0 {
		s.watch.touched = touched
		return
	}
	evs := make([]*Event, len(changes))
	for i, c := range changes {
		evs[i] = s.arena.event(s.idx, c)
	}
	cache := eventCache{}
	var withPrevAll []*Event // the whole txn with prev_kv, shared by every watcher that wants it
	var victims watcherBatch
	for _, w := range touched {
		raw := evs
		if len(w.matched) != len(changes) {
			raw = make([]*Event, 0, len(w.matched))
			for _, i := range w.matched {
				raw = append(raw, evs[i])
			}
		}
		w.matched = w.matched[:0]
		out, any := raw, true
		switch {
		case w.prevKV && !w.filtered() && len(raw) == len(evs):
			if withPrevAll == nil {
				withPrevAll = make([]*Event, len(evs))
				for i, ev := range evs {
					withPrevAll[i] = s.withPrev(ev, cache)
				}
			}
			out = withPrevAll
		case w.prevKV || w.filtered():
			out, any = s.prepare(w, raw, cache)
		}
		if any {
			if offer(w, WatchResponse{WatchID: w.id, Events: out, Revision: rev}) {
				w.quietSinceTick = false
			} else {
				// the victim keeps the raw events: filters and prev_kv are applied again at resend
				w.victim = true
				if victims == nil {
					victims = make(watcherBatch)
				}
				victims[w] = &eventBatch{evs: raw, revs: 1}
				g.remove(w)
			}
		}
		w.minRev = rev + 1
	}
	for i := range touched {
		touched[i] = nil
	}
	s.watch.touched = touched[:0]
	if victims != nil {
		s.watch.victims = append(s.watch.victims, victims)
		s.wake()
	}
}

// notifyOneLocked is notifyLocked for a txn of one change, every put and delete: each matching
// watcher is offered the event as it is found, in one pass over the watchers, where a txn of several
// changes first collects each watcher's share of them. With thousands of watchers each watcher
// visited once rather than twice is most of the difference.
func (s *Store) notifyOneLocked(rev int64, change *rec) {
	g := s.watch.synced
	var evs []*Event // the one event, built for the first watcher that wants it
	var cache eventCache
	victims := s.watch.touched[:0]
	g.forEach(s.idx.keyOf(change), func(w *watcher) {
		if rev < w.minRev {
			return // a watcher that starts in the future
		}
		if evs == nil {
			evs = []*Event{s.arena.event(s.idx, change)}
		}
		out, any := evs, true
		if w.prevKV || w.filtered() {
			if cache == nil {
				cache = eventCache{}
			}
			out, any = s.prepare(w, evs, cache)
		}
		if any {
			if offer(w, WatchResponse{WatchID: w.id, Events: out, Revision: rev}) {
				w.quietSinceTick = false
			} else {
				// removed from the group once the walk over it is done
				victims = append(victims, w)
			}
		}
		w.minRev = rev + 1
	})
	if len(victims) > 0 {
		// the victim keeps the raw event: filters and prev_kv are applied again at resend
		batch := make(watcherBatch, len(victims))
		for i, w := range victims {
			w.victim = true
			batch[w] = &eventBatch{evs: evs, revs: 1}
			g.remove(w)
			victims[i] = nil
		}
		s.watch.victims = append(s.watch.victims, batch)
		s.wake()
	}
	s.watch.touched = victims[:0]
}

// syncWatchersLocked catches up to maxWatchersPerSync unsynced watchers from history and returns how
// many remain unsynced (watchable_store.go syncWatchers). Successive passes take the unsynced
// watchers in turn, so that watchers whose answers cannot be delivered do not hold the others back
// (etcd picks them in its map's random order, watcher_group.go choose). Each watcher gets at most
// watchBatchMaxRevs revisions per pass, never a split revision; the response header is the current
// revision. A watcher whose next revision was compacted gets the compaction answer and is dropped.
func (s *Store) syncWatchersLocked() int {
	ug := s.watch.unsynced
	if ug.size() == 0 {
		return 0
	}
	curRev, compactRev := s.currentRev, s.compactRev

	chosen := ug.choose(maxWatchersPerSync)
	minRev := int64(-1)
	live := chosen[:0]
	for _, w := range chosen {
		if w.creating {
			continue // caught up once its created answer is out
		}
		if w.minRev < compactRev {
			if offer(w, WatchResponse{WatchID: w.id, CompactRevision: compactRev, Canceled: true}) {
				w.compacted = true
				ug.remove(w)
			}
			// otherwise retried next pass
			continue
		}
		if minRev < 0 || w.minRev < minRev {
			minRev = w.minRev
		}
		w.chosen = true
		live = append(live, w)
	}
	if len(live) == 0 {
		return ug.size()
	}

	batches := make(watcherBatch, len(live))
	open := len(live) // watchers whose batch can still take events
	s.log.scan(minRev, func(r *rec) bool {
		if r.mod > curRev {
			return false
		}
		var ev *Event
		ug.forEach(s.idx.keyOf(r), func(w *watcher) {
			if !w.chosen || r.mod < w.minRev {
				return
			}
			eb := batches[w]
			if eb == nil {
				eb = &eventBatch{}
				batches[w] = eb
			}
			if eb.full() {
				return
			}
			if ev == nil {
				ev = s.arena.event(s.idx, r)
			}
			eb.add(ev)
			if eb.full() {
				open--
			}
		})
		// every chosen watcher has its fill of revisions: the rest of history would be read for nothing
		return open > 0
	})

	cache := eventCache{}
	var victims watcherBatch
	for _, w := range live {
		w.chosen = false
		w.minRev = max(curRev+1, w.minRev)
		eb, ok := batches[w]
		if !ok {
			ug.remove(w)
			s.watch.synced.add(w)
			continue
		}
		if eb.moreRev != 0 {
			w.minRev = eb.moreRev
		}
		if !s.sendEventsLocked(w, eb.evs, curRev, cache) {
			w.victim = true
			if victims == nil {
				victims = make(watcherBatch)
			}
			victims[w] = eb
			ug.remove(w)
			continue
		}
		if eb.moreRev != 0 {
			continue // stays unsynced: more to read
		}
		ug.remove(w)
		s.watch.synced.add(w)
	}
	if victims != nil {
		s.watch.victims = append(s.watch.victims, victims)
	}
	return ug.size()
}

// moveVictimBatchLocked retries the oldest batch of responses that full streams refused, keeps
// what is still refused for a later retry, and returns how many went out (watchable_store.go
// moveVictims, one batch per critical section). A watcher whose retry succeeds returns to unsynced
// if it has more to catch up, else to synced.
func (s *Store) moveVictimBatchLocked() int {
	if len(s.watch.victims) == 0 {
		return 0
	}
	wb := s.watch.victims[0]
	s.watch.victims[0] = nil
	s.watch.victims = s.watch.victims[1:]
	moved := 0
	cache := eventCache{}
	var still watcherBatch
	for w, eb := range wb {
		// the watcher has observed the store up to, but not including, w.minRev
		if !s.sendEventsLocked(w, eb.evs, w.minRev-1, cache) {
			if still == nil {
				still = make(watcherBatch)
			}
			still[w] = eb
			continue
		}
		moved++
		w.victim = false
		if eb.moreRev != 0 {
			w.minRev = eb.moreRev
		}
		if w.minRev <= s.currentRev {
			s.watch.unsynced.add(w)
		} else {
			s.watch.synced.add(w)
		}
	}
	if still != nil {
		s.watch.victims = append(s.watch.victims, still)
	}
	if len(s.watch.victims) == 0 {
		s.watch.victims = nil
	}
	return moved
}

// progressIfSyncLocked sends one progress notification addressed to responseID if every given watcher
// is synced and the store has reached its start revision (watchable_store.go progressIfSync). It is
// never queued: a full stream simply misses it.
func (s *Store) progressIfSyncLocked(ws *WatchStream, watchers []*watcher, responseID int64) bool {
	rev := s.currentRev
	for _, w := range watchers {
		if w.creating || !s.watch.synced.has(w) {
			return false
		}
		if rev < w.startRev {
			return false
		}
	}
	if len(watchers) > 0 {
		ws.offerLocked(WatchResponse{WatchID: responseID, Revision: rev})
	}
	return true
}

// progressTickLocked runs a stream's progress ticker if it is due (v3rpc sendLoop progressTicker):
// each progress watcher that sent no events since the previous tick gets a progress notification if
// it is synced. Ticks missed while nobody ran the store's periodic work are one tick, as a
// time.Ticker drops the ticks its reader missed.
func (s *Store) progressTickLocked(ws *WatchStream, now time.Time) {
	if ws.closed || now.Before(ws.nextProgress) {
		return
	}
	ws.nextProgress = nextTick(ws.nextProgress, ws.progressPeriod, now)
	for _, w := range ws.watchers {
		if !w.progress {
			continue
		}
		if w.quietSinceTick {
			s.progressIfSyncLocked(ws, []*watcher{w}, w.id)
		}
		w.quietSinceTick = true
	}
}
