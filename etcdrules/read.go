package etcdrules

import "math"

// The rules below are what etcd decides from a request alone about how it reads keys: how many keys
// a range reads, which revision filters it prunes by and how it sorts, and when a txn compare
// holds. The store and the checker's model apply them to the keys they hold.

// FetchLimit is how many keys in key order a range reads before it prunes and sorts them, 0 for
// all: one more than Limit, to tell More, unless the request asks for an order other than key order
// or prunes by revision afterwards. It reads the order as given: with SortNone and a target other
// than the key, etcd applies the limit in key order and then sorts what it kept. Mirrors
// server/etcdserver/txn/range.go rangeLimit.
func (r *RangeRequest[B]) FetchLimit() int64 {
	if !isDefaultOrdering(r.SortTarget, r.SortOrder) || r.HasRevisionFilters() {
		return 0
	}
	limit := r.Limit
	if limit > 0 && limit < math.MaxInt64 {
		limit++
	}
	return limit
}

// Sort returns the order the range's result is sorted in (a target other than the key with no order
// sorts ascending) and whether it must be sorted at all: false when it is key order, in which keys
// are read. Mirrors txn/range.go executeRange and isDefaultOrdering.
func (r *RangeRequest[B]) Sort() (SortOrder, bool) {
	order := r.SortOrder
	if r.SortTarget != SortByKey && order == SortNone {
		order = SortAscend
	}
	return order, !isDefaultOrdering(r.SortTarget, order)
}

func isDefaultOrdering(t SortTarget, o SortOrder) bool {
	return o == SortNone || (t == SortByKey && o == SortAscend)
}

// HasRevisionFilters reports whether the range prunes keys by mod or create revision.
func (r *RangeRequest[B]) HasRevisionFilters() bool {
	return r.MinModRevision != 0 || r.MaxModRevision != 0 || r.MinCreateRevision != 0 || r.MaxCreateRevision != 0
}

// Keeps reports whether the range's revision filters keep a key of create and mod revisions.
// Mirrors txn/range.go executeRange's pruneKVs calls.
func (r *RangeRequest[B]) Keeps(create, mod int64) bool {
	switch {
	case r.MaxModRevision != 0 && mod > r.MaxModRevision:
	case r.MinModRevision != 0 && mod < r.MinModRevision:
	case r.MaxCreateRevision != 0 && create > r.MaxCreateRevision:
	case r.MinCreateRevision != 0 && create < r.MinCreateRevision:
	default:
		return true
	}
	return false
}

// Holds reports whether a key whose target field compares to c's value as cmp (negative, zero or
// positive, as cmp.Compare) satisfies c; a result etcdserverpb does not define holds. Mirrors
// server/etcdserver/txn/txn.go compareKV.
func (c *Compare[B]) Holds(cmp int) bool {
	switch c.Result {
	case CompareEqual:
		return cmp == 0
	case CompareNotEqual:
		return cmp != 0
	case CompareGreater:
		return cmp > 0
	case CompareLess:
		return cmp < 0
	}
	return true
}
