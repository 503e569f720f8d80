package etcd

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/etcdrules"
)

// Bytes is a byte string: a key, a range end or a value. In JSON it is a string when it is valid UTF-8
// and {"base64": "..."} (standard encoding, with padding) otherwise; both forms are accepted on input.
type Bytes string

// MarshalJSON writes b as a JSON string, or as {"base64": ...} if b is not valid UTF-8.
func (b Bytes) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(b)) {
		return json.Marshal(string(b))
	}
	return json.Marshal(struct {
		Base64 string `json:"base64"`
	}{base64.StdEncoding.EncodeToString([]byte(b))})
}

// UnmarshalJSON reads a JSON string or a {"base64": ...} object.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*b = Bytes(s)
		return nil
	}
	var obj struct {
		Base64 *string `json:"base64"`
	}
	if err := json.Unmarshal(data, &obj); err != nil || obj.Base64 == nil {
		return fmt.Errorf("bytes must be a JSON string or {\"base64\": string}, got %s", data)
	}
	raw, err := base64.StdEncoding.DecodeString(*obj.Base64)
	if err != nil {
		return fmt.Errorf("bytes: invalid base64: %w", err)
	}
	*b = Bytes(raw)
	return nil
}

// History is what a set of clients did against one etcd-compatible store: every KV and lease
// request with its outcome, and every watch with the responses it received. Times are int64
// nanoseconds from any origin shared by the whole history, taken from a monotonic clock.
//
// A closed history (StartRevision 0) began on an empty store at revision 1 that nobody else wrote
// to. An open history (StartRevision > 0) began at StartRevision, with Initial the state of the
// keys under Prefix at that revision: every key its requests and watches name lies under Prefix,
// and other clients (or the store itself) may have written outside it meanwhile, so that
// revisions advance by more than the history's own writes (gaps).
type History struct {
	// Prefix bounds the keys an open history names; empty: the whole keyspace.
	Prefix Bytes `json:"prefix,omitempty"`
	// StartRevision is the revision at which Initial was read; 0 for a closed history.
	StartRevision int64 `json:"start_revision,omitempty"`
	// Initial is the state of the keys under Prefix at StartRevision, in key order.
	Initial    []KeyValue  `json:"initial,omitempty"`
	Operations []Operation `json:"operations"`
	Watches    []Watch     `json:"watches,omitempty"`
	// Run describes the run that recorded the history (the target's version, which decides which
	// violations are known bugs); nil for a history written by hand. Validate refuses one of
	// another schema version.
	Run *check.Run `json:"run,omitempty"`
}

// Open reports whether the history began at a StartRevision on a store others may write to.
func (h *History) Open() bool { return h.StartRevision > 0 }

// PrefixEnd is the end of the range of keys under prefix (clientv3.GetPrefixRangeEnd): "\x00",
// every key, when prefix is empty or all 0xff.
func PrefixEnd(prefix Bytes) Bytes {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return Bytes(b[:i+1])
		}
	}
	return "\x00"
}

// Operation is one request and its outcome. Exactly one of Response and Error is set. An error is a
// definite failure (the request changed nothing) unless Unknown is set: then the request may or may
// not have taken effect (a timeout, a lost connection).
type Operation struct {
	// Client is the lane the operation is drawn in; an operation never overlaps another of its client.
	Client int `json:"client"`
	// Call is when the request was sent, Return when its outcome was known.
	Call   int64 `json:"call"`
	Return int64 `json:"return"`

	Request  Request   `json:"request"`
	Response *Response `json:"response,omitempty"`
	// Error is the error message; for a definite failure, etcd's message (for example
	// "etcdserver: mvcc: required revision has been compacted").
	Error   string `json:"error,omitempty"`
	Unknown bool   `json:"unknown,omitempty"`
}

// Request is one KV or lease request: exactly one field is set.
type Request struct {
	Range          *RangeRequest          `json:"range,omitempty"`
	Put            *PutRequest            `json:"put,omitempty"`
	DeleteRange    *DeleteRangeRequest    `json:"delete_range,omitempty"`
	Txn            *TxnRequest            `json:"txn,omitempty"`
	Compact        *CompactRequest        `json:"compact,omitempty"`
	LeaseGrant     *LeaseGrantRequest     `json:"lease_grant,omitempty"`
	LeaseRevoke    *LeaseRevokeRequest    `json:"lease_revoke,omitempty"`
	LeaseKeepAlive *LeaseKeepAliveRequest `json:"lease_keep_alive,omitempty"`
}

// CompactRequest is etcdserverpb.CompactionRequest.
type CompactRequest struct {
	Revision int64 `json:"revision"`
	Physical bool  `json:"physical,omitempty"`
}

// LeaseGrantRequest is etcdserverpb.LeaseGrantRequest; ID 0 lets the server choose.
type LeaseGrantRequest struct {
	ID  int64 `json:"id,omitempty"`
	TTL int64 `json:"ttl"`
}

// LeaseRevokeRequest is etcdserverpb.LeaseRevokeRequest.
type LeaseRevokeRequest struct {
	ID int64 `json:"id"`
}

// LeaseKeepAliveRequest is one etcdserverpb.LeaseKeepAliveRequest (clientv3 KeepAliveOnce).
type LeaseKeepAliveRequest struct {
	ID int64 `json:"id"`
}

// Response is the successful answer to a Request: Revision is its header revision, and the field
// named like the request's holds the rest (a nil field reads as its zero value).
type Response struct {
	Revision       int64                   `json:"revision"`
	Range          *RangeResponse          `json:"range,omitempty"`
	Put            *PutResponse            `json:"put,omitempty"`
	DeleteRange    *DeleteRangeResponse    `json:"delete_range,omitempty"`
	Txn            *TxnResponse            `json:"txn,omitempty"`
	LeaseGrant     *LeaseGrantResponse     `json:"lease_grant,omitempty"`
	LeaseKeepAlive *LeaseKeepAliveResponse `json:"lease_keep_alive,omitempty"`
}

// Watch is one watch request and the responses it received, in order. A watch that clientv3 resumed
// after a reconnection is still one watch: its guarantees hold across the break.
type Watch struct {
	Client    int             `json:"client"`
	Call      int64           `json:"call"`
	Request   WatchRequest    `json:"request"`
	Responses []WatchResponse `json:"responses,omitempty"`
}

// WatchResponse is one response a watch received (fragments joined), Time when it was received and
// Revision its header revision. A response with no events that is neither created, canceled nor
// compacted and has a revision is a progress notification, as clientv3 decides.
type WatchResponse struct {
	Time            int64   `json:"time"`
	Revision        int64   `json:"revision"`
	Events          []Event `json:"events,omitempty"`
	Created         bool    `json:"created,omitempty"`
	Canceled        bool    `json:"canceled,omitempty"`
	CompactRevision int64   `json:"compact_revision,omitempty"`
	CancelReason    string  `json:"cancel_reason,omitempty"`
}

// IsProgressNotify reports whether r is a progress notification (clientv3 WatchResponse.IsProgressNotify).
func (r *WatchResponse) IsProgressNotify() bool {
	return len(r.Events) == 0 && !r.Canceled && !r.Created && r.CompactRevision == 0 && r.Revision != 0
}

// IsCompacted reports whether r cancels its watch because the revision it needed was compacted.
func (r *WatchResponse) IsCompacted() bool { return r.CompactRevision != 0 }

// The request and response messages, KeyValue, Event and the enums are package etcdrules', with
// Bytes: the store and the gRPC layer use the same types with byte slices. Their JSON form is the
// history format doc.go describes (an enum is its protobuf name; a sort order or target out of
// range, which etcd answers with an error the history may record, is a number). Response headers
// are not part of it: Response.Revision is the top-level one, nested ones are not recorded. A lease
// grant's TTL is not checked (it depends on the server's minimum TTL), nor a keep-alive's TTL or
// header revision (filled when the answer is sent, not when it takes effect).
type (
	KeyValue           = etcdrules.KeyValue[Bytes]
	Event              = etcdrules.Event[Bytes]
	RangeRequest       = etcdrules.RangeRequest[Bytes]
	PutRequest         = etcdrules.PutRequest[Bytes]
	DeleteRangeRequest = etcdrules.DeleteRangeRequest[Bytes]
	Compare            = etcdrules.Compare[Bytes]
	RequestOp          = etcdrules.RequestOp[Bytes]
	TxnRequest         = etcdrules.TxnRequest[Bytes]
	WatchRequest       = etcdrules.WatchRequest[Bytes]

	RangeResponse          = etcdrules.RangeResponse[Bytes]
	PutResponse            = etcdrules.PutResponse[Bytes]
	DeleteRangeResponse    = etcdrules.DeleteRangeResponse[Bytes]
	TxnResponse            = etcdrules.TxnResponse[Bytes]
	ResponseOp             = etcdrules.ResponseOp[Bytes]
	LeaseGrantResponse     = etcdrules.LeaseGrantResponse
	LeaseKeepAliveResponse = etcdrules.LeaseKeepAliveResponse

	EventType     = etcdrules.EventType
	WatchFilter   = etcdrules.WatchFilter
	SortOrder     = etcdrules.SortOrder
	SortTarget    = etcdrules.SortTarget
	CompareResult = etcdrules.CompareResult
	CompareTarget = etcdrules.CompareTarget
)

// The enums' values, etcdrules' under the history's names.
const (
	Put    = etcdrules.EventPut
	Delete = etcdrules.EventDelete

	FilterNoPut    = etcdrules.FilterNoPut
	FilterNoDelete = etcdrules.FilterNoDelete

	SortNone    = etcdrules.SortNone
	SortAscend  = etcdrules.SortAscend
	SortDescend = etcdrules.SortDescend

	SortByKey     = etcdrules.SortByKey
	SortByVersion = etcdrules.SortByVersion
	SortByCreate  = etcdrules.SortByCreate
	SortByMod     = etcdrules.SortByMod
	SortByValue   = etcdrules.SortByValue

	CompareEqual    = etcdrules.CompareEqual
	CompareGreater  = etcdrules.CompareGreater
	CompareLess     = etcdrules.CompareLess
	CompareNotEqual = etcdrules.CompareNotEqual

	CompareVersion = etcdrules.CompareVersion
	CompareCreate  = etcdrules.CompareCreate
	CompareMod     = etcdrules.CompareMod
	CompareValue   = etcdrules.CompareValue
	CompareLease   = etcdrules.CompareLease
)
