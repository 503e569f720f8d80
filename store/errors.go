package store

import (
	"errors"

	"github.com/listwatch/listwatch/etcdrules"
)

// The sentinel errors carry the message a client of etcd's gRPC API sees (rpctypes), so that a caller
// can match them with errors.Is and a user reads what etcd would have said. A request that fails with
// any of them has changed nothing. They are package etcdrules' values, which the checker of
// recorded histories shares: errors.Is matches either name.
var (
	ErrEmptyKey          = etcdrules.ErrEmptyKey
	ErrKeyNotFound       = etcdrules.ErrKeyNotFound
	ErrValueProvided     = etcdrules.ErrValueProvided
	ErrLeaseProvided     = etcdrules.ErrLeaseProvided
	ErrTooManyOps        = etcdrules.ErrTooManyOps
	ErrDuplicateKey      = etcdrules.ErrDuplicateKey
	ErrInvalidSortOption = etcdrules.ErrInvalidSortOption
	ErrCompacted         = etcdrules.ErrCompacted
	ErrFutureRev         = etcdrules.ErrFutureRev
	ErrRequestTooLarge   = etcdrules.ErrRequestTooLarge
	ErrLeaseNotFound     = etcdrules.ErrLeaseNotFound
	ErrLeaseExists       = etcdrules.ErrLeaseExists
	ErrLeaseTTLTooLarge  = etcdrules.ErrLeaseTTLTooLarge

	// The watch errors are etcd's mvcc wording, which is what a failed create carries as cancel_reason.
	ErrEmptyWatcherRange  = etcdrules.ErrEmptyWatcherRange
	ErrWatcherDuplicateID = etcdrules.ErrWatcherDuplicateID
	ErrWatcherNotExist    = etcdrules.ErrWatcherNotExist

	// ErrStreamClosed is returned by calls on a closed WatchStream; ErrClosed by calls on a closed Store.
	ErrStreamClosed = errors.New("store: watch stream is closed")
	ErrClosed       = errors.New("store: closed")

	// ErrInvalidRequestOp is returned for a RequestOp with more than one request set, which etcd's
	// protobuf oneof cannot express.
	ErrInvalidRequestOp = etcdrules.ErrInvalidRequestOp
)
