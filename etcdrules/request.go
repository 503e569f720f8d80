package etcdrules

// Bytes is the byte-string type of a request's keys, range ends and values: []byte for the store,
// a string type for a recorded history. The rules read them without copying.
type Bytes interface{ ~string | ~[]byte }

// The values of etcdserverpb's enums that the rules read (api/etcdserverpb/rpc.proto
// RangeRequest.SortOrder, RangeRequest.SortTarget, Compare.CompareResult, Compare.CompareTarget).
const (
	SortNone    int32 = 0
	SortAscend  int32 = 1
	SortDescend int32 = 2

	SortByKey     int32 = 0
	SortByVersion int32 = 1
	SortByCreate  int32 = 2
	SortByMod     int32 = 3
	SortByValue   int32 = 4

	CompareEqual    int32 = 0
	CompareGreater  int32 = 1
	CompareLess     int32 = 2
	CompareNotEqual int32 = 3

	CompareVersion int32 = 0
	CompareCreate  int32 = 1
	CompareMod     int32 = 2
	CompareValue   int32 = 3
	CompareLease   int32 = 4
)

// The shapes below are etcdserverpb's request messages, field for field as far as the rules read
// them (every field, since the size limit counts them all), with the caller's byte-string type.
// A caller fills one from its own request type; the fields are values and the byte strings are
// shared, so filling one copies no key and no value.

// Range is etcdserverpb.RangeRequest.
type Range[B Bytes] struct {
	Key, RangeEnd                        B
	Limit, Revision                      int64
	SortOrder, SortTarget                int32
	Serializable, KeysOnly, CountOnly    bool
	MinModRevision, MaxModRevision       int64
	MinCreateRevision, MaxCreateRevision int64
}

// Put is etcdserverpb.PutRequest.
type Put[B Bytes] struct {
	Key, Value                       B
	Lease                            int64
	PrevKV, IgnoreValue, IgnoreLease bool
}

// DeleteRange is etcdserverpb.DeleteRangeRequest.
type DeleteRange[B Bytes] struct {
	Key, RangeEnd B
	PrevKV        bool
}

// Compare is etcdserverpb.Compare; of Version, CreateRevision, ModRevision, Value and Lease only
// the one Target names is part of the message.
type Compare[B Bytes] struct {
	Result, Target              int32
	Key, RangeEnd               B
	Version                     int64
	CreateRevision, ModRevision int64
	Value                       B
	Lease                       int64
}

// Op is etcdserverpb.RequestOp: one of its fields should be set. None set is etcd's "empty op";
// more than one cannot be sent to etcd (the protobuf field is a oneof), and is refused here.
type Op[B Bytes] struct {
	Range       *Range[B]
	Put         *Put[B]
	DeleteRange *DeleteRange[B]
	Txn         *Txn[B]
}

// Txn is etcdserverpb.TxnRequest.
type Txn[B Bytes] struct {
	Compare          []Compare[B]
	Success, Failure []Op[B]
}
