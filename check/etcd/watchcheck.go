package etcd

import (
	"fmt"
	"math"
	"sort"

	"github.com/google/go-cmp/cmp"

	"github.com/listwatch/listwatch/check"
)

// maxPerGuarantee bounds the violations listed per watch and guarantee; the rest are counted in a note.
const maxPerGuarantee = 20

// checkWatches checks every watch; ref is nil when there is no linearization, and then only the
// checks that need no reference run (filter, ordered, unique, atomic, bookmarkable, compaction).
func (c *checker) checkWatches(res *Result, ref *reference) {
	comps := c.compactions()
	for i := range c.h.Watches {
		if c.ctx.Err() != nil {
			return // CheckContext returns the context's error
		}
		wc := newWatchChecker(&c.h.Watches[i], i, ref, comps)
		wc.open, wc.start = c.open, c.start
		wc.run()
		res.Notes = append(res.Notes, wc.notes...)
		res.Violations = append(res.Violations, wc.out...)
		for g, n := range wc.dropped {
			res.Notes = append(res.Notes, fmt.Sprintf("watch %d: %d more %s violations not listed", i, n, g))
		}
	}
}

// evPos locates a received event: response and event index.
type evPos struct{ resp, ev int32 }

// revKey identifies an event of a watch: etcd can emit two events of one key at one revision (a txn
// that puts a key and then deletes it with a range ending in "\x00", which checkIntervals lets
// through), so the type is part of the identity.
type revKey struct {
	rev int64
	key Bytes
	typ EventType
}

type watchChecker struct {
	w     *Watch
	wi    int
	ref   *reference
	comps []compaction
	kr    keyRange
	point bool
	noPut bool
	noDel bool

	accepted  []evPos // events that passed the filter, unique and ordered checks, in order
	misplaced []evPos // events that broke ordered: received, but out of place
	received  map[revKey]bool

	firstRev      int64 // the first revision the watch owes events from
	firstRevKnown bool
	// fromCreated: firstRev is a watch from 0's created revision + 1. An event at the created
	// revision itself is neither owed nor below the start: etcd's watch server (v3rpc watch.go
	// recvLoop, 3.7.3) reads the created response's revision after it registers the watcher, so a
	// write committed in between is delivered at the revision the created response names
	// (etcd-io/etcd#20243 leaves that revision's meaning open).
	fromCreated  bool
	lastEventRev int64
	lastProgress int64
	compactedAt  int // index of the compacted response, or -1
	createFailed bool

	// open: an open history starting at start, whose store others write to
	open  bool
	start int64
	notes []string

	out     []Violation
	counts  map[Guarantee]int
	dropped map[Guarantee]int
}

func newWatchChecker(w *Watch, wi int, ref *reference, comps []compaction) *watchChecker {
	key := w.Request.Key
	if key == "" {
		key = "\x00"
	}
	wc := &watchChecker{w: w, wi: wi, ref: ref, comps: comps, kr: rangeOf(key, w.Request.RangeEnd),
		compactedAt: -1, counts: map[Guarantee]int{}, dropped: map[Guarantee]int{}}
	wc.point = !wc.kr.isRange
	for _, f := range w.Request.Filters {
		switch f {
		case FilterNoPut:
			wc.noPut = true
		case FilterNoDelete:
			wc.noDel = true
		}
	}
	return wc
}

func (wc *watchChecker) event(p evPos) *Event {
	return &wc.w.Responses[p.resp].Events[p.ev]
}

func (wc *watchChecker) report(g Guarantee, sig string, evs []Event, resp int, rev int64, diff string, format string, args ...any) {
	if wc.counts[g] >= maxPerGuarantee {
		wc.dropped[g]++
		return
	}
	wc.counts[g]++
	wc.out = append(wc.out, Violation{Violation: check.Violation{Guarantee: g, Operation: -1, Watch: wc.wi,
		Message: fmt.Sprintf(format, args...)}, Response: resp, Revision: rev, Diff: diff, Signature: sig, Events: evs})
}

func (wc *watchChecker) wants(typ EventType, key Bytes) bool {
	if typ == Put && wc.noPut || typ == Delete && wc.noDel {
		return false
	}
	return wc.kr.contains(key)
}

func (wc *watchChecker) run() {
	wc.structural()
	if wc.createFailed {
		return
	}
	wc.checkCompaction()
	if wc.ref != nil {
		wc.againstReference()
	}
}

// structural runs the checks that need only the watch's own responses (etcd's
// tests/robustness/validate/watch.go validateFilter, validateUnique, validateOrdered, validateAtomic,
// validateBookmarkable), and sorts its events into accepted and misplaced ones.
func (wc *watchChecker) structural() {
	w := wc.w
	groupStart := 0       // first accepted event of the revision lastEventRev
	prevLast := int64(-1) // last accepted event revision of the previous response with events
	created, progressSeen := false, false
	final := -1
	for ri := range w.Responses {
		r := &w.Responses[ri]
		if final >= 0 {
			if wc.compactedAt >= 0 {
				wc.report(Compaction, SigAfterCompaction, nil, ri, r.Revision, "", "response after the compaction response %d that ended the watch", final)
			}
			continue
		}
		switch {
		case r.Created:
			if !created {
				created = true
				if r.Canceled {
					wc.createFailed = true
					final = ri
					continue
				}
				if w.Request.StartRevision == 0 {
					wc.firstRev, wc.firstRevKnown, wc.fromCreated = r.Revision+1, true, true
				}
			}
			continue
		case r.IsCompacted():
			wc.compactedAt, final = ri, ri
			continue
		case r.Canceled:
			final = ri
			continue
		case r.IsProgressNotify():
			if r.Revision < wc.lastProgress {
				wc.report(Bookmarkable, SigProgressBackwards, nil, ri, r.Revision, "", "progress notification at %d after one at %d: progress went backwards", r.Revision, wc.lastProgress)
			}
			if r.Revision < wc.lastEventRev {
				wc.report(Bookmarkable, SigProgressBelowEvent, nil, ri, r.Revision, "", "progress notification at %d after an event at %d", r.Revision, wc.lastEventRev)
			}
			if wc.ref != nil && !wc.open && r.Revision > wc.ref.maxRev {
				wc.report(Bookmarkable, SigProgressBeyond, nil, ri, r.Revision, "", "progress notification at %d: the history never reached that revision (last %d)", r.Revision, wc.ref.maxRev)
			}
			if !progressSeen && !created && w.Request.StartRevision == 0 && len(wc.accepted) == 0 {
				wc.firstRev = r.Revision + 1
			}
			progressSeen = true
			wc.lastProgress = max(wc.lastProgress, r.Revision)
			continue
		}
		firstInResp := wc.structuralEvents(ri, r, &groupStart)
		if firstInResp >= 0 {
			if first := wc.event(wc.accepted[firstInResp]).Kv.ModRevision; first == prevLast {
				wc.report(Atomic, SigSplitRevision, nil, ri, first, "", "revision %d split between response %d and this one", first, wc.accepted[firstInResp-1].resp)
			}
			prevLast = wc.lastEventRev
		}
	}
	if w.Request.StartRevision > 0 {
		wc.firstRev, wc.firstRevKnown = w.Request.StartRevision, true
	}
	if !wc.firstRevKnown && wc.firstRev == 0 && len(wc.accepted) > 0 {
		wc.firstRev = wc.event(wc.accepted[0]).Kv.ModRevision
	}
}

// structuralEvents sorts response ri's events into accepted and misplaced ones, judging each on
// the structure alone; groupStart is the first accepted event of the revision lastEventRev. It
// returns the index in wc.accepted of the response's first accepted event, -1 if none.
func (wc *watchChecker) structuralEvents(ri int, r *WatchResponse, groupStart *int) (firstInResp int) {
	w := wc.w
	firstInResp = -1
	for ei := range r.Events {
		ev := &r.Events[ei]
		rev, key := ev.Kv.ModRevision, ev.Kv.Key
		if !wc.wants(ev.Type, key) {
			wc.report(Filter, sigFiltered(wc, key), []Event{stripPrev(*ev)}, ri, rev, "", "%s event of %s at %d does not match the watch on %s with filters %v",
				ev.Type, short(key), rev, describeRange(wc.kr.key, w.Request.RangeEnd), w.Request.Filters)
			continue
		}
		p := evPos{int32(ri), int32(ei)}
		switch {
		case rev > wc.lastEventRev:
			*groupStart = len(wc.accepted)
		case rev == wc.lastEventRev:
			if n := wc.inGroup(*groupStart, key, ev.Type); n > 0 && (wc.ref == nil || wc.ref.count(rev, key, ev.Type) <= n) {
				wc.report(Unique, SigDuplicate, []Event{stripPrev(*ev)}, ri, rev, "", "%s event of %s at %d received twice", ev.Type, short(key), rev)
				continue
			}
		default:
			wc.buildReceived()
			if wc.received[revKey{rev, key, ev.Type}] {
				wc.report(Unique, SigDuplicate, []Event{stripPrev(*ev)}, ri, rev, "", "%s event of %s at %d received twice", ev.Type, short(key), rev)
				continue
			}
			wc.report(Ordered, SigOutOfOrder, []Event{stripPrev(*ev)}, ri, rev, "", "event of %s at %d after an event at %d", short(key), rev, wc.lastEventRev)
			wc.misplaced = append(wc.misplaced, p)
			wc.received[revKey{rev, key, ev.Type}] = true
			continue
		}
		if ev.PrevKV != nil && !w.Request.PrevKV {
			// needs no reference: judged with the structure
			wc.report(PrevKV, SigPrevKVUnasked, []Event{*ev}, ri, rev, "", "event of %s at %d has a prev_kv the watch did not ask for", short(key), rev)
		}
		if rev <= wc.lastProgress {
			wc.report(Bookmarkable, SigEventAfterProgress, []Event{stripPrev(*ev)}, ri, rev, "", "event at %d after a progress notification at %d", rev, wc.lastProgress)
		}
		wc.accepted = append(wc.accepted, p)
		if wc.received != nil {
			wc.received[revKey{rev, key, ev.Type}] = true
		}
		wc.lastEventRev = rev
		if firstInResp < 0 {
			firstInResp = len(wc.accepted) - 1
		}
	}
	return firstInResp
}

// inGroup counts the accepted events of key and type from start on.
func (wc *watchChecker) inGroup(start int, key Bytes, typ EventType) int {
	n := 0
	for _, p := range wc.accepted[start:] {
		if ev := wc.event(p); ev.Kv.Key == key && ev.Type == typ {
			n++
		}
	}
	return n
}

// buildReceived indexes the events received so far; from then on structural keeps it up to date.
func (wc *watchChecker) buildReceived() {
	if wc.received != nil {
		return
	}
	wc.received = make(map[revKey]bool, len(wc.accepted)+len(wc.misplaced))
	for _, ps := range [][]evPos{wc.accepted, wc.misplaced} {
		for _, p := range ps {
			ev := wc.event(p)
			wc.received[revKey{ev.Kv.ModRevision, ev.Kv.Key, ev.Type}] = true
		}
	}
}

// checkCompaction checks that the watch was canceled as compacted exactly when it had to be, as far as
// the history tells: a compaction that completed before the watch was created above its start
// revision must cancel it before it receives anything, and a compaction answer needs a compaction
// that may have happened before it, above the revision the watch needed next.
func (wc *watchChecker) checkCompaction() {
	w := wc.w
	if wc.compactedAt >= 0 {
		r := &w.Responses[wc.compactedAt]
		c := r.CompactRevision
		found := false
		for _, comp := range wc.comps {
			if comp.rev == c && comp.call <= r.Time {
				found = true
			}
		}
		if !found && wc.open {
			wc.notes = append(wc.notes, fmt.Sprintf("watch %d: canceled as compacted at %d, a compaction no request of the history made (another client's, or the store's own)", wc.wi, c))
		} else if !found {
			wc.report(Compaction, SigCompactedUnrequested, nil, wc.compactedAt, c, "", "canceled as compacted at %d, but no compaction at %d was requested before", c, c)
		}
		next := int64(0)
		if wc.firstRevKnown {
			next = wc.firstRev
		}
		for _, p := range wc.accepted {
			if int(p.resp) < wc.compactedAt {
				next = max(next, wc.event(p).Kv.ModRevision+1)
			}
		}
		for ri := 0; ri < wc.compactedAt; ri++ {
			if pr := &w.Responses[ri]; pr.IsProgressNotify() {
				next = max(next, pr.Revision+1)
			}
		}
		if next >= c && next > 0 {
			wc.report(Compaction, SigCompactedNotNeeded, nil, wc.compactedAt, c, "", "canceled as compacted at %d, but the next revision it needed, %d, was not compacted", c, next)
		}
		return
	}
	start := w.Request.StartRevision
	if start <= 0 {
		return
	}
	var done int64
	for _, comp := range wc.comps {
		if comp.ok && comp.ret < w.Call {
			done = max(done, comp.rev)
		}
	}
	if start >= done {
		return
	}
	for ri := range w.Responses {
		r := &w.Responses[ri]
		if len(r.Events) > 0 || r.IsProgressNotify() {
			what := "events"
			if len(r.Events) == 0 {
				what = "a progress notification"
			}
			wc.report(Compaction, SigNotCanceled, nil, ri, done, "", "watch from %d received %s, though the compaction at %d completed before it was created: etcd cancels it as compacted before anything", start, what, done)
			return
		}
	}
}

// matchIter yields the reference events the watch must receive, in [from, to].
type matchIter struct {
	wc    *watchChecker
	pos   []int // for a one-key watch: the key's event indexes
	i, hi int
}

func (wc *watchChecker) iter(from, to int64) *matchIter {
	it := &matchIter{wc: wc}
	lo, hi := wc.ref.span(from, to)
	if wc.point {
		it.pos = wc.ref.byKey[wc.kr.key]
		it.i = sort.SearchInts(it.pos, lo)
		it.hi = sort.SearchInts(it.pos, hi)
		return it
	}
	it.i, it.hi = lo, hi
	return it
}

// next returns the index of the next owed reference event, or -1.
func (it *matchIter) next() int {
	ref := it.wc.ref
	for it.i < it.hi {
		p := it.i
		if it.pos != nil {
			p = it.pos[it.i]
		}
		it.i++
		if ev := &ref.events[p]; it.wc.wants(ev.Type, ev.Kv.Key) {
			return p
		}
	}
	return -1
}

// againstReference walks the accepted events and the events the reference owes the watch side by
// side: etcd's tests/robustness/validate/watch.go validateResumable, validateReliable,
// validateIsCreate and validatePrevKV, in one linear pass.
func (wc *watchChecker) againstReference() {
	ref := wc.ref
	lastRev := min(max(wc.lastEventRev, wc.lastProgress), ref.maxRev)
	from := wc.firstRev
	if from == 0 {
		return // nothing received, nothing owed
	}
	if wc.open && from <= wc.start {
		// what happened up to the start revision is not in the history: owed from after it
		from = wc.start + 1
	}
	it := wc.iter(from, lastRev)
	cur := it.next()
	first := true
	var missing []int
	flush := func(resp int) {
		if len(missing) == 0 {
			return
		}
		g := Reliable
		what := "events missing"
		if first {
			g, what = Resumable, "events missing at the start of the watch"
		}
		a, b := ref.events[missing[0]].Kv.ModRevision, ref.events[missing[len(missing)-1]].Kv.ModRevision
		evs := make([]Event, len(missing))
		for i, p := range missing {
			evs[i] = stripPrev(ref.events[p])
		}
		wc.report(g, SigMissing, evs, resp, a, wc.gapDiff(a, b), "%d %s, at revisions %d to %d", len(missing), what, a, b)
		missing = missing[:0]
	}
	for _, ap := range wc.accepted {
		ev := wc.event(ap)
		rev, key := ev.Kv.ModRevision, ev.Kv.Key
		if rev < from && rev >= wc.firstRev {
			continue // at or below an open history's start: not judged
		}
		if wc.fromCreated && rev == wc.firstRev-1 {
			continue // at the created revision: not judged (fromCreated)
		}
		if wc.firstRevKnown && rev < wc.firstRev {
			wc.report(FirstRevision, SigBelowFirstRevision, []Event{stripPrev(*ev)}, int(ap.resp), rev, "", "event of %s at %d is below the watch's first revision %d", short(key), rev, wc.firstRev)
			continue
		}
		p := ref.find(rev, key, ev.Type, max(cur, 0))
		if p < 0 {
			if q := ref.find(rev, key, 1-ev.Type, 0); q >= 0 {
				wc.report(Reliable, SigWrongType, []Event{stripPrev(*ev)}, int(ap.resp), rev, cmp.Diff(stripPrev(ref.events[q]), stripPrev(*ev)), "event of %s at %d has the wrong type", short(key), rev)
			} else {
				var owed []Event
				lo, hi := ref.span(rev, rev)
				for _, re := range ref.events[lo:hi] {
					if wc.wants(re.Type, re.Kv.Key) {
						owed = append(owed, stripPrev(re))
					}
				}
				wc.report(Genuine, SigInvented, []Event{stripPrev(*ev)}, int(ap.resp), rev, cmp.Diff(owed, []Event{stripPrev(*ev)}, diffOptions),
					"%s event of %s at %d is in no write of the history", ev.Type, short(key), rev)
			}
			continue
		}
		re := &ref.events[p]
		if cur < 0 || p < cur {
			wc.report(Reliable, SigOutOfOrderInRev, []Event{stripPrev(*ev)}, int(ap.resp), rev, "", "event of %s at %d out of order within its revision", short(key), rev)
			continue
		}
		for cur >= 0 && cur < p {
			if !wc.receivedRef(cur) && !wc.compactedWithinRevision(cur, wc.w.Responses[ap.resp].Time) {
				missing = append(missing, cur)
			}
			cur = it.next()
		}
		flush(int(ap.resp))
		cur = it.next()
		first = false
		if ev.Type != re.Type || ev.Kv != re.Kv {
			if ev.Type == re.Type && ev.IsCreate() != re.IsCreate() {
				wc.report(IsCreate, SigIsCreate, []Event{stripPrev(*ev)}, int(ap.resp), rev, cmp.Diff(stripPrev(*re), stripPrev(*ev)), "event of %s at %d: is-create %v, the key %s at %d",
					short(key), rev, ev.IsCreate(), map[bool]string{true: "did not exist", false: "existed"}[re.IsCreate()], rev-1)
			} else {
				wc.report(Reliable, SigDiffers, []Event{stripPrev(*ev)}, int(ap.resp), rev, cmp.Diff(stripPrev(*re), stripPrev(*ev)), "event of %s at %d differs from the write", short(key), rev)
			}
		}
		wc.checkPrevKV(ap, ev, re)
	}
	end := int64(math.MaxInt64)
	if n := len(wc.w.Responses); n > 0 {
		end = wc.w.Responses[n-1].Time
	}
	for cur >= 0 {
		if !wc.receivedRef(cur) && !wc.compactedWithinRevision(cur, end) {
			missing = append(missing, cur)
		}
		cur = it.next()
	}
	first = false
	flush(-1)
}

// compactedWithinRevision reports whether reference event p is one a compaction may have removed
// before time t without removing its revision: a compaction at exactly its revision C keeps, of
// each key, only its last change at C (mvcc key_index.go compact keeps the newest revision at or
// below C), so a watch that reads C from the store's history after it gets a txn's DELETE of a key
// without the PUT before it (TestCompactionWithinRevision).
func (wc *watchChecker) compactedWithinRevision(p int, t int64) bool {
	ev := &wc.ref.events[p]
	rev := ev.Kv.ModRevision
	later := false
	for q := p + 1; q < wc.ref.revStart[rev+1]; q++ {
		later = later || wc.ref.events[q].Kv.Key == ev.Kv.Key
	}
	if !later {
		return false
	}
	for _, c := range wc.comps {
		if c.rev == rev && c.call <= t {
			return true
		}
	}
	return false
}

func (wc *watchChecker) receivedRef(p int) bool {
	wc.buildReceived()
	ev := &wc.ref.events[p]
	return wc.received[revKey{ev.Kv.ModRevision, ev.Kv.Key, ev.Type}]
}

func stripPrev(ev Event) Event {
	ev.PrevKV = nil
	return ev
}

// gapDiff shows the owed and the received events of the revisions [a, b].
func (wc *watchChecker) gapDiff(a, b int64) string {
	var want, got []Event
	lo, hi := wc.ref.span(a, b)
	for _, ev := range wc.ref.events[lo:hi] {
		if wc.wants(ev.Type, ev.Kv.Key) {
			want = append(want, stripPrev(ev))
		}
	}
	for _, p := range wc.accepted {
		if ev := wc.event(p); ev.Kv.ModRevision >= a && ev.Kv.ModRevision <= b {
			got = append(got, stripPrev(*ev))
		}
	}
	return cmp.Diff(want, got, diffOptions)
}

// checkPrevKV: prev_kv is present if and only if the watch asked for it, unless the event creates its
// key or a compaction at or above the event's revision may have run before the response was received
// (etcd then omits it), and when present it is the key's value at the previous revision.
func (wc *watchChecker) checkPrevKV(ap evPos, ev, re *Event) {
	rev := ev.Kv.ModRevision
	resp := int(ap.resp)
	if !wc.w.Request.PrevKV {
		return // a prev_kv not asked for is a structural violation
	}
	switch {
	case ev.PrevKV != nil && re.PrevKV == nil:
		wc.report(PrevKV, SigPrevKVWrong, []Event{*ev}, resp, rev, cmp.Diff(re.PrevKV, ev.PrevKV), "event of %s at %d has a prev_kv, but the key did not exist at %d", short(ev.Kv.Key), rev, rev-1)
	case ev.PrevKV != nil && *ev.PrevKV != *re.PrevKV:
		wc.report(PrevKV, SigPrevKVWrong, []Event{*ev}, resp, rev, cmp.Diff(re.PrevKV, ev.PrevKV), "event of %s at %d: prev_kv is not the value at %d", short(ev.Kv.Key), rev, rev-1)
	case ev.PrevKV == nil && re.PrevKV != nil:
		t := wc.w.Responses[resp].Time
		for _, c := range wc.comps {
			if c.rev >= rev && c.call <= t {
				return
			}
		}
		wc.report(PrevKV, SigPrevKVMissing, []Event{*ev}, resp, rev, cmp.Diff(re.PrevKV, ev.PrevKV), "event of %s at %d has no prev_kv, and no compaction could have removed revision %d", short(ev.Kv.Key), rev, rev-1)
	}
}

// sigFiltered tells apart an event outside the watched range from one whose type a filter drops.
func sigFiltered(wc *watchChecker, key Bytes) string {
	if wc.kr.contains(key) {
		return SigFilteredType
	}
	return SigOutOfRange
}
