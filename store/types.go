package store

import "github.com/listwatch/listwatch/etcdrules"

// The request and response types, KeyValue and Event are package etcdrules' etcd messages with byte
// slices, shared with the gRPC layer and the history checker; the enums they carry
// (etcdrules.SortOrder, etcdrules.CompareResult, ...) and their values are etcdrules'. The store's
// own response types below mirror etcdserverpb and mvccpb field for field as well, so that the gRPC
// layer converts all of them mechanically. Byte slices in requests are never retained: the store
// copies what it keeps. Responses are freshly allocated and belong to the caller, except Events (and
// their KeyValues) delivered on a watch stream, which are shared by every watcher that receives them
// and must be treated as read-only.
//
// The aliases name etcdrules' types as the store's API has them. A RequestOp with no request set is
// rejected with ErrKeyNotFound, as etcd rejects an empty RequestOp; a WatchRequest's Fragment is
// carried for the gRPC layer, which splits large responses, and the store ignores it; Header is the
// part of the response header the store fills (the revision), the gRPC layer adds the rest.
type (
	KeyValue           = etcdrules.KeyValue[[]byte]
	Event              = etcdrules.Event[[]byte]
	RangeRequest       = etcdrules.RangeRequest[[]byte]
	PutRequest         = etcdrules.PutRequest[[]byte]
	DeleteRangeRequest = etcdrules.DeleteRangeRequest[[]byte]
	Compare            = etcdrules.Compare[[]byte]
	RequestOp          = etcdrules.RequestOp[[]byte]
	TxnRequest         = etcdrules.TxnRequest[[]byte]
	WatchRequest       = etcdrules.WatchRequest[[]byte]

	Header                 = etcdrules.ResponseHeader
	RangeResponse          = etcdrules.RangeResponse[[]byte]
	PutResponse            = etcdrules.PutResponse[[]byte]
	DeleteRangeResponse    = etcdrules.DeleteRangeResponse[[]byte]
	TxnResponse            = etcdrules.TxnResponse[[]byte]
	ResponseOp             = etcdrules.ResponseOp[[]byte]
	LeaseGrantResponse     = etcdrules.LeaseGrantResponse
	LeaseKeepAliveResponse = etcdrules.LeaseKeepAliveResponse
)

// CompactResponse is etcdserverpb.CompactionResponse.
type CompactResponse struct {
	Header Header
}

// LeaseRevokeResponse is etcdserverpb.LeaseRevokeResponse.
type LeaseRevokeResponse struct {
	Header Header
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

// AutoWatchID asks the stream to pick the next free watch ID; InvalidWatchID answers a failed create
// and addresses a RequestProgress answer to the whole stream.
const (
	AutoWatchID    int64 = 0
	InvalidWatchID int64 = -1
)

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
