// Package etcdrules holds etcd v3's request vocabulary and what etcd v3.7 decides about a request
// before it reads any state: the request and response value types, its client-facing error values,
// the request-shape rules of its v3 API and the rules a range reads from its request. It is a
// stateless leaf (it keeps nothing, reads no store and never modifies a request it checks) that
// listwatch's store (which enforces the rules), its gRPC layer (which converts etcdserverpb to and
// from the types) and the history checker (which records and judges the types and predicts the
// errors a recorded request must have got) all use, so that a request or response is defined once
// and the checker's model never imports what it judges. It imports none of listwatch's packages.
//
// # API
//
//   - The errors: ErrEmptyKey, ErrKeyNotFound, ErrValueProvided, ErrLeaseProvided, ErrTooManyOps,
//     ErrDuplicateKey, ErrInvalidSortOption, ErrCompacted, ErrFutureRev, ErrRequestTooLarge,
//     ErrLeaseNotFound, ErrLeaseExists, ErrLeaseTTLTooLarge, the watch errors ErrEmptyWatcherRange,
//     ErrWatcherDuplicateID and ErrWatcherNotExist, and ErrInvalidRequestOp.
//   - The types, etcdserverpb's and mvccpb's messages field for field, generic over the caller's
//     byte-string type (Bytes: []byte for the store, a string type for the checker): RangeRequest,
//     PutRequest, DeleteRangeRequest, TxnRequest (with Compare and RequestOp), WatchRequest,
//     KeyValue, Event, RangeResponse, PutResponse, DeleteRangeResponse, TxnResponse (with
//     ResponseOp), LeaseGrantResponse, LeaseKeepAliveResponse and ResponseHeader; the enums
//     EventType, WatchFilter, SortOrder, SortTarget, CompareResult, CompareTarget, whose text is
//     their protobuf name. The JSON tags are the checker's history format; headers and watch IDs
//     are not part of it.
//   - The requests' Check methods; CheckCompact and CheckLeaseGrant. A range's FetchLimit, Sort,
//     HasRevisionFilters and Keeps; a compare's Holds. Limits (zero value: etcd's defaults, DefaultMaxTxnOps and
//     DefaultMaxRequestBytes) bound txns and proposals; MaxLeaseTTL bounds lease TTLs.
//
// # Invariants
//
//   - Wording. Every error carries the message etcd's gRPC API sends for the same condition
//     (api/v3rpc/rpctypes/error.go; storage/mvcc/watcher.go for the watch errors), so that a
//     message recorded from a real etcd is matched by value (TestErrorsAreEtcds).
//   - Ranges. A range with an empty key fails with ErrEmptyKey; one with a sort order or target
//     that etcdserverpb does not define fails with ErrInvalidSortOption
//     (v3rpc/key.go checkRangeRequest; TestRangeRules).
//   - Puts and deletes. An empty key fails with ErrEmptyKey; a put with ignore_value and a value,
//     ErrValueProvided; with ignore_lease and a lease, ErrLeaseProvided (v3rpc/key.go
//     checkPutRequest, checkDeleteRequest; TestPutRules, TestDeleteRules).
//   - Txns. The compares and each branch count against MaxTxnOps, a nested txn against what its
//     parent leaves (ErrTooManyOps); an empty compare key or op key is ErrEmptyKey, an empty op
//     ErrKeyNotFound, an op with two requests ErrInvalidRequestOp; a branch that puts one key twice,
//     or puts a key a delete of the same branch covers, nested txns included, fails with
//     ErrDuplicateKey, except that the then and else branches of a nested txn may put the same key
//     and that a delete whose range end is "\x00" is the empty interval (etcd's quirk: such a txn
//     may put and delete one key in one revision) (v3rpc/key.go checkTxnRequest, checkIntervals;
//     TestTxnRules).
//   - Size. A write whose InternalRaftRequest would exceed MaxRequestBytes fails with
//     ErrRequestTooLarge (etcdserver/v3_server.go processInternalRaftRequestOnce); the size is the
//     protobuf size etcd marshals, with a 9-byte request ID (TestSizeIsTheProposalSize,
//     TestSizeLimit). A txn of ranges only, in both branches, is served without raft
//     (etcdserver/v3_server.go Txn, txn/txn.go IsTxnReadonly) and has no size limit here; a nested
//     txn makes it a write (TestTxnRules "read-only, large", "nested read is a write").
//   - Leases. A grant with a TTL above MaxLeaseTTL fails with ErrLeaseTTLTooLarge
//     (lease/lessor.go Grant; TestLeaseGrantRules).
//   - Order. The first rule a request breaks, in etcd's order, gives its error: shape, then
//     intervals, then size (TestTxnRules).
//   - Enums. Each enum value's text is its name in etcd's protobuf definitions and reads back as
//     the value; an out-of-range sort order or target is kept as a number, any other enum out of
//     range cannot be written (TestEnumNamesAreProtobufs, TestEnumsOutOfRange). Response headers
//     and watch IDs are left out of JSON (TestHeadersAreNotInJSON).
//   - Range reads. A range reads Limit+1 keys in key order, all when it asks for another order (as
//     given: SortNone with a non-key target keeps the limit) or filters by revision; a non-key
//     target without an order sorts ascending; the revision filters are inclusive bounds
//     (txn/range.go rangeLimit, executeRange; TestRangeReadRules).
//   - Compares. A compare holds as its result says of how the key compares to its value; a result
//     etcdserverpb does not define holds (txn/txn.go compareKV; TestCompareHolds).
package etcdrules
