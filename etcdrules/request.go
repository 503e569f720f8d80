package etcdrules

// Bytes is the byte-string type of a request's keys, range ends and values: []byte for the store,
// a string type for a recorded history. The rules read them without copying.
type Bytes interface{ ~string | ~[]byte }

// The types below are etcdserverpb's request messages and mvccpb's KeyValue, field for field, with
// the caller's byte-string type: listwatch's store instantiates them with []byte, the history
// checker with a string type whose JSON form is its history format (hence the JSON tags, which
// only the checker reads). A message of one instantiation converts to another field by field
// (Convert* below); filling one from etcdserverpb shares the byte slices.

// RangeRequest is etcdserverpb.RangeRequest. RangeEnd empty reads Key alone, "\x00" every key from
// Key on, otherwise [Key, RangeEnd).
type RangeRequest[B Bytes] struct {
	Key               B          `json:"key"`
	RangeEnd          B          `json:"range_end,omitempty"`
	Limit             int64      `json:"limit,omitempty"`
	Revision          int64      `json:"revision,omitempty"`
	SortOrder         SortOrder  `json:"sort_order,omitempty"`
	SortTarget        SortTarget `json:"sort_target,omitempty"`
	Serializable      bool       `json:"serializable,omitempty"`
	KeysOnly          bool       `json:"keys_only,omitempty"`
	CountOnly         bool       `json:"count_only,omitempty"`
	MinModRevision    int64      `json:"min_mod_revision,omitempty"`
	MaxModRevision    int64      `json:"max_mod_revision,omitempty"`
	MinCreateRevision int64      `json:"min_create_revision,omitempty"`
	MaxCreateRevision int64      `json:"max_create_revision,omitempty"`
}

// PutRequest is etcdserverpb.PutRequest.
type PutRequest[B Bytes] struct {
	Key         B     `json:"key"`
	Value       B     `json:"value,omitempty"`
	Lease       int64 `json:"lease,omitempty"`
	PrevKV      bool  `json:"prev_kv,omitempty"`
	IgnoreValue bool  `json:"ignore_value,omitempty"`
	IgnoreLease bool  `json:"ignore_lease,omitempty"`
}

// DeleteRangeRequest is etcdserverpb.DeleteRangeRequest; RangeEnd as in RangeRequest.
type DeleteRangeRequest[B Bytes] struct {
	Key      B    `json:"key"`
	RangeEnd B    `json:"range_end,omitempty"`
	PrevKV   bool `json:"prev_kv,omitempty"`
}

// Compare is etcdserverpb.Compare, one txn guard: of Version, CreateRevision, ModRevision, Value
// and Lease only the one Target names is part of the message. RangeEnd as in RangeRequest; over a
// range every key must satisfy the compare.
type Compare[B Bytes] struct {
	Result         CompareResult `json:"result"`
	Target         CompareTarget `json:"target"`
	Key            B             `json:"key"`
	RangeEnd       B             `json:"range_end,omitempty"`
	Version        int64         `json:"version,omitempty"`
	CreateRevision int64         `json:"create_revision,omitempty"`
	ModRevision    int64         `json:"mod_revision,omitempty"`
	Value          B             `json:"value,omitempty"`
	Lease          int64         `json:"lease,omitempty"`
}

// RequestOp is etcdserverpb.RequestOp, one operation of a txn branch: one of its fields should be
// set. None set is etcd's "empty op"; more than one cannot be sent to etcd (the protobuf field is a
// oneof), and is refused here.
type RequestOp[B Bytes] struct {
	Range       *RangeRequest[B]       `json:"range,omitempty"`
	Put         *PutRequest[B]         `json:"put,omitempty"`
	DeleteRange *DeleteRangeRequest[B] `json:"delete_range,omitempty"`
	Txn         *TxnRequest[B]         `json:"txn,omitempty"`
}

// TxnRequest is etcdserverpb.TxnRequest.
type TxnRequest[B Bytes] struct {
	Compare []Compare[B]   `json:"compare,omitempty"`
	Success []RequestOp[B] `json:"success,omitempty"`
	Failure []RequestOp[B] `json:"failure,omitempty"`
}

// KeyValue is mvccpb.KeyValue, one revision of a key.
type KeyValue[B Bytes] struct {
	Key            B     `json:"key"`
	CreateRevision int64 `json:"create_revision,omitempty"`
	ModRevision    int64 `json:"mod_revision,omitempty"`
	Version        int64 `json:"version,omitempty"`
	Value          B     `json:"value,omitempty"`
	Lease          int64 `json:"lease,omitempty"`
}

// WatchRequest is etcdserverpb.WatchCreateRequest. Key empty means "\x00"; RangeEnd as in
// RangeRequest. StartRevision 0 means "from the revision after the watch was created". WatchID is
// the stream's choice of ID (0: the next free one); a history does not record it.
type WatchRequest[B Bytes] struct {
	Key            B             `json:"key"`
	RangeEnd       B             `json:"range_end,omitempty"`
	StartRevision  int64         `json:"start_revision,omitempty"`
	PrevKV         bool          `json:"prev_kv,omitempty"`
	ProgressNotify bool          `json:"progress_notify,omitempty"`
	Filters        []WatchFilter `json:"filters,omitempty"`
	Fragment       bool          `json:"fragment,omitempty"`
	WatchID        int64         `json:"-"`
}
