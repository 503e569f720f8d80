package etcd

import "github.com/listwatch/listwatch/etcdrules"

// definiteErrors are etcd's client-facing errors that refuse a request: one answered with any of
// them changed nothing. Any other failure leaves the outcome unknown.
var definiteErrors = map[string]error{}

func init() {
	for _, e := range []error{
		etcdrules.ErrEmptyKey, etcdrules.ErrKeyNotFound, etcdrules.ErrValueProvided, etcdrules.ErrLeaseProvided,
		etcdrules.ErrTooManyOps, etcdrules.ErrDuplicateKey, etcdrules.ErrInvalidSortOption, etcdrules.ErrCompacted,
		etcdrules.ErrFutureRev, etcdrules.ErrRequestTooLarge, etcdrules.ErrLeaseNotFound, etcdrules.ErrLeaseExists,
		etcdrules.ErrLeaseTTLTooLarge,
	} {
		definiteErrors[e.Error()] = e
	}
}

// IsDefiniteError reports whether msg is one of etcd's errors that mean the request changed nothing
// (for example "etcdserver: mvcc: required revision has been compacted"). A recorder marks every
// other failure as Unknown.
func IsDefiniteError(msg string) bool {
	_, ok := definiteErrors[msg]
	return ok
}
