package etcdrules

// Limits are the server's bounds on requests; the zero value is etcd's defaults.
type Limits struct {
	// MaxTxnOps bounds the compares and the ops of each txn branch (etcd --max-txn-ops).
	MaxTxnOps int
	// MaxRequestBytes bounds the encoded size of a write (etcd --max-request-bytes).
	MaxRequestBytes int
}

// Defaults, as etcd v3.7 has them (server/embed/config.go DefaultMaxTxnOps and
// DefaultMaxRequestBytes; server/lease/lessor.go MaxLeaseTTL).
const (
	DefaultMaxTxnOps       = 128
	DefaultMaxRequestBytes = 1536 * 1024 // 1.5 MiB
	MaxLeaseTTL            = 9000000000  // seconds
)

func (l Limits) withDefaults() Limits {
	if l.MaxTxnOps <= 0 {
		l.MaxTxnOps = DefaultMaxTxnOps
	}
	if l.MaxRequestBytes <= 0 {
		l.MaxRequestBytes = DefaultMaxRequestBytes
	}
	return l
}

func (l Limits) checkSize(n int) error {
	if n > l.withDefaults().MaxRequestBytes {
		return ErrRequestTooLarge
	}
	return nil
}

// Check returns the error etcd gives r before reading any state.
// Mirrors server/etcdserver/api/v3rpc/key.go checkRangeRequest. A range is a read, which etcd
// serves without proposing it, so no size limit applies.
func (r *RangeRequest[B]) Check() error {
	if len(r.Key) == 0 {
		return ErrEmptyKey
	}
	if r.SortOrder < SortNone || r.SortOrder > SortDescend || r.SortTarget < SortByKey || r.SortTarget > SortByValue {
		return ErrInvalidSortOption
	}
	return nil
}

// Check returns the error etcd gives r before reading any state: v3rpc/key.go checkPutRequest,
// then the size of the proposal (etcdserver/v3_server.go processInternalRaftRequestOnce).
func (r *PutRequest[B]) Check(l Limits) error {
	if err := r.checkShape(); err != nil {
		return err
	}
	return l.checkSize(raftRequest(fieldRaftPut, r.body()))
}

// checkShape mirrors v3rpc/key.go checkPutRequest.
func (r *PutRequest[B]) checkShape() error {
	if len(r.Key) == 0 {
		return ErrEmptyKey
	}
	if r.IgnoreValue && len(r.Value) != 0 {
		return ErrValueProvided
	}
	if r.IgnoreLease && r.Lease != 0 {
		return ErrLeaseProvided
	}
	return nil
}

// Check returns the error etcd gives r before reading any state: v3rpc/key.go checkDeleteRequest,
// then the size of the proposal.
func (r *DeleteRangeRequest[B]) Check(l Limits) error {
	if len(r.Key) == 0 {
		return ErrEmptyKey
	}
	return l.checkSize(raftRequest(fieldRaftDeleteRange, r.body()))
}

// Check returns the error etcd gives r before reading any state: v3rpc/key.go Txn runs
// checkTxnRequest, then checkIntervals on each branch, then the proposal's size is checked. A txn
// of ranges only is no proposal: etcd serves it without raft (etcdserver/v3_server.go Txn), so only
// gRPC's receive limit bounds its size.
func (r *TxnRequest[B]) Check(l Limits) error {
	l = l.withDefaults()
	if err := r.checkShape(l.MaxTxnOps); err != nil {
		return err
	}
	if _, _, err := checkIntervals(r.Success); err != nil {
		return err
	}
	if _, _, err := checkIntervals(r.Failure); err != nil {
		return err
	}
	if r.readOnly() {
		return nil
	}
	return l.checkSize(raftRequest(fieldRaftTxn, r.body()))
}

// readOnly mirrors server/etcdserver/txn/txn.go IsTxnReadonly: ranges only, in both branches; a
// nested txn counts as a write even if it holds ranges only.
func (r *TxnRequest[B]) readOnly() bool {
	for _, ops := range [][]RequestOp[B]{r.Success, r.Failure} {
		for i := range ops {
			if ops[i].Range == nil {
				return false
			}
		}
	}
	return true
}

// CheckCompact returns the error etcd gives a compaction at rev before reading any state: only the
// size of the proposal, which a compaction reaches only under a tiny MaxRequestBytes.
func CheckCompact(rev int64, l Limits) error {
	return l.checkSize(raftRequest(fieldRaftCompaction, intField(1, rev)))
}

// CheckLeaseGrant returns the error etcd gives a lease grant of ttl seconds before reading any
// state. Mirrors server/lease/lessor.go Grant.
func CheckLeaseGrant(ttl int64) error {
	if ttl > MaxLeaseTTL {
		return ErrLeaseTTLTooLarge
	}
	return nil
}

// checkShape mirrors v3rpc/key.go checkTxnRequest: the compares and each branch count against
// maxTxnOps, and a nested txn gets what its parent left.
func (r *TxnRequest[B]) checkShape(maxTxnOps int) error {
	opc := max(len(r.Compare), len(r.Success), len(r.Failure))
	if opc > maxTxnOps {
		return ErrTooManyOps
	}
	for i := range r.Compare {
		if len(r.Compare[i].Key) == 0 {
			return ErrEmptyKey
		}
	}
	for _, ops := range [][]RequestOp[B]{r.Success, r.Failure} {
		for i := range ops {
			if err := ops[i].checkShape(maxTxnOps - opc); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkShape mirrors v3rpc/key.go checkRequestOp.
func (op *RequestOp[B]) checkShape(maxTxnOps int) error {
	set := 0
	for _, b := range []bool{op.Range != nil, op.Put != nil, op.DeleteRange != nil, op.Txn != nil} {
		if b {
			set++
		}
	}
	switch {
	case set == 0:
		return ErrKeyNotFound // etcd's answer to an empty op
	case set > 1:
		return ErrInvalidRequestOp
	case op.Range != nil:
		return op.Range.Check()
	case op.Put != nil:
		return op.Put.checkShape()
	case op.DeleteRange != nil:
		if len(op.DeleteRange.Key) == 0 {
			return ErrEmptyKey
		}
		return nil
	default:
		return op.Txn.checkShape(maxTxnOps)
	}
}

// interval is a half-open key interval in etcd's "string affine" order (pkg/adt
// NewStringAffineInterval), in which "" is +infinity.
type interval struct{ begin, end string }

func affineLess(a, b string) bool {
	switch {
	case a == "":
		return false
	case b == "":
		return true
	}
	return a < b
}

// containsPoint reports whether the point k, the interval [k, k+"\x00"), meets iv.
func (iv interval) containsPoint(k string) bool {
	return !affineLess(k, iv.begin) && affineLess(k, iv.end)
}

// checkIntervals refuses a branch that puts one key twice or puts a key a delete of the same branch
// covers, nested txns included; the then and else branches of a nested txn may put the same key.
// Mirrors v3rpc/key.go checkIntervals, quirk included: a delete with range end "\x00" is the empty
// interval [key, "\x00") there, so it conflicts with no put, and such a txn may put and delete one
// key in one revision.
func checkIntervals[B Bytes](ops []RequestOp[B]) (map[string]struct{}, []interval, error) {
	var dels []interval
	for _, op := range ops {
		if d := op.DeleteRange; d != nil {
			if len(d.RangeEnd) != 0 {
				dels = append(dels, interval{string(d.Key), string(d.RangeEnd)})
			} else {
				dels = append(dels, interval{string(d.Key), string(d.Key) + "\x00"})
			}
		}
	}
	intersects := func(k string) bool {
		for _, iv := range dels {
			if iv.containsPoint(k) {
				return true
			}
		}
		return false
	}
	var puts map[string]struct{} // made on the first put: most branches put little or nothing
	add := func(k string) {
		if puts == nil {
			puts = make(map[string]struct{})
		}
		puts[k] = struct{}{}
	}
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
				return nil, dels, ErrDuplicateKey
			}
			add(k)
		}
		for k := range putsElse {
			if _, ok := puts[k]; ok {
				if _, isSafe := putsThen[k]; !isSafe {
					return nil, dels, ErrDuplicateKey
				}
			}
			if intersects(k) {
				return nil, dels, ErrDuplicateKey
			}
			add(k)
		}
		dels = append(dels, delsThen...)
		dels = append(dels, delsElse...)
	}
	for _, op := range ops {
		if op.Put == nil {
			continue
		}
		k := string(op.Put.Key)
		if _, ok := puts[k]; ok || intersects(k) {
			return nil, dels, ErrDuplicateKey
		}
		add(k)
	}
	return puts, dels, nil
}
