package kube

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/listwatch/listwatch/check"
)

// Options tune Check.
type Options struct {
	// Timeout bounds the linearizability search; 0 means no bound. When it runs out the verdict is
	// check.VerdictTimeout and the checks that need the write log are skipped.
	Timeout time.Duration
	// Phase, if set, is told each part of the check as it begins (check.PhaseSearch, PhaseLists,
	// check.PhaseWatches), for a progress line.
	Phase check.PhaseFunc
}

// PhaseLists is a part of a check its Options.Phase is told of, besides check's.
const PhaseLists = "the lists and gets"

// Check verifies a history against the apiserver's guarantees (doc.go defines each). It returns an
// error wrapping ErrInvalidHistory for a malformed history; violations are in the Result. It is
// CheckContext with context.Background().
func Check(h *History, opts Options) (*Result, error) {
	return CheckContext(context.Background(), h, opts)
}

// CheckContext is Check stopped by ctx: once ctx ends it returns, soon after, an error wrapping
// ctx.Err() (errors.Is(err, context.Canceled)) from whichever part of the check runs: porcupine's
// search (its model refuses every step), the replay, the lists and gets, or the watches.
func CheckContext(ctx context.Context, h *History, opts Options) (*Result, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	c := newChecker(h)
	c.ctx = ctx
	c.prepare()
	if err := c.check(opts); err != nil {
		return nil, err
	}
	c.coverage()
	return c.res, nil
}

// check runs the parts of the check in turn, and stops after the one during which ctx ended.
func (c *checker) check(opts Options) error {
	opts.Phase.Begin(check.PhaseSearch)
	c.linearize(opts.Timeout)
	if err := check.Stopped(c.ctx, check.PhaseSearch); err != nil {
		return err
	}
	opts.Phase.Begin(PhaseLists)
	if c.res.Verdict == check.VerdictLinearizable {
		c.buildLog()
		c.checkLists()
		c.checkGets()
	} else {
		c.res.Notes = append(c.res.Notes, "list, get and watch checks against the write log skipped: no linearization")
	}
	c.checkListValidation()
	if err := check.Stopped(c.ctx, PhaseLists); err != nil {
		return err
	}
	opts.Phase.Begin(check.PhaseWatches)
	c.checkWatches(c.res.Verdict == check.VerdictLinearizable)
	c.checkWindows()
	return check.Stopped(c.ctx, check.PhaseWatches)
}

// checker holds one Check's state.
type checker struct {
	// ctx stops the check (CheckContext); context.Background() unless set
	ctx context.Context
	h   *History
	res *Result

	names    map[string]int
	nameList []string
	// versions: what each write (by operation index) or initial item (initialSrc) wrote.
	versions     map[int]*Object
	initialItems []Object
	initialRV    uint64
	// observed: by write annotation, the first object any answer or watch showed with it.
	observed map[string]*Object
	// delRV: by uid, the resourceVersion watches saw the object deleted at (a DELETED event at a
	// resourceVersion no write answered with; an update out of a selector has its own)
	delRV map[string]uint64

	kops []*kop

	// The write log of the linearization found, and what follows from it.
	order   []*kop   // the linearization, as applied
	records []record // writes that took effect, in order
	states  [][]*Object
	// callMax[k] is the latest call time among the first k records.
	callMax []int64
	// freshRet/freshRV: for each known resourceVersion a request showed (a write's, a consistent
	// list's), when it returned; sorted by return time, freshRV a running maximum.
	freshRet []int64
	freshRV  []uint64

	expired []expiry
	served  []expiry
	counts  map[Guarantee]map[int]int // violations per guarantee per watch or chain, for maxPerWatch
}

// record is a WriteRecord with its operation.
type record struct {
	WriteRecord
	op *kop
}

// lo and hi bound the record's resourceVersion.
func (r *record) lo() uint64 {
	if r.RV != 0 {
		return r.RV
	}
	return r.MinRV
}

func (r *record) hi() uint64 {
	if r.RV != 0 {
		return r.RV
	}
	return r.MaxRV
}

func newChecker(h *History) *checker {
	return &checker{ctx: context.Background(), h: h, res: &Result{}, names: map[string]int{}, versions: map[int]*Object{},
		observed: map[string]*Object{}, delRV: map[string]uint64{}, counts: map[Guarantee]map[int]int{}}
}

// violate records a violation; key groups violations (a watch, a list chain) for maxPerWatch.
func (c *checker) violate(v Violation, key int) {
	m := c.counts[v.Guarantee]
	if m == nil {
		m = map[int]int{}
		c.counts[v.Guarantee] = m
	}
	m[key]++
	if m[key] > maxPerWatch {
		if m[key] == maxPerWatch+1 {
			c.res.Notes = append(c.res.Notes, fmt.Sprintf("more %s violations of the same watch or request were not listed", v.Guarantee))
		}
		return
	}
	c.res.Violations = append(c.res.Violations, v)
}

func (c *checker) opViolation(g Guarantee, op int, format string, a ...any) Violation {
	return Violation{Violation: check.Violation{Guarantee: g, Operation: op, Watch: -1, Message: fmt.Sprintf(format, a...)}, Frame: -1}
}

func (c *checker) nameID(name string) int {
	if id, ok := c.names[name]; ok {
		return id
	}
	id := len(c.nameList)
	c.names[name] = id
	c.nameList = append(c.nameList, name)
	return id
}

// rvOf parses a resourceVersion the server gave, reporting one that is not a number.
func (c *checker) rvOf(s string, op, watch, frame int) uint64 {
	v, err := parseRV(s)
	if err != nil {
		c.violate(Violation{Violation: check.Violation{Guarantee: ReadRV, Operation: op, Watch: watch,
			Message: fmt.Sprintf("%v: the apiserver's resourceVersions are etcd revisions, decimal numbers (k8s.io/apiserver pkg/storage/api_object_versioner.go)", err)}, Frame: frame}, -1)
		return 0
	}
	return v
}

// prepare reads the history into the search's operations.
func (c *checker) prepare() {
	h := c.h
	if h.Initial != nil {
		c.initialRV = c.rvOf(h.Initial.ResourceVersion, -1, -1, -1)
		c.initialItems = h.Initial.Items
		for i := range c.initialItems {
			c.nameID(c.initialItems[i].Name)
			c.versions[initialSrc(i)] = &c.initialItems[i]
		}
	}
	c.observeStates()
	for i := range h.Operations {
		op := &h.Operations[i]
		k := &kop{index: i, client: op.Client, call: op.Call, ret: op.Return, verb: op.Verb, name: -1, out: outcomeOf(op)}
		switch op.Verb {
		case Create, Update, Delete:
			k.name = c.nameID(op.Name)
			if k.out == outUnknown {
				k.ret = math.MaxInt64
			}
			if op.Verb == Update && op.Object != nil {
				k.preUID, k.preRV = op.Object.UID, op.Object.ResourceVersion
			}
			if op.Verb == Delete && op.Precondition != nil {
				k.preUID, k.preRV = op.Precondition.UID, op.Precondition.ResourceVersion
			}
			switch {
			case op.Verb == Delete:
				if k.out == outOK && op.Result != nil && op.Result.ResourceVersion != "" {
					k.rv = c.rvOf(op.Result.ResourceVersion, i, -1, -1)
				}
			case k.out == outOK && op.Result != nil:
				k.state = op.Result
				k.rv = c.rvOf(op.Result.ResourceVersion, i, -1, -1)
			case k.out == outUnknown && c.observed[op.Object.Annotations[WriteAnnotation]] != nil:
				k.state = c.observed[op.Object.Annotations[WriteAnnotation]]
				k.rv, _ = parseRV(k.state.ResourceVersion)
				k.resolved = k.rv != 0
			default:
				k.state = op.Object
			}
			if k.state != nil {
				c.versions[i] = k.state
			}
		case Get:
			if op.Options != nil && op.Options.ResourceVersion != "" {
				continue // not a consistent read: checkGets
			}
			if !(k.out == outOK && op.Result != nil) && k.out != outNotFound {
				continue
			}
			k.name = c.nameID(op.Name)
			k.got = op.Result
		case List:
			o := op.Options
			if o.ResourceVersion != "" || o.Continue != "" || o.ResourceVersionMatch != "" || k.out != outOK ||
				op.List == nil || invalidList(o) != "" {
				continue
			}
			sel, err := newSelector(o, h.Resource.Namespace)
			if err != nil {
				continue
			}
			k.list, k.sel = op.List, sel
			if k.rv = c.rvOf(op.List.ResourceVersion, i, -1, -1); k.rv == 0 {
				continue
			}
		}
		c.kops = append(c.kops, k)
	}
	c.watchedDeletes()
}

// observeStates notes each state the history shows, by the write annotation that names the write
// that made it: what an unknown-outcome write did, if anything showed it.
func (c *checker) observeStates() {
	h := c.h
	observe := func(o *Object) {
		if w := o.Annotations[WriteAnnotation]; w != "" && c.observed[w] == nil && o.ResourceVersion != "" {
			c.observed[w] = o
		}
	}
	for i := range h.Operations {
		op := &h.Operations[i]
		if op.Result != nil && op.Verb != Delete {
			observe(op.Result)
		}
		if op.List != nil {
			for j := range op.List.Items {
				observe(&op.List.Items[j])
			}
		}
	}
	for i := range h.Watches {
		for _, f := range h.Watches[i].Frames {
			if f.Type == Added || f.Type == Modified {
				observe(f.Object)
			}
		}
	}
}

// watchedDeletes notes, for each uid the watches saw deleted at a resourceVersion no write
// answered with, the highest such resourceVersion: where its delete took effect.
func (c *checker) watchedDeletes() {
	h := c.h
	known := map[uint64]bool{}
	for _, k := range c.kops {
		if k.isWrite() && k.verb != Delete && k.rv != 0 {
			known[k.rv] = true
		}
	}
	for i := range h.Watches {
		for _, f := range h.Watches[i].Frames {
			if f.Type != Deleted || f.Object.UID == "" {
				continue
			}
			if v, err := parseRV(f.Object.ResourceVersion); err == nil && !known[v] && v > c.delRV[f.Object.UID] {
				c.delRV[f.Object.UID] = v
			}
		}
	}
}

// linearize searches for a linearization of the writes and consistent reads.
func (c *checker) linearize(timeout time.Duration) {
	model := check.Stoppable(c.ctx, c.model())
	ops := make([]porcupine.Operation, len(c.kops))
	for i, k := range c.kops {
		ops[i] = porcupine.Operation{ClientId: k.client, Input: k, Call: k.call, Return: k.ret}
	}
	result, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	if c.ctx.Err() != nil {
		return // what porcupine answered once its model refused every step means nothing
	}
	switch result {
	case porcupine.Ok:
		var full []int
		if parts := info.PartialLinearizations(); len(parts) > 0 && len(parts[0]) > 0 {
			full = parts[0][0]
		}
		if !c.replay(full) {
			if c.ctx.Err() != nil {
				return // the replay was stopped
			}
			// porcupine found a linearization the replay cannot reproduce: a bug of this package
			c.res.Verdict = check.VerdictTimeout
			c.res.Notes = append(c.res.Notes, "internal: the linearization found could not be replayed")
			return
		}
		c.res.Verdict = check.VerdictLinearizable
		for _, k := range c.order {
			c.res.Linearization = append(c.res.Linearization, k.index)
		}
	case porcupine.Illegal:
		c.res.Verdict = check.VerdictNotLinearizable
		c.explainIllegal(info)
	default:
		c.res.Verdict = check.VerdictTimeout
		c.res.Notes = append(c.res.Notes, "the linearizability search timed out")
	}
}

// replay applies the linearization found in order, choosing for each unknown-outcome write
// whether it took effect so that every later operation fits (a depth-first search with the failed
// (position, state) pairs remembered). It fills c.order and c.records.
func (c *checker) replay(full []int) bool {
	type choice struct {
		before, after *mstate
	}
	chosen := make([]choice, len(full))
	failed := map[[2]uint64]bool{}
	steps, stopped := 0, false
	var dfs func(pos int, s *mstate) bool
	dfs = func(pos int, s *mstate) bool {
		if steps++; stopped || check.Polled(c.ctx, steps) {
			stopped = true
			return false
		}
		if pos == len(full) {
			return true
		}
		key := [2]uint64{uint64(pos), s.hash()}
		if failed[key] {
			return false
		}
		next := c.step(s, c.kops[full[pos]])
		// an unknown-outcome write nothing showed is taken not to have happened, unless what
		// follows needs it
		for i := range next {
			chosen[pos] = choice{before: s, after: next[i]}
			if dfs(pos+1, next[i]) {
				return true
			}
		}
		failed[key] = true
		return false
	}
	if !dfs(0, c.initialState()) {
		return false
	}
	for pos, i := range full {
		k := c.kops[i]
		ch := chosen[pos]
		if k.isWrite() {
			if ch.after == ch.before {
				continue // did not take effect
			}
			r := record{op: k}
			r.Operation, r.Name, r.RV = k.index, c.nameList[k.name], c.writeRV(k, ch.before.objs[k.name])
			if b := ch.before.objs[k.name]; b.present {
				r.Before = c.objectOf(b)
			}
			if a := ch.after.objs[k.name]; a.present {
				r.After = c.objectOf(a)
			}
			c.records = append(c.records, r)
		} else if k.verb == Get && (k.out == outUnknown || k.out == outRefused) {
			continue
		}
		c.order = append(c.order, k)
	}
	return true
}

// explainIllegal names the operation that could not follow the longest linearizable prefix.
func (c *checker) explainIllegal(info porcupine.LinearizationInfo) {
	var longest []int
	for _, part := range info.PartialLinearizations() {
		for _, l := range part {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	in := make([]bool, len(c.kops))
	states := []*mstate{c.initialState()}
	for _, i := range longest {
		in[i] = true
		var next []*mstate
		for _, s := range states {
			next = append(next, c.step(s, c.kops[i])...)
		}
		if len(next) > 0 {
			states = next
		}
	}
	var culprit *kop
	for i, k := range c.kops {
		if !in[i] && (culprit == nil || k.ret < culprit.ret) {
			culprit = k
		}
	}
	v := c.opViolation(Linearizable, -1, "no linearization of the writes and consistent reads exists")
	if culprit != nil {
		v.Operation = culprit.index
		v.Message = fmt.Sprintf("no linearization: after the longest linearizable prefix (%d of %d operations) %s cannot take effect at any point between its call and its return",
			len(longest), len(c.kops), c.describeOp(culprit))
		s := states[0]
		v.Expected = c.describeState(s)
		v.Received = describeOperation(&c.h.Operations[culprit.index])
	}
	c.violate(v, -1)
}

// buildLog derives from the records the resourceVersion bounds of writes neither an answer nor a
// watch showed (between the known ones around them in the linearization), the state after each
// record, and the freshness bounds.
func (c *checker) buildLog() {
	// forward: an unknown resourceVersion is above every known one before it
	var maxSoFar uint64 = c.initialRV
	ri := 0
	for _, k := range c.order {
		if k.isWrite() {
			r := &c.records[ri]
			ri++
			if r.RV == 0 {
				r.MinRV = maxSoFar + 1
			} else {
				maxSoFar = max(maxSoFar, r.RV)
			}
		}
	}
	// backward: below every known write's after it, at most every consistent list's after it
	var minAfter uint64 = math.MaxUint64
	ri = len(c.records) - 1
	for i := len(c.order) - 1; i >= 0; i-- {
		k := c.order[i]
		if k.isWrite() {
			r := &c.records[ri]
			ri--
			if r.RV == 0 {
				r.MaxRV = minAfter
			} else {
				minAfter = min(minAfter, r.RV-1)
			}
		}
	}
	for i := range c.records {
		c.res.Writes = append(c.res.Writes, c.records[i].WriteRecord)
	}
	// states after each record
	cur := make([]*Object, len(c.nameList))
	for i := range c.initialItems {
		cur[c.names[c.initialItems[i].Name]] = &c.initialItems[i]
	}
	c.states = append(c.states, cur)
	c.callMax = append(c.callMax, math.MinInt64)
	for _, r := range c.records {
		next := slices.Clone(cur)
		next[c.names[r.Name]] = r.After
		c.states = append(c.states, next)
		cur = next
		c.callMax = append(c.callMax, max(c.callMax[len(c.callMax)-1], r.op.call))
	}
	// freshness: what every request that returned by a time had shown
	type shown struct {
		ret int64
		rv  uint64
	}
	var all []shown
	for _, k := range c.order {
		if k.rv != 0 && k.out == outOK {
			all = append(all, shown{k.ret, k.rv})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ret < all[j].ret })
	best := c.initialRV
	for _, s := range all {
		best = max(best, s.rv)
		c.freshRet = append(c.freshRet, s.ret)
		c.freshRV = append(c.freshRV, best)
	}
}

// fresh is the lowest resourceVersion a consistent read called at t may answer with: the highest
// any request that returned before t showed.
func (c *checker) fresh(t int64) uint64 {
	i := sort.Search(len(c.freshRet), func(i int) bool { return c.freshRet[i] >= t })
	if i == 0 {
		return c.initialRV
	}
	return c.freshRV[i-1]
}

// positions returns the range of record counts [p, q] whose states may be the state at
// resourceVersion m: p records certainly at or below m, q possibly.
func (c *checker) positions(m uint64) (int, int) {
	p := sort.Search(len(c.records), func(i int) bool { return c.records[i].hi() > m })
	q := sort.Search(len(c.records), func(i int) bool { return c.records[i].lo() > m })
	return p, q
}

// filtered is the state after k records, as the selector admits it, by name.
func (c *checker) filtered(k int, sel *selector) map[string]*Object {
	out := map[string]*Object{}
	for _, o := range c.states[k] {
		if o != nil && sel.matches(o) {
			out[o.Name] = o
		}
	}
	return out
}

// future returns the first record among the first k that was called after t: a state at
// resourceVersion m shown at t cannot hold a write not yet made (nil if none).
func (c *checker) future(k int, t int64) *record {
	if c.callMax[k] <= t {
		return nil
	}
	for i := range k {
		if c.records[i].op.call > t {
			return &c.records[i]
		}
	}
	return nil
}

// describeObjects lists objects by name.
func describeObjects(m map[string]*Object) string {
	names := sortedNames(m)
	s := "{"
	for i, n := range names {
		if i > 0 {
			s += ", "
		}
		s += m[n].String()
	}
	return s + "}"
}

// compareSets says how got differs from want, "" when it does not.
func compareSets(want map[string]*Object, got []*Object) string {
	seen := map[string]bool{}
	var diffs []string
	for _, o := range got {
		w, ok := want[o.Name]
		switch {
		case seen[o.Name]:
			diffs = append(diffs, "twice: "+o.String())
		case !ok:
			diffs = append(diffs, "not in the state: "+o.String())
		case !w.same(o):
			diffs = append(diffs, fmt.Sprintf("%s instead of %s", o, w))
		}
		seen[o.Name] = true
	}
	for _, n := range sortedNames(want) {
		if !seen[n] {
			diffs = append(diffs, "missing: "+want[n].String())
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprint(diffs)
}

// coverage counts what the history exercised.
func (c *checker) coverage() {
	cv := &c.res.Coverage
	cv.Lists = map[string]int{}
	cv.Watches = map[string]int{}
	for i := range c.h.Operations {
		op := &c.h.Operations[i]
		cv.Requests++
		out := outcomeOf(op)
		switch op.Verb {
		case Create, Update, Delete:
			switch out {
			case outOK:
				cv.Writes++
			case outConflict, outExists:
				cv.Conflicts++
			case outNotFound:
				cv.NotFound++
			case outUnknown:
				cv.Unknown++
			}
		case Get:
			cv.Gets++
		case List:
			sem := listSemantics(op.Options)
			if op.Options.Continue != "" && sem != Invalid {
				sem = Continuation
			}
			cv.Lists[sem]++
			if op.Status == 410 {
				cv.Expired++
			}
		}
	}
	for i := range c.h.Watches {
		w := &c.h.Watches[i]
		cv.Watches[watchClass(&w.Options)]++
		if w.ResumedFrom != nil {
			cv.Resumed++
		}
		if hasSelector(&w.Options) {
			cv.SelectorWatches++
		}
		if w.Status == 410 {
			cv.Expired++
		} else if w.Status != 200 && w.Status != 0 {
			cv.Errors++
		}
		for _, f := range w.Frames {
			switch {
			case f.Type == Bookmark && f.Object.InitialEventsEnd:
				cv.InitialEventsEnd++
			case f.Type == Bookmark:
				cv.Bookmarks++
			case f.Type == Error && f.Status.Code == 410:
				cv.Expired++
			case f.Type == Error:
				cv.Errors++
			default:
				cv.Events++
			}
		}
	}
}
