package etcd

import "github.com/listwatch/listwatch/etcdrules"

// shapeError returns the error etcd gives req whatever the state: the checks v3rpc and the lessor
// make before reading anything, at etcd's default limits. The rules are package etcdrules', whose
// request types the history's are.
func shapeError(req *Request) error {
	var limits etcdrules.Limits
	switch {
	case req.Range != nil:
		return req.Range.Check()
	case req.Put != nil:
		return req.Put.Check(limits)
	case req.DeleteRange != nil:
		return req.DeleteRange.Check(limits)
	case req.Txn != nil:
		return req.Txn.Check(limits)
	case req.Compact != nil:
		return etcdrules.CheckCompact(req.Compact.Revision, limits)
	case req.LeaseGrant != nil:
		return etcdrules.CheckLeaseGrant(req.LeaseGrant.TTL)
	}
	return nil
}
