package store

import "math/bits"

// etcd rejects a write whose marshaled InternalRaftRequest exceeds MaxRequestBytes
// (etcdserver/v3_server.go processInternalRaftRequestOnce). These functions compute that protobuf
// size for the store's request types, with the field numbers of etcdserverpb/rpc.proto and
// raft_internal.proto; the request header is counted as a 9-byte request ID, the width of the IDs
// etcd's generator produces.

const raftHeaderSize = 2 + 1 + 1 + 9 // tag of field 100, length, tag of ID, ID

func varintSize(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

func tagSize(field int) int { return varintSize(uint64(field) << 3) }

func bytesField(field int, b []byte) int {
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

func putSize(r *PutRequest) int { return raftRequest(4, putBody(r)) }

func deleteRangeSize(r *DeleteRangeRequest) int { return raftRequest(5, deleteRangeBody(r)) }

func txnSize(r *TxnRequest) int { return raftRequest(6, txnBody(r)) }

func compactSize(rev int64) int { return raftRequest(7, intField(1, rev)) }

func putBody(r *PutRequest) int {
	return bytesField(1, r.Key) + bytesField(2, r.Value) + intField(3, r.Lease) +
		boolField(4, r.PrevKv) + boolField(5, r.IgnoreValue) + boolField(6, r.IgnoreLease)
}

func deleteRangeBody(r *DeleteRangeRequest) int {
	return bytesField(1, r.Key) + bytesField(2, r.RangeEnd) + boolField(3, r.PrevKv)
}

func rangeBody(r *RangeRequest) int {
	return bytesField(1, r.Key) + bytesField(2, r.RangeEnd) + intField(3, r.Limit) + intField(4, r.Revision) +
		intField(5, int64(r.SortOrder)) + intField(6, int64(r.SortTarget)) + boolField(7, r.Serializable) +
		boolField(8, r.KeysOnly) + boolField(9, r.CountOnly) + intField(10, r.MinModRevision) +
		intField(11, r.MaxModRevision) + intField(12, r.MinCreateRevision) + intField(13, r.MaxCreateRevision)
}

func compareBody(c *Compare) int {
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

func requestOpBody(op *RequestOp) int {
	switch {
	case op.Range != nil:
		return msgField(1, rangeBody(op.Range))
	case op.Put != nil:
		return msgField(2, putBody(op.Put))
	case op.DeleteRange != nil:
		return msgField(3, deleteRangeBody(op.DeleteRange))
	case op.Txn != nil:
		return msgField(4, txnBody(op.Txn))
	}
	return 0
}

func txnBody(r *TxnRequest) int {
	n := 0
	for i := range r.Compare {
		n += msgField(1, compareBody(&r.Compare[i]))
	}
	for i := range r.Success {
		n += msgField(2, requestOpBody(&r.Success[i]))
	}
	for i := range r.Failure {
		n += msgField(3, requestOpBody(&r.Failure[i]))
	}
	return n
}
