package store

// The request and response types mirror go.etcd.io/etcd/api/v3/etcdserverpb and mvccpb field for field, so
// that the gRPC layer converts them mechanically. Byte slices in requests are never retained: the store
// copies what it keeps. Responses are freshly allocated and belong to the caller, except Event and
// KeyValue values delivered on a watch stream, which are shared by every watcher that receives them and
// must be treated as read-only.

// KeyValue is one revision of a key, as mvccpb.KeyValue.
type KeyValue struct {
	Key            []byte
	CreateRevision int64
	ModRevision    int64
	Version        int64
	Value          []byte
	Lease          int64
}

// EventType says whether an event stored a key or deleted it.
type EventType int32

const (
	EventPut    EventType = 0
	EventDelete EventType = 1
)

func (t EventType) String() string {
	if t == EventDelete {
		return "DELETE"
	}
	return "PUT"
}

// Event is one change of one key. A DELETE event's Kv carries only Key and ModRevision (the deletion
// revision); the deleted value is in PrevKv when the watcher asked for it.
type Event struct {
	Type   EventType
	Kv     *KeyValue
	PrevKv *KeyValue
}

// IsCreate reports whether the event created its key (a PUT whose create and mod revisions agree).
func (e *Event) IsCreate() bool {
	return e.Type == EventPut && e.Kv.CreateRevision == e.Kv.ModRevision
}

// Header is the response header the store fills: the store revision the response reflects. The gRPC
// layer adds cluster_id, member_id and raft_term.
type Header struct {
	Revision int64
}

// SortOrder is RangeRequest.SortOrder.
type SortOrder int32

const (
	SortNone    SortOrder = 0
	SortAscend  SortOrder = 1
	SortDescend SortOrder = 2
)

// SortTarget is RangeRequest.SortTarget.
type SortTarget int32

const (
	SortByKey     SortTarget = 0
	SortByVersion SortTarget = 1
	SortByCreate  SortTarget = 2
	SortByMod     SortTarget = 3
	SortByValue   SortTarget = 4
)

// RangeRequest reads a key or a range, as etcdserverpb.RangeRequest. RangeEnd empty reads Key alone;
// RangeEnd "\x00" reads every key >= Key; otherwise [Key, RangeEnd).
type RangeRequest struct {
	Key               []byte
	RangeEnd          []byte
	Limit             int64
	Revision          int64
	SortOrder         SortOrder
	SortTarget        SortTarget
	Serializable      bool
	KeysOnly          bool
	CountOnly         bool
	MinModRevision    int64
	MaxModRevision    int64
	MinCreateRevision int64
	MaxCreateRevision int64
}

// RangeResponse is etcdserverpb.RangeResponse.
type RangeResponse struct {
	Header Header
	Kvs    []*KeyValue
	More   bool
	Count  int64
}

// PutRequest is etcdserverpb.PutRequest.
type PutRequest struct {
	Key         []byte
	Value       []byte
	Lease       int64
	PrevKv      bool
	IgnoreValue bool
	IgnoreLease bool
}

// PutResponse is etcdserverpb.PutResponse.
type PutResponse struct {
	Header Header
	PrevKv *KeyValue
}

// DeleteRangeRequest is etcdserverpb.DeleteRangeRequest; RangeEnd as in RangeRequest.
type DeleteRangeRequest struct {
	Key      []byte
	RangeEnd []byte
	PrevKv   bool
}

// DeleteRangeResponse is etcdserverpb.DeleteRangeResponse.
type DeleteRangeResponse struct {
	Header  Header
	Deleted int64
	PrevKvs []*KeyValue
}

// CompareResult is Compare.Result.
type CompareResult int32

const (
	CompareEqual    CompareResult = 0
	CompareGreater  CompareResult = 1
	CompareLess     CompareResult = 2
	CompareNotEqual CompareResult = 3
)

// CompareTarget is Compare.Target.
type CompareTarget int32

const (
	CompareVersion CompareTarget = 0
	CompareCreate  CompareTarget = 1
	CompareMod     CompareTarget = 2
	CompareValue   CompareTarget = 3
	CompareLease   CompareTarget = 4
)

// Compare is one txn guard, as etcdserverpb.Compare. Only the field that Target names is read.
// RangeEnd as in RangeRequest; over a range every key must satisfy the compare.
type Compare struct {
	Result         CompareResult
	Target         CompareTarget
	Key            []byte
	RangeEnd       []byte
	Version        int64
	CreateRevision int64
	ModRevision    int64
	Value          []byte
	Lease          int64
}

// RequestOp is one operation of a txn branch: exactly one field is set. An op with none set is
// rejected with ErrKeyNotFound, as etcd rejects an empty RequestOp.
type RequestOp struct {
	Range       *RangeRequest
	Put         *PutRequest
	DeleteRange *DeleteRangeRequest
	Txn         *TxnRequest
}

// ResponseOp holds the response of the RequestOp at the same position.
type ResponseOp struct {
	Range       *RangeResponse
	Put         *PutResponse
	DeleteRange *DeleteRangeResponse
	Txn         *TxnResponse
}

// TxnRequest is etcdserverpb.TxnRequest.
type TxnRequest struct {
	Compare []Compare
	Success []RequestOp
	Failure []RequestOp
}

// TxnResponse is etcdserverpb.TxnResponse.
type TxnResponse struct {
	Header    Header
	Succeeded bool
	Responses []ResponseOp
}

// CompactResponse is etcdserverpb.CompactionResponse.
type CompactResponse struct {
	Header Header
}

// LeaseGrantResponse is etcdserverpb.LeaseGrantResponse.
type LeaseGrantResponse struct {
	Header Header
	ID     int64
	TTL    int64
}

// LeaseRevokeResponse is etcdserverpb.LeaseRevokeResponse.
type LeaseRevokeResponse struct {
	Header Header
}

// LeaseKeepAliveResponse is etcdserverpb.LeaseKeepAliveResponse.
type LeaseKeepAliveResponse struct {
	Header Header
	ID     int64
	TTL    int64
}

// LeaseTimeToLiveResponse is etcdserverpb.LeaseTimeToLiveResponse.
type LeaseTimeToLiveResponse struct {
	Header     Header
	ID         int64
	TTL        int64
	GrantedTTL int64
	Keys       [][]byte
}

// LeaseLeasesResponse is etcdserverpb.LeaseLeasesResponse: lease IDs, soonest expiry first.
type LeaseLeasesResponse struct {
	Header Header
	Leases []int64
}

// WatchFilter drops one kind of event from a watch, as WatchCreateRequest.FilterType.
type WatchFilter int32

const (
	FilterNoPut    WatchFilter = 0
	FilterNoDelete WatchFilter = 1
)

// AutoWatchID asks the stream to pick the next free watch ID; InvalidWatchID answers a failed create
// and addresses a RequestProgress answer to the whole stream.
const (
	AutoWatchID    int64 = 0
	InvalidWatchID int64 = -1
)

// WatchRequest creates a watcher, as etcdserverpb.WatchCreateRequest. Key empty means "\x00";
// RangeEnd as in RangeRequest. StartRevision 0 means "from the next revision". Fragment is carried for
// the gRPC layer, which splits large responses; the store ignores it.
type WatchRequest struct {
	Key            []byte
	RangeEnd       []byte
	StartRevision  int64
	ProgressNotify bool
	Filters        []WatchFilter
	PrevKv         bool
	WatchID        int64
	Fragment       bool
}

// WatchResponse is one message on a watch stream, as etcdserverpb.WatchResponse without the cluster
// fields. Exactly one of these shapes:
//   - created: Created, the watch ID (InvalidWatchID with Canceled and CancelReason if the create failed)
//     and the current revision;
//   - events: one or more whole revisions of events in revision order, Revision the store revision the
//     response reflects;
//   - progress: no events, Revision the store revision, WatchID the watcher or InvalidWatchID for a
//     stream-wide RequestProgress;
//   - compacted: Canceled, CompactRevision the compact revision, Revision 0; nothing more follows for the
//     ID but the answer to a Cancel (the ID stays in use until then, as in etcd);
//   - canceled: Canceled after a Cancel, Revision the current revision; nothing more follows for the ID.
type WatchResponse struct {
	WatchID         int64
	Events          []*Event
	Revision        int64
	CompactRevision int64
	Created         bool
	Canceled        bool
	CancelReason    string
}

// IsProgressNotify reports whether the response is a progress notification, as clientv3 decides it.
func (r *WatchResponse) IsProgressNotify() bool {
	return len(r.Events) == 0 && !r.Canceled && !r.Created && r.CompactRevision == 0 && r.Revision != 0
}
