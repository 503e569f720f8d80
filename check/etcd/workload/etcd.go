package workload

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/listwatch/listwatch/check/etcd"
)

// etcdKeys is the size of the etcd workload's keyspace: small, so that clients contend.
const etcdKeys = 40

// etcdKey is the workload's key n, under its prefix.
func (r *runner) etcdKey(n int) etcd.Bytes {
	return etcd.Bytes(fmt.Sprintf("%skey/%02d", r.cfg.Prefix, n))
}

// p is s under the workload's prefix.
func (r *runner) p(s string) etcd.Bytes { return etcd.Bytes(r.cfg.Prefix + s) }

// uses reports whether the workload may use f.
func (r *runner) uses(f Feature) bool { return !r.cfg.Avoid.Has(f) }

// leasedFrom is the first key a lease may be attached to. etcd 3.7 answers a keys-only range from
// its index, without the keys' leases (mvcc RangeOptions.FastKeysOnly, unless sorted by value),
// where etcd 3.4 to 3.6 give them; so that the workload passes on both, a keys-only range covers a
// key that may have a lease only when it is sorted by value.
const leasedFrom = "key/30"

// mayHoldLease reports whether [key, end) covers a key a lease may be attached to.
func (r *runner) mayHoldLease(key, end etcd.Bytes) bool {
	from := r.p(leasedFrom)
	if end == "" {
		return key >= from
	}
	return end == "\x00" || end > from
}

// keysOnly makes q keys-only, sorted by value if it covers a key that may have a lease; it leaves q
// as it is when the store refuses keys-only ranges, or the sort that would need.
func (r *runner) keysOnly(q *etcd.RangeRequest) {
	leased := r.uses(FeatLeases) && r.mayHoldLease(q.Key, q.RangeEnd)
	if !r.uses(FeatKeysOnly) || leased && !r.uses(FeatSort) {
		return
	}
	q.KeysOnly = true
	if leased {
		q.SortTarget = etcd.SortByValue
	}
}

// Lease bounds of the etcd workload. TTLs outlast any run, so that no lease expires on its own (a
// history cannot show an expiry nobody watched).
const (
	etcdMaxLeases = 4
	etcdMinTTL    = 900
	etcdMaxTTL    = 3600
	// etcdShortTTL is the TTL of the leases granted to expire within a run (etcd raises it to its
	// minimum, 2 s with its default election timeout); one grant in etcdShortEvery is one.
	etcdShortTTL   = 2
	etcdShortEvery = 4
)

type etcdClient struct {
	client
	id     int
	seq    int
	leases []int64 // granted by this client and not revoked
	nextID int64   // for client-chosen lease IDs, unique to the client
	values []etcd.Bytes
}

func (r *runner) etcdClient(i int, rng *rand.Rand, budget int64) func() {
	c := &etcdClient{client: client{r: r, rng: rng, left: budget}, id: i}
	return func() {
		for c.more() {
			c.step()
		}
	}
}

func (c *etcdClient) step() {
	r := c.r
	if c.rng.IntN(progressTriggerEvery) == 0 {
		// a burst of writes, then at once a RequestProgress
		c.progressAfterWrites(func() {
			for range 1 + c.rng.IntN(4) {
				_, _ = c.do("put", etcd.Request{Put: c.putRequest()})
			}
		})
		return
	}
	switch p := c.rng.IntN(100); {
	case p < 22:
		_, _ = c.do("range", etcd.Request{Range: c.rangeRequest()})
	case p < 47:
		_, _ = c.do("put", etcd.Request{Put: c.putRequest()})
	case p < 57:
		d := c.deleteRequest()
		if !r.uses(FeatDeleteRPC) {
			c.deleteTxn(d.Key)
			return
		}
		_, _ = c.do("delete-range", etcd.Request{DeleteRange: d})
	case p < 82:
		if !r.uses(FeatTxn) {
			c.apiserverTxn()
			return
		}
		_, _ = c.do("txn", etcd.Request{Txn: c.txnRequest()})
	case !r.uses(FeatLeases):
		_, _ = c.do("range", etcd.Request{Range: c.rangeRequest()})
	case p < 89:
		c.grant()
	case p < 94:
		c.revoke()
	default:
		c.keepAlive()
	}
}

func (c *etcdClient) key() etcd.Bytes { return c.r.etcdKey(c.rng.IntN(etcdKeys)) }

// keyRange draws what a range, delete or watch covers: a key, a range, a prefix, every key from a
// key on, or every key of the workload.
func (r *runner) keyRange(rng *rand.Rand) (key, end etcd.Bytes) {
	switch rng.IntN(6) {
	case 0, 1:
		return r.etcdKey(rng.IntN(etcdKeys)), ""
	case 2:
		a, b := rng.IntN(etcdKeys), rng.IntN(etcdKeys)
		return r.etcdKey(min(a, b)), r.etcdKey(max(a, b) + 1)
	case 3:
		p := r.p(fmt.Sprintf("key/%d", rng.IntN(etcdKeys/10)))
		return p, etcd.PrefixEnd(p)
	case 4:
		// to the end of the keyspace; under a prefix, to the end of the prefix
		end := etcd.Bytes("\x00")
		if r.cfg.Prefix != "" {
			end = etcd.PrefixEnd(r.p(""))
		}
		return r.etcdKey(rng.IntN(etcdKeys)), end
	default:
		return r.p("key/"), etcd.PrefixEnd(r.p("key/"))
	}
}

// deleteTxn deletes key the apiserver's way, for a store that refuses the delete RPC: read it, then
// delete it if its mod revision is still the one read.
func (c *etcdClient) deleteTxn(key etcd.Bytes) {
	if !c.r.uses(FeatConditionalDelete) {
		return // no delete the store answers as etcd does
	}
	resp, err := c.do("range", etcd.Request{Range: &etcd.RangeRequest{Key: key}})
	if err != nil || resp.Range == nil || len(resp.Range.Kvs) == 0 {
		return
	}
	_, _ = c.do("delete-range", etcd.Request{Txn: &etcd.TxnRequest{
		Compare: []etcd.Compare{{Result: etcd.CompareEqual, Target: etcd.CompareMod, Key: key, ModRevision: resp.Range.Kvs[0].ModRevision}},
		Success: []etcd.RequestOp{{DeleteRange: &etcd.DeleteRangeRequest{Key: key}}},
		Failure: []etcd.RequestOp{{Range: &etcd.RangeRequest{Key: key}}},
	}})
}

// apiserverTxn is a txn of the shapes the apiserver sends, for a store that refuses others: a
// create (mod_revision == 0 ? put) or an update (mod_revision == X ? put : get) at a recent
// revision, which mostly loses.
func (c *etcdClient) apiserverTxn() {
	key := c.key()
	t := &etcd.TxnRequest{
		Compare: []etcd.Compare{{Result: etcd.CompareEqual, Target: etcd.CompareMod, Key: key}},
		Success: []etcd.RequestOp{{Put: &etcd.PutRequest{Key: key, Value: c.value()}}},
	}
	if c.rng.IntN(2) == 0 {
		t.Compare[0].ModRevision = max(c.r.floor, c.r.rev.Load()-c.rng.Int64N(10))
		t.Failure = []etcd.RequestOp{{Range: &etcd.RangeRequest{Key: key}}}
	}
	_, _ = c.do("txn", etcd.Request{Txn: t})
}

// revision draws a revision to read at: mostly the latest (0), else a recent one that may be
// compacted, or one a little ahead that may not exist yet.
func (c *etcdClient) revision() int64 {
	cur := c.r.rev.Load()
	switch p := c.rng.IntN(20); {
	case p < 14:
		return 0
	case p < 19:
		past := max(c.r.floor, cur-c.rng.Int64N(40))
		if !c.r.uses(FeatPastRevision) {
			return 0
		}
		return past
	default:
		return cur + 1 + c.rng.Int64N(2)
	}
}

func (c *etcdClient) rangeRequest() *etcd.RangeRequest {
	key, end := c.r.keyRange(c.rng)
	r := &etcd.RangeRequest{Key: key, RangeEnd: end, Revision: c.revision(),
		Serializable: c.rng.IntN(6) == 0 && c.r.uses(FeatSerializable)}
	if c.rng.IntN(3) == 0 && (end != "" || c.r.uses(FeatLimitOnKey)) {
		r.Limit = 1 + c.rng.Int64N(5)
	}
	if order, target := etcd.SortOrder(c.rng.IntN(3)), etcd.SortTarget(c.rng.IntN(5)); c.rng.IntN(4) == 0 && c.r.uses(FeatSort) {
		r.SortOrder, r.SortTarget = order, target
	}
	switch c.rng.IntN(10) {
	case 0:
		c.r.keysOnly(r)
	case 1:
		r.CountOnly = c.r.uses(FeatCountOnly)
	}
	if c.rng.IntN(8) == 0 && c.r.uses(FeatRevisionFilters) {
		cur := c.r.rev.Load()
		pick := func() int64 { return max(c.r.floor, cur-c.rng.Int64N(30)) }
		switch c.rng.IntN(4) {
		case 0:
			r.MinModRevision = pick()
		case 1:
			r.MaxModRevision = pick()
		case 2:
			r.MinCreateRevision = pick()
		default:
			r.MaxCreateRevision = pick()
		}
	}
	return r
}

func (c *etcdClient) value() etcd.Bytes {
	c.seq++
	v := etcd.Bytes(fmt.Sprintf("v%d.%d", c.id, c.seq))
	if c.rng.IntN(100) == 0 {
		v += etcd.Bytes(strings.Repeat("x", 4096))
	}
	c.values = append(c.values, v)
	if len(c.values) > 8 {
		c.values = c.values[1:]
	}
	return v
}

// lease draws a lease to attach to key: none mostly, one of the client's, or sometimes one that
// never existed; none below leasedFrom.
func (c *etcdClient) lease(key etcd.Bytes) int64 {
	if key < c.r.p(leasedFrom) || !c.r.uses(FeatLeases) {
		return 0
	}
	switch p := c.rng.IntN(8); {
	case p < 4 && len(c.leases) > 0:
		return c.leases[c.rng.IntN(len(c.leases))]
	case p == 4:
		return c.gone()
	}
	return 0
}

func (c *etcdClient) putRequest() *etcd.PutRequest {
	p := &etcd.PutRequest{Key: c.key(), PrevKV: c.rng.IntN(3) == 0 && c.r.uses(FeatPutPrevKV)}
	switch c.rng.IntN(30) {
	case 0:
		if c.r.uses(FeatIgnoreValue) {
			p.IgnoreValue = true
			p.Lease = c.lease(p.Key)
			break
		}
		p.Value = c.value()
	case 1:
		p.IgnoreLease = c.r.uses(FeatIgnoreLease)
		p.Value = c.value()
	default:
		p.Value = c.value()
		p.Lease = c.lease(p.Key)
	}
	return p
}

func (c *etcdClient) deleteRequest() *etcd.DeleteRangeRequest {
	d := &etcd.DeleteRangeRequest{PrevKV: c.rng.IntN(2) == 0}
	switch p := c.rng.IntN(10); {
	case p < 6:
		d.Key = c.key()
	case p < 9:
		a, b := c.rng.IntN(etcdKeys), c.rng.IntN(etcdKeys)
		d.Key, d.RangeEnd = c.r.etcdKey(min(a, b)), c.r.etcdKey(min(a, b)+1+c.rng.IntN(3))
	default:
		p := c.r.p(fmt.Sprintf("key/%d", c.rng.IntN(etcdKeys/10)))
		d.Key, d.RangeEnd = p, etcd.PrefixEnd(p)
	}
	if !c.r.uses(FeatDeleteRange) {
		d.RangeEnd = ""
	}
	return d
}

func (c *etcdClient) compare() etcd.Compare {
	cmp := etcd.Compare{Result: etcd.CompareResult(c.rng.IntN(4)), Target: etcd.CompareTarget(c.rng.IntN(5)),
		Key: c.key()}
	if !c.r.uses(compareFeature(cmp.Target)) {
		cmp.Target = etcd.CompareMod // what the apiserver compares, tried first by every store
	}
	if c.rng.IntN(10) == 0 {
		cmp.Key, cmp.RangeEnd = c.r.keyRange(c.rng)
	}
	cur := c.r.rev.Load()
	switch cmp.Target {
	case etcd.CompareVersion:
		cmp.Version = c.rng.Int64N(4)
	case etcd.CompareCreate:
		cmp.CreateRevision = max(0, cur-c.rng.Int64N(30))
	case etcd.CompareMod:
		cmp.ModRevision = max(0, cur-c.rng.Int64N(30))
	case etcd.CompareValue:
		if len(c.values) > 0 && c.rng.IntN(3) > 0 {
			cmp.Value = c.values[c.rng.IntN(len(c.values))]
		} else {
			cmp.Value = etcd.Bytes(fmt.Sprintf("v%d.%d", c.rng.IntN(8), c.rng.IntN(50)))
		}
	case etcd.CompareLease:
		cmp.Lease = c.lease(c.r.p(leasedFrom))
	}
	return cmp
}

// compareFeature is the feature a compare on t needs.
func compareFeature(t etcd.CompareTarget) Feature {
	switch t {
	case etcd.CompareVersion:
		return FeatCompareVersion
	case etcd.CompareCreate:
		return FeatCompareCreate
	case etcd.CompareValue:
		return FeatCompareValue
	case etcd.CompareLease:
		return FeatCompareLease
	}
	return FeatCompareMod
}

// branch draws up to n operations; the keys written are distinct, as etcd requires of a branch.
func (c *etcdClient) branch(n int) []etcd.RequestOp {
	var ops []etcd.RequestOp
	written := c.rng.Perm(etcdKeys)
	if !c.r.uses(FeatMultiOpTxn) {
		n = min(n, 1)
	}
	for range c.rng.IntN(n + 1) {
		switch p := c.rng.IntN(20); {
		case p < 6:
			key, end := c.r.keyRange(c.rng)
			r := &etcd.RangeRequest{Key: key, RangeEnd: end, Limit: c.rng.Int64N(3)}
			if end == "" && !c.r.uses(FeatLimitOnKey) {
				r.Limit = 0
			}
			if c.rng.IntN(5) == 0 {
				c.r.keysOnly(r)
			}
			ops = append(ops, etcd.RequestOp{Range: r})
		case p < 14:
			k := c.r.etcdKey(written[0])
			written = written[1:]
			ops = append(ops, etcd.RequestOp{Put: &etcd.PutRequest{Key: k, Value: c.value(),
				Lease: c.lease(k), PrevKV: c.rng.IntN(3) == 0}})
		case p < 19 || !c.r.uses(FeatNestedTxn):
			k := c.r.etcdKey(written[0])
			written = written[1:]
			ops = append(ops, etcd.RequestOp{DeleteRange: &etcd.DeleteRangeRequest{Key: k, PrevKV: c.rng.IntN(2) == 0}})
		default:
			ops = append(ops, etcd.RequestOp{Txn: &etcd.TxnRequest{
				Compare: []etcd.Compare{c.compare()},
				Success: []etcd.RequestOp{{Range: &etcd.RangeRequest{Key: c.key()}}},
				Failure: []etcd.RequestOp{{Range: &etcd.RangeRequest{Key: c.key(), CountOnly: true}}},
			}})
		}
	}
	return ops
}

func (c *etcdClient) txnRequest() *etcd.TxnRequest {
	t := &etcd.TxnRequest{}
	for range c.rng.IntN(4) {
		t.Compare = append(t.Compare, c.compare())
	}
	t.Success = c.branch(3)
	t.Failure = c.branch(2)
	if len(t.Success) == 0 && len(t.Failure) == 0 {
		// etcd serves a txn whose ops are all serializable ranges, none at all included, without
		// a linearizable read (server/etcdserver/txn/txn.go IsTxnSerializable); etcd.Check
		// judges every txn as linearizable, so the workload sends none
		t.Success = []etcd.RequestOp{{Range: &etcd.RangeRequest{Key: c.key()}}}
	}
	return t
}

func (c *etcdClient) grant() {
	if len(c.leases) >= etcdMaxLeases {
		c.revoke()
		return
	}
	g := &etcd.LeaseGrantRequest{TTL: etcdMinTTL + c.rng.Int64N(etcdMaxTTL-etcdMinTTL)}
	if c.rng.IntN(3) == 0 {
		c.nextID++
		g.ID = int64(c.id+1)<<32 | c.nextID
	}
	short := c.rng.IntN(etcdShortEvery) == 0
	if short {
		g.TTL = etcdShortTTL
	}
	resp, err := c.do("lease-grant", etcd.Request{LeaseGrant: g})
	if err != nil || resp.LeaseGrant == nil {
		return
	}
	if !short {
		c.leases = append(c.leases, resp.LeaseGrant.ID)
		return
	}
	// a lease left to expire: one key on it, and it is never named again
	key := c.r.etcdKey(30 + c.rng.IntN(etcdKeys-30))
	_, _ = c.do("put", etcd.Request{Put: &etcd.PutRequest{Key: key, Value: c.value(), Lease: resp.LeaseGrant.ID}})
}

// gone draws a lease ID nobody granted. Leases once granted are never named after their revoke:
// a "lease not found" answer about a granted lease tells the checker the lease may have expired,
// and every lease that may expire at any time multiplies the linearizations to search.
func (c *etcdClient) gone() int64 {
	return int64(c.id+1)<<32 | 1<<31 | c.rng.Int64N(1000)
}

func (c *etcdClient) revoke() {
	if len(c.leases) == 0 || c.rng.IntN(5) == 0 {
		_, _ = c.do("lease-revoke", etcd.Request{LeaseRevoke: &etcd.LeaseRevokeRequest{ID: c.gone()}})
		return
	}
	i := c.rng.IntN(len(c.leases))
	id := c.leases[i]
	_, err := c.do("lease-revoke", etcd.Request{LeaseRevoke: &etcd.LeaseRevokeRequest{ID: id}})
	if err == nil {
		// after an unknown outcome the lease may still exist: keep it, a later revoke will tell
		c.leases = slices.Delete(c.leases, i, i+1)
	}
}

func (c *etcdClient) keepAlive() {
	id := c.gone()
	if len(c.leases) > 0 && c.rng.IntN(5) > 0 {
		id = c.leases[c.rng.IntN(len(c.leases))]
	}
	_, _ = c.do("lease-keepalive", etcd.Request{LeaseKeepAlive: &etcd.LeaseKeepAliveRequest{ID: id}})
}

// etcdWatcher keeps a drawn watch open: after it ends on purpose it resumes from the last
// revision + 1 or draws a new one; after a compaction answer it resumes from the compaction
// revision, the oldest it may, or (every other time, since under a high write rate a watch that
// starts behind may be compacted again before it catches up) draws a new one.
func (r *runner) etcdWatcher(i int, rng *rand.Rand) func() {
	return func() {
		compactions := 0
		for !r.watchEnded() {
			req := r.drawWatch(rng)
			for !r.watchEnded() {
				w := r.watch(i, req, 5+rng.IntN(50))
				if w.compacted != 0 {
					if compactions++; compactions%2 == 1 {
						req.StartRevision = w.compacted
						continue
					}
					break
				}
				if w.refused {
					r.sleep(retryBackoff)
					break
				}
				if rng.IntN(2) == 0 {
					break
				}
				req.StartRevision = w.last + 1
			}
		}
	}
}

func (r *runner) drawWatch(rng *rand.Rand) etcd.WatchRequest {
	// wide ranges mostly, so that the watches see much of the traffic
	key, end := r.p("key/"), etcd.PrefixEnd(r.p("key/"))
	if rng.IntN(2) == 0 {
		key, end = r.keyRange(rng)
	}
	w := etcd.WatchRequest{Key: key, RangeEnd: end, PrevKV: rng.IntN(2) == 0,
		ProgressNotify: rng.IntN(2) == 0 && r.uses(FeatProgressNotify), Fragment: rng.IntN(10) == 0 && r.uses(FeatFragment)}
	if past := max(r.floor, r.rev.Load()-rng.Int64N(30)); rng.IntN(2) == 0 && r.uses(FeatWatchFromPast) {
		w.StartRevision = past
	}
	switch f := rng.IntN(10); {
	case !r.uses(FeatWatchFilters):
	case f == 0:
		w.Filters = []etcd.WatchFilter{etcd.FilterNoPut}
	case f == 1:
		w.Filters = []etcd.WatchFilter{etcd.FilterNoDelete}
	}
	return w
}

// etcdCompactor compacts every CompactEvery revisions at a revision drawn among the recent ones,
// sometimes at one already compacted or one ahead of the store, which etcd refuses.
func (r *runner) etcdCompactor(rng *rand.Rand, wake <-chan struct{}) func() {
	return func() {
		var compacted int64
		next := r.cfg.CompactEvery + 1
		for r.waitRevision(next, wake) {
			cur := r.rev.Load()
			rev := max(compacted+1, cur-rng.Int64N(max(1, r.cfg.CompactEvery/2)))
			switch rng.IntN(10) {
			case 0:
				rev = max(r.floor, compacted)
			case 1:
				rev = cur + 5 // the store may reach it, or refuse it as a future revision
			}
			_, err := r.do("compact", etcd.Request{Compact: &etcd.CompactRequest{Revision: rev, Physical: rng.IntN(2) == 0}})
			if err == nil {
				compacted = max(compacted, rev)
			}
			next = r.rev.Load() + r.cfg.CompactEvery
		}
	}
}
