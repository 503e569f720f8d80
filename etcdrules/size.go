package etcdrules

import "math/bits"

// etcd refuses a write whose marshaled InternalRaftRequest exceeds MaxRequestBytes
// (etcdserver/v3_server.go processInternalRaftRequestOnce). These functions compute that protobuf
// size, with the field numbers of api/etcdserverpb/rpc.proto and
// server/etcdserver/api/etcdserverpb/raft_internal.proto; the request header is counted as a
// 9-byte request ID, the width of the IDs etcd's generator (pkg/idutil) produces.

// Field numbers of InternalRaftRequest.
const (
	fieldRaftPut         = 4
	fieldRaftDeleteRange = 5
	fieldRaftTxn         = 6
	fieldRaftCompaction  = 7
)

const raftHeaderSize = 2 + 1 + 1 + 9 // tag of field 100, length, tag of ID, ID

func varintSize(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

func tagSize(field int) int { return varintSize(uint64(field) << 3) }

func bytesField[B Bytes](field int, b B) int {
	if len(b) == 0 {
		return 0
	}
	return tagSize(field) + varintSize(uint64(len(b))) + len(b)
}

func intField(field int, v int64) int {
	if v == 0 {
		return 0
	}
	return tagSize(field) + varintSize(uint64(v))
}

func boolField(field int, b bool) int {
	if !b {
		return 0
	}
	return tagSize(field) + 1
}

func msgField(field, n int) int { return tagSize(field) + varintSize(uint64(n)) + n }

func raftRequest(field, n int) int { return raftHeaderSize + msgField(field, n) }

func (r *PutRequest[B]) body() int {
	return bytesField(1, r.Key) + bytesField(2, r.Value) + intField(3, r.Lease) +
		boolField(4, r.PrevKV) + boolField(5, r.IgnoreValue) + boolField(6, r.IgnoreLease)
}

func (r *DeleteRangeRequest[B]) body() int {
	return bytesField(1, r.Key) + bytesField(2, r.RangeEnd) + boolField(3, r.PrevKV)
}

func (r *RangeRequest[B]) body() int {
	return bytesField(1, r.Key) + bytesField(2, r.RangeEnd) + intField(3, r.Limit) + intField(4, r.Revision) +
		intField(5, int64(r.SortOrder)) + intField(6, int64(r.SortTarget)) + boolField(7, r.Serializable) +
		boolField(8, r.KeysOnly) + boolField(9, r.CountOnly) + intField(10, r.MinModRevision) +
		intField(11, r.MaxModRevision) + intField(12, r.MinCreateRevision) + intField(13, r.MaxCreateRevision)
}

func (c *Compare[B]) body() int {
	n := intField(1, int64(c.Result)) + intField(2, int64(c.Target)) + bytesField(3, c.Key) + bytesField(64, c.RangeEnd)
	// the target union is a oneof: it is encoded even when its value is zero
	switch c.Target {
	case CompareVersion:
		n += tagSize(4) + varintSize(uint64(c.Version))
	case CompareCreate:
		n += tagSize(5) + varintSize(uint64(c.CreateRevision))
	case CompareMod:
		n += tagSize(6) + varintSize(uint64(c.ModRevision))
	case CompareValue:
		n += tagSize(7) + varintSize(uint64(len(c.Value))) + len(c.Value)
	case CompareLease:
		n += tagSize(8) + varintSize(uint64(c.Lease))
	}
	return n
}

func (op *RequestOp[B]) body() int {
	switch {
	case op.Range != nil:
		return msgField(1, op.Range.body())
	case op.Put != nil:
		return msgField(2, op.Put.body())
	case op.DeleteRange != nil:
		return msgField(3, op.DeleteRange.body())
	case op.Txn != nil:
		return msgField(4, op.Txn.body())
	}
	return 0
}

func (r *TxnRequest[B]) body() int {
	n := 0
	for i := range r.Compare {
		n += msgField(1, r.Compare[i].body())
	}
	for i := range r.Success {
		n += msgField(2, r.Success[i].body())
	}
	for i := range r.Failure {
		n += msgField(3, r.Failure[i].body())
	}
	return n
}
