package etcd

import (
	"fmt"

	"github.com/listwatch/listwatch/check"
)

// requestNames are the request types Counts counts, in the order it lists them.
var requestNames = []string{"range", "put", "delete_range", "txn", "compact", "lease_grant", "lease_revoke", "lease_keep_alive"}

// Counts counts the history's operations by request type and outcome: a txn whose compares
// failed is a conflict, a request with an error failed, one without an answer unknown.
func (h *History) Counts() []check.NameCount {
	return check.CountNames(requestNames, len(h.Operations), func(i int) int {
		r := &h.Operations[i].Request
		for j, set := range []bool{r.Range != nil, r.Put != nil, r.DeleteRange != nil, r.Txn != nil,
			r.Compact != nil, r.LeaseGrant != nil, r.LeaseRevoke != nil, r.LeaseKeepAlive != nil} {
			if set {
				return j
			}
		}
		return 0
	}, func(i int) check.Outcome {
		op := &h.Operations[i]
		switch {
		case op.Unknown:
			return check.Unknown
		case op.Error != "":
			return check.Failed
		case op.Response != nil && op.Response.Txn != nil && !op.Response.Txn.Succeeded:
			return check.Conflict
		}
		return check.OK
	})
}

// WatchCounts is what a history's watches received, and how many serializable ranges it answered.
type WatchCounts struct {
	Watches, Responses, EventResponses, Events, Progress, Compacted, Serializable int
}

// CountWatches counts what h's watches received.
func CountWatches(h *History) WatchCounts {
	c := WatchCounts{Watches: len(h.Watches)}
	for _, w := range h.Watches {
		for _, r := range w.Responses {
			c.Responses++
			c.Events += len(r.Events)
			switch {
			case len(r.Events) > 0:
				c.EventResponses++
			case r.IsCompacted():
				c.Compacted++
			case r.IsProgressNotify():
				c.Progress++
			}
		}
	}
	for _, op := range h.Operations {
		if op.Request.Range != nil && op.Request.Range.Serializable && op.Response != nil {
			c.Serializable++
		}
	}
	return c
}

// CheckedOver says what g was checked over in h, checked into res: "-" without a history (only
// the scenarios ran), "skipped: no linearization" for a guarantee that needs one, else how many
// requests, events, watches... the guarantee was judged on.
func CheckedOver(g check.Info, h *History, res *Result) string {
	switch {
	case h == nil:
		return "-"
	case g.Skipped(res.Verdict):
		return "skipped: no linearization"
	}
	c := CountWatches(h)
	switch g.Guarantee {
	case Linearizable:
		return fmt.Sprintf("%d requests", len(h.Operations))
	case Serializable:
		return fmt.Sprintf("%d serializable ranges", c.Serializable)
	case Atomic:
		return fmt.Sprintf("%d responses with events", c.EventResponses)
	case Bookmarkable:
		return fmt.Sprintf("%d progress notifications", c.Progress)
	case Resumable, Reliable:
		return fmt.Sprintf("%d watches", c.Watches)
	case Compaction:
		return fmt.Sprintf("%d watches, %d compaction answers", c.Watches, c.Compacted)
	}
	return fmt.Sprintf("%d events", c.Events)
}

// Add adds o's counts to c.
func (c *Coverage) Add(o Coverage) {
	c.ProgressNotifications += o.ProgressNotifications
	c.CompactionAnswers += o.CompactionAnswers
	c.CompactedReads += o.CompactedReads
	c.CurrentReads += o.CurrentReads
	c.PastReads += o.PastReads
	c.FutureReads += o.FutureReads
	c.Compactions += o.Compactions
	c.RefusedCompactions += o.RefusedCompactions
	c.WatchesFromHistory += o.WatchesFromHistory
	c.WatchesFromCompactRevision += o.WatchesFromCompactRevision
	c.LeaseExpiries += o.LeaseExpiries
	c.Gaps += o.Gaps
	c.GapRevisions += o.GapRevisions
}

// Counts lists what a run should exercise, with how often c did: fragments counts the fragmented
// watch responses, which the scenarios count and a history does not.
func (c Coverage) Counts(fragments int) []check.Count {
	return []check.Count{
		{Name: "progress notifications", N: c.ProgressNotifications},
		{Name: "compaction answers", N: c.CompactionAnswers},
		{Name: "fragmented responses", N: fragments},
		{Name: "lease expiries", N: c.LeaseExpiries},
		{Name: "reads at a future revision", N: c.FutureReads},
		{Name: "reads at the current revision", N: c.CurrentReads},
		{Name: "reads at a past revision", N: c.PastReads},
		{Name: "reads at a compacted revision", N: c.CompactedReads},
		{Name: "compactions", N: c.Compactions},
		{Name: "watches from a compact revision", N: c.WatchesFromCompactRevision},
		{Name: "watches catching up from history", N: c.WatchesFromHistory},
	}
}
