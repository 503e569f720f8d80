package etcdrules

// The response types are etcdserverpb's and mvccpb's, field for field, with the caller's
// byte-string type, as the request types are. Header is the part of etcdserverpb.ResponseHeader a
// store fills; a recorded history does not keep it (its JSON tag is "-"): a history records the
// top-level header revision once per operation and nested headers not at all.

// ResponseHeader is the part of etcdserverpb.ResponseHeader a store fills: the store revision the
// response reflects. The gRPC layer adds cluster_id, member_id and raft_term.
type ResponseHeader struct {
	Revision int64
}

// RangeResponse is etcdserverpb.RangeResponse.
type RangeResponse[B Bytes] struct {
	Header ResponseHeader `json:"-"`
	Kvs    []KeyValue[B]  `json:"kvs,omitempty"`
	More   bool           `json:"more,omitempty"`
	Count  int64          `json:"count,omitempty"`
}

// PutResponse is etcdserverpb.PutResponse.
type PutResponse[B Bytes] struct {
	Header ResponseHeader `json:"-"`
	PrevKV *KeyValue[B]   `json:"prev_kv,omitempty"`
}

// DeleteRangeResponse is etcdserverpb.DeleteRangeResponse.
type DeleteRangeResponse[B Bytes] struct {
	Header  ResponseHeader `json:"-"`
	Deleted int64          `json:"deleted,omitempty"`
	PrevKVs []KeyValue[B]  `json:"prev_kvs,omitempty"`
}

// TxnResponse is etcdserverpb.TxnResponse.
type TxnResponse[B Bytes] struct {
	Header    ResponseHeader  `json:"-"`
	Succeeded bool            `json:"succeeded,omitempty"`
	Responses []ResponseOp[B] `json:"responses,omitempty"`
}

// ResponseOp is etcdserverpb.ResponseOp: it answers the RequestOp at the same position, and
// exactly one field is set.
type ResponseOp[B Bytes] struct {
	Range       *RangeResponse[B]       `json:"range,omitempty"`
	Put         *PutResponse[B]         `json:"put,omitempty"`
	DeleteRange *DeleteRangeResponse[B] `json:"delete_range,omitempty"`
	Txn         *TxnResponse[B]         `json:"txn,omitempty"`
}

// LeaseGrantResponse is etcdserverpb.LeaseGrantResponse.
type LeaseGrantResponse struct {
	Header ResponseHeader `json:"-"`
	ID     int64          `json:"id"`
	TTL    int64          `json:"ttl,omitempty"`
}

// LeaseKeepAliveResponse is etcdserverpb.LeaseKeepAliveResponse.
type LeaseKeepAliveResponse struct {
	Header ResponseHeader `json:"-"`
	ID     int64          `json:"id"`
	TTL    int64          `json:"ttl,omitempty"`
}

// Event is mvccpb.Event, one change of one key. A DELETE event's Kv carries only Key and
// ModRevision (the deletion revision); the deleted value is in PrevKV when the watcher asked for
// it.
type Event[B Bytes] struct {
	Type   EventType    `json:"type"`
	Kv     KeyValue[B]  `json:"kv"`
	PrevKV *KeyValue[B] `json:"prev_kv,omitempty"`
}

// IsCreate reports whether the event created its key: a PUT whose create and mod revisions agree.
func (e *Event[B]) IsCreate() bool {
	return e.Type == EventPut && e.Kv.CreateRevision == e.Kv.ModRevision
}
