package history

import (
	"errors"

	"github.com/listwatch/listwatch/store"
)

// The request-shape checks: the errors a request gets whatever the state, because the store checks
// them before it reads anything. They mirror store/kv.go checkRangeRequest, checkPutRequest,
// checkTxnRequest, checkRequestOp and checkIntervals (v3rpc/key.go); the size limit is asked of an
// empty store when a request may be near it.

// sizeSlack bounds what the encoding adds per field or message; a request whose bytes plus this much
// per field stay under the limit cannot be too large.
const sizeSlack = 24

type shapeChecker struct{}

func (shapeChecker) close() {}

func (shapeChecker) check(req *Request) error {
	switch {
	case req.Range != nil:
		return checkRangeShape(req.Range)
	case req.Put != nil:
		if err := checkPutShape(req.Put); err != nil {
			return err
		}
	case req.DeleteRange != nil:
		if req.DeleteRange.Key == "" {
			return store.ErrEmptyKey
		}
	case req.Txn != nil:
		if err := checkTxnShape(req.Txn, store.DefaultMaxTxnOps); err != nil {
			return err
		}
		if _, _, err := checkIntervals(req.Txn.Success); err != nil {
			return err
		}
		if _, _, err := checkIntervals(req.Txn.Failure); err != nil {
			return err
		}
	case req.LeaseGrant != nil:
		if req.LeaseGrant.TTL > store.MaxLeaseTTL {
			return store.ErrLeaseTTLTooLarge
		}
		return nil
	default:
		return nil
	}
	if sizeBound(req) <= store.DefaultMaxRequestBytes {
		return nil
	}
	return sizeCheck(req)
}

// sizeCheck asks an empty store whether req is too large; the other shape checks have passed.
func sizeCheck(req *Request) error {
	st := newReferenceStore()
	defer st.Close()
	if _, err := applyToStore(st, req); errors.Is(err, store.ErrRequestTooLarge) {
		return err
	}
	return nil
}

func checkRangeShape(r *RangeRequest) error {
	if r.Key == "" {
		return store.ErrEmptyKey
	}
	if r.SortOrder < SortNone || r.SortOrder > SortDescend || r.SortTarget < SortByKey || r.SortTarget > SortByValue {
		return store.ErrInvalidSortOption
	}
	return nil
}

func checkPutShape(r *PutRequest) error {
	switch {
	case r.Key == "":
		return store.ErrEmptyKey
	case r.IgnoreValue && r.Value != "":
		return store.ErrValueProvided
	case r.IgnoreLease && r.Lease != 0:
		return store.ErrLeaseProvided
	}
	return nil
}

func checkTxnShape(t *TxnRequest, maxTxnOps int) error {
	opc := max(len(t.Compare), len(t.Success), len(t.Failure))
	if opc > maxTxnOps {
		return store.ErrTooManyOps
	}
	for _, c := range t.Compare {
		if c.Key == "" {
			return store.ErrEmptyKey
		}
	}
	for _, ops := range [][]RequestOp{t.Success, t.Failure} {
		for i := range ops {
			if err := checkOpShape(&ops[i], maxTxnOps-opc); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkOpShape(op *RequestOp, maxTxnOps int) error {
	switch {
	case op.Range == nil && op.Put == nil && op.DeleteRange == nil && op.Txn == nil:
		return store.ErrKeyNotFound
	case op.Range != nil:
		return checkRangeShape(op.Range)
	case op.Put != nil:
		return checkPutShape(op.Put)
	case op.DeleteRange != nil:
		if op.DeleteRange.Key == "" {
			return store.ErrEmptyKey
		}
		return nil
	default:
		return checkTxnShape(op.Txn, maxTxnOps)
	}
}

// interval is a half-open interval in etcd's "affine" order, in which "" is +infinity.
type interval struct{ begin, end Bytes }

func affineLess(a, b Bytes) bool {
	switch {
	case a == "":
		return false
	case b == "":
		return true
	}
	return a < b
}

func (iv interval) containsPoint(k Bytes) bool {
	return !affineLess(k, iv.begin) && affineLess(k, iv.end)
}

// checkIntervals follows etcd's api/v3rpc/key.go checkIntervals (store.checkIntervals), quirks
// included: a delete whose range end is "\x00"
// is the empty interval [key, "\x00"), so it conflicts with no put.
func checkIntervals(ops []RequestOp) (map[Bytes]struct{}, []interval, error) {
	var dels []interval
	for _, op := range ops {
		if d := op.DeleteRange; d != nil {
			if d.RangeEnd != "" {
				dels = append(dels, interval{d.Key, d.RangeEnd})
			} else {
				dels = append(dels, interval{d.Key, d.Key + "\x00"})
			}
		}
	}
	intersects := func(k Bytes) bool {
		for _, iv := range dels {
			if iv.containsPoint(k) {
				return true
			}
		}
		return false
	}
	puts := make(map[Bytes]struct{})
	for _, op := range ops {
		if op.Txn == nil {
			continue
		}
		putsThen, delsThen, err := checkIntervals(op.Txn.Success)
		if err != nil {
			return nil, dels, err
		}
		putsElse, delsElse, err := checkIntervals(op.Txn.Failure)
		if err != nil {
			return nil, dels, err
		}
		for k := range putsThen {
			if _, ok := puts[k]; ok || intersects(k) {
				return nil, dels, store.ErrDuplicateKey
			}
			puts[k] = struct{}{}
		}
		for k := range putsElse {
			if _, ok := puts[k]; ok {
				if _, isSafe := putsThen[k]; !isSafe {
					return nil, dels, store.ErrDuplicateKey
				}
			}
			if intersects(k) {
				return nil, dels, store.ErrDuplicateKey
			}
			puts[k] = struct{}{}
		}
		dels = append(dels, delsThen...)
		dels = append(dels, delsElse...)
	}
	for _, op := range ops {
		if op.Put == nil {
			continue
		}
		k := op.Put.Key
		if _, ok := puts[k]; ok || intersects(k) {
			return nil, dels, store.ErrDuplicateKey
		}
		puts[k] = struct{}{}
	}
	return puts, dels, nil
}

// sizeBound is an upper bound of a request's encoded size.
func sizeBound(req *Request) int {
	switch {
	case req.Put != nil:
		return putBound(req.Put)
	case req.DeleteRange != nil:
		return 8*sizeSlack + len(req.DeleteRange.Key) + len(req.DeleteRange.RangeEnd)
	case req.Txn != nil:
		return txnBound(req.Txn)
	}
	return 8 * sizeSlack
}

func putBound(p *PutRequest) int { return 10*sizeSlack + len(p.Key) + len(p.Value) }

func rangeBound(r *RangeRequest) int { return 16*sizeSlack + len(r.Key) + len(r.RangeEnd) }

func txnBound(t *TxnRequest) int {
	n := 8 * sizeSlack
	for _, c := range t.Compare {
		n += 10*sizeSlack + len(c.Key) + len(c.RangeEnd) + len(c.Value)
	}
	for _, ops := range [][]RequestOp{t.Success, t.Failure} {
		for _, op := range ops {
			n += 4 * sizeSlack
			switch {
			case op.Range != nil:
				n += rangeBound(op.Range)
			case op.Put != nil:
				n += putBound(op.Put)
			case op.DeleteRange != nil:
				n += 8*sizeSlack + len(op.DeleteRange.Key) + len(op.DeleteRange.RangeEnd)
			case op.Txn != nil:
				n += txnBound(op.Txn)
			}
		}
	}
	return n
}
