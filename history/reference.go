package history

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/google/go-cmp/cmp"

	"github.com/listwatch/listwatch/store"
)

// ErrModelDivergence: the reference store, replaying a linearization the model accepted, answered
// differently from the model. It is a bug in this package; the error says where.
var ErrModelDivergence = errors.New("history: the checker's model and the reference store disagree")

// reference is the event log of a linearization, indexed for the watch checks.
type reference struct {
	events []Event
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

// replay runs the linearization through the model and through a fresh reference store side by side.
// Every answer of the store must be the model's (which the search matched with the recorded one),
// and every event the store's watch delivers must be a change the model made; the store's events
// are the reference log. It returns the model's final state too.
func (c *checker) replay(lin []*kvOp) (*reference, *mstate, error) {
	st := newReferenceStore()
	defer st.Close()
	ws, err := st.NewWatchStream()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrModelDivergence, err)
	}
	defer ws.Close()
	if _, err := ws.Watch(context.Background(), &store.WatchRequest{Key: []byte{0}, RangeEnd: []byte{0}, PrevKv: true}); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrModelDivergence, err)
	}
	<-ws.Chan() // the created answer
	var events []Event
	s := initialState()
	for _, op := range lin {
		ok, next := c.step(s, op)
		if !ok {
			return nil, nil, fmt.Errorf("%w: %s does not replay on the model", ErrModelDivergence, describeOp(op))
		}
		o := eval(s, op)
		req := op.req
		if req.LeaseGrant != nil {
			g := *req.LeaseGrant
			g.ID = op.grantID
			req = &Request{LeaseGrant: &g}
		}
		var resp *Response
		var serr error
		if op.shapeErr != nil {
			serr = op.shapeErr
		} else {
			resp, serr = applyToStore(st, req)
		}
		if err := agree(op, o, resp, serr); err != nil {
			return nil, nil, err
		}
		var got []Event
		for len(ws.Chan()) > 0 {
			wr := <-ws.Chan()
			for _, ev := range wr.Events {
				got = append(got, fromStoreEvent(ev))
			}
		}
		if len(got) != len(o.changes) {
			return nil, nil, fmt.Errorf("%w: %s: the store produced %d events, the model %d", ErrModelDivergence, describeOp(op), len(got), len(o.changes))
		}
		for i, ev := range got {
			if ev.Type != o.changes[i].typ || ev.Kv != o.changes[i].kv {
				return nil, nil, fmt.Errorf("%w: %s: event %d differs: %s", ErrModelDivergence, describeOp(op), i,
					cmp.Diff(o.changes[i].kv, ev.Kv))
			}
		}
		events = append(events, got...)
		s = next
	}
	return buildReference(events, s.rev), s, nil
}

// agree checks the store's answer against the model's.
func agree(op *kvOp, o outcome, resp *Response, serr error) error {
	switch {
	case (o.err == nil) != (serr == nil):
		return fmt.Errorf("%w: %s: model error %v, store error %v", ErrModelDivergence, describeOp(op), o.err, serr)
	case o.err != nil:
		if o.err.Error() != serr.Error() {
			return fmt.Errorf("%w: %s: model error %v, store error %v", ErrModelDivergence, describeOp(op), o.err, serr)
		}
	case !responseMatches(op.req, o.resp, o.ties, resp):
		return fmt.Errorf("%w: %s:\n%s", ErrModelDivergence, describeOp(op), cmp.Diff(o.resp, resp, diffOptions))
	}
	return nil
}

// checkSerializable checks each serializable read against the linearization's state at its header
// revision: it may be stale, but it must be a state the store was in.
func (c *checker) checkSerializable(res *Result, final *mstate) {
	for _, op := range c.serializable {
		v := Violation{Guarantee: Serializable, Operation: op.index, Watch: -1, Response: -1, Revision: op.resp.Revision}
		rev := op.resp.Revision
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
