package etcd

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/listwatch/listwatch/etcdrules"
)

// A mutation is one corruption a store could commit to a response or a watch stream. sites lists
// the places of a valid history (with its check result) where it applies, in history order; at
// applies it at one of them, to a copy. The checker must report it under want, and under no
// guarantee but want and also (a corruption that breaks a second guarantee by its nature, such as
// a moved event that is both missing where it was and invented where it went). excluded names the
// kinds of position where the mutation cannot apply or cannot be detected in principle, and why:
// TestMutationsAtEveryPosition applies it at every other kind, and fails where no recorded history
// offers one.
type mutation struct {
	name     string
	want     Guarantee
	also     []Guarantee
	excluded map[posKind]string
	sites    func(h *History, res *Result) []site
	at       func(h *History, res *Result, s site)
}

// site is a place a mutation applies: a watch's response and event (e -1: the response itself), or
// an operation (op >= 0, w -1) and an index within it; x is the mutation's own datum.
type site struct {
	w, r, e int
	op, i   int
	x       int64
}

func evSite(w, r, e int) site { return site{w: w, r: r, e: e, op: -1} }
func opSite(op, i int) site   { return site{w: -1, r: -1, e: -1, op: op, i: i} }

// apply applies m at the site pick chooses among its sites; false if there is none.
func (m *mutation) apply(h *History, res *Result, pick func(n int) int) bool {
	s, ok := choose(m.sites(h, res), pick)
	if ok {
		m.at(h, res, s)
	}
	return ok
}

// judge says what is wrong with the guarantees reported for a history m was applied to: want must
// be among them, and nothing but want and m.also.
func (m *mutation) judge(got []Guarantee) error {
	if !slices.Contains(got, m.want) {
		return fmt.Errorf("%s not reported, got %v", m.want, got)
	}
	for _, g := range got {
		if g != m.want && !slices.Contains(m.also, g) {
			return fmt.Errorf("want %s (or also %v), got %v", m.want, m.also, got)
		}
	}
	return nil
}

// posKind is a kind of position in a history: where in a watch stream (or among the operations) a
// corruption sits.
type posKind int

const (
	// posFirst: the first response of a watch with events (or one before it), or the first place
	// of the operations where the mutation applies.
	posFirst posKind = iota
	// posCompaction: within one revision of a compaction the history requested, or beside a
	// watch's compaction answer.
	posCompaction
	// posAfterProgress: the first response after a progress notification, before any other with
	// events.
	posAfterProgress
	// posEnd: the last response of a watch with events (or one after it), or the last place of
	// the operations where the mutation applies.
	posEnd
)

var posKinds = []posKind{posFirst, posCompaction, posAfterProgress, posEnd}

func (k posKind) String() string {
	return [...]string{"first", "compaction", "after-progress", "end"}[k]
}

// kindsOf says which kinds of position site i of sites is at.
func kindsOf(h *History, sites []site, i int) []posKind {
	s := sites[i]
	comps := compactionRevs(h)
	near := func(rev int64) bool {
		for _, c := range comps {
			if rev >= c-1 && rev <= c+1 {
				return true
			}
		}
		return false
	}
	var out []posKind
	if s.op >= 0 {
		o := &h.Operations[s.op]
		if i == 0 {
			out = append(out, posFirst)
		}
		if o.Request.Compact != nil || o.Response != nil && near(o.Response.Revision) ||
			o.Request.Range != nil && o.Request.Range.Revision > 0 && near(o.Request.Range.Revision) ||
			firstAfterCompaction(h, sites, i) {
			out = append(out, posCompaction)
		}
		if i == len(sites)-1 {
			out = append(out, posEnd)
		}
		return out
	}
	rs := h.Watches[s.w].Responses
	firstEv, lastEv := -1, -1
	for ri := range rs {
		if len(rs[ri].Events) > 0 {
			if firstEv < 0 {
				firstEv = ri
			}
			lastEv = ri
		}
	}
	if s.r <= firstEv || firstEv < 0 {
		out = append(out, posFirst)
	}
	rev := int64(-1)
	switch {
	case s.r < len(rs) && len(rs[s.r].Events) > 0:
		rev = rs[s.r].Events[max(s.e, 0)].Kv.ModRevision
	case s.r < len(rs) && (rs[s.r].IsProgressNotify() || rs[s.r].Created):
		rev = rs[s.r].Revision
	}
	beside := func(ri int) bool { return ri >= 0 && ri < len(rs) && rs[ri].IsCompacted() }
	if near(rev) || beside(s.r) || beside(s.r+1) || beside(s.r-1) {
		out = append(out, posCompaction)
	}
	for ri := min(s.r, len(rs)) - 1; ri >= 0; ri-- {
		if rs[ri].IsProgressNotify() {
			out = append(out, posAfterProgress)
		}
		if rs[ri].IsProgressNotify() || len(rs[ri].Events) > 0 {
			break
		}
	}
	if s.r >= lastEv {
		out = append(out, posEnd)
	}
	return out
}

// firstAfterCompaction: operation site i is the first of sites called after a compaction returned.
func firstAfterCompaction(h *History, sites []site, i int) bool {
	call := h.Operations[sites[i].op].Call
	for _, c := range h.Operations {
		if c.Request.Compact == nil || c.Response == nil || c.Return > call {
			continue
		}
		if !slices.ContainsFunc(sites[:i], func(s site) bool { return h.Operations[s.op].Call > c.Return }) {
			return true
		}
	}
	return false
}

// compactionRevs are the revisions of the history's successful compactions.
func compactionRevs(h *History) []int64 {
	var out []int64
	for _, o := range h.Operations {
		if o.Request.Compact != nil && o.Response != nil {
			out = append(out, o.Request.Compact.Revision)
		}
	}
	return out
}

func cloneHistory(t testing.TB, h *History) *History {
	t.Helper()
	var buf bytes.Buffer
	if err := h.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	c, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// evAt is an event of a watch: watch, response and event index.
type evAt struct{ w, r, e int }

func watchEvents(h *History, w int) []evAt {
	var out []evAt
	for ri, r := range h.Watches[w].Responses {
		for ei := range r.Events {
			out = append(out, evAt{w, ri, ei})
		}
	}
	return out
}

func (p evAt) get(h *History) *Event { return &h.Watches[p.w].Responses[p.r].Events[p.e] }
func (p evAt) site() site            { return evSite(p.w, p.r, p.e) }
func (s site) ev() evAt              { return evAt{s.w, s.r, s.e} }

func removeEvent(h *History, p evAt) {
	r := &h.Watches[p.w].Responses[p.r]
	r.Events = slices.Delete(r.Events, p.e, p.e+1)
	if len(r.Events) == 0 {
		h.Watches[p.w].Responses = slices.Delete(h.Watches[p.w].Responses, p.r, p.r+1)
	}
}

func hasFinal(w *Watch) bool {
	return slices.ContainsFunc(w.Responses, func(r WatchResponse) bool { return r.Canceled || r.IsCompacted() })
}

func created(w *Watch) *WatchResponse {
	for i := range w.Responses {
		if w.Responses[i].Created && !w.Responses[i].Canceled {
			return &w.Responses[i]
		}
	}
	return nil
}

// firstKnown: the watch's first revision is known (a start revision, or a created response).
func firstKnown(w *Watch) bool { return w.Request.StartRevision > 0 || created(w) != nil }

// covered reports whether the watch's window reaches rev: a later event or a progress notification
// at or above it. An event beyond the window could still be on its way when the watch was closed.
func covered(w *Watch, rev int64, after int) bool {
	for _, r := range w.Responses[after+1:] {
		if r.IsProgressNotify() && r.Revision >= rev {
			return true
		}
		for _, ev := range r.Events {
			if ev.Kv.ModRevision > rev {
				return true
			}
		}
	}
	return false
}

// judged: an event at rev is judged against the reference (an open history's events at or below
// its start are not).
func judged(h *History, rev int64) bool { return rev > h.StartRevision }

// eventSites collects the events f accepts, in history order.
func eventSites(h *History, f func(p evAt, ev *Event) bool) []site {
	var out []site
	for w := range h.Watches {
		for _, p := range watchEvents(h, w) {
			if f(p, p.get(h)) {
				out = append(out, p.site())
			}
		}
	}
	return out
}

// respSites collects the responses f accepts, in history order.
func respSites(h *History, f func(w, ri int, r *WatchResponse) bool) []site {
	var out []site
	for w := range h.Watches {
		for ri := range h.Watches[w].Responses {
			if f(w, ri, &h.Watches[w].Responses[ri]) {
				out = append(out, evSite(w, ri, -1))
			}
		}
	}
	return out
}

// opSites collects the operations f accepts, with an index within each, in history order.
func opSites(h *History, f func(i int, o *Operation) []int) []site {
	var out []site
	for i := range h.Operations {
		for _, j := range f(i, &h.Operations[i]) {
			out = append(out, opSite(i, j))
		}
	}
	return out
}

func choose[T any](c []T, pick func(int) int) (T, bool) {
	var zero T
	if len(c) == 0 {
		return zero, false
	}
	return c[pick(len(c))], true
}

func keyOf(w *Watch) Bytes {
	if w.Request.Key == "" {
		return "\x00"
	}
	return w.Request.Key
}

func lastRefRev(res *Result) int64 {
	if len(res.Events) == 0 {
		return 1
	}
	return res.Events[len(res.Events)-1].Kv.ModRevision
}

// closedAndKnown: a closed history whose every operation has a known outcome, where the reference
// log is the only one the history allows.
func closedAndKnown(h *History) bool {
	return !h.Open() && !slices.ContainsFunc(h.Operations, func(o Operation) bool { return o.Unknown })
}

// hasFilter reports whether a watch drops a type of events.
func hasFilter(w *Watch, f WatchFilter) bool { return slices.Contains(w.Request.Filters, f) }

// Reasons a kind of position is excluded, shared by the mutations they apply to.
const (
	exclOps           = "a KV operation has no place in a watch stream: progress notifications are the watches'"
	exclFirstResume   = "at the first event it is the resumable guarantee's: \"drop the first event\""
	exclNoFinal       = "applies where the watch's stream went on: nothing follows the end"
	exclCompactAnswer = "applies to a compaction answer, which is always beside itself: its kinds are compaction and end"
	exclAppended      = "the answer is appended after the stream's last response: the end is its one kind of place (and a compaction answer its own by construction)"
	exclOneExpiry     = "the recorded lease expiries (scenario lease-expiry) are at one place, a watch's end; elsewhere the corruption is a DELETE moved up a revision, which \"shift an event up a revision\" covers at every kind"
)

// watchMutations corrupt a watch stream.
var watchMutations = []mutation{
	{name: "drop an event", want: Reliable,
		sites: func(h *History, res *Result) []site {
			return eventSites(h, func(p evAt, ev *Event) bool {
				w := &h.Watches[p.w]
				evs := watchEvents(h, p.w)
				// the last event of a watch with nothing after it could still have been on its way; a
				// watch's only event, lost, leaves nothing received to resume from: reliable too
				return (p != evs[0] || len(evs) == 1) && judged(h, ev.Kv.ModRevision) && covered(w, ev.Kv.ModRevision, p.r) &&
					!onlyEvidenceOfExpiry(h, res, p)
			})
		},
		at: func(h *History, _ *Result, s site) { removeEvent(h, s.ev()) }},
	{name: "drop the first event", want: Resumable,
		sites: func(h *History, _ *Result) []site {
			return eventSites(h, func(p evAt, ev *Event) bool {
				w := &h.Watches[p.w]
				// without a created response a watch from 0 starts where its first event is; the only
				// event of a watch is "drop an event"'s
				evs := watchEvents(h, p.w)
				return p == evs[0] && len(evs) > 1 && firstKnown(w) && judged(h, ev.Kv.ModRevision) && covered(w, ev.Kv.ModRevision, p.r)
			})
		},
		at: func(h *History, _ *Result, s site) { removeEvent(h, s.ev()) }},
	{name: "drop a txn's events", want: Reliable,
		excluded: map[posKind]string{posFirst: exclFirstResume},
		sites: func(h *History, _ *Result) []site {
			return eventSites(h, func(p evAt, ev *Event) bool {
				r := &h.Watches[p.w].Responses[p.r]
				// the first event of a revision that has more than one in the response
				return p.e+1 < len(r.Events) && r.Events[p.e+1].Kv.ModRevision == ev.Kv.ModRevision &&
					(p.e == 0 || r.Events[p.e-1].Kv.ModRevision != ev.Kv.ModRevision) &&
					p != watchEvents(h, p.w)[0] && judged(h, ev.Kv.ModRevision) && covered(&h.Watches[p.w], ev.Kv.ModRevision, p.r)
			})
		},
		at: func(h *History, _ *Result, s site) {
			r := &h.Watches[s.w].Responses[s.r]
			rev := r.Events[s.e].Kv.ModRevision
			r.Events = slices.DeleteFunc(r.Events, func(ev Event) bool { return ev.Kv.ModRevision == rev })
			if len(r.Events) == 0 {
				h.Watches[s.w].Responses = slices.Delete(h.Watches[s.w].Responses, s.r, s.r+1)
			}
		}},
	{name: "duplicate an event", want: Unique,
		sites: func(h *History, _ *Result) []site {
			return eventSites(h, func(evAt, *Event) bool { return true })
		},
		at: func(h *History, _ *Result, s site) {
			r := &h.Watches[s.w].Responses[s.r]
			r.Events = slices.Insert(r.Events, s.e+1, r.Events[s.e])
		}},
	{name: "resend a response", want: Unique,
		excluded: map[posKind]string{posEnd: "the last response has no later one to be resent after"},
		sites: func(h *History, _ *Result) []site {
			// a response with events, sent again right after the next one with events
			return respSites(h, func(w, ri int, r *WatchResponse) bool {
				return len(r.Events) > 0 && nextWithEvents(&h.Watches[w], ri) > 0
			})
		},
		at: func(h *History, _ *Result, s site) {
			w := &h.Watches[s.w]
			n := nextWithEvents(w, s.r)
			again := w.Responses[s.r]
			again.Time = w.Responses[n].Time
			w.Responses = slices.Insert(w.Responses, n+1, again)
		}},
	{name: "swap two responses", want: Ordered,
		excluded: map[posKind]string{posEnd: "the last response has no next one to swap with"},
		sites: func(h *History, _ *Result) []site {
			return respSites(h, func(w, ri int, r *WatchResponse) bool {
				rs := h.Watches[w].Responses
				return ri+1 < len(rs) && len(r.Events) > 0 && len(rs[ri+1].Events) > 0
			})
		},
		at: func(h *History, _ *Result, s site) {
			rs := h.Watches[s.w].Responses
			rs[s.r].Events, rs[s.r+1].Events = rs[s.r+1].Events, rs[s.r].Events
			rs[s.r].Revision, rs[s.r+1].Revision = rs[s.r+1].Revision, rs[s.r].Revision
		}},
	{name: "reorder a txn's events", want: Reliable,
		sites: func(h *History, _ *Result) []site {
			return eventSites(h, func(p evAt, ev *Event) bool {
				evs := h.Watches[p.w].Responses[p.r].Events
				return p.e+1 < len(evs) && evs[p.e+1].Kv.ModRevision == ev.Kv.ModRevision && evs[p.e+1].Kv.Key != ev.Kv.Key &&
					judged(h, ev.Kv.ModRevision)
			})
		},
		at: func(h *History, _ *Result, s site) {
			evs := h.Watches[s.w].Responses[s.r].Events
			evs[s.e], evs[s.e+1] = evs[s.e+1], evs[s.e]
		}},
	{name: "split a revision between responses", want: Atomic,
		sites: func(h *History, _ *Result) []site {
			return eventSites(h, func(p evAt, ev *Event) bool {
				evs := h.Watches[p.w].Responses[p.r].Events
				return p.e > 0 && evs[p.e-1].Kv.ModRevision == ev.Kv.ModRevision
			})
		},
		at: func(h *History, _ *Result, s site) {
			rs := h.Watches[s.w].Responses
			second := rs[s.r]
			second.Events = slices.Clone(rs[s.r].Events[s.e:])
			rs[s.r].Events = rs[s.r].Events[:s.e]
			h.Watches[s.w].Responses = slices.Insert(rs, s.r+1, second)
		}},
	{name: "corrupt a prev_kv", want: PrevKV,
		sites: func(h *History, _ *Result) []site {
			return eventSites(h, func(p evAt, ev *Event) bool { return ev.PrevKV != nil && judged(h, ev.Kv.ModRevision) })
		},
		at: func(h *History, _ *Result, s site) {
			prev := *s.ev().get(h).PrevKV
			prev.Value += "-corrupt"
			s.ev().get(h).PrevKV = &prev
		}},
	{name: "drop a prev_kv", want: PrevKV,
		sites: func(h *History, _ *Result) []site {
			return eventSites(h, func(p evAt, ev *Event) bool {
				// etcd omits the prev_kv a compaction at or above the event removed
				t := h.Watches[p.w].Responses[p.r].Time
				for _, o := range h.Operations {
					if c := o.Request.Compact; c != nil && c.Revision >= ev.Kv.ModRevision && o.Call <= t {
						return false
					}
				}
				return ev.PrevKV != nil && judged(h, ev.Kv.ModRevision)
			})
		},
		at: func(h *History, _ *Result, s site) { s.ev().get(h).PrevKV = nil }},
	{name: "prev_kv not asked for", want: PrevKV,
		sites: func(h *History, _ *Result) []site {
			return eventSites(h, func(p evAt, ev *Event) bool { return !h.Watches[p.w].Request.PrevKV })
		},
		at: addPrevKV},
	{name: "prev_kv of a created key", want: PrevKV,
		sites: func(h *History, _ *Result) []site {
			return eventSites(h, func(p evAt, ev *Event) bool {
				return h.Watches[p.w].Request.PrevKV && ev.Type == Put && ev.IsCreate() && judged(h, ev.Kv.ModRevision)
			})
		},
		at: addPrevKV},
	{name: "corrupt an event's value", want: Reliable,
		sites: func(h *History, _ *Result) []site {
			return eventSites(h, func(p evAt, ev *Event) bool { return ev.Type == Put && judged(h, ev.Kv.ModRevision) })
		},
		at: func(h *History, _ *Result, s site) { s.ev().get(h).Kv.Value += "-corrupt" }},
	{name: "wrong is-create", want: IsCreate,
		sites: func(h *History, _ *Result) []site {
			return eventSites(h, func(p evAt, ev *Event) bool {
				return ev.Type == Put && ev.Kv.Version > 1 && judged(h, ev.Kv.ModRevision)
			})
		},
		at: func(h *History, _ *Result, s site) {
			ev := s.ev().get(h)
			ev.Kv.CreateRevision = ev.Kv.ModRevision
		}},
	{name: "event outside the watched range", want: Filter,
		sites: func(h *History, _ *Result) []site {
			return eventSites(h, func(p evAt, ev *Event) bool {
				return !newWatchChecker(&h.Watches[p.w], p.w, nil, nil).kr.contains("zz-outside")
			})
		},
		at: func(h *History, _ *Result, s site) {
			r := &h.Watches[s.w].Responses[s.r]
			ev := r.Events[s.e]
			ev.Kv.Key = "zz-outside"
			r.Events = slices.Insert(r.Events, s.e+1, ev)
		}},
	{name: "event of a filtered type", want: Filter,
		sites: func(h *History, _ *Result) []site {
			return eventSites(h, func(p evAt, ev *Event) bool { return hasFilter(&h.Watches[p.w], FilterNoDelete) })
		},
		at: func(h *History, _ *Result, s site) {
			r := &h.Watches[s.w].Responses[s.r]
			ev := r.Events[s.e]
			ev = Event{Type: Delete, Kv: KeyValue{Key: ev.Kv.Key, ModRevision: ev.Kv.ModRevision}}
			r.Events = slices.Insert(r.Events, s.e+1, ev)
		}},
	// moved up, the event may also be above a progress notification that followed it
	{name: "shift an event up a revision", want: Genuine, also: []Guarantee{Reliable, Resumable, Bookmarkable},
		sites: func(h *History, res *Result) []site {
			ref := newReferenceOf(res)
			return eventSites(h, func(p evAt, ev *Event) bool {
				rev := ev.Kv.ModRevision
				evs := h.Watches[p.w].Responses[p.r].Events
				// the last event of its revision, into a revision the reference has no such event at,
				// with the next event of the watch above it or in the same response
				if p.e+1 < len(evs) && evs[p.e+1].Kv.ModRevision == rev || ref.count(rev+1, ev.Kv.Key, ev.Type) > 0 || ref.count(rev+1, ev.Kv.Key, 1-ev.Type) > 0 {
					return false
				}
				next := nextWithEvents(&h.Watches[p.w], p.r)
				return judged(h, rev) && firstKnown(&h.Watches[p.w]) && rev+1 <= ref.maxRev &&
					(next < 0 || h.Watches[p.w].Responses[next].Events[0].Kv.ModRevision > rev+1)
			})
		},
		at: func(h *History, _ *Result, s site) {
			ev := s.ev().get(h)
			if ev.Kv.CreateRevision == ev.Kv.ModRevision {
				ev.Kv.CreateRevision++
			}
			ev.Kv.ModRevision++
		}},
	// an invented event also says the watch reached its revision: events it never received below it
	// are missing
	{name: "invent an event", want: Genuine, also: []Guarantee{Reliable},
		excluded: map[posKind]string{posFirst: "an invented event is placed after every revision of the history, at the end of the stream",
			posAfterProgress: "an invented event is placed at the end of the stream, after the last one's events"},
		sites: func(h *History, _ *Result) []site {
			// a put: an invented delete could be the expiry of a lease
			return respSites(h, func(w, ri int, r *WatchResponse) bool {
				watch := &h.Watches[w]
				return ri == len(watch.Responses)-1 && !hasFinal(watch) && created(watch) != nil && !hasFilter(watch, FilterNoPut)
			})
		},
		at: func(h *History, res *Result, s site) {
			watch := &h.Watches[s.w]
			rev := max(max(int64(1), lastRefRev(res))+1, watch.Request.StartRevision, created(watch).Revision+1)
			ev := Event{Type: Put, Kv: KeyValue{Key: keyOf(watch), CreateRevision: rev, ModRevision: rev, Version: 1, Value: "invented"}}
			last := watch.Responses[len(watch.Responses)-1].Time
			watch.Responses = append(watch.Responses, WatchResponse{Time: last, Revision: rev, Events: []Event{ev}})
		}},
	{name: "event below the first revision", want: FirstRevision,
		sites: func(h *History, _ *Result) []site {
			return eventSites(h, func(p evAt, ev *Event) bool {
				return p == watchEvents(h, p.w)[0] && firstKnown(&h.Watches[p.w]) && judged(h, ev.Kv.ModRevision)
			})
		},
		at: func(h *History, _ *Result, s site) {
			first := s.ev().get(h).Kv.ModRevision
			if h.Watches[s.w].Request.StartRevision > 0 {
				h.Watches[s.w].Request.StartRevision = first + 1
			} else {
				// An event at the created revision itself is not judged (watchCheck.fromCreated).
				created(&h.Watches[s.w]).Revision = first + 1
			}
		}},
	{name: "created revision behind", want: Resumable,
		excluded: map[posKind]string{posAfterProgress: "the created response comes before any progress notification",
			posEnd: "the created response is the first of its watch"},
		sites: func(h *History, res *Result) []site {
			ref := newReferenceOf(res)
			// a watch from now told it starts a revision early: it owes the event at its real start
			return respSites(h, func(w, ri int, r *WatchResponse) bool {
				watch := &h.Watches[w]
				// with no event received, the owed ones are missing, not missing at the start
				if watch.Request.StartRevision != 0 || r != created(watch) || !judged(h, r.Revision-1) || nextWithEvents(watch, ri) < 0 {
					return false
				}
				wc := newWatchChecker(watch, w, nil, nil)
				lo, hi := ref.span(r.Revision, r.Revision)
				return slices.ContainsFunc(ref.events[lo:hi], func(ev Event) bool { return wc.wants(ev.Type, ev.Kv.Key) })
			})
		},
		at: func(h *History, _ *Result, s site) { h.Watches[s.w].Responses[s.r].Revision-- }},
}

// addPrevKV gives the event at s a prev_kv: its own key-value with another value.
func addPrevKV(h *History, _ *Result, s site) {
	ev := s.ev().get(h)
	prev := ev.Kv
	prev.Value += "-prev"
	ev.PrevKV = &prev
}

// nextWithEvents is the index of the first response after ri with events, -1 if none.
func nextWithEvents(w *Watch, ri int) int {
	for n := ri + 1; n < len(w.Responses); n++ {
		if len(w.Responses[n].Events) > 0 {
			return n
		}
	}
	return -1
}

// newReferenceOf indexes a result's reference log.
func newReferenceOf(res *Result) *reference { return buildReference(res.Events, lastRefRev(res)) }

// progressMutations corrupt progress notifications and compaction answers.
var progressMutations = []mutation{
	{name: "progress notification behind an event", want: Bookmarkable,
		sites: func(h *History, _ *Result) []site {
			return respSites(h, func(w, ri int, r *WatchResponse) bool {
				return len(r.Events) > 0 && r.Events[len(r.Events)-1].Kv.ModRevision >= 2
			})
		},
		at: func(h *History, _ *Result, s site) {
			r := h.Watches[s.w].Responses[s.r]
			prog := WatchResponse{Time: r.Time, Revision: r.Events[len(r.Events)-1].Kv.ModRevision - 1}
			h.Watches[s.w].Responses = slices.Insert(h.Watches[s.w].Responses, s.r+1, prog)
		}},
	{name: "progress notification ahead of pending events", want: Bookmarkable,
		sites: func(h *History, _ *Result) []site {
			// etcd-io/etcd#15220: a notification at the revision of events still queued, sent first
			return respSites(h, func(w, ri int, r *WatchResponse) bool { return len(r.Events) > 0 })
		},
		at: func(h *History, _ *Result, s site) {
			r := h.Watches[s.w].Responses[s.r]
			prog := WatchResponse{Time: r.Time, Revision: r.Events[len(r.Events)-1].Kv.ModRevision}
			h.Watches[s.w].Responses = slices.Insert(h.Watches[s.w].Responses, s.r, prog)
		}},
	{name: "progress notification ahead, then the watch ends", want: Reliable,
		excluded: map[posKind]string{posFirst: exclFirstResume},
		sites: func(h *History, res *Result) []site {
			// etcd-io/etcd#15220 where the client closes the watch, believing it synced, before the
			// queued events come
			return respSites(h, func(w, ri int, r *WatchResponse) bool {
				watch := &h.Watches[w]
				return len(r.Events) > 0 && ri > nextWithEvents(watch, -1) && judged(h, r.Events[0].Kv.ModRevision) &&
					!slices.ContainsFunc(watchEvents(h, w), func(p evAt) bool { return p.r >= ri && onlyEvidenceOfExpiry(h, res, p) })
			})
		},
		at: func(h *History, _ *Result, s site) {
			w := &h.Watches[s.w]
			r := w.Responses[s.r]
			w.Responses = append(w.Responses[:s.r], WatchResponse{Time: r.Time, Revision: r.Events[len(r.Events)-1].Kv.ModRevision})
		}},
	{name: "progress notification beyond the history", want: Bookmarkable, also: []Guarantee{Reliable},
		sites: func(h *History, _ *Result) []site {
			if h.Open() {
				return nil // an open history's store moves on without it
			}
			return respSites(h, func(w, ri int, r *WatchResponse) bool { return len(r.Events) > 0 || r.IsProgressNotify() })
		},
		at: func(h *History, res *Result, s site) {
			w := &h.Watches[s.w]
			prog := WatchResponse{Time: w.Responses[s.r].Time, Revision: lastRefRev(res) + 1}
			w.Responses = slices.Insert(w.Responses, s.r+1, prog)
		}},
	{name: "progress going backwards", want: Bookmarkable,
		sites: func(h *History, _ *Result) []site {
			return respSites(h, func(w, ri int, r *WatchResponse) bool { return r.IsProgressNotify() && r.Revision >= 2 })
		},
		at: func(h *History, _ *Result, s site) {
			w := &h.Watches[s.w]
			prog := w.Responses[s.r]
			prog.Revision--
			w.Responses = slices.Insert(w.Responses, s.r+1, prog)
		}},
	{name: "compaction answer the watch did not deserve", want: Compaction,
		excluded: map[posKind]string{posFirst: exclAppended, posAfterProgress: exclAppended, posCompaction: exclAppended},
		sites: func(h *History, _ *Result) []site {
			var out []site
			for w := range h.Watches {
				watch := &h.Watches[w]
				if hasFinal(watch) || created(watch) == nil {
					continue
				}
				next := nextRevision(watch)
				for i, o := range h.Operations {
					if o.Request.Compact != nil && o.Response != nil && o.Request.Compact.Revision <= next && o.Request.Compact.Revision > 0 {
						out = append(out, site{w: w, r: len(watch.Responses), e: -1, op: -1, x: int64(i)})
					}
				}
			}
			return out
		},
		at: func(h *History, _ *Result, s site) {
			watch := &h.Watches[s.w]
			comp := &h.Operations[s.x]
			t := max(watch.Responses[len(watch.Responses)-1].Time, comp.Call)
			watch.Responses = append(watch.Responses, WatchResponse{Time: t, Canceled: true, CompactRevision: comp.Request.Compact.Revision})
		}},
	{name: "compaction answer at the wrong revision", want: Compaction,
		excluded: map[posKind]string{posFirst: exclCompactAnswer, posAfterProgress: exclCompactAnswer},
		sites: func(h *History, _ *Result) []site {
			if h.Open() {
				return nil // in an open history another client may have compacted there
			}
			return respSites(h, func(w, ri int, r *WatchResponse) bool {
				return r.IsCompacted() && !slices.Contains(compactionRevs(h), r.CompactRevision+1)
			})
		},
		at: func(h *History, _ *Result, s site) { h.Watches[s.w].Responses[s.r].CompactRevision++ }},
	{name: "response after a compaction answer", want: Compaction,
		excluded: map[posKind]string{posFirst: exclCompactAnswer, posAfterProgress: exclCompactAnswer},
		sites: func(h *History, _ *Result) []site {
			return respSites(h, func(w, ri int, r *WatchResponse) bool { return r.IsCompacted() })
		},
		at: func(h *History, _ *Result, s site) {
			w := &h.Watches[s.w]
			r := w.Responses[s.r]
			w.Responses = slices.Insert(w.Responses, s.r+1, WatchResponse{Time: r.Time, Revision: r.CompactRevision - 1})
		}},
	{name: "missing compaction answer", want: Compaction,
		excluded: map[posKind]string{posAfterProgress: "a watch owed a compaction answer receives nothing before it"},
		sites: func(h *History, _ *Result) []site {
			// a watch from below a compaction that completed before it was called, answered
			// "compacted" first: the answer is replaced by the events it would have owed
			return respSites(h, func(w, ri int, r *WatchResponse) bool {
				watch := &h.Watches[w]
				start := watch.Request.StartRevision
				if start <= 0 || len(watch.Responses) != 2 || ri != 1 || !r.IsCompacted() {
					return false
				}
				return slices.ContainsFunc(h.Operations, func(o Operation) bool {
					return o.Request.Compact != nil && o.Response != nil && o.Return < watch.Call && o.Request.Compact.Revision > start
				})
			})
		},
		at: func(h *History, res *Result, s site) {
			watch := &h.Watches[s.w]
			wc := newWatchChecker(watch, s.w, nil, nil)
			t := watch.Responses[1].Time
			watch.Responses = watch.Responses[:1]
			var evs []Event
			for _, ev := range res.Events {
				if ev.Kv.ModRevision >= watch.Request.StartRevision && wc.wants(ev.Type, ev.Kv.Key) {
					if !watch.Request.PrevKV {
						ev.PrevKV = nil
					}
					evs = append(evs, ev)
				}
			}
			watch.Responses = append(watch.Responses, WatchResponse{Time: t, Revision: max(lastRefRev(res), watch.Request.StartRevision), Events: evs})
		}},
	{name: "lease expiry in the wrong revision", want: Genuine, also: []Guarantee{Reliable, Resumable, Atomic},
		excluded: map[posKind]string{posFirst: exclOneExpiry, posCompaction: exclOneExpiry, posAfterProgress: exclOneExpiry},
		sites: func(h *History, res *Result) []site {
			exp := expiryRevisions(h, res)
			return respSites(h, func(w, ri int, r *WatchResponse) bool {
				return len(r.Events) > 0 && exp[r.Events[0].Kv.ModRevision] && judged(h, r.Events[0].Kv.ModRevision)
			})
		},
		at: func(h *History, _ *Result, s site) {
			// the expiry's deletes are sent as of the next revision
			r := &h.Watches[s.w].Responses[s.r]
			rev := r.Events[0].Kv.ModRevision
			for i := range r.Events {
				if r.Events[i].Kv.ModRevision == rev {
					r.Events[i].Kv.ModRevision++
				}
			}
			r.Revision = max(r.Revision, rev+1)
		}},
}

// onlyEvidenceOfExpiry: the event is a lease expiry's DELETE that no other watch received. The
// checker lets a lease expire only where the history shows it may have (doc.go, Linearizability):
// without it, the revision no request made is unexplained, and reported as not linearizable.
func onlyEvidenceOfExpiry(h *History, res *Result, p evAt) bool {
	ev := p.get(h)
	if ev.Type != Delete || !expiryRevisions(h, res)[ev.Kv.ModRevision] {
		return false
	}
	for w := range h.Watches {
		if w != p.w && slices.ContainsFunc(watchEvents(h, w), func(q evAt) bool { return q.get(h).Kv.ModRevision == ev.Kv.ModRevision }) {
			return false
		}
	}
	return true
}

// nextRevision is the revision a watch needs next: after its last event or progress notification,
// else its first.
func nextRevision(w *Watch) int64 {
	next := w.Request.StartRevision
	if next == 0 {
		next = created(w).Revision + 1
	}
	for _, r := range w.Responses {
		for _, ev := range r.Events {
			next = max(next, ev.Kv.ModRevision+1)
		}
		if r.IsProgressNotify() {
			next = max(next, r.Revision+1)
		}
	}
	return next
}

// expiryRevisions are the revisions of the reference log that no operation of the history made:
// lease expiries, in a history where every write's outcome is known.
func expiryRevisions(h *History, res *Result) map[int64]bool {
	if slices.ContainsFunc(h.Operations, func(o Operation) bool { return o.Unknown }) {
		return nil
	}
	made := map[int64]bool{}
	for _, o := range h.Operations {
		// the writes that may have made their answer's revision (one that changed nothing answers
		// the current one, which may be an expiry's: then the expiry is not found, which is safe)
		q := &o.Request
		if o.Response != nil && (q.Put != nil || q.Txn != nil && !isReadOnly(q) || q.LeaseRevoke != nil ||
			q.DeleteRange != nil && o.Response.DeleteRange != nil && o.Response.DeleteRange.Deleted > 0) {
			made[o.Response.Revision] = true
		}
	}
	out := map[int64]bool{}
	for _, ev := range res.Events {
		if !made[ev.Kv.ModRevision] && ev.Type == Delete {
			out[ev.Kv.ModRevision] = true
		}
	}
	return out
}

// opExcluded is the exclusion every KV mutation has.
var opExcluded = map[posKind]string{posAfterProgress: exclOps}

// opMutations corrupt the answers to KV requests.
var opMutations = []mutation{
	{name: "stale read", want: Linearizable, excluded: opExcluded,
		sites: func(h *History, res *Result) []site {
			return opSites(h, func(i int, o *Operation) []int {
				if o.Request.Range == nil || o.Request.Range.Serializable || o.Response == nil || o.Response.Range == nil {
					return nil
				}
				var out []int
				for j, kv := range o.Response.Range.Kvs {
					if kv.Version > 1 && earlierPut(res, kv) != nil {
						out = append(out, j)
					}
				}
				return out
			})
		},
		at: func(h *History, res *Result, s site) {
			kv := &h.Operations[s.op].Response.Range.Kvs[s.i]
			ev := earlierPut(res, *kv)
			value := ev.Kv.Value
			if h.Operations[s.op].Request.Range.KeysOnly {
				value = ""
			}
			kv.Value, kv.ModRevision, kv.Version = value, ev.Kv.ModRevision, kv.Version-1
		}},
	{name: "lost write", want: Linearizable, excluded: opExcluded,
		sites: func(h *History, _ *Result) []site {
			return opSites(h, func(i int, o *Operation) []int {
				if o.Request.Range == nil || o.Request.Range.Serializable || o.Response == nil || o.Response.Range == nil || o.Response.Range.More {
					return nil
				}
				var out []int
				for j, kv := range o.Response.Range.Kvs {
					if kv.Version == 1 {
						out = append(out, j)
					}
				}
				return out
			})
		},
		at: func(h *History, _ *Result, s site) {
			r := h.Operations[s.op].Response.Range
			r.Kvs = slices.Delete(r.Kvs, s.i, s.i+1)
			r.Count--
		}},
	{name: "serializable read of a value never stored", want: Serializable, excluded: opExcluded,
		sites: func(h *History, _ *Result) []site {
			return opSites(h, func(i int, o *Operation) []int {
				if o.Request.Range == nil || !o.Request.Range.Serializable || o.Response == nil || o.Response.Range == nil || o.Request.Range.KeysOnly {
					return nil
				}
				return indexes(len(o.Response.Range.Kvs))
			})
		},
		at: func(h *History, _ *Result, s site) { h.Operations[s.op].Response.Range.Kvs[s.i].Value += "-corrupt" }},
	{name: "shift a write's header revision", want: Linearizable, excluded: opExcluded,
		sites: func(h *History, _ *Result) []site {
			// a put answered with the revision of another put: two writes cannot make one revision
			made := map[int64]bool{}
			for _, o := range h.Operations {
				if o.Request.Put != nil && o.Response != nil {
					made[o.Response.Revision] = true
				}
			}
			return opSites(h, func(i int, o *Operation) []int {
				if o.Request.Put == nil || o.Response == nil || !made[o.Response.Revision+1] {
					return nil
				}
				return []int{0}
			})
		},
		at: func(h *History, _ *Result, s site) { h.Operations[s.op].Response.Revision++ }},
	{name: "read header beyond the history", want: Linearizable, excluded: opExcluded,
		sites: func(h *History, _ *Result) []site {
			if !closedAndKnown(h) {
				return nil // others' writes, or one of unknown outcome, may have made it
			}
			return opSites(h, func(i int, o *Operation) []int {
				if o.Request.Range == nil || o.Request.Range.Serializable || o.Response == nil {
					return nil
				}
				return []int{0}
			})
		},
		at: func(h *History, res *Result, s site) { h.Operations[s.op].Response.Revision = lastRefRev(res) + 1 }},
	{name: "drop a put's prev_kv", want: Linearizable, excluded: opExcluded,
		sites: func(h *History, _ *Result) []site {
			return opSites(h, func(i int, o *Operation) []int {
				if o.Request.Put == nil || o.Response == nil || o.Response.Put == nil || o.Response.Put.PrevKV == nil {
					return nil
				}
				return []int{0}
			})
		},
		at: func(h *History, _ *Result, s site) { h.Operations[s.op].Response.Put.PrevKV = nil }},
	{name: "corrupt a put's prev_kv", want: Linearizable, excluded: opExcluded,
		sites: func(h *History, _ *Result) []site {
			return opSites(h, func(i int, o *Operation) []int {
				if o.Request.Put == nil || o.Response == nil || o.Response.Put == nil || o.Response.Put.PrevKV == nil {
					return nil
				}
				return []int{0}
			})
		},
		at: func(h *History, _ *Result, s site) {
			prev := *h.Operations[s.op].Response.Put.PrevKV
			prev.Value += "-corrupt"
			h.Operations[s.op].Response.Put.PrevKV = &prev
		}},
	{name: "past read answered compacted", want: Linearizable, excluded: opExcluded,
		sites: func(h *History, _ *Result) []site {
			return opSites(h, func(i int, o *Operation) []int {
				r := o.Request.Range
				// a serializable read's error is not judged: it has no header revision to place it at
				if r == nil || r.Revision <= 0 || r.Serializable || o.Response == nil {
					return nil
				}
				// a compaction above the revision that may have run before the read answered makes
				// "compacted" a right answer
				if slices.ContainsFunc(h.Operations, func(c Operation) bool {
					return c.Request.Compact != nil && c.Request.Compact.Revision > r.Revision && c.Call < o.Return
				}) {
					return nil
				}
				return []int{0}
			})
		},
		at: func(h *History, _ *Result, s site) {
			o := &h.Operations[s.op]
			o.Response, o.Error = nil, etcdrules.ErrCompacted.Error()
		}},
	{name: "compaction refused as compacted", want: Linearizable, also: []Guarantee{Compaction}, excluded: opExcluded,
		sites: func(h *History, _ *Result) []site {
			return opSites(h, func(i int, o *Operation) []int {
				c := o.Request.Compact
				if c == nil || o.Response == nil {
					return nil
				}
				// no other compaction at or above it that may have run first
				if slices.ContainsFunc(h.Operations, func(d Operation) bool {
					return d.Request.Compact != nil && d.Request.Compact.Revision >= c.Revision && d.Call < o.Return && d.Call != o.Call
				}) {
					return nil
				}
				return []int{0}
			})
		},
		at: func(h *History, _ *Result, s site) {
			o := &h.Operations[s.op]
			o.Response, o.Error = nil, etcdrules.ErrCompacted.Error()
		}},
}

// earlierPut is the reference's last PUT of kv's key before kv's revision, nil if none.
func earlierPut(res *Result, kv KeyValue) *Event {
	for i := len(res.Events) - 1; i >= 0; i-- {
		if ev := &res.Events[i]; ev.Kv.Key == kv.Key && ev.Kv.ModRevision < kv.ModRevision && ev.Type == Put {
			return ev
		}
	}
	return nil
}

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// mutations are all of them.
var mutations = slices.Concat(watchMutations, progressMutations, opMutations)

// Transformations that keep a history valid: the checker must still accept it.
var validTransforms = []struct {
	name  string
	apply func(h *History, pick func(int) int) bool
}{
	{"forget write responses", func(h *History, pick func(int) int) bool {
		var c []int
		for i, o := range h.Operations {
			if o.Response != nil && !isReadOnly(&o.Request) && o.Request.LeaseGrant == nil {
				c = append(c, i)
			}
		}
		if len(c) == 0 {
			return false
		}
		for range 1 + pick(3) {
			i := c[pick(len(c))]
			o := &h.Operations[i]
			o.Response, o.Error, o.Unknown = nil, "context deadline exceeded", true
		}
		return true
	}},
	{"writes that never arrived", func(h *History, pick func(int) int) bool {
		var end int64
		for _, o := range h.Operations {
			end = max(end, o.Return)
		}
		for i := range 1 + pick(3) {
			call := int64(pick(int(end + 1)))
			req := put("phantom", string(rune('a'+i)))
			if pick(2) == 0 {
				req = Request{DeleteRange: &DeleteRangeRequest{Key: "a", RangeEnd: "\x00"}}
			}
			h.Operations = append(h.Operations, Operation{Client: 99, Call: call, Return: call + 1, Request: req,
				Error: "connection refused", Unknown: true})
		}
		return true
	}},
}
