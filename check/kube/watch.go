package kube

import (
	"fmt"
	"math"
	"net/http"

	"github.com/listwatch/listwatch/check"
)

// Watch start classes.
const (
	startExact   = "exact"   // from N: the changes after N
	startInitial = "initial" // initial events (the state at some M), then the changes after M
	startNow     = "now"     // sendInitialEvents=false from "" or "0": the changes after some M
)

// watchClass says how a watch starts, per the API concepts document's "Semantics for watch" and
// its "Streaming lists" section: resourceVersion unset or "0" without sendInitialEvents start
// with the state (synthetic ADDED events), as sendInitialEvents=true does, and WatchList
// defaulting (k8s.io/apimachinery pkg/apis/meta/internalversion/defaults.go
// SetListOptionsDefaults) makes them sendInitialEvents=true.
func watchClass(o *ListOptions) string {
	switch {
	case o.SendInitialEvents != nil && *o.SendInitialEvents:
		return startInitial
	case o.ResourceVersion == "" || o.ResourceVersion == "0":
		if o.SendInitialEvents == nil {
			return startInitial
		}
		return startNow
	}
	return startExact
}

// expected is an event the write log owes a watch.
type expected struct {
	typ string
	obj *Object
	rec *record
	// optional: the write's resourceVersion is unknown and may be at or below the start.
	optional bool
}

// eventOf is the event record r gives a watch whose selector is sel: ADDED when the object
// enters the selection (created, or updated into it), MODIFIED while it stays, DELETED when it
// leaves (deleted, or updated out of it), carrying the previous state at the event's
// resourceVersion. Mirrors k8s.io/apiserver pkg/storage/cacher/cache_watcher.go
// convertToWatchEvent and pkg/storage/etcd3/watcher.go prepareObjects ("this sends the *old*
// object with the etcd revision for the time at which it gets deleted").
func eventOf(r *record, sel *selector) (string, *Object) {
	prevIn := r.Before != nil && sel.matches(r.Before)
	curIn := r.After != nil && sel.matches(r.After)
	switch {
	case !prevIn && curIn:
		return Added, r.After
	case prevIn && curIn:
		return Modified, r.After
	case prevIn && !curIn:
		old := *r.Before
		old.ResourceVersion = ""
		if r.RV != 0 {
			old.ResourceVersion = rvString(r.RV)
		}
		return Deleted, &old
	}
	return "", nil
}

// matchEvent reports whether frame f is the expected event e.
func matchEvent(e expected, f *Frame) bool {
	if f.Type != e.typ || f.Object.Name != e.obj.Name || f.Object.UID != e.obj.UID || !f.Object.sameContent(e.obj) {
		return false
	}
	v, err := parseRV(f.Object.ResourceVersion)
	if err != nil {
		return false
	}
	if e.rec.RV != 0 {
		return v == e.rec.RV
	}
	return v >= e.rec.MinRV && v <= e.rec.MaxRV
}

func (e expected) String() string {
	rv := e.obj.ResourceVersion
	if rv == "" {
		rv = fmt.Sprintf("[%d..%d]", e.rec.MinRV, e.rec.MaxRV)
	}
	return fmt.Sprintf("%s %s@%s (operation %d)", e.typ, e.obj.Name, rv, e.rec.Operation)
}

func describeFrame(f *Frame) string {
	switch {
	case f.Type == Error:
		return "ERROR " + f.Status.String()
	case f.Type == Bookmark && f.Object.InitialEventsEnd:
		return "BOOKMARK (initial-events-end) @" + f.Object.ResourceVersion
	case f.Type == Bookmark:
		return "BOOKMARK @" + f.Object.ResourceVersion
	}
	return f.Type + " " + f.Object.String()
}

// owed iterates over the events the log owes a watch after its start: records [p, q) may be at
// or below the start (their events are optional), records from q on are after it.
type owed struct {
	c    *checker
	sel  *selector
	p, q int
}

// peek returns the next owed event at or after record j and the record after it; ok false at
// the end of the log.
func (o *owed) peek(j int) (expected, int, bool) {
	for ; j < len(o.c.records); j++ {
		r := &o.c.records[j]
		if typ, obj := eventOf(r, o.sel); typ != "" {
			return expected{typ: typ, obj: obj, rec: r, optional: j < o.q}, j + 1, true
		}
	}
	return expected{}, j, false
}

// watchCheck is the state of one watch's check.
type watchCheck struct {
	c   *checker
	wi  int
	w   *Watch
	sel *selector
	key int
}

func (wc *watchCheck) violate(g Guarantee, frame int, exp, got, format string, a ...any) {
	wc.c.violate(Violation{Violation: check.Violation{Guarantee: g, Operation: -1, Watch: wc.wi,
		Message: fmt.Sprintf(format, a...)}, Frame: frame, Expected: exp, Received: got}, wc.key)
}

func (c *checker) checkWatches(withLog bool) {
	for wi := range c.h.Watches {
		if c.ctx.Err() != nil {
			return // CheckContext returns the context's error
		}
		c.checkWatch(wi, withLog)
	}
}

// checkWatch judges one watch.
func (c *checker) checkWatch(wi int, withLog bool) {
	w := &c.h.Watches[wi]
	o := &w.Options
	wc := &watchCheck{c: c, wi: wi, w: w, key: -10 - wi}
	class := watchClass(o)
	var n uint64
	if class == startExact {
		var err error
		if n, err = parseRV(o.ResourceVersion); err != nil && w.Status == http.StatusOK {
			wc.violate(Validation, -1, "", "", "answered 200 to a watch from resourceVersion %q, which the apiserver refuses (400: invalid resource version)", o.ResourceVersion)
			return
		}
	}
	switch {
	case w.Status == 0:
		return
	case w.Status == http.StatusGone:
		wc.violate(Expired, -1, "200 and an ERROR event", fmt.Sprintf("%d %s", w.Status, w.Error),
			"answered 410 as an HTTP status: the apiserver answers a watch from an expired resourceVersion with 200 and an ERROR event (k8s.io/apiserver pkg/storage/cacher/cacher.go Watch, newErrWatcher; pkg/storage/etcd3/watcher.go)")
		if class == startExact {
			c.expired = append(c.expired, expiry{kind: "watch", x: n, t: w.End, op: -1, watch: wi, f: -1})
		}
		return
	case w.Status != http.StatusOK:
		return
	}
	if why := invalidWatch(o); why != "" {
		wc.violate(Validation, -1, "", "", "answered 200 to watch options the apiserver refuses (%s): %s", describeOptions(o), why)
		return
	}
	sel, err := newSelector(o, c.h.Resource.Namespace)
	if err != nil {
		wc.violate(Validation, -1, "", "", "answered 200 to a bad selector: %v", err)
		return
	}
	wc.sel = sel

	// the frames that count: up to the first ERROR, after which nothing may come
	end := len(w.Frames)
	for j, f := range w.Frames {
		if f.Type == Error {
			end = j
			if j < len(w.Frames)-1 {
				wc.violate(WatchReplay, j+1, "the end of the stream", describeFrame(&w.Frames[j+1]),
					"a frame after an ERROR event: the watch ends with its error (k8s.io/apiserver pkg/endpoints/handlers/watch.go serveWatch)")
			}
			break
		}
	}
	endIdx, lastRV, ok := wc.structuralFrames(class, end)
	if !ok {
		return
	}
	// a 410 ERROR: only for a resourceVersion the watch needs
	if end < len(w.Frames) && w.Frames[end].Status.Code == http.StatusGone {
		f := &w.Frames[end]
		need := lastRV
		if class == startExact {
			need = max(need, n)
		}
		if need == 0 {
			wc.violate(Expired, end, "the initial state of the most recent or any resourceVersion", describeFrame(f),
				"410 Expired to a watch from resourceVersion %q that needs no history: its start is the state the server holds", o.ResourceVersion)
		} else {
			c.expired = append(c.expired, expiry{kind: "watch", x: need, t: f.Time, op: -1, watch: wi, f: end})
		}
	} else if class == startExact {
		c.served = append(c.served, expiry{kind: "watch", x: n, t: w.Call, op: -1, watch: wi, f: -1})
	}
	if !withLog {
		return
	}
	wc.replayWatch(class, n, end, endIdx)
}

// structuralFrames runs the checks of the frames before end that need no write log: bookmarks
// asked for and in order, one initial-events-end bookmark where initial events were asked for. It
// returns the index of that bookmark (-1 if none), the highest resourceVersion delivered, and
// false if a frame has a resourceVersion that is not one (a violation of its own).
func (wc *watchCheck) structuralFrames(class string, end int) (endIdx int, lastRV uint64, ok bool) {
	w, o := wc.w, &wc.w.Options
	endIdx = -1
	for j := range end {
		f := &w.Frames[j]
		v, err := parseRV(f.Object.ResourceVersion)
		if err != nil {
			wc.c.rvOf(f.Object.ResourceVersion, -1, wc.wi, j)
			return endIdx, lastRV, false
		}
		if f.Type == Bookmark {
			if !o.AllowWatchBookmarks {
				wc.violate(BookmarkOrder, j, "no bookmark", describeFrame(f),
					"a bookmark on a watch that did not ask for them (allowWatchBookmarks unset): the apiserver sends bookmarks only when asked (pkg/storage/cacher/cache_watcher.go, pkg/storage/etcd3/watcher.go)")
			}
			if v < lastRV {
				wc.violate(BookmarkOrder, j, fmt.Sprintf("a bookmark at %d or above", lastRV), describeFrame(f),
					"bookmark below a resourceVersion already delivered: a client resuming from it would get events again")
			}
			if f.Object.InitialEventsEnd {
				switch {
				case endIdx >= 0:
					wc.violate(InitialEventsEnd, j, "one initial-events-end bookmark", describeFrame(f), "a second initial-events-end bookmark")
				case class != startInitial || !o.AllowWatchBookmarks:
					wc.violate(InitialEventsEnd, j, "no initial-events-end bookmark", describeFrame(f),
						"initial-events-end bookmark on a watch that did not ask for initial events with bookmarks (pkg/storage/cacher/cacher.go setInitialEventsEndBookmarkIfRequested)")
				default:
					endIdx = j
				}
			}
		}
		lastRV = max(lastRV, v)
	}
	return endIdx, lastRV, true
}

// replayWatch finds the watch's start and holds what it delivered to the write log.
func (wc *watchCheck) replayWatch(class string, n uint64, end, endIdx int) {
	c, w, o := wc.c, wc.w, &wc.w.Options
	var lb uint64 // the lowest start the resourceVersion semantics allow
	switch {
	case o.ResourceVersion == "":
		lb = c.fresh(w.Call)
	case o.ResourceVersion != "0":
		lb = n
	}
	var events []int // frames of events, before end
	for j := range end {
		if w.Frames[j].Type != Bookmark {
			events = append(events, j)
		}
	}
	rvAt := func(j int) uint64 { v, _ := parseRV(w.Frames[j].Object.ResourceVersion); return v }

	switch {
	case class == startExact && n < c.initialRV:
		// the changes up to the run's start are not in the history: judge those after it
		c.res.Coverage.BeforeStart++
		from := end
		for j := range end {
			if rvAt(j) > c.initialRV {
				from = j
				break
			}
		}
		p, q := c.positions(c.initialRV)
		wc.live(c.initialRV, p, q, from, end)
	case class == startExact:
		p, q := c.positions(n)
		wc.live(n, p, q, 0, end)
	case class == startNow:
		if len(events) == 0 {
			return
		}
		m := rvAt(events[0]) - 1
		if m < lb {
			wc.violate(WatchStart, events[0], fmt.Sprintf("changes after %d or later", lb), describeFrame(&w.Frames[events[0]]),
				"a watch from the most recent state starts below resourceVersion %d, which a request had shown before the watch was called", lb)
			return
		}
		p, q := c.positions(m)
		wc.live(m, p, q, events[0], end)
	case endIdx >= 0:
		m := rvAt(endIdx)
		var initial []*Object
		for _, j := range events {
			if j > endIdx {
				break
			}
			if w.Frames[j].Type != Added {
				wc.violate(WatchStart, j, "ADDED events of the initial state", describeFrame(&w.Frames[j]), "an initial event other than ADDED")
				return
			}
			initial = append(initial, w.Frames[j].Object)
		}
		if m < lb {
			wc.violate(WatchStart, endIdx, fmt.Sprintf("an initial state at %d or later", lb), describeFrame(&w.Frames[endIdx]),
				"initial events end at resourceVersion %d, older than the watch's resourceVersion semantics allow (%q: at least %d)", m, o.ResourceVersion, lb)
			return
		}
		p, q := c.positions(m)
		if r := c.future(p, w.Frames[endIdx].Time); r != nil {
			wc.violate(WatchStart, endIdx, "", "", "the initial state at %d includes operation %d's write, called after the bookmark was received", m, r.Operation)
			return
		}
		var diff string
		k := p
		for ; k <= max(p, q); k++ {
			if diff = compareSets(c.filtered(k, wc.sel), initial); diff == "" {
				break
			}
		}
		if diff != "" {
			wc.violate(WatchStart, endIdx, describeObjects(c.filtered(p, wc.sel)), describeList(initial),
				"the initial events are not the state at the initial-events-end bookmark's resourceVersion %d: %s", m, diff)
			return
		}
		wc.live(m, k, k, endIdx+1, end)
	default:
		wc.splitInitial(lb, events, end)
	}
}

// splitInitial finds, for a watch that starts with the state but sent no initial-events-end
// bookmark, where the initial events end: the first k events must be the state at some M, all
// ADDED, and the rest the changes after M. It tries every split and every state, and reports the
// split that explains the most.
func (wc *watchCheck) splitInitial(lb uint64, events []int, end int) {
	c, w, o := wc.c, wc.w, &wc.w.Options
	rvAt := func(j int) uint64 { v, _ := parseRV(w.Frames[j].Object.ResourceVersion); return v }
	limit := len(events)
	for i, j := range events {
		if w.Frames[j].Type != Added {
			limit = i
			break
		}
	}
	for j := range end { // no split after a bookmark
		if w.Frames[j].Type == Bookmark {
			for i, e := range events {
				if e > j {
					limit = min(limit, i)
					break
				}
			}
			break
		}
	}
	type attempt struct {
		k, pos int
		m      uint64
	}
	var tried []attempt
	// the most initial events first: a stream cut short (a timeout, the client) may end inside
	// them, and then they are a part of the state
	for k := limit; k >= 0; k-- {
		var maxRV uint64
		var initial []*Object
		for _, j := range events[:k] {
			maxRV = max(maxRV, rvAt(j))
			initial = append(initial, w.Frames[j].Object)
		}
		lo := max(lb, maxRV)
		hi := uint64(math.MaxUint64)
		t := w.End
		cut := k == len(events) // no change followed: the initial events may be incomplete
		if !cut {
			if rvAt(events[k]) == 0 {
				continue
			}
			hi = rvAt(events[k]) - 1
			t = w.Frames[events[k]].Time
		}
		if lo > hi {
			continue
		}
		p, _ := c.positions(lo)
		_, q := c.positions(hi)
		for pos := p; pos <= q; pos++ {
			if pos > p && !wc.changes(&c.records[pos-1]) {
				continue // the selection did not change
			}
			if c.future(pos, t) != nil {
				break
			}
			want := c.filtered(pos, wc.sel)
			if (cut && compareSubset(want, initial) != "") || (!cut && compareSets(want, initial) != "") {
				continue
			}
			m := lo
			if pos > 0 {
				m = max(m, c.records[pos-1].lo())
			}
			tried = append(tried, attempt{k, pos, m})
			if wc.dryLive(m, pos, events, k, end) {
				wc.liveFrom(m, pos, events, k, end)
				if !cut && o.AllowWatchBookmarks && o.SendInitialEvents != nil {
					wc.violate(InitialEventsEnd, events[k], "an initial-events-end bookmark before the first change",
						describeFrame(&w.Frames[events[k]]),
						"the initial events end without the initial-events-end bookmark a watch with sendInitialEvents=true and allowWatchBookmarks=true gets (pkg/storage/cacher/cacher.go setInitialEventsEndBookmarkIfRequested)")
				}
				return
			}
		}
	}
	if len(tried) == 0 {
		p, _ := c.positions(lb)
		var shown []*Object
		for _, j := range events[:limit] {
			shown = append(shown, w.Frames[j].Object)
		}
		wc.violate(WatchStart, -1, describeObjects(c.filtered(p, wc.sel)), describeList(shown),
			"no state at a resourceVersion the watch's semantics allow (%q: at least %d) is its initial events", o.ResourceVersion, lb)
		return
	}
	// report the replay of the split that explains the most initial events
	best := tried[0]
	wc.liveFrom(best.m, best.pos, events, best.k, end)
}

// changes reports whether record r changes what the watch's selector admits.
func (wc *watchCheck) changes(r *record) bool {
	typ, _ := eventOf(r, wc.sel)
	return typ != ""
}

// dryLive reports whether the live frames after the first k events replay the log from pos.
func (wc *watchCheck) dryLive(m uint64, pos int, events []int, k, end int) bool {
	c := wc.c
	saved, savedCounts, savedChecked := len(c.res.Violations), c.counts, c.res.Coverage.EventsChecked
	savedNotes := len(c.res.Notes)
	c.counts = map[Guarantee]map[int]int{}
	okay := wc.live(m, pos, pos, liveStart(events, k), end)
	c.res.Violations, c.counts, c.res.Coverage.EventsChecked = c.res.Violations[:saved], savedCounts, savedChecked
	c.res.Notes = c.res.Notes[:savedNotes]
	return okay
}

// liveStart is the first frame after the first k events.
func liveStart(events []int, k int) int {
	if k == 0 {
		return 0
	}
	return events[k-1] + 1
}

func (wc *watchCheck) liveFrom(m uint64, pos int, events []int, k, end int) {
	wc.live(m, pos, pos, liveStart(events, k), end)
}

// live holds frames [from, end) to the changes after m: records [p, q) are optional, from q on
// owed. Every event must be the next owed one; every bookmark at or above what was delivered
// and below every pending event. It returns false after the first replay violation.
func (wc *watchCheck) live(m uint64, p, q, from, end int) bool {
	c, w := wc.c, wc.w
	ow := &owed{c: c, sel: wc.sel, p: p, q: q}
	j := p
	last := m
	for fi := from; fi < end; fi++ {
		f := &w.Frames[fi]
		v, _ := parseRV(f.Object.ResourceVersion)
		if f.Type == Bookmark {
			if f.Object.InitialEventsEnd {
				continue // judged in checkWatch
			}
			// the first owed event, skipping optional ones
			k := j
			for {
				e, nk, ok := ow.peek(k)
				if !ok {
					break
				}
				if e.optional {
					k = nk
					continue
				}
				if e.rec.hi() <= v {
					wc.violate(BookmarkOrder, fi, fmt.Sprintf("a bookmark below %s, which is pending", e), describeFrame(f),
						"bookmark ahead of a pending event: a client resuming from it would never see the event (bookmarks promise every change up to their resourceVersion was sent)")
					return false
				}
				break
			}
			last = max(last, v)
			continue
		}
		c.res.Coverage.EventsChecked++
		for {
			e, nk, ok := ow.peek(j)
			if !ok {
				wc.violate(WatchReplay, fi, fmt.Sprintf("no event: nothing the selector admits changed after %d", last), describeFrame(f),
					"an event the write log does not owe the watch")
				return false
			}
			if matchEvent(e, f) {
				j = nk
				last = v
				break
			}
			if e.optional {
				j = nk
				continue
			}
			wc.mismatch(ow, e, j, f, fi)
			return false
		}
	}
	return true
}

// mismatch reports why frame f is not the owed event e (at record j).
func (wc *watchCheck) mismatch(ow *owed, e expected, j int, f *Frame, fi int) {
	// further on: the events before it were dropped
	var skipped []string
	for k, n := j, 0; n < 1000; n++ {
		later, nk, ok := ow.peek(k)
		if !ok {
			break
		}
		if matchEvent(later, f) {
			wc.violate(WatchReplay, fi, e.String(), describeFrame(f),
				"event(s) missing: %d owed event(s) before this one were not delivered, first %s", len(skipped), skipped[0])
			return
		}
		skipped = append(skipped, later.String())
		k = nk
	}
	// earlier: delivered again, or out of order
	for k := ow.p; k < j; {
		before, nk, ok := ow.peek(k)
		if !ok {
			break
		}
		if matchEvent(before, f) {
			wc.violate(WatchReplay, fi, e.String(), describeFrame(f),
				"event out of order or delivered twice: it is owed before the events already delivered")
			return
		}
		k = nk
	}
	v, _ := parseRV(f.Object.ResourceVersion)
	if f.Object.Name == e.obj.Name && f.Object.UID == e.obj.UID && (e.rec.RV == v || (e.rec.RV == 0 && v >= e.rec.MinRV && v <= e.rec.MaxRV)) {
		if f.Type != e.typ {
			wc.violate(WatchReplay, fi, e.String(), describeFrame(f),
				"wrong event type: the selector admits the object %s before and %s after this write, so the watch owes %s",
				admits(wc.sel, e.rec.Before), admits(wc.sel, e.rec.After), e.typ)
			return
		}
		wc.violate(WatchReplay, fi, e.String(), describeFrame(f), "wrong object in the event")
		return
	}
	wc.violate(WatchReplay, fi, e.String(), describeFrame(f), "an event other than the next owed one")
}

func admits(sel *selector, o *Object) string {
	switch {
	case o == nil:
		return "(absent)"
	case sel.matches(o):
		return "(admitted)"
	}
	return "(not admitted)"
}
