package store

import (
	"slices"
	"sync"

	"github.com/listwatch/listwatch/etcdrules"
)

// The checks etcd makes before a request reads any state are package etcdrules'; these functions
// describe the store's requests in its shapes, sharing the byte slices.

func rangeShape(r *RangeRequest) etcdrules.Range[[]byte] {
	return etcdrules.Range[[]byte]{Key: r.Key, RangeEnd: r.RangeEnd, Limit: r.Limit, Revision: r.Revision,
		SortOrder: int32(r.SortOrder), SortTarget: int32(r.SortTarget), Serializable: r.Serializable,
		KeysOnly: r.KeysOnly, CountOnly: r.CountOnly, MinModRevision: r.MinModRevision,
		MaxModRevision: r.MaxModRevision, MinCreateRevision: r.MinCreateRevision, MaxCreateRevision: r.MaxCreateRevision}
}

func putShape(r *PutRequest) etcdrules.Put[[]byte] {
	return etcdrules.Put[[]byte]{Key: r.Key, Value: r.Value, Lease: r.Lease, PrevKV: r.PrevKv,
		IgnoreValue: r.IgnoreValue, IgnoreLease: r.IgnoreLease}
}

func deleteShape(r *DeleteRangeRequest) etcdrules.DeleteRange[[]byte] {
	return etcdrules.DeleteRange[[]byte]{Key: r.Key, RangeEnd: r.RangeEnd, PrevKV: r.PrevKv}
}

// shapeBuf holds the shapes of one txn's requests (a txn is the one request whose description is a
// tree). The buffers are reused through shapeBufs, so that describing a txn allocates nothing once
// a txn as large has been checked.
type shapeBuf struct {
	ops    []etcdrules.Op[[]byte]
	ranges []etcdrules.Range[[]byte]
	puts   []etcdrules.Put[[]byte]
	dels   []etcdrules.DeleteRange[[]byte]
	txns   []etcdrules.Txn[[]byte]
	cmps   []etcdrules.Compare[[]byte]
}

var shapeBufs = sync.Pool{New: func() any { return new(shapeBuf) }}

// checkTxnShape applies etcdrules' txn rules to r under limits.
func checkTxnShape(r *TxnRequest, limits etcdrules.Limits) error {
	var n shapeCounts
	n.count(r)
	b := shapeBufs.Get().(*shapeBuf)
	// the shapes point into the buffers, which must not move while they are filled
	b.ops = slices.Grow(b.ops[:0], n.ops)
	b.ranges = slices.Grow(b.ranges[:0], n.ranges)
	b.puts = slices.Grow(b.puts[:0], n.puts)
	b.dels = slices.Grow(b.dels[:0], n.dels)
	b.txns = slices.Grow(b.txns[:0], n.txns)
	b.cmps = slices.Grow(b.cmps[:0], n.cmps)
	t := b.txn(r)
	err := t.Check(limits)
	// drop the references to the request's keys and values before the buffers are reused
	clear(b.ops)
	clear(b.ranges)
	clear(b.puts)
	clear(b.dels)
	clear(b.txns)
	clear(b.cmps)
	shapeBufs.Put(b)
	return err
}

type shapeCounts struct{ ops, ranges, puts, dels, txns, cmps int }

func (n *shapeCounts) count(r *TxnRequest) {
	n.cmps += len(r.Compare)
	for _, ops := range [][]RequestOp{r.Success, r.Failure} {
		n.ops += len(ops)
		for i := range ops {
			op := &ops[i]
			if op.Range != nil {
				n.ranges++
			}
			if op.Put != nil {
				n.puts++
			}
			if op.DeleteRange != nil {
				n.dels++
			}
			if op.Txn != nil {
				n.txns++
				n.count(op.Txn)
			}
		}
	}
}

func (b *shapeBuf) txn(r *TxnRequest) etcdrules.Txn[[]byte] {
	var t etcdrules.Txn[[]byte]
	if len(r.Compare) > 0 {
		start := len(b.cmps)
		for i := range r.Compare {
			c := &r.Compare[i]
			b.cmps = append(b.cmps, etcdrules.Compare[[]byte]{Result: int32(c.Result), Target: int32(c.Target),
				Key: c.Key, RangeEnd: c.RangeEnd, Version: c.Version, CreateRevision: c.CreateRevision,
				ModRevision: c.ModRevision, Value: c.Value, Lease: c.Lease})
		}
		t.Compare = b.cmps[start:len(b.cmps):len(b.cmps)]
	}
	t.Success = b.branch(r.Success)
	t.Failure = b.branch(r.Failure)
	return t
}

func (b *shapeBuf) branch(ops []RequestOp) []etcdrules.Op[[]byte] {
	if len(ops) == 0 {
		return nil
	}
	start := len(b.ops)
	b.ops = b.ops[:start+len(ops)]
	out := b.ops[start : start+len(ops) : start+len(ops)]
	for i := range ops {
		op := &ops[i]
		if op.Range != nil {
			b.ranges = append(b.ranges, rangeShape(op.Range))
			out[i].Range = &b.ranges[len(b.ranges)-1]
		}
		if op.Put != nil {
			b.puts = append(b.puts, putShape(op.Put))
			out[i].Put = &b.puts[len(b.puts)-1]
		}
		if op.DeleteRange != nil {
			b.dels = append(b.dels, deleteShape(op.DeleteRange))
			out[i].DeleteRange = &b.dels[len(b.dels)-1]
		}
		if op.Txn != nil {
			b.txns = append(b.txns, etcdrules.Txn[[]byte]{})
			sub := &b.txns[len(b.txns)-1]
			*sub = b.txn(op.Txn)
			out[i].Txn = sub
		}
	}
	return out
}
