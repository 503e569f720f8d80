package etcd

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/etcdrules"
)

// The fast path of the linearizability check. An etcd history is mostly ordered already: a write's
// answer names the revision it created, and every other answer its header revision, the revision
// the store was at when it ran. So the sweep below walks the history's calls and returns in time
// order, as porcupine does, but instead of searching it places each operation where its revision
// says: a revision's creator when the store must move past the revision before it, the operations
// answered at a revision while the store is there. What the revisions leave open it decides by
// rules that cannot lose a linearization (an operation that changes nothing and fits now is placed
// now) or greedily (which unknown-outcome write or lease expiry created a revision no answer
// claims: the first that fits and agrees with every watch; which compaction, grant or unknown write
// must come first for an operation to fit). Every placement is a step of the model, so a sweep
// that places every operation of known outcome has found a linearization, with each operation
// between its call and its return; one that gets stuck proves nothing by itself, and the check
// falls back to porcupine (linearize). The sweep is linear in the history (each operation is
// placed once), plus, for each revision no answer claims, a pass over the unknown-outcome writes
// waiting; sorting the calls and returns makes it O(n log n).

const noAnchor = math.MinInt64

// sweepKind is how the sweep treats an operation.
type sweepKind uint8

const (
	kindAnchored sweepKind = iota // answered at a revision it did not create: placed while the store is there
	kindCreator                   // created the revision its answer names: placed when the store moves there
	kindFloating                  // failed, or a keepalive: placed at any point it fits
	kindOptional                  // outcome unknown, or a lease expiry: placed only where needed
	kindReach                     // a watch saw a revision: the store must be there by then
)

type sweep struct {
	c        *checker
	ops      []*kvOp
	kind     []sweepKind
	anchor   []int64 // kindAnchored: the revision the store is at when it runs
	placed   []bool
	called   []bool
	s        *mstate
	lin      []*kvOp
	deadline time.Time
	steps    int
	// stuck says where the sweep got stuck (a note says it when porcupine searches)
	stuck string
	// choices are the picks made among the unknown-outcome writes and expiries that could make a
	// revision, in order; forced, the picks a restart makes (sweepWithRestarts)
	choices []choice
	forced  []int
	// gaps are, in an open history, the last times the store moved on by others' writes alone: an
	// unknown-outcome write or expiry may have made a gap's last revision (repairGap)
	gaps []gapMark

	pendingAt map[int64][]int // called and unplaced anchored operations, by anchor
	left      map[int64]int   // unplaced anchored operations, by anchor
	floating  []int           // called and unplaced floating operations
	optional  []int           // called and unplaced optional operations
	// optionalBy indexes the called optional operations by the keys they may write; wild are those
	// that may write keys no index names (ranges, revokes)
	optionalBy map[Bytes][]int
	wild       []int
	creators   map[int64][]int // writes that claim a revision and revokes answered at it
	seen       map[int64]bool  // revisions at which a watch received events
	stops      []int64         // open histories: the revisions the store must stop at, sorted
}

// choice is a pick among the operations that could make a revision: the pick-th that fit, and
// whether another fit after it.
type choice struct {
	pick int
	more bool
}

// sweepRestarts bounds the restarts of sweepWithRestarts.
const sweepRestarts = 16

// sweepWithRestarts runs the sweep, and when it gets stuck runs it again with the last choice
// among the unknown-outcome writes and expiries that could make a revision changed to the next
// candidate (chronological backtracking, by restarts), at most sweepRestarts times.
// Stuck, it returns where its first run got stuck.
func sweepWithRestarts(c *checker, ops []*kvOp, deadline time.Time) (lin []*kvOp, ok bool, stuck string) {
	var forced []int
	for range sweepRestarts {
		sw := newSweep(c, ops, deadline)
		sw.forced = forced
		if sw.run() {
			return sw.lin, true, ""
		}
		if stuck == "" {
			stuck = sw.stuck
		}
		ch := sw.choices
		for len(ch) > 0 && !ch[len(ch)-1].more {
			ch = ch[:len(ch)-1]
		}
		if len(ch) == 0 || sw.expired() {
			return nil, false, stuck
		}
		forced = make([]int, len(ch))
		for i, x := range ch {
			forced[i] = x.pick
		}
		forced[len(ch)-1]++
	}
	return nil, false, stuck
}

// gapMark is a gap of an open history: the state before it, the revision it moved the store to,
// and the length of lin then.
type gapMark struct {
	from *mstate
	to   int64
	lin  int
}

// Bounds of repairGap: the gaps it tries, newest first, and the operations placed since a gap it
// replays at most.
const (
	repairGaps   = 16
	repairReplay = 5000
)

// sweepEvent is the call or the return of operation i at time t.
type sweepEvent struct {
	t   int64
	ret bool
	i   int
}

func newSweep(c *checker, ops []*kvOp, deadline time.Time) *sweep {
	sw := &sweep{c: c, ops: ops, kind: make([]sweepKind, len(ops)), anchor: make([]int64, len(ops)),
		placed: make([]bool, len(ops)), called: make([]bool, len(ops)), s: initialState(c.h), deadline: deadline,
		pendingAt: map[int64][]int{}, left: map[int64]int{}, creators: map[int64][]int{}, seen: map[int64]bool{},
		optionalBy: map[Bytes][]int{}}
	for _, g := range c.guides {
		for rev := range g.byRev {
			sw.seen[rev] = true
		}
	}
	// a revision an answer shows a key put at was made by a write of the history (its prefix is
	// its own), not by others
	for rev := range c.shownAt() {
		sw.seen[rev] = true
	}
	stops := map[int64]bool{}
	for rev := range sw.seen {
		stops[rev] = true
	}
	for i, op := range ops {
		sw.anchor[i] = noAnchor
		switch {
		case op.reach > 0:
			sw.kind[i] = kindReach
		case op.unknown:
			sw.kind[i] = kindOptional
		case op.resp == nil || op.rev == revAny:
			sw.kind[i] = kindFloating
		case op.rev == revNext:
			sw.kind[i] = kindCreator
			sw.creators[op.resp.Revision] = append(sw.creators[op.resp.Revision], i)
			stops[op.resp.Revision] = true
		default:
			sw.kind[i], sw.anchor[i] = kindAnchored, op.resp.Revision
			sw.left[op.resp.Revision]++
			stops[op.resp.Revision] = true
			if op.rev == revSameOrNext {
				sw.creators[op.resp.Revision] = append(sw.creators[op.resp.Revision], i)
			}
		}
	}
	if c.open {
		for rev := range stops {
			sw.stops = append(sw.stops, rev)
		}
		slices.Sort(sw.stops)
	}
	return sw
}

// run sweeps the history and reports whether it placed every operation of known outcome; the
// linearization is then sw.lin.
func (sw *sweep) run() bool {
	events := make([]sweepEvent, 0, 2*len(sw.ops))
	for i, op := range sw.ops {
		events = append(events, sweepEvent{t: op.call, i: i})
		if op.ret != math.MaxInt64 {
			events = append(events, sweepEvent{t: op.ret, ret: true, i: i})
		}
	}
	// porcupine's order: by time, a call before a return at the same time
	slices.SortFunc(events, func(a, b sweepEvent) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		switch {
		case a.ret == b.ret:
			return cmp.Compare(a.i, b.i)
		case a.ret:
			return 1
		}
		return -1
	})
	for _, e := range events {
		if sw.steps++; sw.steps%check.PollEvery == 0 && sw.expired() {
			return false
		}
		if !e.ret {
			if !sw.call(e.i) {
				sw.stuck = fmt.Sprintf("%s called at %d, store at revision %d", describeOp(sw.ops[e.i]), e.t, sw.s.rev)
				return false
			}
			continue
		}
		if !sw.placed[e.i] && !sw.force(e.i) {
			sw.stuck = fmt.Sprintf("%s returns at %d, store at revision %d", describeOp(sw.ops[e.i]), e.t, sw.s.rev)
			return false
		}
	}
	return true
}

// expired reports whether the sweep's deadline passed or the check's context ended.
func (sw *sweep) expired() bool {
	return (!sw.deadline.IsZero() && time.Now().After(sw.deadline)) || sw.c.ctx.Err() != nil
}

// call notes that operation i was called, and places it if it changes nothing and fits now.
func (sw *sweep) call(i int) bool {
	sw.called[i] = true
	switch sw.kind[i] {
	case kindOptional:
		sw.optional = append(sw.optional, i)
		keys, wild := writtenKeys(sw.ops[i].req)
		if wild {
			sw.wild = append(sw.wild, i)
		}
		for _, k := range keys {
			sw.optionalBy[k] = append(sw.optionalBy[k], i)
		}
	case kindFloating:
		if !sw.tryPreserving(i) {
			sw.floating = append(sw.floating, i)
		}
	case kindAnchored:
		a := sw.anchor[i]
		if a < sw.s.rev {
			return false // the store has moved past the revision it was answered at
		}
		if a > sw.s.rev || !sw.tryPreserving(i) {
			sw.pendingAt[a] = append(sw.pendingAt[a], i)
		}
	case kindCreator:
		if sw.ops[i].resp.Revision <= sw.s.rev {
			return false // the revision it claims was made already
		}
	}
	return true
}

// force places operation i, which returns now: it must take effect before anything called later.
func (sw *sweep) force(i int) bool {
	op := sw.ops[i]
	switch sw.kind[i] {
	case kindReach:
		if sw.s.rev < op.reach && !sw.advanceTo(op.reach) {
			return false
		}
		sw.placed[i] = true
		return true
	case kindCreator:
		return sw.advanceTo(op.resp.Revision) && sw.placed[i]
	case kindAnchored:
		a := sw.anchor[i]
		if sw.s.rev < a && !sw.advanceTo(a) {
			return false
		}
		if sw.placed[i] {
			return true // a revoke that created its revision
		}
		return sw.s.rev == a && (sw.tryPlace(i) || sw.fixInSlot(i) || sw.repairGap(i))
	case kindFloating:
		for {
			if sw.tryPlace(i) || sw.fixInSlot(i) || sw.repairGap(i) {
				return true
			}
			next := sw.s.rev + 1
			if sw.c.open {
				next = sw.nextStop(sw.s.rev)
				if next == math.MaxInt64 {
					return false
				}
			}
			if !sw.advanceTo(next) {
				return false
			}
		}
	}
	return false
}

// nextStop is the first revision above r an open history's store must stop at.
func (sw *sweep) nextStop(r int64) int64 {
	j, found := slices.BinarySearch(sw.stops, r)
	if found {
		j++
	}
	if j == len(sw.stops) {
		return math.MaxInt64
	}
	return sw.stops[j]
}

// advanceTo moves the store to revision t: at each revision on the way it places every operation
// answered there, then the revision's creator.
func (sw *sweep) advanceTo(t int64) bool {
	for sw.s.rev < t {
		if !sw.drain(sw.s.rev) {
			return false
		}
		next := sw.s.rev + 1
		if sw.c.open {
			next = min(t, sw.nextStop(sw.s.rev))
		}
		if !sw.create(next) {
			return false
		}
	}
	return true
}

// create makes the store reach revision next from the one before it (in an open history, from
// anywhere below it): by the write whose answer claims it, a revoke answered there that deletes
// keys, an unknown-outcome write or lease expiry that makes it with what the watches saw there,
// or, in an open history, by others' writes outside the prefix.
func (sw *sweep) create(next int64) bool {
	for _, i := range sw.creators[next] {
		if sw.kind[i] == kindCreator && !sw.placed[i] {
			// a write whose answer claims the revision: nothing else can make it
			return sw.called[i] && (sw.tryPlace(i) || sw.repairGap(i))
		}
	}
	for _, i := range sw.creators[next] {
		if sw.placed[i] {
			continue
		}
		if sw.called[i] {
			// a revoke that deletes keys (one that deletes none may still be answered at next
			// in an open history, after others' writes)
			if ok, _, o := sw.c.apply(sw.s, sw.ops[i]); ok && o.state.rev == next && len(o.changes) > 0 {
				sw.place(i, o)
				return true
			}
		}
	}
	if !sw.c.open || sw.seen[next] {
		base := sw.s.advance(next - 1)
		// the pick-th candidate that fits, and whether another follows it (a choice to revisit)
		pick := 0
		if k := len(sw.choices); k < len(sw.forced) {
			pick = sw.forced[k]
		}
		var chosen int
		var o outcome
		found := 0
		for _, i := range sw.candidates(next) {
			if ok, _, oi := sw.c.apply(base, sw.ops[i]); ok && oi.state.rev == next && sw.agreesShown(next, oi) {
				if found == pick {
					chosen, o = i, oi
				}
				if found++; found > pick+1 {
					break
				}
			}
		}
		if found > pick {
			sw.choices = append(sw.choices, choice{pick: pick, more: found > pick+1})
			if base != sw.s {
				sw.s = base
				sw.lin = append(sw.lin, &kvOp{index: -1, reach: base.rev, observation: true, call: sw.ops[chosen].call, ret: math.MaxInt64})
			}
			sw.place(chosen, o)
			return true
		}
		if !sw.c.open {
			return false
		}
	}
	from, n := sw.s, len(sw.lin)
	sw.setState(sw.s.advance(next))
	sw.gaps = append(sw.gaps, gapMark{from: from, to: next, lin: n})
	if len(sw.gaps) > 2*repairGaps {
		sw.gaps = slices.Delete(sw.gaps, 0, repairGaps)
	}
	return true
}

// drain places every operation answered at revision r, before the store leaves it.
func (sw *sweep) drain(r int64) bool {
	for sw.left[r] > 0 {
		pend := sw.pending(r)
		if len(pend) == 0 {
			return false // one was called after whatever moves the store on returned
		}
		progress := false
		for _, i := range pend {
			if sw.tryPlace(i) {
				progress = true
				break
			}
		}
		for j := 0; !progress && j < len(pend); j++ {
			progress = sw.fixInSlot(pend[j]) || sw.repairGap(pend[j])
		}
		if !progress {
			return false
		}
	}
	return true
}

// pending returns the unplaced anchored operations called so far at revision r, dropping the
// placed ones from the list.
func (sw *sweep) pending(r int64) []int {
	l := sw.pendingAt[r]
	out := l[:0]
	for _, i := range l {
		if !sw.placed[i] {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		delete(sw.pendingAt, r)
		return nil
	}
	sw.pendingAt[r] = out
	return out
}

// candidates are the optional operations that may make revision next: with what a watch saw
// there, or a key an answer shows put there, those that may write that key; else all.
func (sw *sweep) candidates(next int64) []int {
	for _, g := range sw.c.guides {
		if next < g.first || next > g.last || len(g.byRev[next]) == 0 {
			continue
		}
		return sw.writersOf(g.byRev[next][0].key)
	}
	if kv, ok := sw.c.shownAt()[next]; ok {
		return sw.writersOf(kv.Key)
	}
	return sw.liveOptional()
}

// writersOf are the unplaced optional operations that may write key k.
func (sw *sweep) writersOf(k Bytes) []int {
	var out []int
	for _, l := range [][]int{sw.optionalBy[k], sw.wild} {
		for _, i := range l {
			if !sw.placed[i] {
				out = append(out, i)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// agreesShown reports whether o, an outcome making revision next, puts what an answer shows put
// there, if one does: each revision has one maker, so no other can have made it.
func (sw *sweep) agreesShown(next int64, o outcome) bool {
	kv, ok := sw.c.shownAt()[next]
	if !ok {
		return true
	}
	for _, ch := range o.changes {
		if ch.typ == etcdrules.EventPut && ch.kv.Key == kv.Key && ch.kv.Value == kv.Value {
			return true
		}
	}
	return false
}

// shownAt maps each revision a range answer shows a key last put at to that key and value (the
// first answer that shows one): only a write that put it can have made the revision. It is
// computed once.
func (c *checker) shownAt() map[int64]KeyValue {
	if c.shown == nil {
		c.shown = map[int64]KeyValue{}
		for i := range c.h.Operations {
			if r := c.h.Operations[i].Response; r != nil {
				c.showRange(r.Range)
				c.showTxn(r.Txn)
			}
		}
	}
	return c.shown
}

func (c *checker) showRange(r *RangeResponse) {
	if r == nil {
		return
	}
	for _, kv := range r.Kvs {
		if _, ok := c.shown[kv.ModRevision]; !ok && kv.ModRevision > 0 && len(kv.Value) > 0 {
			c.shown[kv.ModRevision] = kv
		}
	}
}

func (c *checker) showTxn(t *TxnResponse) {
	if t == nil {
		return
	}
	for _, op := range t.Responses {
		c.showRange(op.Range)
		c.showTxn(op.Txn)
	}
}

// writtenKeys lists the keys a request may write, and whether it may write others too.
func writtenKeys(req *Request) (keys []Bytes, wild bool) {
	switch {
	case req.Put != nil:
		return []Bytes{req.Put.Key}, false
	case req.DeleteRange != nil:
		if req.DeleteRange.RangeEnd == "" {
			return []Bytes{req.DeleteRange.Key}, false
		}
		return nil, true
	case req.Txn != nil:
		for _, ops := range [][]RequestOp{req.Txn.Success, req.Txn.Failure} {
			for _, op := range ops {
				r := Request{Put: op.Put, DeleteRange: op.DeleteRange, Txn: op.Txn}
				k, w := writtenKeys(&r)
				keys, wild = append(keys, k...), wild || w
			}
		}
		return keys, wild
	case req.LeaseRevoke != nil:
		return nil, true
	}
	return nil, false
}

func (sw *sweep) liveOptional() []int {
	out := sw.optional[:0]
	for _, i := range sw.optional {
		if !sw.placed[i] {
			out = append(out, i)
		}
	}
	sw.optional = out
	return out
}

// fixInSlot tries to make operation i fit at the store's revision by placing first one operation
// that changes the state without a new revision: a compaction, lease grant or revoke answered at
// this revision, or an unknown-outcome request or lease expiry that changes no key.
func (sw *sweep) fixInSlot(i int) bool {
	s := sw.s
	try := func(z int) bool {
		if z == i || sw.placed[z] {
			return false
		}
		ok, _, oz := sw.c.apply(s, sw.ops[z])
		if !ok || oz.state == s || oz.state.rev != s.rev {
			return false
		}
		ok, _, oi := sw.c.apply(oz.state, sw.ops[i])
		if !ok {
			return false
		}
		sw.place(z, oz)
		sw.place(i, oi)
		return true
	}
	for _, z := range sw.pending(s.rev) {
		if try(z) {
			return true
		}
	}
	for _, z := range sw.liveOptional() {
		if try(z) {
			return true
		}
	}
	return false
}

// tryPlace places operation i if it can take effect now.
func (sw *sweep) tryPlace(i int) bool {
	ok, _, o := sw.c.apply(sw.s, sw.ops[i])
	if ok {
		sw.place(i, o)
	}
	return ok
}

// tryPreserving places operation i if it can take effect now without changing the state. Placing
// such an operation as soon as it is called cannot lose a linearization: it could be moved to this
// point of any linearization that extends the operations placed so far.
func (sw *sweep) tryPreserving(i int) bool {
	ok, _, o := sw.c.apply(sw.s, sw.ops[i])
	if ok && o.state == sw.s {
		sw.place(i, o)
	}
	return ok && o.state == sw.s
}

// place places operation i with outcome o, unless it was placed already (setState places what
// fits as soon as the state allows).
func (sw *sweep) place(i int, o outcome) {
	if sw.placed[i] {
		return
	}
	sw.placed[i] = true
	if a := sw.anchor[i]; a != noAnchor {
		sw.left[a]--
	}
	if !sw.ops[i].observation {
		sw.lin = append(sw.lin, sw.ops[i])
	}
	sw.setState(o.state)
}

// repairGap tries, in an open history, to make operation i fit by having an unknown-outcome write
// or lease expiry make the last revision of one of the last gaps instead of others' writes,
// replaying what was placed since on the state it leaves: every operation must keep its outcome
// and none may have returned before the write or expiry was called.
func (sw *sweep) repairGap(i int) bool {
	for k := len(sw.gaps) - 1; k >= 0 && k >= len(sw.gaps)-repairGaps; k-- {
		g := sw.gaps[k]
		if len(sw.lin)-g.lin > repairReplay {
			return false
		}
		for _, z := range sw.liveOptional() {
			if sw.repairWith(g, z, i) {
				sw.gaps = sw.gaps[:k]
				return true
			}
		}
	}
	return false
}

// repairWith places optional operation z at the last revision of gap g, replays what was placed
// since, and then operation i, if all of them fit.
func (sw *sweep) repairWith(g gapMark, z, i int) bool {
	zop := sw.ops[z]
	base := g.from.advance(g.to - 1)
	ok, _, oz := sw.c.apply(base, zop)
	if !ok || oz.state.rev != g.to {
		return false
	}
	st := oz.state
	since := sw.lin[g.lin:]
	for _, y := range since {
		var oy outcome
		if ok, _, oy = sw.c.apply(st, y); !ok || y.ret < zop.call {
			return false
		}
		st = oy.state
	}
	ok, _, oi := sw.c.apply(st, sw.ops[i])
	if !ok {
		return false
	}
	lin := slices.Clone(sw.lin[:g.lin])
	if base != g.from {
		lin = append(lin, &kvOp{index: -1, reach: base.rev, observation: true, call: zop.call, ret: math.MaxInt64})
	}
	sw.lin = append(append(lin, zop), since...)
	sw.placed[z] = true
	sw.setState(st)
	sw.place(i, oi)
	return true
}

// setState moves the store to s and places what now fits without changing it.
func (sw *sweep) setState(s *mstate) {
	if s == sw.s {
		return
	}
	sw.s = s
	for _, i := range sw.pending(s.rev) {
		sw.tryPreserving(i)
	}
	out := sw.floating[:0]
	for _, i := range sw.floating {
		if !sw.placed[i] && !sw.tryPreserving(i) {
			out = append(out, i)
		}
	}
	sw.floating = out
}

// inversion looks for two operations of known outcome whose revisions order them against real
// time: a's answer places it before b (a read at revision r comes after the write that made r and
// before the one that made r+1), yet b returned before a was called. There is then no
// linearization, whatever the rest of the history. It returns the pair with the earliest b in
// revision order, or nils; or a alone, answered at a revision below the first the store was at.
func (c *checker) inversion() (a, b *kvOp) {
	type keyed struct {
		op     *kvOp
		lo, hi int64 // where the answer places it: 2r-1 creating r, 2r at r
	}
	var ks []keyed
	first := initialState(c.h).rev // the first revision the store was at
	for _, op := range c.ops {
		if op.unknown || op.resp == nil || op.reach > 0 {
			continue
		}
		r := op.resp.Revision
		if (op.rev == revSame && r < first) || (op.rev == revNext && r <= first) {
			return op, nil // answered at a revision the store never was at (0: none)
		}
		switch op.rev {
		case revNext:
			ks = append(ks, keyed{op, 2*r - 1, 2*r - 1})
		case revSame:
			ks = append(ks, keyed{op, 2 * r, 2 * r})
		case revSameOrNext:
			ks = append(ks, keyed{op, 2*r - 1, 2 * r})
		}
	}
	byHi := slices.Clone(ks)
	slices.SortFunc(byHi, func(x, y keyed) int { return cmp.Compare(x.hi, y.hi) })
	slices.SortFunc(ks, func(x, y keyed) int { return cmp.Compare(x.lo, y.lo) })
	j := 0
	for _, k := range ks {
		for ; j < len(byHi) && byHi[j].hi < k.lo; j++ {
			if a == nil || byHi[j].op.call > a.call {
				a = byHi[j].op
			}
		}
		if a != nil && k.op.ret < a.call {
			return a, k.op
		}
	}
	return nil, nil
}

// explainInversion describes the inversion of a and b as a violation of a.
func (c *checker) explainInversion(a, b *kvOp) Violation {
	v := Violation{Violation: check.Violation{Guarantee: Linearizable, Operation: a.index, Watch: -1}, Response: -1,
		Revision: a.resp.Revision, Signature: SigNotLinearizable}
	if b == nil {
		v.Message = "no linearization: " + describeOp(a) + " is answered at a revision the store never was at (it began at " +
			itoa64(initialState(c.h).rev) + ")"
		return v
	}
	v.Message = "no linearization: " + describeOp(a) + " took effect before " + describeOp(b) +
		", as their revisions say, but it was called after that one returned"
	return v
}
