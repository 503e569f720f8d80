package history

import (
	"github.com/listwatch/listwatch/store"
)

// shapeChecker tells the errors a request gets whatever the state, which the store finds before it
// reads anything (store.CheckRequest), under the reference store's limits.
type shapeChecker struct{ st *store.Store }

func (c *shapeChecker) close() {
	if c.st != nil {
		c.st.Close()
	}
}

func (c *shapeChecker) check(req *Request) error {
	if c.st == nil {
		c.st = newReferenceStore()
	}
	switch {
	case req.Range != nil:
		return c.st.CheckRequest(toStoreRange(req.Range))
	case req.Put != nil:
		return c.st.CheckRequest(toStorePut(req.Put))
	case req.DeleteRange != nil:
		return c.st.CheckRequest(toStoreDelete(req.DeleteRange))
	case req.Txn != nil:
		return c.st.CheckRequest(toStoreTxn(req.Txn))
	case req.LeaseGrant != nil && req.LeaseGrant.TTL > store.MaxLeaseTTL:
		return store.ErrLeaseTTLTooLarge
	}
	return nil
}
