package etcd

import (
	"errors"
	"fmt"
	"sort"

	"github.com/listwatch/listwatch/check"
)

// ErrModelDivergence: the linearization the search found does not replay on the checker's model.
// It is a bug in this package; the error says where.
var ErrModelDivergence = errors.New("etcd: the linearization found does not replay on the model")

// reference is the event log of a linearization, indexed for the watch checks.
type reference struct {
	events []Event
	// unknownChanged counts the unknown-outcome requests of the history whose replay made a change.
	unknownChanged int
	// revStart[r] is the index of the first event at revision r; revStart[maxRev+1] == len(events).
	revStart []int
	maxRev   int64
	byKey    map[Bytes][]int
}

// span returns the index range of the events at revisions [from, to].
func (r *reference) span(from, to int64) (int, int) {
	from = max(from, 0)
	to = min(to, r.maxRev)
	if from > to {
		return 0, 0
	}
	return r.revStart[from], r.revStart[to+1]
}

// find returns the index of the first event of key and type at rev at or after index from, else the
// first one before from, else -1.
func (r *reference) find(rev int64, key Bytes, typ EventType, from int) int {
	if rev < 0 || rev > r.maxRev {
		return -1
	}
	lo, hi := r.revStart[rev], r.revStart[rev+1]
	first := -1
	for i := lo; i < hi; i++ {
		if ev := &r.events[i]; ev.Kv.Key == key && ev.Type == typ {
			if i >= from {
				return i
			}
			if first < 0 {
				first = i
			}
		}
	}
	return first
}

// count returns how many events of key and type there are at rev.
func (r *reference) count(rev int64, key Bytes, typ EventType) int {
	if rev < 0 || rev > r.maxRev {
		return 0
	}
	n := 0
	for i := r.revStart[rev]; i < r.revStart[rev+1]; i++ {
		if ev := &r.events[i]; ev.Kv.Key == key && ev.Type == typ {
			n++
		}
	}
	return n
}

func buildReference(events []Event, maxRev int64) *reference {
	r := &reference{events: events, maxRev: maxRev, revStart: make([]int, maxRev+2), byKey: map[Bytes][]int{}}
	i := 0
	for rev := int64(0); rev <= maxRev+1; rev++ {
		for i < len(events) && events[i].Kv.ModRevision < rev {
			i++
		}
		r.revStart[rev] = i
	}
	for i, ev := range events {
		r.byKey[ev.Kv.Key] = append(r.byKey[ev.Kv.Key], i)
	}
	return r
}

// replayed is what replay returned for the linearization a check accepted.
type replayed struct {
	ref   *reference
	final *mstate
	gaps  []Gap
}

// replay runs the linearization through the model and returns its event log and final state. Every
// operation must take effect where the search placed it (else the search and the model disagree:
// ErrModelDivergence). Each event is one change the model made, with prev_kv as etcd's watch sends
// it (v3rpc/watch.go sendLoop): the key's version at the previous revision, if it had one, and none
// for an event that creates its key.
func (c *checker) replay(lin []*kvOp) (*reference, *mstate, []Gap, error) {
	var events []Event
	var gaps []Gap
	changed := 0
	s := initialState(c.h)
	for i, op := range lin {
		if check.Polled(c.ctx, i) {
			return nil, nil, nil, c.stopped(PhaseReplay)
		}
		ok, base, o := c.apply(s, op)
		if !ok {
			return nil, nil, nil, fmt.Errorf("%w: %s does not replay on the model", ErrModelDivergence, describeOp(op))
		}
		if base.rev > s.rev {
			gaps = append(gaps, Gap{From: s.rev + 1, To: base.rev})
		}
		before := base.kv()
		for _, ch := range o.changes {
			ev := Event{Type: ch.typ, Kv: ch.kv}
			if !ev.IsCreate() {
				if rc := before.get(ch.kv.Key); rc != nil {
					prev := rc.keyValue(ch.kv.Key)
					ev.PrevKV = &prev
				}
			}
			if c.noVersions {
				ev.Kv.Version = 0
				if ev.PrevKV != nil {
					ev.PrevKV.Version = 0
				}
			}
			events = append(events, ev)
		}
		if op.unknown && op.index >= 0 && (len(o.changes) > 0 || o.state.rev != base.rev) {
			changed++
		}
		s = o.state
	}
	ref := buildReference(events, s.rev)
	ref.unknownChanged = changed
	return ref, s, gaps, nil
}

// checkSerializable checks each serializable read against the linearization's state at its header
// revision: it may be stale, but it must be a state the store was in.
func (c *checker) checkSerializable(res *Result, final *mstate) {
	for i, op := range c.serializable {
		if check.Polled(c.ctx, i) {
			return // CheckContext returns the context's error
		}
		v := Violation{Violation: check.Violation{Guarantee: Serializable, Operation: op.index, Watch: -1}, Response: -1, Revision: op.resp.Revision, Signature: SigStaleSerializable}
		rev := op.resp.Revision
		if c.open && rev < c.start {
			c.below++
			continue
		}
		if rev < 1 || rev > final.rev {
			v.Message = fmt.Sprintf("%s: header revision %d was never the store's revision (the linearization ends at %d)", describeOp(op), rev, final.rev)
			res.Violations = append(res.Violations, v)
			continue
		}
		s := &mstate{rev: rev, compactRev: -1, snap: final.snap.at(rev)}
		o := eval(s, op)
		if o.err != nil || !responseMatches(op.req, o.resp, o.ties, op.resp) {
			v.Message = fmt.Sprintf("%s: not the answer of the store at revision %d", describeOp(op), rev)
			v.Diff = diffOutcome(o, op)
			res.Violations = append(res.Violations, v)
		}
	}
}

// compaction is a compaction request that may have taken effect.
type compaction struct {
	rev       int64
	call, ret int64
	ok        bool // succeeded (else: outcome unknown)
}

func (c *checker) compactions() []compaction {
	var out []compaction
	for _, o := range c.h.Operations {
		if o.Request.Compact != nil && (o.Response != nil || o.Unknown) {
			out = append(out, compaction{rev: o.Request.Compact.Revision, call: o.Call, ret: o.Return, ok: o.Response != nil})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].call < out[j].call })
	return out
}
