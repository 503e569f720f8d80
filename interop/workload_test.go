package interop

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// The workload is a seeded random sequence of clientv3 calls run one at a time, each on both sides
// (reference first), with each pair of outcomes compared at once. The generator steers by the
// reference side's answers (current and compact revision, which leases exist), so both sides get
// exactly the same requests; a side that diverges shows up in the comparisons, not in the requests.
//
// Everything that could make two correct servers answer differently is kept out of the workload:
// leases that can expire during the run carry no keys and are never used after their grant; every
// open watch has delivered all its events before a compaction (so no watcher is lagging when it
// happens) and before a cancel; watches that may fail to be created, and watches from a future
// revision, get a stream of their own (a failed create poisons its clientv3 stream, and a future
// watch keeps RequestProgress unanswered on its stream), and so do watches from a past revision:
// etcd's send loop may pass a created answer ahead of a progress notification it queued before the
// create (v3rpc watch.go sendLoop picks between its control and event channels at random), and
// clientv3 broadcasts that notification to the new watch too, which then looks caught up to a
// revision whose events it has yet to receive (FuzzDifferential found it; corpus entry
// progress-before-created). Only watches from revision 0, which owe nothing at or below such a
// notification, share streams.

// Keys are chosen from a small space with shared prefixes and 0xff bytes, so that ranges, prefixes
// and from-key selections overlap and hit the prefix-end edge cases.
var (
	workloadKeys = []string{"a", "a/1", "a/2", "a/3", "a/3/x", "b", "b/1", "b/2", "c", "c0", "\xff", "\xff\xff", "z"}
	missingKeys  = []string{"a/0", "a/9", "m", "q/1"}
	prefixes     = []string{"a", "a/", "b/", "c", "\xff", "q/"}
	explicitIDs  = []int64{101, 202, 303}
	// Streams shared by the watches that cannot fail or wait for the future.
	sharedStreams = []string{"s0", "s1", "s2"}
)

// soloPrefix names the streams of a single watch each (soloPrefix+N).
const soloPrefix = "solo"

const (
	// maxReportedDiffs bounds the differences reported per seed; later ones are only counted.
	maxReportedDiffs = 25
	// oversizedValue is over etcd's 1.5 MiB request limit and under gRPC's 2 MiB receive limit, so
	// the server's size check answers it.
	oversizedValue = 1536*1024 + 100
)

type leaseState struct {
	alive     bool
	ephemeral bool // short TTL: may expire during the run, so never used after its grant
}

// reporter is the part of *testing.T the runner reports through, so a test can check what it reports.
type reporter interface {
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Failed() bool
}

type runner struct {
	t     reporter
	ctx   context.Context // set by runWorkload for the run
	label string          // "seed N", or what else names the run in reports
	rnd   *rand.Rand
	sides [2]*side
	// more, if set, is asked before each operation whether the run goes on (a fuzz input ends it).
	more func() bool

	op         int
	rev        int64 // the reference side's current revision
	compactRev int64
	leases     []leaseState
	// noCompactAt holds the revisions of txns that may have deleted and re-created a key (doTxn)
	noCompactAt map[int64]bool
	values      []string
	soloCount   int

	// scenarios enables the three heavier once-per-seed scenarios (expire, burst, bigValues).
	scenarios bool

	counts   map[string]int
	failures map[string]int // ops the reference side answered with an error, by kind
	diffs    int
	excluded map[string]string // op kind -> known difference; those ops are not run
	loggedEx map[string]bool
}

// newSeedRunner returns a runner whose generator is seeded with seed.
func newSeedRunner(t reporter, seed uint64, ref, other *side, excluded map[string]string) *runner {
	return newRunner(t, fmt.Sprintf("seed %d", seed), rand.New(rand.NewPCG(seed, seed^0x5eed)), ref, other, excluded)
}

// newRunner returns a runner whose generator draws from rnd, with a label for reports; runWorkload
// runs it.
func newRunner(t reporter, label string, rnd *rand.Rand, ref, other *side, excluded map[string]string) *runner {
	return &runner{
		t:           t,
		label:       label,
		rnd:         rnd,
		sides:       [2]*side{ref, other},
		rev:         1,
		compactRev:  0,
		values:      []string{"", "x", "y"},
		counts:      map[string]int{},
		noCompactAt: map[int64]bool{},
		failures:    map[string]int{},
		excluded:    excluded,
		loggedEx:    map[string]bool{},
	}
}

// run executes n random operations, then drains and compares every watch and the final state.
func (r *runner) run(n int) {
	for r.op = 0; r.op < n && (r.more == nil || r.more()); r.op++ {
		// Three heavier scenarios run once per seed, at fixed points of the workload.
		switch {
		case !r.scenarios:
		case r.op == n/4:
			r.expire()
		case r.op == n/2:
			r.burst()
		case r.op == 3*n/4:
			r.bigValues()
		}
		r.step()
		if r.t.Failed() && r.diffs == 0 {
			return // a harness failure, already reported
		}
	}
	r.finish()
}

func (r *runner) skip(kind string) bool {
	reason, ok := r.excluded[kind]
	if ok && !r.loggedEx[kind] {
		r.loggedEx[kind] = true
		r.t.Logf("%s: not running %s ops: known difference: %s", r.label, kind, reason)
	}
	return ok
}

func (r *runner) step() {
	switch p := r.rnd.IntN(100); {
	case p < 18:
		r.put()
	case p < 22:
		r.hotPut()
	case p < 32:
		r.del()
	case p < 50:
		r.txn()
	case p < 66:
		r.get()
	case p < 69:
		r.compact()
	case p < 78:
		r.leaseOp()
	case p < 86:
		r.watch()
	case p < 89:
		r.cancelWatch()
	case p < 92:
		r.requestProgress()
	case p < 96:
		r.rawOp()
	case p < 98:
		r.invalid()
	case p < 99:
		r.historyGet()
	default:
		r.overlapCompactWatch()
	}
}

// do runs one operation on both sides and compares the outcomes.
func (r *runner) do(kind, desc string, f func(s *side) outcome) (out [2]outcome, ran bool) {
	if r.skip(kind) {
		return out, false
	}
	r.counts[kind]++
	for i, s := range r.sides {
		out[i] = f(s)
	}
	if out[0].Err != "" {
		r.failures[kind]++
	}
	if !equalOutcome(out[0], out[1]) {
		r.report(kind, desc, diffOutcome(out[0], out[1]))
	}
	if m, ok := out[0].Resp.(interface{ GetHeader() *pb.ResponseHeader }); ok && m.GetHeader() != nil {
		r.rev = max(r.rev, m.GetHeader().Revision)
	}
	return out, true
}

// maxDiffLen bounds one reported diff: a difference in a megabyte value would print it whole.
const maxDiffLen = 8000

func (r *runner) report(kind, desc, diff string) {
	if len(diff) > maxDiffLen {
		diff = diff[:maxDiffLen] + "\n... (diff truncated)"
	}
	r.diffs++
	if r.diffs <= maxReportedDiffs {
		r.t.Errorf("%s op %d %s: %s\n%s vs %s (-%s +%s):\n%s", r.label, r.op, kind, desc,
			r.sides[0].name, r.sides[1].name, r.sides[0].name, r.sides[1].name, diff)
	}
}

// fail reports a harness problem (a side that cannot be driven), not a difference.
func (r *runner) fail(err error) {
	r.t.Errorf("%s op %d: %v", r.label, r.op, err)
}

func (s *side) kvOutcome(resp clientv3.OpResponse, err error) outcome {
	if err != nil {
		return errOutcome(err)
	}
	var m proto.Message
	switch {
	case resp.Get() != nil:
		m = (*pb.RangeResponse)(resp.Get())
	case resp.Put() != nil:
		m = (*pb.PutResponse)(resp.Put())
	case resp.Del() != nil:
		m = (*pb.DeleteRangeResponse)(resp.Del())
	default:
		m = (*pb.TxnResponse)(resp.Txn())
	}
	return outcome{Resp: s.normProto(m)}
}

func (r *runner) doOp(kind string, spec *opSpec) {
	r.do(kind, spec.String(), func(s *side) outcome {
		return s.kvOutcome(s.cli.Do(r.ctx, spec.op(s)))
	})
}

// ---- generators ----

func pick[T any](rnd *rand.Rand, xs []T) T { return xs[rnd.IntN(len(xs))] }

func (r *runner) chance(percent int) bool { return r.rnd.IntN(100) < percent }

func (r *runner) key() string {
	if r.chance(12) {
		return pick(r.rnd, missingKeys)
	}
	return pick(r.rnd, workloadKeys)
}

func (r *runner) sel() keySel {
	switch p := r.rnd.IntN(10); {
	case p < 5:
		return keySel{Key: r.key()}
	case p < 7:
		a, b := r.key(), r.key()
		if a > b && r.chance(70) {
			a, b = b, a
		}
		return keySel{Key: a, End: b, Mode: selRange}
	case p < 9:
		if r.chance(5) {
			return keySel{Key: "", Mode: selPrefix}
		}
		return keySel{Key: pick(r.rnd, prefixes), Mode: selPrefix}
	default:
		if r.chance(5) {
			return keySel{Key: "", Mode: selFromKey}
		}
		return keySel{Key: r.key(), Mode: selFromKey}
	}
}

// revision returns a revision around the interesting window: compacted, valid or future.
func (r *runner) revision() int64 {
	lo := max(1, r.compactRev-1)
	return lo + r.rnd.Int64N(r.rev+2-lo)
}

func (r *runner) value() string {
	if r.chance(30) {
		return pick(r.rnd, r.values)
	}
	v := fmt.Sprintf("v%d", r.rnd.IntN(1000))
	r.values = append(r.values, v)
	if len(r.values) > 12 {
		r.values = r.values[len(r.values)-12:]
	}
	return v
}

// usableLease returns a lease the workload may put under: a live long lease mostly, sometimes a
// revoked one or an ID nobody granted (both fail the put).
func (r *runner) usableLease() leaseRef {
	var alive, dead []int
	for h, l := range r.leases {
		switch {
		case l.ephemeral:
		case l.alive:
			alive = append(alive, h)
		default:
			dead = append(dead, h)
		}
	}
	switch p := r.rnd.IntN(10); {
	case p < 8 && len(alive) > 0:
		return leaseRef{Handle: pick(r.rnd, alive)}
	case p < 9 && len(dead) > 0:
		return leaseRef{Handle: pick(r.rnd, dead)}
	}
	return leaseRef{Handle: -1, Raw: 0x7e57_0001}
}

func (r *runner) genGet() *getSpec {
	g := &getSpec{Sel: r.sel()}
	if r.chance(45) {
		g.Rev = r.revision()
	}
	if r.chance(30) {
		g.Limit = r.rnd.Int64N(4)
	}
	g.CountOnly = r.chance(10)
	g.KeysOnly = r.chance(15)
	g.Serializable = r.chance(15)
	if r.chance(30) {
		g.Sort = &sortSpec{Target: clientv3.SortTarget(r.rnd.IntN(5)), Order: clientv3.SortOrder(r.rnd.IntN(3))}
	}
	filter := func() int64 {
		if r.chance(15) {
			return r.rnd.Int64N(r.rev + 1)
		}
		return 0
	}
	g.MinMod, g.MaxMod, g.MinCreate, g.MaxCreate = filter(), filter(), filter(), filter()
	return g
}

func (r *runner) genPut(key string) *putSpec {
	p := &putSpec{Key: key, Value: r.value(), Lease: noLease, PrevKV: r.chance(40)}
	if r.chance(25) {
		p.Lease = r.usableLease()
	}
	if r.chance(10) {
		p.IgnoreValue = true
		if !r.chance(20) {
			p.Value = ""
		}
	}
	if r.chance(10) {
		p.IgnoreLease = true
		if !r.chance(20) {
			p.Lease = noLease
		}
	}
	return p
}

func (r *runner) genDel() *delSpec { return &delSpec{Sel: r.sel(), PrevKV: r.chance(50)} }

func (r *runner) genCmp() cmpSpec {
	c := cmpSpec{Sel: keySel{Key: r.key()}, Result: pick(r.rnd, []string{"=", ">", "<", "!="}), Lease: noLease}
	if r.chance(30) {
		c.Sel = r.sel()
	}
	c.Target = pick(r.rnd, []string{"version", "create", "mod", "value", "lease"})
	switch c.Target {
	case "version":
		c.Int = r.rnd.Int64N(4)
	case "create", "mod":
		c.Int = r.rnd.Int64N(r.rev + 2)
	case "value":
		c.Value = pick(r.rnd, r.values)
	case "lease":
		if r.chance(60) {
			c.Lease = r.usableLease()
		} else {
			c.Lease = leaseRef{Handle: -1}
		}
	}
	return c
}

func (r *runner) genBranch(depth int) []opSpec {
	ops := make([]opSpec, r.rnd.IntN(4))
	for i := range ops {
		switch p := r.rnd.IntN(10); {
		case p < 4:
			ops[i].Get = r.genGet()
		case p < 7:
			ops[i].Put = r.genPut(r.key())
		case p < 9 || depth >= 2:
			ops[i].Del = r.genDel()
		default:
			ops[i].Txn = r.genTxn(depth + 1)
		}
	}
	return ops
}

func (r *runner) genTxn(depth int) *txnSpec {
	t := &txnSpec{Cmps: make([]cmpSpec, r.rnd.IntN(4))}
	for i := range t.Cmps {
		t.Cmps[i] = r.genCmp()
	}
	t.Then, t.Else = r.genBranch(depth), r.genBranch(depth)
	return t
}

// ---- operations ----

func (r *runner) put() {
	r.doOp("put", &opSpec{Put: r.genPut(r.key())})
}

// hotPut writes the same key again and again, so versions climb and prev_kv chains grow.
func (r *runner) hotPut() {
	r.doOp("put", &opSpec{Put: r.genPut("a/1")})
}

func (r *runner) del() {
	r.doOp("delete", &opSpec{Del: r.genDel()})
}

func (r *runner) get() {
	r.doOp("get", &opSpec{Get: r.genGet()})
}

// historyGet reads a past revision with every option, the way a lister pages history.
func (r *runner) historyGet() {
	g := r.genGet()
	g.Rev = r.revision()
	r.doOp("get", &opSpec{Get: g})
}

func (r *runner) txn() {
	t := r.genTxn(0)
	kind := "txn"
	// One txn in ten is made invalid in a way the server must reject before doing anything.
	if r.chance(10) {
		kind = "txn-invalid"
		k := r.key()
		switch r.rnd.IntN(5) {
		case 0: // duplicate put
			t.Then = append(t.Then, opSpec{Put: r.genPut(k)}, opSpec{Put: r.genPut(k)})
		case 1: // put inside a range deleted in the same branch
			t.Else = append(t.Else, opSpec{Del: &delSpec{Sel: keySel{Key: "a/", Mode: selPrefix}}}, opSpec{Put: r.genPut("a/2")})
		case 2: // duplicate across a nested txn
			t.Then = append(t.Then, opSpec{Put: r.genPut(k)}, opSpec{Txn: &txnSpec{Then: []opSpec{{Put: r.genPut(k)}}}})
		case 3: // too many ops in one branch
			for len(t.Then) <= 128 {
				t.Then = append(t.Then, opSpec{Get: &getSpec{Sel: keySel{Key: r.key()}}})
			}
		case 4: // too many compares
			for len(t.Cmps) <= 128 {
				t.Cmps = append(t.Cmps, r.genCmp())
			}
		}
	}
	defuseIgnoreAfterFromKeyDelete(t)
	r.doTxn(kind, t)
}

// doTxn runs a txn on both sides and remembers the revision if the txn may have deleted and re-created
// a key there: etcd v3.7.3's compaction at exactly such a revision deletes the key's live value
// from its backend while its index still points at it, and the next read of the key exits the
// process ("range failed to find revision pair"; etcd-io/etcd#22376). The workload never compacts
// at such a revision.
func (r *runner) doTxn(kind string, t *txnSpec) {
	before := r.rev
	r.doOp(kind, &opSpec{Txn: t})
	if r.rev > before && recreatesAKey(t) {
		r.noCompactAt[r.rev] = true
	}
}

// defuseIgnoreAfterFromKeyDelete clears ignore_value and ignore_lease from every put of t that
// follows a delete from a key at or below the put's key. etcd checks those flags against the state
// at the start of the txn only and panics applying the put once the delete removed the key
// (txn/put.go put reads the previous value of a key that is gone; listwatch refuses such a txn with
// "key not found" instead): no etcd survives the request to be compared with.
func defuseIgnoreAfterFromKeyDelete(t *txnSpec) {
	putsAfterFromKeyDelete(t, func(p *putSpec) { p.IgnoreValue, p.IgnoreLease = false, false })
}

// recreatesAKey reports whether t may delete a key and put it again in one revision: a put that
// follows a delete from a key at or below the put's key.
func recreatesAKey(t *txnSpec) bool {
	found := false
	putsAfterFromKeyDelete(t, func(*putSpec) { found = true })
	return found
}

// putsAfterFromKeyDelete calls f with every put of t that follows, in execution order, a delete
// from a key at or below the put's key (range end "\x00", which v3rpc's checkIntervals takes for
// an empty interval and so lets through in the same branch). Both branches of a nested txn count,
// to be safe.
func putsAfterFromKeyDelete(t *txnSpec, f func(*putSpec)) {
	var from []string // keys of the deletes from a key met so far
	var walk func(ops []opSpec)
	walk = func(ops []opSpec) {
		for i := range ops {
			switch op := &ops[i]; {
			case op.Del != nil:
				if key, end := rawSel(op.Del.Sel); string(end) == "\x00" {
					from = append(from, string(key))
				}
			case op.Put != nil:
				for _, k := range from {
					if op.Put.Key >= k {
						f(op.Put)
						break
					}
				}
			case op.Txn != nil:
				walk(op.Txn.Then)
				walk(op.Txn.Else)
			}
		}
	}
	walk(t.Then)
	from = nil
	walk(t.Else)
}

func (r *runner) compact() {
	var rev int64
	switch p := r.rnd.IntN(10); {
	case p < 6 && r.rev > r.compactRev:
		rev = r.compactRev + 1 + r.rnd.Int64N(r.rev-r.compactRev)
	case p < 8:
		rev = max(0, r.compactRev-r.rnd.Int64N(2)) // compacted already
	default:
		rev = r.rev + 1 + r.rnd.Int64N(3) // future
	}
	r.compactAt(rev)
}

// compactAt compacts both sides at rev once every watch has delivered what it owes, unless a txn
// may have re-created a key at rev (see doTxn).
func (r *runner) compactAt(rev int64) {
	if r.noCompactAt[rev] {
		r.counts["compact-skipped"]++
		return
	}
	// A compaction cancels only watchers still catching up, and which those are depends on timing:
	// let every watch deliver what it owes first.
	if !r.catchUp() {
		return
	}
	// Physical: etcd deletes compacted history in a background job, and a watch from the compact
	// revision reads what the job has not deleted yet (a txn's put of a key it then deleted, at that
	// revision). Waiting for the job keeps that timing out of the comparison; listwatch's compaction
	// is complete when it answers either way.
	out, ran := r.do("compact", fmt.Sprintf("compact %d", rev), func(s *side) outcome {
		resp, err := s.cli.Compact(r.ctx, rev, clientv3.WithCompactPhysical())
		if err != nil {
			return errOutcome(err)
		}
		return outcome{Resp: s.normProto((*pb.CompactionResponse)(resp))}
	})
	if ran && out[0].Err == "" {
		r.compactRev = rev
		r.hashKV(rev)
	}
}

// hashKV compares HashKV at the compact revision (the hash the compaction kept), just above it and at
// the current revision: errors, compact and hash revisions, header. The hash itself is left out:
// it covers keys' lease IDs, which each server picks (TestDifferentialMaintenance compares values on
// a history without leases). It draws nothing from the random source, so the rest of the workload
// is the same with it or without.
func (r *runner) hashKV(compact int64) {
	for _, rev := range []int64{compact, compact + 1, 0} {
		r.do("hashkv", fmt.Sprintf("hashkv %d", rev), func(s *side) outcome {
			resp, err := s.cli.HashKV(r.ctx, s.cli.Endpoints()[0], rev)
			if err != nil {
				return errOutcome(err)
			}
			resp.Hash = 0
			return outcome{Resp: s.normProto((*pb.HashKVResponse)(resp))}
		})
	}
}

func (r *runner) catchUp() bool {
	for _, s := range r.sides {
		if err := s.catchUp(r.ctx, r.rev); err != nil {
			r.fail(err)
			return false
		}
		if s.raw != nil {
			if err := s.raw.catchUp(r.ctx, r.rev); err != nil {
				r.fail(fmt.Errorf("%s: raw stream: %w", s.name, err))
				return false
			}
		}
	}
	return true
}

func (r *runner) leaseOp() {
	switch p := r.rnd.IntN(10); {
	case p < 4:
		r.grant()
	case p < 6:
		r.revoke()
	case p < 8:
		r.timeToLive()
	case p < 9:
		r.leaseList()
	default:
		r.keepAliveOnce()
	}
}

func (r *runner) grant() {
	h := len(r.leases)
	var ttl, id int64
	ephemeral := false
	switch p := r.rnd.IntN(20); {
	case p < 3: // below the floor: raised to it, so it may expire during the run
		ttl, ephemeral = pick(r.rnd, []int64{-3, 0, 1}), true
	case p < 7:
		id, ttl = pick(r.rnd, explicitIDs), 600+r.rnd.Int64N(3000)
	case p < 8:
		ttl = 9_000_000_001 // above etcd's maximum
	default:
		ttl = 600 + r.rnd.Int64N(3000)
	}
	r.grantLease(h, ttl, id, ephemeral)
}

// grantLease grants handle h on both sides; it is appended to r.leases if the reference granted it.
func (r *runner) grantLease(h int, ttl, id int64, ephemeral bool) {
	desc := fmt.Sprintf("grant lease#%d ttl=%d id=%d", h, ttl, id)
	out, ran := r.do("lease-grant", desc, func(s *side) outcome {
		if id != 0 {
			resp, err := s.lease.LeaseGrant(r.ctx, &pb.LeaseGrantRequest{ID: id, TTL: ttl})
			if err != nil {
				return errOutcome(err)
			}
			s.granted(h, resp.ID)
			return outcome{Resp: s.normProto(resp)}
		}
		resp, err := s.cli.Grant(r.ctx, ttl)
		if err != nil {
			return errOutcome(err)
		}
		s.granted(h, int64(resp.ID))
		return outcome{Resp: s.normProto(&pb.LeaseGrantResponse{Header: resp.ResponseHeader, ID: int64(resp.ID), TTL: resp.TTL, Error: resp.Error})}
	})
	if ran && out[0].Err == "" {
		r.leases = append(r.leases, leaseState{alive: true, ephemeral: ephemeral})
		for _, s := range r.sides {
			if len(s.leaseIDs) <= h {
				s.granted(h, 0) // failed on this side only: the difference is already reported
			}
		}
		return
	}
	// The reference refused it: the handle is not used, and a lease the other side granted anyway
	// stays unmapped, so any later sight of it shows as a difference.
	for _, s := range r.sides {
		if len(s.leaseIDs) > h {
			delete(s.handles, s.leaseIDs[h])
			s.leaseIDs = s.leaseIDs[:h]
		}
	}
}

// leaseTarget picks a long lease, alive or revoked, or one nobody granted.
func (r *runner) leaseTarget() leaseRef {
	var long []int
	for h, l := range r.leases {
		if !l.ephemeral {
			long = append(long, h)
		}
	}
	if len(long) > 0 && r.chance(85) {
		return leaseRef{Handle: pick(r.rnd, long)}
	}
	return leaseRef{Handle: -1, Raw: 0x7e57_0002}
}

func (r *runner) revoke() {
	ref := r.leaseTarget()
	r.do("lease-revoke", fmt.Sprintf("revoke %v", ref), func(s *side) outcome {
		resp, err := s.cli.Revoke(r.ctx, clientv3.LeaseID(s.leaseID(ref)))
		if err != nil {
			return errOutcome(err)
		}
		return outcome{Resp: s.normProto((*pb.LeaseRevokeResponse)(resp))}
	})
	if ref.Handle >= 0 {
		r.leases[ref.Handle].alive = false
	}
}

func (r *runner) timeToLive() {
	ref := r.leaseTarget()
	withKeys := r.chance(60)
	r.do("lease-ttl", fmt.Sprintf("timeToLive %v keys=%v", ref, withKeys), func(s *side) outcome {
		var opts []clientv3.LeaseOption
		if withKeys {
			opts = append(opts, clientv3.WithAttachedKeys())
		}
		resp, err := s.cli.TimeToLive(r.ctx, clientv3.LeaseID(s.leaseID(ref)), opts...)
		if err != nil {
			return errOutcome(err)
		}
		return outcome{Resp: s.normTimeToLive(resp)}
	})
}

func (r *runner) leaseList() {
	ephemeral := map[int]bool{}
	for h, l := range r.leases {
		ephemeral[h] = l.ephemeral
	}
	r.do("lease-list", "leases", func(s *side) outcome {
		resp, err := s.cli.Leases(r.ctx)
		if err != nil {
			return errOutcome(err)
		}
		return outcome{Resp: s.normLeaseList(resp, ephemeral)}
	})
}

func (r *runner) keepAliveOnce() {
	ref := r.leaseTarget()
	r.do("lease-keepalive", fmt.Sprintf("keepAliveOnce %v", ref), func(s *side) outcome {
		resp, err := s.cli.KeepAliveOnce(r.ctx, clientv3.LeaseID(s.leaseID(ref)))
		if err != nil {
			return errOutcome(err)
		}
		return outcome{Resp: s.normProto(&pb.LeaseKeepAliveResponse{Header: resp.ResponseHeader, ID: int64(resp.ID), TTL: resp.TTL})}
	})
}

func (r *runner) watch() {
	if r.skip("watch") {
		return
	}
	spec := watchSpec{
		Sel:           r.sel(),
		PrevKV:        r.chance(40),
		NoPut:         r.chance(12),
		NoDelete:      r.chance(12),
		CreatedNotify: r.chance(60),
		Fragment:      r.chance(10),
		Stream:        pick(r.rnd, sharedStreams),
	}
	switch p := r.rnd.IntN(20); {
	case p < 7:
	case p < 16:
		spec.Rev = max(1, r.compactRev) + r.rnd.Int64N(r.rev+1-max(1, r.compactRev))
	case p < 18:
		spec.Rev = r.rev + 1 + r.rnd.Int64N(3)
	case p < 19:
		spec.Rev = -1
	default:
		spec.Rev = max(1, r.compactRev-1-r.rnd.Int64N(2)) // below the compact revision once there is one
	}
	mayFail := spec.Rev < 0 || spec.Sel.Key == "" || (spec.Sel.Mode == selRange && spec.Sel.End <= spec.Sel.Key)
	if mayFail || spec.Rev != 0 {
		spec.Stream = r.soloStream()
	}
	r.counts["watch"]++
	for _, s := range r.sides {
		if _, err := s.watch(r.ctx, spec); err != nil {
			r.fail(err)
		}
	}
}

// soloStream names a new stream for one watch.
func (r *runner) soloStream() string {
	r.soloCount++
	return fmt.Sprintf("%s%d", soloPrefix, r.soloCount)
}

func (r *runner) openWatches() []int {
	var open []int
	for i, w := range r.sides[0].watches {
		if !w.isClosed() {
			open = append(open, i)
		}
	}
	return open
}

func (r *runner) cancelWatch() {
	open := r.openWatches()
	if len(open) == 0 || r.skip("watch-cancel") {
		return
	}
	i := pick(r.rnd, open)
	if !r.catchUp() {
		return
	}
	r.counts["watch-cancel"]++
	for _, s := range r.sides {
		if err := s.stopWatch(s.watches[i]); err != nil {
			r.fail(err)
		}
	}
}

// requestProgress asks one stream for progress; whether it is answered depends on timing, so the
// answers are not compared, only checked on each side by checkWatch.
func (r *runner) requestProgress() {
	open := r.openWatches()
	if len(open) == 0 || r.skip("progress") {
		return
	}
	stream := r.sides[0].watches[pick(r.rnd, open)].spec.Stream
	r.counts["progress"]++
	for _, s := range r.sides {
		if err := s.cli.RequestProgress(streamCtx(r.ctx, stream)); err != nil {
			r.fail(fmt.Errorf("%s: RequestProgress: %w", s.name, err))
		}
	}
}

func (r *runner) rawOp() {
	switch p := r.rnd.IntN(10); {
	case p < 6:
		r.rawCreate()
	case p < 9:
		r.rawCancel()
	default:
		if r.sides[0].raw != nil {
			r.counts["raw-progress"]++
			for _, s := range r.sides {
				req := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}
				if err := s.raw.stream.Send(req); err != nil {
					r.fail(fmt.Errorf("%s: raw progress request: %w", s.name, err))
				}
			}
		}
	}
}

// rawCreate creates a watch on the raw stream, with an auto or explicit ID (explicit ones collide
// with earlier ones now and then), never from the future: a future watcher would keep the stream's
// progress requests unanswered.
func (r *runner) rawCreate() {
	sel := r.sel()
	req := &pb.WatchCreateRequest{PrevKv: r.chance(40), Fragment: r.chance(20)}
	if r.chance(5) {
		sel = keySel{} // an empty key alone, which clientv3 never sends as such
	}
	req.Key, req.RangeEnd = rawSel(sel)
	switch p := r.rnd.IntN(20); {
	case p < 8:
	case p < 17:
		req.StartRevision = max(1, r.compactRev) + r.rnd.Int64N(r.rev+1-max(1, r.compactRev))
	case p < 19:
		req.StartRevision = max(1, r.compactRev-1-r.rnd.Int64N(2)) // below the compact revision once there is one
	default:
		req.StartRevision = -1
	}
	if r.chance(45) {
		req.WatchId = pick(r.rnd, []int64{1, 2, 3, 7, 100})
	}
	if r.chance(12) {
		req.Filters = append(req.Filters, pb.WatchCreateRequest_NOPUT)
	}
	if r.chance(12) {
		req.Filters = append(req.Filters, pb.WatchCreateRequest_NODELETE)
	}
	desc := fmt.Sprintf("raw watch %v start=%d id=%d prevKV=%v filters=%v", sel, req.StartRevision, req.WatchId, req.PrevKv, req.Filters)
	created := map[*side]int{}
	out, ran := r.do("raw-watch-create", desc, func(s *side) outcome {
		rs, err := s.rawStream(r.ctx)
		if err != nil {
			r.fail(err)
			return outcome{}
		}
		resp, idx, err := rs.create(r.ctx, req)
		if err != nil {
			r.fail(fmt.Errorf("%s: raw create: %w", s.name, err))
			return outcome{}
		}
		created[s] = idx
		return outcome{Resp: s.normProto(resp)}
	})
	resp, _ := out[0].Resp.(*pb.WatchResponse)
	if !ran || resp == nil || resp.Canceled || req.StartRevision <= 0 || req.StartRevision >= r.compactRev {
		return
	}
	r.counts["raw-watch-compacted"]++
	// Created below the compact revision: the compaction answer follows at the next sync, and the
	// watcher stays registered (keeping the stream's progress requests unanswered) until the client
	// cancels it, as clientv3 does on that answer.
	for _, s := range r.sides {
		if err := s.raw.awaitCompacted(r.ctx, resp.WatchId, created[s]); err != nil {
			r.fail(fmt.Errorf("%s: raw watch %d from compacted revision %d: %w", s.name, resp.WatchId, req.StartRevision, err))
			return
		}
	}
	// Until then a progress request goes unanswered: ask once, cancel, and count the progress
	// answers that arrived before the cancel answer (etcd: none).
	marks := map[*side]int{}
	for _, s := range r.sides {
		marks[s] = s.raw.len()
		req := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}
		if err := s.raw.stream.Send(req); err != nil {
			r.fail(fmt.Errorf("%s: raw progress request: %w", s.name, err))
			return
		}
	}
	r.rawCancelID(resp.WatchId, true)
	r.do("raw-progress-compacted", fmt.Sprintf("progress answers while watch %d is compacted but not cancelled", resp.WatchId), func(s *side) outcome {
		return outcome{Resp: s.raw.progressAnswersBefore(marks[s], resp.WatchId)}
	})
}

// rawCancel cancels an open raw watch, or an ID nobody uses (which gets no answer), once every watch
// delivered what it owes.
func (r *runner) rawCancel() {
	ref := r.sides[0].raw
	if ref == nil || r.skip("raw-watch-cancel") {
		return
	}
	open := ref.openIDs()
	id, isOpen := int64(500), false
	if len(open) > 0 && r.chance(85) {
		id, isOpen = pick(r.rnd, open), true
	}
	if !r.catchUp() {
		return
	}
	r.rawCancelID(id, isOpen)
}

// rawCancelID cancels id on both raw streams; when the watch is open the answer is awaited and
// compared.
func (r *runner) rawCancelID(id int64, isOpen bool) {
	r.do("raw-watch-cancel", fmt.Sprintf("raw cancel %d (open=%v)", id, isOpen), func(s *side) outcome {
		resp, err := s.raw.cancelWatch(r.ctx, id, isOpen)
		if err != nil {
			r.fail(fmt.Errorf("%s: raw cancel: %w", s.name, err))
			return outcome{}
		}
		if resp == nil {
			return outcome{}
		}
		return outcome{Resp: s.normProto(resp)}
	})
}

// expire lets a lease with keys expire: the server revokes it and deletes its keys in one revision.
// Nothing else runs until both sides have expired it, so the revision it happens at is the same.
func (r *runner) expire() {
	if r.skip("lease-expire") {
		return
	}
	h := len(r.leases)
	r.grantLease(h, 1, 0, true)
	if len(r.leases) == h {
		return
	}
	r.leases[h].alive = false
	for _, k := range []string{"b/2", "a/3", "z"}[:1+r.rnd.IntN(3)] {
		r.doOp("put", &opSpec{Put: &putSpec{Key: k, Value: r.value(), Lease: leaseRef{Handle: h}, PrevKV: true}})
	}
	ref := leaseRef{Handle: h}
	for _, s := range r.sides {
		if err := s.awaitExpiry(r.ctx, s.leaseID(ref)); err != nil {
			r.fail(err)
			return
		}
	}
	r.counts["lease-expire"]++
	r.do("lease-ttl", fmt.Sprintf("timeToLive %v after expiry", ref), func(s *side) outcome {
		resp, err := s.cli.TimeToLive(r.ctx, clientv3.LeaseID(s.leaseID(ref)), clientv3.WithAttachedKeys())
		if err != nil {
			return errOutcome(err)
		}
		return outcome{Resp: s.normTimeToLive(resp)}
	})
	r.doOp("get", &opSpec{Get: &getSpec{Sel: keySel{Key: "", Mode: selFromKey}}})
}

// overlapCompactWatch changes one key twice in one txn, a put and a delete from the key on (an
// empty interval to v3rpc's checkIntervals, so the txn is valid), in either order, sometimes with a
// value larger than a listwatch value-log chunk; then it compacts at the txn's revision and watches
// from there with prev_kv. etcd's compaction keeps only the key's last change at that revision, so
// the watch gets that change alone (store issue 12: listwatch sent the stale PUT too, and with a
// large value its tick goroutine crashed).
func (r *runner) overlapCompactWatch() {
	if r.skip("overlap") {
		return
	}
	k := r.key()
	put := opSpec{Put: &putSpec{Key: k, Value: r.value(), Lease: noLease, PrevKV: r.chance(50)}}
	if r.chance(25) {
		put.Put.Value = strings.Repeat("o", 1<<20+100)
	}
	del := opSpec{Del: &delSpec{Sel: keySel{Key: k, Mode: selFromKey}, PrevKV: r.chance(50)}}
	t := &txnSpec{Then: []opSpec{put, del}}
	if r.chance(50) {
		t.Then = []opSpec{del, put}
	}
	before := r.rev
	r.doTxn("txn", t)
	if r.rev == before {
		return // refused on the reference side: nothing to compact at
	}
	rev := r.rev
	r.compactAt(rev) // not after a delete then put: etcd-io/etcd#22376, see doTxn
	spec := watchSpec{Sel: keySel{Key: k, Mode: selFromKey}, Rev: rev, PrevKV: r.chance(50), Stream: r.soloStream()}
	r.counts["watch"]++
	for _, s := range r.sides {
		if _, err := s.watch(r.ctx, spec); err != nil {
			r.fail(err)
		}
	}
	r.counts["overlap"]++
}

// burst writes one key over a thousand times with the same value from concurrent writers, so the
// history outgrows one watch catch-up batch (1000 revisions) while staying the same on both sides
// whatever the interleaving. The puts' answers are not compared (their order is not determined);
// the resulting key and every watch's events are.
func (r *runner) burst() {
	if r.skip("burst") {
		return
	}
	n := 1001 + r.rnd.IntN(60)
	for _, s := range r.sides {
		if err := s.burst(r.ctx, n); err != nil {
			r.fail(err)
			return
		}
	}
	r.counts["burst-put"] += n
	start := r.rev + 1
	r.doOp("get", &opSpec{Get: &getSpec{Sel: keySel{Key: "burst"}}})
	spec := watchSpec{Sel: keySel{Key: "burst"}, Rev: start, PrevKV: true, Stream: r.soloStream()}
	r.counts["watch"]++
	for _, s := range r.sides {
		if _, err := s.watch(r.ctx, spec); err != nil {
			r.fail(err)
		}
	}
}

// bigValues writes two values that together exceed the watch fragmentation threshold (2 MiB), then
// watches them from before, with and without fragmentation, and deletes them again.
func (r *runner) bigValues() {
	if r.skip("big-values") {
		return
	}
	start := r.rev + 1
	for i, k := range []string{"big/1", "big/2"} {
		v := strings.Repeat(string(rune('p'+i)), 1<<20+50<<10)
		r.doOp("put", &opSpec{Put: &putSpec{Key: k, Value: v, Lease: noLease}})
	}
	for _, fragment := range []bool{true, false} {
		spec := watchSpec{Sel: keySel{Key: "big/", Mode: selPrefix}, Rev: start, Fragment: fragment, Stream: r.soloStream()}
		r.counts["watch"]++
		for _, s := range r.sides {
			if _, err := s.watch(r.ctx, spec); err != nil {
				r.fail(err)
			}
		}
	}
	r.do("raw-watch-create", "raw watch of the big values, fragmented", func(s *side) outcome {
		rs, err := s.rawStream(r.ctx)
		if err != nil {
			r.fail(err)
			return outcome{}
		}
		key, end := rawSel(keySel{Key: "big/", Mode: selPrefix})
		resp, _, err := rs.create(r.ctx, &pb.WatchCreateRequest{Key: key, RangeEnd: end, StartRevision: start, Fragment: true, PrevKv: true})
		if err != nil {
			r.fail(fmt.Errorf("%s: raw create: %w", s.name, err))
			return outcome{}
		}
		return outcome{Resp: s.normProto(resp)}
	})
	if !r.catchUp() {
		return
	}
	r.doOp("delete", &opSpec{Del: &delSpec{Sel: keySel{Key: "big/", Mode: selPrefix}}})
	r.counts["big-values"]++
}

// invalid sends requests every server must refuse, and checks they change nothing.
func (r *runner) invalid() {
	switch r.rnd.IntN(8) {
	case 0:
		r.doOp("invalid", &opSpec{Get: &getSpec{Sel: keySel{Key: ""}}})
	case 1:
		r.doOp("invalid", &opSpec{Put: &putSpec{Key: "", Value: "v", Lease: noLease}})
	case 2:
		r.doOp("invalid", &opSpec{Del: &delSpec{Sel: keySel{Key: ""}}})
	case 3:
		r.doOp("invalid", &opSpec{Txn: &txnSpec{Cmps: []cmpSpec{{Sel: keySel{Key: ""}, Target: "version", Result: "="}}}})
	case 4:
		r.doOp("invalid", &opSpec{Put: &putSpec{Key: "big", Value: strings.Repeat("x", oversizedValue), Lease: noLease}})
	case 5:
		// clientv3 refuses sort options outside the enums itself, so send this one raw.
		target := pb.RangeRequest_SortTarget(5 + r.rnd.IntN(3))
		order := pb.RangeRequest_SortOrder(r.rnd.IntN(5))
		r.do("invalid", fmt.Sprintf("raw range sort=%d/%d", target, order), func(s *side) outcome {
			resp, err := s.kv.Range(r.ctx, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("b"), SortTarget: target, SortOrder: order})
			if err != nil {
				return errOutcome(err)
			}
			return outcome{Resp: s.normProto(resp)}
		})
	case 6:
		r.doOp("invalid", &opSpec{Get: &getSpec{Sel: r.sel(), Rev: r.rev + 1 + r.rnd.Int64N(5)}})
	case 7:
		if r.compactRev > 1 {
			r.doOp("invalid", &opSpec{Get: &getSpec{Sel: r.sel(), Rev: r.compactRev - 1}})
		} else {
			r.doOp("invalid", &opSpec{Put: &putSpec{Key: "a", Lease: noLease, IgnoreValue: true, IgnoreLease: true, Value: "v"}})
		}
	}
}

// finish drains every watch up to the final revision, compares what each delivered, and compares
// the final keyspace.
func (r *runner) finish() {
	r.op = -1
	if !r.catchUp() {
		return
	}
	for _, s := range r.sides {
		if err := s.stopWatches(); err != nil {
			r.fail(err)
			return
		}
	}
	events := 0
	for i := range r.sides[0].watches {
		desc := r.sides[0].watches[i].spec.String()
		for _, s := range r.sides {
			for _, p := range s.checkWatch(s.watches[i]) {
				r.t.Errorf("%s watch %d (%s) on %s: %s", r.label, i, desc, s.name, p)
			}
		}
		a := r.sides[0].watchOutcome(r.sides[0].watches[i])
		b := r.sides[1].watchOutcome(r.sides[1].watches[i])
		events += len(a.Events)
		if diff := diffWatch(a, b); diff != "" {
			r.report("watch", fmt.Sprintf("watch %d: %s", i, desc), diff)
		}
	}
	r.counts["watch-events"] = events
	if r.sides[0].raw != nil {
		a, b := r.sides[0].rawWatches(), r.sides[1].rawWatches()
		for _, s := range r.sides {
			for i, w := range s.rawWatches() {
				if len(w.After) > 0 {
					r.t.Errorf("%s raw watch %d on %s: responses after the final one or for no watch: %v", r.label, i, s.name, w.After)
				}
			}
		}
		if len(a) != len(b) {
			r.report("raw-watch", "raw watch stream", fmt.Sprintf("%d vs %d creates answered", len(a), len(b)))
		}
		for i := range min(len(a), len(b)) {
			if diff := diffRawWatch(a[i], b[i]); diff != "" {
				r.report("raw-watch", fmt.Sprintf("raw watch stream, create %d", i), diff)
			}
		}
		for _, w := range a {
			r.counts["raw-watch-events"] += len(w.Events)
		}
	}
	r.doOp("final", &opSpec{Get: &getSpec{Sel: keySel{Key: "", Mode: selFromKey}}})
	for rev := max(1, r.compactRev); rev <= r.rev; rev += max(1, (r.rev-r.compactRev)/5) {
		r.doOp("final", &opSpec{Get: &getSpec{Sel: keySel{Key: "", Mode: selFromKey}, Rev: rev}})
	}
}

func (r *runner) summary() string {
	kinds := make([]string, 0, len(r.counts))
	total := 0
	for k, n := range r.counts {
		if f := r.failures[k]; f > 0 {
			kinds = append(kinds, fmt.Sprintf("%s=%d(%d failed)", k, n, f))
		} else {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
		}
		if !strings.HasSuffix(k, "-events") {
			total += n
		}
	}
	sort.Strings(kinds)
	return fmt.Sprintf("%s: %d operations up to revision %d (compacted at %d), %d differences: %s",
		r.label, total, r.rev, r.compactRev, r.diffs, strings.Join(kinds, " "))
}
