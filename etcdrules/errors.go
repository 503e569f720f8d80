package etcdrules

import "errors"

// The errors carry the message a client of etcd's gRPC API reads (api/v3rpc/rpctypes/error.go), so
// that a caller matches them with errors.Is and a user reads what etcd would have said. A request
// refused with any of them changed nothing.
var (
	ErrEmptyKey          = errors.New("etcdserver: key is not provided")
	ErrKeyNotFound       = errors.New("etcdserver: key not found")
	ErrValueProvided     = errors.New("etcdserver: value is provided")
	ErrLeaseProvided     = errors.New("etcdserver: lease is provided")
	ErrTooManyOps        = errors.New("etcdserver: too many operations in txn request")
	ErrDuplicateKey      = errors.New("etcdserver: duplicate key given in txn request")
	ErrInvalidSortOption = errors.New("etcdserver: invalid sort option")
	ErrCompacted         = errors.New("etcdserver: mvcc: required revision has been compacted")
	ErrFutureRev         = errors.New("etcdserver: mvcc: required revision is a future revision")
	ErrRequestTooLarge   = errors.New("etcdserver: request is too large")
	ErrLeaseNotFound     = errors.New("etcdserver: requested lease not found")
	ErrLeaseExists       = errors.New("etcdserver: lease already exists")
	ErrLeaseTTLTooLarge  = errors.New("etcdserver: too large lease TTL")

	// The watch errors are etcd's mvcc wording (server/storage/mvcc/watcher.go), which is what a
	// failed watch create carries as its cancel_reason.
	ErrEmptyWatcherRange  = errors.New("mvcc: watcher range is empty")
	ErrWatcherDuplicateID = errors.New("mvcc: duplicate watch ID provided on the WatchStream")
	ErrWatcherNotExist    = errors.New("mvcc: watcher does not exist")

	// ErrInvalidRequestOp refuses a txn op with more than one request set, which etcd's protobuf
	// oneof cannot express; it keeps the wording listwatch's store always gave it.
	ErrInvalidRequestOp = errors.New("store: request op sets more than one request")
)
