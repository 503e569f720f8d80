package etcd

import (
	"fmt"

	"pgregory.net/rapid"
)

// reqGen draws random requests over a small keyspace, so that keys collide, ranges overlap and
// every error path of the store is reachable.
type reqGen struct {
	t      *rapid.T
	rev    func() int64 // the store's revision as far as the generator knows
	leases []int64
	// wild adds requests that fail on their shape (empty keys, bad sorts, misplaced ignore flags).
	wild bool
}

var genKeys = []string{"a", "a1", "a2", "ab", "b", "b1", "c", "\x00", "a\xff"}

func (g *reqGen) key(label string) Bytes {
	if g.wild && rapid.IntRange(0, 30).Draw(g.t, label+"Empty") == 0 {
		return ""
	}
	return Bytes(rapid.SampledFrom(genKeys).Draw(g.t, label))
}

func (g *reqGen) rangeEnd(key Bytes, label string) Bytes {
	switch rapid.IntRange(0, 5).Draw(g.t, label) {
	case 0, 1:
		return ""
	case 2:
		return "\x00"
	case 3:
		return PrefixEnd(key)
	default:
		return Bytes(rapid.SampledFrom(genKeys).Draw(g.t, label+"End"))
	}
}

func (g *reqGen) revision(label string) int64 {
	cur := g.rev()
	switch rapid.IntRange(0, 3).Draw(g.t, label) {
	case 0:
		return 0
	case 1:
		return rapid.Int64Range(-1, cur+1).Draw(g.t, label+"Any")
	default:
		return rapid.Int64Range(max(1, cur-3), cur).Draw(g.t, label+"Recent")
	}
}

func (g *reqGen) lease(label string) int64 {
	switch rapid.IntRange(0, 6).Draw(g.t, label) {
	case 0, 1, 2:
		return 0
	case 3, 4, 5:
		if len(g.leases) > 0 {
			return rapid.SampledFrom(g.leases).Draw(g.t, label+"Known")
		}
	}
	return rapid.Int64Range(1, 5).Draw(g.t, label+"Any")
}

func (g *reqGen) value(label string) Bytes {
	return Bytes(rapid.SampledFrom([]string{"", "x", "y", "z", "xx", "\xff\xfe"}).Draw(g.t, label))
}

func (g *reqGen) rangeReq(label string) *RangeRequest {
	k := g.key(label + "Key")
	r := &RangeRequest{Key: k, RangeEnd: g.rangeEnd(k, label+"RangeEnd"), Revision: g.revision(label + "Rev"),
		Serializable: rapid.IntRange(0, 4).Draw(g.t, label+"Serializable") == 0}
	if rapid.Bool().Draw(g.t, label+"Opts") {
		r.Limit = rapid.Int64Range(0, 3).Draw(g.t, label+"Limit")
		hi := int32(2)
		if g.wild {
			hi = 3
		}
		r.SortOrder = SortOrder(rapid.Int32Range(0, hi).Draw(g.t, label+"Order"))
		r.SortTarget = SortTarget(rapid.Int32Range(0, 4+hi-2).Draw(g.t, label+"Target"))
		r.KeysOnly = rapid.Bool().Draw(g.t, label+"KeysOnly")
		r.CountOnly = rapid.IntRange(0, 5).Draw(g.t, label+"CountOnly") == 0
		if rapid.Bool().Draw(g.t, label+"Filters") {
			cur := g.rev()
			r.MinModRevision = rapid.Int64Range(0, cur).Draw(g.t, label+"MinMod")
			r.MaxModRevision = rapid.Int64Range(0, cur).Draw(g.t, label+"MaxMod")
			r.MinCreateRevision = rapid.Int64Range(0, cur).Draw(g.t, label+"MinCreate")
			r.MaxCreateRevision = rapid.Int64Range(0, cur).Draw(g.t, label+"MaxCreate")
		}
	}
	return r
}

func (g *reqGen) putReq(label string) *PutRequest {
	p := &PutRequest{Key: g.key(label + "Key"), Value: g.value(label + "Value"), Lease: g.lease(label + "Lease"),
		PrevKV: rapid.Bool().Draw(g.t, label+"PrevKV")}
	if rapid.IntRange(0, 6).Draw(g.t, label+"Ignore") == 0 {
		p.IgnoreValue = rapid.Bool().Draw(g.t, label+"IgnoreValue")
		p.IgnoreLease = !p.IgnoreValue || rapid.Bool().Draw(g.t, label+"IgnoreLease")
		if !g.wild {
			if p.IgnoreValue {
				p.Value = ""
			}
			if p.IgnoreLease {
				p.Lease = 0
			}
		}
	}
	return p
}

func (g *reqGen) deleteReq(label string) *DeleteRangeRequest {
	k := g.key(label + "Key")
	return &DeleteRangeRequest{Key: k, RangeEnd: g.rangeEnd(k, label+"RangeEnd"), PrevKV: rapid.Bool().Draw(g.t, label+"PrevKV")}
}

func (g *reqGen) compare(label string) Compare {
	k := g.key(label + "Key")
	c := Compare{Result: CompareResult(rapid.Int32Range(0, 3).Draw(g.t, label+"Result")),
		Target: CompareTarget(rapid.Int32Range(0, 4).Draw(g.t, label+"Target")), Key: k}
	if rapid.IntRange(0, 3).Draw(g.t, label+"Ranged") == 0 {
		c.RangeEnd = g.rangeEnd(k, label+"RangeEnd")
	}
	cur := g.rev()
	switch c.Target {
	case CompareVersion:
		c.Version = rapid.Int64Range(0, 3).Draw(g.t, label+"Version")
	case CompareCreate:
		c.CreateRevision = rapid.Int64Range(0, cur).Draw(g.t, label+"Create")
	case CompareMod:
		c.ModRevision = rapid.Int64Range(0, cur).Draw(g.t, label+"Mod")
	case CompareValue:
		c.Value = g.value(label + "Value")
	case CompareLease:
		c.Lease = g.lease(label + "Lease")
	}
	return c
}

func (g *reqGen) ops(label string, depth int) []RequestOp {
	n := rapid.IntRange(0, 3).Draw(g.t, label+"N")
	var ops []RequestOp
	for i := range n {
		l := fmt.Sprintf("%s%d", label, i)
		var op RequestOp
		switch rapid.IntRange(0, 9).Draw(g.t, l+"Kind") {
		case 0, 1, 2:
			op.Range = g.rangeReq(l)
		case 3, 4, 5:
			op.Put = g.putReq(l)
		case 6, 7:
			op.DeleteRange = g.deleteReq(l)
		case 8:
			if depth < 2 {
				op.Txn = g.txnReq(l, depth+1)
			} else {
				op.Range = g.rangeReq(l)
			}
		default:
			if !g.wild {
				op.Put = g.putReq(l)
			}
		}
		ops = append(ops, op)
	}
	return ops
}

func (g *reqGen) txnReq(label string, depth int) *TxnRequest {
	t := &TxnRequest{}
	for i := range rapid.IntRange(0, 2).Draw(g.t, label+"Compares") {
		t.Compare = append(t.Compare, g.compare(fmt.Sprintf("%sCmp%d", label, i)))
	}
	t.Success = g.ops(label+"Then", depth)
	t.Failure = g.ops(label+"Else", depth)
	return t
}

// request draws one request; reads says whether reads may be drawn, compact whether compactions may.
func (g *reqGen) request(label string, compact bool) Request {
	switch k := rapid.IntRange(0, 19).Draw(g.t, label+"Kind"); {
	case k < 5:
		return Request{Range: g.rangeReq(label)}
	case k < 10:
		return Request{Put: g.putReq(label)}
	case k < 12:
		return Request{DeleteRange: g.deleteReq(label)}
	case k < 16:
		return Request{Txn: g.txnReq(label, 0)}
	case k == 16 && compact:
		cur := g.rev()
		return Request{Compact: &CompactRequest{Revision: rapid.Int64Range(max(-1, cur-4), cur+1).Draw(g.t, label+"Compact")}}
	case k == 17:
		id := int64(0)
		if rapid.Bool().Draw(g.t, label+"GrantID") {
			id = rapid.Int64Range(1, 5).Draw(g.t, label+"GrantIDValue")
		}
		return Request{LeaseGrant: &LeaseGrantRequest{ID: id, TTL: 3600}}
	case k == 18:
		return Request{LeaseRevoke: &LeaseRevokeRequest{ID: g.lease(label + "Revoke")}}
	default:
		return Request{LeaseKeepAlive: &LeaseKeepAliveRequest{ID: g.lease(label + "KeepAlive")}}
	}
}
