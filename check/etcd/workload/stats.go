package workload

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/listwatch/listwatch/check"
)

// Outcome is how a request ended: check's.
type Outcome = check.Outcome

// The outcomes, as check has them. Conflict is a txn whose compares failed: a create that found its
// key, an update or a delete that lost a race, a compactor that lost the compare-and-swap; Failed,
// a definite error (etcd.IsDefiniteError).
const (
	OK          = check.OK
	Conflict    = check.Conflict
	Failed      = check.Failed
	Unknown     = check.Unknown
	numOutcomes = check.NumOutcomes
)

// Stats counts what a workload does; it is safe for concurrent use and its zero value is ready.
type Stats struct {
	operations, failed, unknown          atomic.Int64
	watches, events, progress, compacted atomic.Int64
	revision                             atomic.Int64

	mu     sync.Mutex
	byName map[string]*[numOutcomes]int64
}

func (s *Stats) countOp(name string, o Outcome) {
	s.operations.Add(1)
	switch o {
	case Failed:
		s.failed.Add(1)
	case Unknown:
		s.unknown.Add(1)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byName == nil {
		s.byName = map[string]*[numOutcomes]int64{}
	}
	c := s.byName[name]
	if c == nil {
		c = new([numOutcomes]int64)
		s.byName[name] = c
	}
	c[o]++
}

// Snapshot is what a workload has done so far.
type Snapshot struct {
	// Operations counts every request; Failed and Unknown those with that outcome.
	Operations, Failed, Unknown int64
	// Watches counts the watches opened, WatchEvents the events they received,
	// ProgressNotifications the progress notifications and Compacted the compaction answers.
	Watches, WatchEvents, ProgressNotifications, Compacted int64
	// Revision is the highest header revision seen.
	Revision int64
	// ByName counts the requests by what they were for (create, update, list page, compact...)
	// and outcome, in the order of NameOrder.
	ByName []NameCount
}

// NameCount is how the requests of one name ended, indexed by Outcome: check's.
type NameCount = check.NameCount

// NameOrder is the order Snapshot.ByName lists request names in; other names follow, sorted.
var NameOrder = []string{
	"create", "get", "update", "delete", "list", // k8s
	"range", "put", "delete-range", "txn", // etcd
	"lease-grant", "lease-revoke", "lease-keepalive", "watch-list", "compact-txn", "compact", "final-read",
}

// Snapshot reads the counters.
func (s *Stats) Snapshot() Snapshot {
	snap := Snapshot{Operations: s.operations.Load(), Failed: s.failed.Load(), Unknown: s.unknown.Load(),
		Watches: s.watches.Load(), WatchEvents: s.events.Load(), ProgressNotifications: s.progress.Load(),
		Compacted: s.compacted.Load(), Revision: s.revision.Load()}
	s.mu.Lock()
	for name, c := range s.byName {
		snap.ByName = append(snap.ByName, NameCount{Name: name, Outcomes: *c})
	}
	s.mu.Unlock()
	rank := func(name string) int {
		if i := slices.Index(NameOrder, name); i >= 0 {
			return i
		}
		return len(NameOrder)
	}
	slices.SortFunc(snap.ByName, func(a, b NameCount) int {
		if ra, rb := rank(a.Name), rank(b.Name); ra != rb {
			return ra - rb
		}
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	return snap
}
