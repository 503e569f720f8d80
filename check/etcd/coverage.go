package etcd

import "github.com/listwatch/listwatch/etcdrules"

// coverage counts what the history exercised: what its watches received, where its reads fell in
// the store's revision window, its compactions, and from the linearization found (if any) its
// lease expiries and gaps.
func (c *checker) coverage(res *Result) Coverage {
	var cov Coverage
	compacted := map[int64]int64{} // compaction revision -> when it returned
	for _, o := range c.h.Operations {
		if r := o.Request.Compact; r != nil && o.Response != nil {
			if t, ok := compacted[r.Revision]; !ok || o.Return < t {
				compacted[r.Revision] = o.Return
			}
		}
	}
	for _, o := range c.h.Operations {
		switch {
		case o.Request.Compact != nil:
			if o.Response != nil {
				cov.Compactions++
			} else if !o.Unknown {
				cov.RefusedCompactions++
			}
			continue
		case o.Unknown || !readsAtRevision(&o.Request):
			continue
		}
		switch {
		case o.Error == etcdrules.ErrCompacted.Error():
			cov.CompactedReads++
		case o.Error == etcdrules.ErrFutureRev.Error():
			cov.FutureReads++
		case o.Response != nil && o.Request.Range != nil:
			if o.Request.Range.Revision == o.Response.Revision {
				cov.CurrentReads++
			} else {
				cov.PastReads++
			}
		}
	}
	for _, w := range c.h.Watches {
		start := w.Request.StartRevision
		if t, ok := compacted[start]; ok && start > 0 && t < w.Call {
			cov.WatchesFromCompactRevision++
		}
		for _, r := range w.Responses {
			switch {
			case r.Created && start > 0 && r.Revision >= start:
				cov.WatchesFromHistory++
			case r.IsCompacted():
				cov.CompactionAnswers++
			case r.IsProgressNotify():
				cov.ProgressNotifications++
			}
		}
	}
	for _, op := range res.lin {
		if op.index < 0 && op.req != nil && op.req.LeaseRevoke != nil {
			cov.LeaseExpiries++
		}
	}
	cov.Gaps = len(res.Gaps)
	for _, g := range res.Gaps {
		cov.GapRevisions += int(g.To - g.From + 1)
	}
	return cov
}

// readsAtRevision reports whether a request reads at an explicit revision: a range, or a txn with a
// range that names one.
func readsAtRevision(req *Request) bool {
	if req.Range != nil {
		return req.Range.Revision != 0
	}
	if req.Txn == nil {
		return false
	}
	var walk func(t *TxnRequest) bool
	walk = func(t *TxnRequest) bool {
		for _, ops := range [][]RequestOp{t.Success, t.Failure} {
			for _, op := range ops {
				if op.Range != nil && op.Range.Revision != 0 || op.Txn != nil && walk(op.Txn) {
					return true
				}
			}
		}
		return false
	}
	return walk(req.Txn)
}
