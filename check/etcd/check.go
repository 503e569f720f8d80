package etcd

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/etcdrules"
)

// Options tune Check.
type Options struct {
	// Timeout bounds the linearizability search; 0 means no bound. When it runs out the verdict is
	// VerdictTimeout and the watch checks that need a reference are skipped.
	Timeout time.Duration
	// IgnoreVersions compares keys in answers and events without their Version, for a store that
	// keeps none (kine answers version 0): the rest of each answer is still judged.
	IgnoreVersions bool
	// Phase, if set, is told each part of the check as it begins (check.PhaseSearch, PhaseReplay,
	// check.PhaseWatches), for a progress line.
	Phase check.PhaseFunc
}

// PhaseReplay is a part of a check its Options.Phase is told of, besides check's.
const PhaseReplay = "the replay of the linearization"

// Check verifies a history: the KV operations must be linearizable against the reference semantics,
// and every watch must keep the watch guarantees against the reference event log of the
// linearization found. It returns an error wrapping ErrInvalidHistory for a malformed history, and
// one wrapping ErrModelDivergence if the linearization the search found does not replay on the
// model (a bug in this package); violations are in the Result. It is CheckContext with
// context.Background().
func Check(h *History, opts Options) (*Result, error) {
	return CheckContext(context.Background(), h, opts)
}

// CheckContext is Check stopped by ctx: once ctx ends it returns, soon after, an error wrapping
// ctx.Err() (errors.Is(err, context.Canceled)) from whichever part of the check runs: the sweep,
// porcupine's search, the replay or the watch checks, each of which looks at ctx every few
// thousand steps (porcupine's, at each step of its model).
func CheckContext(ctx context.Context, h *History, opts Options) (*Result, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	if opts.IgnoreVersions {
		h = withoutVersions(h)
	}
	c := newChecker(h)
	c.ctx = ctx
	c.noVersions = opts.IgnoreVersions
	res := &Result{}
	ref, err := c.check(res, opts)
	if err != nil {
		return nil, err
	}
	c.finish(res)
	changed := -1 // no linearization, no replay
	if ref != nil {
		changed = ref.unknownChanged
	}
	countUnknown(h, res, changed)
	return res, nil
}

// check runs the parts of the check in turn, and stops after the one during which ctx ended; it
// returns the reference event log of the replay, nil without a linearization.
func (c *checker) check(res *Result, opts Options) (*reference, error) {
	opts.Phase.Begin(check.PhaseSearch)
	c.linearize(res, opts.Timeout)
	if err := c.stopped(check.PhaseSearch); err != nil {
		return nil, err
	}
	var ref *reference
	if res.Verdict != VerdictLinearizable {
		res.Notes = append(res.Notes, "watch checks against the reference event log skipped: the KV history has no linearization")
	} else {
		opts.Phase.Begin(PhaseReplay)
		r := c.replayed // the sweep's order was replayed when it was accepted
		if r == nil {
			var err error
			if r, err = c.replayLin(res.lin); err != nil {
				return nil, err
			}
		}
		ref, res.Events, res.Gaps = r.ref, r.ref.events, r.gaps
		c.checkSerializable(res, r.final)
		if err := c.stopped(PhaseReplay); err != nil {
			return nil, err
		}
	}
	opts.Phase.Begin(check.PhaseWatches)
	c.checkWatches(res, ref)
	return ref, c.stopped(check.PhaseWatches)
}

// replayLin replays lin, the linearization porcupine found.
func (c *checker) replayLin(lin []*kvOp) (*replayed, error) {
	ref, final, gaps, err := c.replay(lin)
	if err != nil {
		return nil, err
	}
	return &replayed{ref: ref, final: final, gaps: gaps}, nil
}

// stopped is the error CheckContext returns once its context ended during phase, else nil.
func (c *checker) stopped(phase string) error {
	return check.Stopped(c.ctx, phase)
}

// finish adds what every verdict reports: the notes about what was left unjudged, and the coverage.
func (c *checker) finish(res *Result) {
	if c.below > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d reads at revisions below the start revision %d not judged: the history does not show the store there", c.below, c.start))
	}
	res.Coverage = c.coverage(res)
}

// revCheck says which header revisions a successful response may carry from a state at revision r.
type revCheck uint8

const (
	revSame       revCheck = iota // r
	revNext                       // r+1
	revSameOrNext                 // r or r+1
	revAny                        // not compared
)

// kvOp is an operation prepared for the search.
type kvOp struct {
	index    int // in History.Operations; -1 for a lease expiry
	call     int64
	ret      int64 // math.MaxInt64 when the outcome is unknown
	client   int
	req      *Request
	resp     *Response
	errMsg   string
	unknown  bool
	shapeErr error
	grantID  int64
	rev      revCheck
	// reach, for the watch-guided search only: the store must be at this revision by ret, because a
	// watch received it (index -1, watch in watch).
	reach int64
	watch int
	// observation marks what the guided search adds: reach operations, and serializable reads
	// (which hold at their header revision at any time before they returned)
	observation bool
}

func (op *kvOp) revisionFits(r int64) bool {
	got := op.resp.Revision
	switch op.rev {
	case revSame:
		return got == r
	case revNext:
		return got == r+1
	case revSameOrNext:
		return got == r || got == r+1
	}
	return true
}

type observedEvent struct {
	typ   EventType
	key   Bytes
	value Bytes
}

// watchGuide is what one watch saw, for the watch-guided search: within [first, last] a correct
// watch received exactly the matching events of every revision.
type watchGuide struct {
	wc          *watchChecker
	first, last int64
	lastTime    int64 // when last was first received
	byRev       map[int64][]observedEvent
}

func newWatchGuide(w *Watch, wi int) *watchGuide {
	g := &watchGuide{wc: newWatchChecker(w, wi, nil, nil), byRev: map[int64][]observedEvent{}}
	g.first = w.Request.StartRevision
	minEvent := int64(0)
	for _, r := range w.Responses {
		if r.Canceled || r.IsCompacted() {
			break
		}
		if r.Created {
			if g.first <= 0 {
				g.first = r.Revision + 1
			}
			continue
		}
		if r.IsProgressNotify() && r.Revision > g.last {
			g.last, g.lastTime = r.Revision, r.Time
		}
		for _, ev := range r.Events {
			rev := ev.Kv.ModRevision
			o := observedEvent{typ: ev.Type, key: ev.Kv.Key}
			if ev.Type == Put {
				o.value = ev.Kv.Value
			}
			g.byRev[rev] = append(g.byRev[rev], o)
			if rev > g.last {
				g.last, g.lastTime = rev, r.Time
			}
			if minEvent == 0 || rev < minEvent {
				minEvent = rev
			}
		}
	}
	if g.first <= 0 {
		g.first = minEvent
		if g.first == 0 {
			g.first = g.last + 1
		}
	}
	return g
}

// agrees reports whether changes made at rev are exactly what the watch received at rev, if its
// window covers rev.
func (g *watchGuide) agrees(rev int64, changes []change) bool {
	if rev < g.first || rev > g.last {
		return true
	}
	seen := g.byRev[rev]
	j := 0
	for _, ch := range changes {
		if !g.wc.wants(ch.typ, ch.kv.Key) {
			continue
		}
		o := observedEvent{typ: ch.typ, key: ch.kv.Key}
		if ch.typ == Put {
			o.value = ch.kv.Value
		}
		if j >= len(seen) || seen[j] != o {
			return false
		}
		j++
	}
	return j == len(seen)
}

type checker struct {
	// ctx stops the check (CheckContext); context.Background() unless set
	ctx          context.Context
	h            *History
	ops          []*kvOp // in the search
	serializable []*kvOp
	// claimed maps a revision to the successful operation whose response shows it created it.
	claimed map[int64]*kvOp
	guides  []*watchGuide
	// guided is set during the watch-guided search
	guided bool
	// shown: shownAt's map, once computed
	shown map[int64]KeyValue
	// replayed is the replay of the sweep's order, set when linearize accepts it; nil when
	// porcupine found the linearization.
	replayed *replayed
	// open: the history began at start, and others may write outside its prefix
	open  bool
	start int64
	// noVersions: Options.IgnoreVersions
	noVersions bool
	// below counts the reads left out of an open history's search: at revisions below its start,
	// which it cannot judge
	below int
}

func newChecker(h *History) *checker {
	c := &checker{ctx: context.Background(), h: h, claimed: map[int64]*kvOp{}, open: h.Open(), start: h.StartRevision}
	for i := range h.Watches {
		c.guides = append(c.guides, newWatchGuide(&h.Watches[i], i))
	}
	maxClient := 0
	granted := map[int64]int64{} // lease ID -> the earliest time it may expire: its grant's call + its TTL
	for i := range h.Operations {
		o := &h.Operations[i]
		maxClient = max(maxClient, o.Client)
		op := &kvOp{index: i, call: o.Call, ret: o.Return, client: o.Client, req: &o.Request,
			resp: o.Response, errMsg: o.Error, unknown: o.Unknown}
		req := &o.Request
		if op.unknown {
			op.ret = math.MaxInt64
			if isReadOnly(req) {
				continue // an unanswered read tells nothing
			}
		}
		if isSerializableRead(req) && op.resp == nil {
			continue // a stale read may fail where a linearizable one would not
		}
		if c.open && req.Range != nil && req.Range.Revision > 0 && req.Range.Revision < c.start {
			c.below++
			continue // a read of what the history does not show
		}
		if g := req.LeaseGrant; g != nil {
			// a grant that names its ID must get it; one that does not gets the ID its answer says
			op.grantID = g.ID
			if op.grantID == 0 && op.resp != nil {
				op.grantID = op.resp.LeaseGrant.ID
			}
			if op.grantID == 0 {
				continue // nobody can know the lease it may have created
			}
			// a lease lives at least its TTL (the larger of the one asked for and the one granted)
			ttl := g.TTL
			if op.resp != nil && op.resp.LeaseGrant != nil {
				ttl = max(ttl, op.resp.LeaseGrant.TTL)
			}
			earliest := o.Call + ttl*int64(time.Second)
			if t, ok := granted[op.grantID]; !ok || earliest < t {
				granted[op.grantID] = earliest
			}
		}
		op.shapeErr = shapeError(req)
		if op.resp != nil {
			op.rev = revisionCheck(req, op.resp)
			if op.rev == revNext {
				c.claimed[op.resp.Revision] = op
			}
			if isSerializableRead(req) {
				c.serializable = append(c.serializable, op)
				continue
			}
		}
		c.ops = append(c.ops, op)
	}
	c.addLeaseExpiries(granted, maxClient)
	return c
}

// addLeaseExpiries adds the expiries of the leases that may have expired: every lease whose TTL
// may have run out before the history ends gets an expiry, on a client lane after maxClient's,
// that may take effect at any time after granted says it may, as an unknown-outcome revoke. No
// more is asked: an expiry may show only in a read that finds a key gone, or in nothing at all.
func (c *checker) addLeaseExpiries(granted map[int64]int64, maxClient int) {
	h := c.h
	end := int64(math.MinInt64) // the last time the history shows
	for _, o := range h.Operations {
		end = max(end, o.Return)
	}
	for _, w := range h.Watches {
		for _, r := range w.Responses {
			end = max(end, r.Time)
		}
	}
	ids := make([]int64, 0, len(granted))
	for id, earliest := range granted {
		if earliest <= end {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		c.ops = append(c.ops, &kvOp{index: -1, call: granted[id], ret: math.MaxInt64, client: maxClient + 1,
			req: &Request{LeaseRevoke: &LeaseRevokeRequest{ID: id}}, unknown: true})
	}
}

func isReadOnly(req *Request) bool {
	switch {
	case req.Range != nil, req.LeaseKeepAlive != nil:
		return true
	case req.Txn != nil:
		return txnReadOnly(req.Txn)
	}
	return false
}

// isSerializableRead reports whether etcd serves the request from the member's local state without a
// linearizable read: a serializable range, or a txn whose every top-level op of both branches is a
// serializable range, an empty txn included (etcdserver/v3_server.go Txn with IsTxnReadonly and
// IsTxnSerializable).
func isSerializableRead(req *Request) bool {
	switch {
	case req.Range != nil:
		return req.Range.Serializable
	case req.Txn != nil:
		for _, ops := range [][]RequestOp{req.Txn.Success, req.Txn.Failure} {
			for _, op := range ops {
				if op.Range == nil || !op.Range.Serializable {
					return false
				}
			}
		}
		return true
	}
	return false
}

func txnReadOnly(t *TxnRequest) bool {
	for _, ops := range [][]RequestOp{t.Success, t.Failure} {
		for _, op := range ops {
			if op.Put != nil || op.DeleteRange != nil || (op.Txn != nil && !txnReadOnly(op.Txn)) {
				return false
			}
		}
	}
	return true
}

func revisionCheck(req *Request, resp *Response) revCheck {
	switch {
	case req.Put != nil:
		return revNext
	case req.DeleteRange != nil:
		if resp.DeleteRange != nil && resp.DeleteRange.Deleted > 0 {
			return revNext
		}
		return revSame
	case req.Txn != nil:
		if txnChanged(resp.Txn) {
			return revNext
		}
		return revSame
	case req.LeaseRevoke != nil:
		return revSameOrNext
	case req.LeaseKeepAlive != nil:
		return revAny
	}
	return revSame
}

func txnChanged(t *TxnResponse) bool {
	if t == nil {
		return false
	}
	for _, r := range t.Responses {
		switch {
		case r.Put != nil:
			return true
		case r.DeleteRange != nil && r.DeleteRange.Deleted > 0:
			return true
		case r.Txn != nil && txnChanged(r.Txn):
			return true
		}
	}
	return false
}

// step is the porcupine model's step: whether op can take effect on s with its recorded outcome, and
// the state after it.
func (c *checker) step(s *mstate, op *kvOp) (bool, *mstate) {
	ok, _, o := c.apply(s, op)
	if !ok {
		return false, nil
	}
	return true, o.state
}

// apply evaluates op on s with its recorded outcome: whether it can take effect there, the state it
// runs on and its outcome. In an open history the state it runs on is s advanced past the writes of
// others to where the revision of its response says it ran.
func (c *checker) apply(s *mstate, op *kvOp) (bool, *mstate, outcome) {
	if op.reach > 0 {
		if c.open {
			// a revision a watch saw was reached, by the history's writes or by others'
			n := s.advance(op.reach)
			return true, n, outcome{state: n}
		}
		return s.rev >= op.reach, s, outcome{state: s}
	}
	if op.resp != nil {
		base, ok := c.fit(s, op)
		if !ok {
			return false, nil, outcome{}
		}
		s = base
	}
	o := eval(s, op)
	switch {
	case op.unknown:
		if o.state.rev != s.rev {
			// a revision that a successful request shows it created cannot be another's
			if c.claimed[o.state.rev] != nil {
				return false, nil, outcome{}
			}
			if c.guided {
				for _, g := range c.guides {
					if !g.agrees(o.state.rev, o.changes) {
						return false, nil, outcome{}
					}
				}
			}
		}
		return true, s, o
	case op.resp != nil:
		if c.noVersions && o.err == nil {
			zeroResponseVersions(o.resp, o.ties)
		}
		if o.err != nil || !responseMatches(op.req, o.resp, o.ties, op.resp) {
			return false, nil, outcome{}
		}
		return true, s, o
	default:
		ok := o.err != nil && o.err.Error() == op.errMsg
		if !ok && c.compactBelowStart(s, op) && op.errMsg == etcdrules.ErrCompacted.Error() {
			// the store may have been compacted there before the history began
			ok = true
		}
		return ok, s, outcome{state: s}
	}
}

// compactBelowStart reports whether op compacts at or below an open history's start revision and
// above what the history compacted: whether it succeeds depends on compactions made before the
// history began, which it does not show.
func (c *checker) compactBelowStart(s *mstate, op *kvOp) bool {
	r := op.req.Compact
	return c.open && r != nil && r.Revision <= c.start && r.Revision > s.compactRev
}

// fit returns the state op's response says it ran on, and whether s can get there. In a closed
// history that is s itself, if the response's revision is the one op gives there. In an open one
// the store may have moved on by others' writes: a write that changed something ran on the
// revision before its response's, anything else on its response's.
func (c *checker) fit(s *mstate, op *kvOp) (*mstate, bool) {
	if !c.open {
		return s, op.revisionFits(s.rev)
	}
	got := op.resp.Revision
	switch op.rev {
	case revNext:
		return s.advance(got - 1), got > s.rev
	case revSame:
		return s.advance(got), got >= s.rev
	case revSameOrNext:
		if got < s.rev {
			return nil, false
		}
		if revokes(s, op.req.LeaseRevoke.ID) {
			return s.advance(got - 1), got > s.rev
		}
		return s.advance(got), true
	}
	return s, true
}

// revokes reports whether revoking lease id on s deletes a key.
func revokes(s *mstate, id int64) bool {
	found := false
	s.kv().ascend(keyRange{key: "", isRange: true}, func(_ Bytes, rc *krec) bool {
		found = rc.lease == id
		return !found
	})
	return found
}

func (c *checker) model() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return initialState(c.h) },
		Step: func(st, in, _ any) (bool, any) {
			ok, n := c.step(st.(*mstate), in.(*kvOp))
			if !ok {
				return false, nil
			}
			return true, n
		},
		Equal:             func(a, b any) bool { return statesEqual(a.(*mstate), b.(*mstate)) },
		Hash:              func(st any) uint64 { return st.(*mstate).hash },
		DescribeOperation: func(in, _ any) string { return describeOp(in.(*kvOp)) },
		DescribeState:     func(st any) string { return describeState(st.(*mstate)) },
	}
}

func porcupineOps(kops []*kvOp) []porcupine.Operation {
	ops := make([]porcupine.Operation, len(kops))
	for i, op := range kops {
		ops[i] = porcupine.Operation{ClientId: op.client, Input: op, Call: op.call, Return: op.ret}
	}
	return ops
}

// reachOps are the watch observations of the guided search: for each watch, that the store reached
// the highest revision the watch saw by the time it saw it.
func (c *checker) reachOps() []*kvOp {
	lane := 0
	for _, op := range c.ops {
		lane = max(lane, op.client+1)
	}
	var ops []*kvOp
	for i, g := range c.guides {
		if g.last > 1 {
			ops = append(ops, &kvOp{index: -1, reach: g.last, watch: i, call: c.h.Watches[i].Call, ret: g.lastTime, client: lane, observation: true})
		}
	}
	return ops
}

// sweepObservations are what guides the sweep besides the watches' reachOps: each serializable
// read shows that the store reached its header revision before it returned (checkSerializable
// then judges its answer there).
func (c *checker) sweepObservations() []*kvOp {
	ops := c.reachOps()
	for _, op := range c.serializable {
		if r := op.resp.Revision; r > 0 {
			ops = append(ops, &kvOp{index: -1, reach: r, watch: -1, call: op.call, ret: op.ret, client: op.client, observation: true})
		}
	}
	return ops
}

// guidedOps adds to the operations what else the history observed: the watches' reachOps, and each
// serializable read, at its header revision at any time before it returned.
func (c *checker) guidedOps() []*kvOp {
	ops := append(slices.Clone(c.ops), c.reachOps()...)
	for _, op := range c.serializable {
		o := *op
		o.call, o.observation = math.MinInt64, true
		ops = append(ops, &o)
	}
	return ops
}

// linearize finds a linearization: first by the sweep (sweep.go), which orders the operations by
// their revisions; with unknown-outcome writes, guided as the search below is by the watches. If
// the sweep gets stuck, two operations whose revisions order them against real time prove that
// there is none (inversion); else porcupine searches, as search says, within what is left of the
// timeout.
func (c *checker) linearize(res *Result, timeout time.Duration) {
	start := time.Now()
	var deadline time.Time
	if timeout > 0 {
		deadline = start.Add(timeout)
	}
	res.model = c.model()
	res.visualize = c.visualize
	hasUnknown := slices.ContainsFunc(c.ops, func(op *kvOp) bool { return op.unknown })
	guided := hasUnknown && (len(c.guides) > 0 || len(c.serializable) > 0)
	stuck := ""
	passes := []bool{false}
	if guided {
		passes = []bool{true, false}
	}
	for _, g := range passes {
		ops := c.ops
		if g {
			ops = append(slices.Clone(c.ops), c.sweepObservations()...)
		}
		c.guided = g
		lin, ok, where := sweepWithRestarts(c, ops, deadline)
		c.guided = false
		stuck = cmp.Or(stuck, where)
		if ok {
			// The sweep's greedy choices are checked step by step, but a placement that fits each
			// step may still leave an order the whole replay refuses (seen with forgotten write
			// responses in open histories): such an order is not a linearization, so porcupine
			// decides instead (TestSweepAgreesWithPorcupine).
			r, err := c.replayLin(lin)
			if err != nil {
				stuck = cmp.Or(stuck, "an order the model does not replay")
				continue
			}
			// The sweep asks of a serializable read only that its revision be reached, so with
			// unknown-outcome writes it may have chosen the wrong one to make a revision such a
			// read shows: porcupine's guided search, which asks for its answer, decides then.
			if hasUnknown && !c.serializableHold(r.final) {
				stuck = cmp.Or(stuck, "a serializable read the sweep's choice of unknown-outcome writes contradicts")
				continue
			}
			c.replayed = r
		}
		if ok {
			if !g && guided {
				res.Notes = append(res.Notes, noteUnguided)
			}
			res.Verdict = VerdictLinearizable
			c.setLinearization(res, lin)
			return
		}
	}
	if c.ctx.Err() != nil {
		return // the sweep was stopped, not stuck
	}
	if a, b := c.inversion(); a != nil {
		res.Verdict = VerdictNotLinearizable
		res.Violations = append(res.Violations, c.explainInversion(a, b))
		return
	}
	res.Notes = append(res.Notes, "the revisions did not order the history (stuck where "+stuck+"): porcupine searched")
	if timeout > 0 {
		timeout -= time.Since(start)
		if timeout <= 0 {
			res.visualize = nil
			res.Verdict = VerdictTimeout
			res.Notes = append(res.Notes, "the linearizability search timed out")
			return
		}
	}
	c.search(res, timeout)
}

// serializableHold reports whether every serializable read is the answer of the store at its header
// revision in the linearization replayed, final its last state.
func (c *checker) serializableHold(final *mstate) bool {
	below := c.below
	var r Result
	c.checkSerializable(&r, final)
	c.below = below
	return len(r.Violations) == 0
}

const noteUnguided = "no linearization agrees with every watch: the unknown-outcome writes were placed without their guidance"

// setLinearization records lin, the linearization found, in res.
func (c *checker) setLinearization(res *Result, lin []*kvOp) {
	res.lin = lin
	res.Linearization = nil
	for _, op := range lin {
		if op.index >= 0 {
			res.Linearization = append(res.Linearization, op.index)
		}
	}
}

// visualize runs porcupine's search for the report of a history the sweep linearized.
func (c *checker) visualize(timeout time.Duration) (porcupine.LinearizationInfo, bool) {
	result, info := porcupine.CheckOperationsVerbose(c.model(), porcupineOps(c.ops), timeout)
	return info, result != porcupine.Unknown
}

// search is porcupine's search for a linearization. With unknown-outcome writes it first runs a
// guided search: an unknown-outcome write may create a revision only with exactly the events each
// watch whose window covers that revision received there, the store must reach each watch's
// highest revision by the time the watch saw it, and each serializable read must fit the store at
// its header revision some time before it returned. Should that find nothing (a watch or a
// serializable read is wrong), it searches again unguided, so that the checks that follow can say
// which is wrong.
func (c *checker) search(res *Result, timeout time.Duration) {
	start := time.Now()
	hasUnknown := slices.ContainsFunc(c.ops, func(op *kvOp) bool { return op.unknown })
	model := check.Stoppable(c.ctx, res.model)
	result := porcupine.Unknown
	var info porcupine.LinearizationInfo
	kops := c.ops
	guided := hasUnknown && (len(c.guides) > 0 || len(c.serializable) > 0)
	if guided {
		c.guided = true
		kops = c.guidedOps()
		result, info = porcupine.CheckOperationsVerbose(model, porcupineOps(kops), timeout)
		c.guided = false
	}
	// a guided search that timed out leaves no time for the unguided one: the bound is the whole search's
	if (!guided || result == porcupine.Illegal) && c.ctx.Err() == nil {
		if guided {
			res.Notes = append(res.Notes, noteUnguided)
		}
		left := timeout
		if timeout > 0 {
			left = timeout - time.Since(start)
		}
		if timeout == 0 || left > 0 {
			kops = c.ops
			result, info = porcupine.CheckOperationsVerbose(model, porcupineOps(kops), left)
		} else {
			result = porcupine.Unknown
		}
	}
	if c.ctx.Err() != nil {
		return // what porcupine answered once its model refused every step means nothing
	}
	res.info, res.hasInfo = info, true
	switch result {
	case porcupine.Ok:
		res.Verdict = VerdictLinearizable
		var lin []*kvOp
		if parts := info.PartialLinearizations(); len(parts) > 0 && len(parts[0]) > 0 {
			// unknown-outcome writes after the last operation of known outcome (or watch
			// observation) are the ones nothing shows to have happened: they are left out
			full := parts[0][0]
			last := -1
			for j, i := range full {
				if !kops[i].unknown {
					last = j
				}
			}
			for _, i := range full[:last+1] {
				if !kops[i].observation {
					lin = append(lin, kops[i])
				}
			}
		}
		c.setLinearization(res, lin)
	case porcupine.Illegal:
		res.Verdict = VerdictNotLinearizable
		res.Violations = append(res.Violations, c.explainIllegal(info))
	default:
		res.Verdict = VerdictTimeout
		res.Notes = append(res.Notes, "the linearizability search timed out")
	}
}

// explainIllegal picks, after the longest partial linearization, the operation that could not follow
// it (the one that returned first among those left out) and says what the model expected of it there.
func (c *checker) explainIllegal(info porcupine.LinearizationInfo) Violation {
	v := Violation{Violation: check.Violation{Guarantee: Linearizable, Operation: -1, Watch: -1}, Response: -1, Signature: SigNotLinearizable}
	var longest []int
	for _, part := range info.PartialLinearizations() {
		for _, l := range part {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	s := initialState(c.h)
	in := make([]bool, len(c.ops))
	for _, i := range longest {
		in[i] = true
		if ok, n := c.step(s, c.ops[i]); ok {
			s = n
		}
	}
	var culprit *kvOp
	for i, op := range c.ops {
		if !in[i] && (culprit == nil || op.ret < culprit.ret) {
			culprit = op
		}
	}
	if culprit == nil {
		v.Message = "no linearization of the operations exists"
		return v
	}
	v.Operation = culprit.index
	v.Revision = s.rev
	o := eval(s, culprit)
	v.Message = "no linearization: after the longest linearizable prefix (" + itoa(len(longest)) + " of " +
		itoa(len(c.ops)) + " operations, store at revision " + itoa64(s.rev) + ") " + describeOp(culprit) +
		" cannot take effect: no point between its call and its return gives its recorded outcome"
	v.Diff = diffOutcome(o, culprit)
	return v
}
