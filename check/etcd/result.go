package etcd

import (
	"fmt"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/listwatch/listwatch/check"
)

// Guarantee names a property Check verifies; doc.go defines each one exactly.
type Guarantee = check.Guarantee

// The guarantees. Linearizable and Serializable are about KV operations, the others about watches.
const (
	Linearizable  Guarantee = "linearizable"
	Serializable  Guarantee = "serializable"
	Filter        Guarantee = "filter"
	Ordered       Guarantee = "ordered"
	Unique        Guarantee = "unique"
	Atomic        Guarantee = "atomic"
	Bookmarkable  Guarantee = "bookmarkable"
	FirstRevision Guarantee = "first_revision"
	Resumable     Guarantee = "resumable"
	Reliable      Guarantee = "reliable"
	IsCreate      Guarantee = "is_create"
	PrevKV        Guarantee = "prev_kv"
	Genuine       Guarantee = "genuine"
	Compaction    Guarantee = "compaction"
)

// Guarantees lists every guarantee in doc.go's order, with what check.Info says of it.
var Guarantees = []check.Info{
	{Guarantee: Linearizable}, {Guarantee: Serializable, NeedsReference: true}, {Guarantee: Filter},
	{Guarantee: Unique}, {Guarantee: Ordered}, {Guarantee: Atomic}, {Guarantee: Bookmarkable},
	{Guarantee: FirstRevision, NeedsReference: true}, {Guarantee: Genuine, NeedsReference: true},
	{Guarantee: Resumable, NeedsReference: true}, {Guarantee: Reliable, NeedsReference: true},
	{Guarantee: IsCreate, NeedsReference: true}, {Guarantee: PrevKV, NeedsReference: true}, {Guarantee: Compaction},
}

// Violation is one broken guarantee: check.Violation says which and where (Operation and Watch
// index the history's Operations and Watches), Response indexes the watch's Responses (-1 when
// not about one). Diff is a go-cmp diff from what the reference expects (-) to what was received
// (+).
type Violation struct {
	check.Violation
	Response int    `json:"response"`
	Revision int64  `json:"revision,omitempty"`
	Diff     string `json:"diff,omitempty"`
	// Signature names the way the guarantee broke (one of the Sig constants), what known upstream
	// bugs are matched on (KnownBugs).
	Signature string `json:"signature,omitempty"`
	// Events are the events at fault: the ones missing for reliable and resumable, the one received
	// otherwise (without prev_kv unless the prev_kv is at fault).
	Events []Event `json:"events,omitempty"`
}

// The signatures of violations.
const (
	SigNotLinearizable      = "not-linearizable"
	SigStaleSerializable    = "serializable-not-a-state"
	SigOutOfRange           = "event-out-of-range"
	SigFilteredType         = "event-type-filtered"
	SigDuplicate            = "duplicate-event"
	SigOutOfOrder           = "out-of-order"
	SigSplitRevision        = "split-revision"
	SigProgressBackwards    = "progress-backwards"
	SigProgressBelowEvent   = "progress-below-event"
	SigProgressBeyond       = "progress-beyond-history"
	SigEventAfterProgress   = "event-after-progress"
	SigBelowFirstRevision   = "event-below-first-revision"
	SigInvented             = "invented-event"
	SigWrongType            = "wrong-event-type"
	SigMissing              = "events-missing"
	SigOutOfOrderInRev      = "out-of-order-in-revision"
	SigDiffers              = "event-differs"
	SigIsCreate             = "wrong-is-create"
	SigPrevKVUnasked        = "prev-kv-not-asked-for"
	SigPrevKVWrong          = "prev-kv-wrong"
	SigPrevKVMissing        = "prev-kv-missing"
	SigAfterCompaction      = "response-after-compaction"
	SigCompactedUnrequested = "compacted-without-compaction"
	SigCompactedNotNeeded   = "compacted-revision-not-compacted"
	SigNotCanceled          = "not-canceled-below-compaction"
)

// Gap is a run of revisions [From, To] of an open history that none of its writes made: writes of
// other clients, outside its prefix, or of the store itself.
type Gap struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Coverage counts what a history exercised, so that a verdict says what it rests on.
type Coverage struct {
	// ProgressNotifications received by the watches; CompactionAnswers, watches canceled as
	// compacted.
	ProgressNotifications, CompactionAnswers int
	// The revision window of reads (ranges at an explicit revision, and txns reading one): answered
	// "compacted" (below the window), at their answer's header revision (its current edge), below it
	// but served (the past), and answered "future revision" (above the window).
	CompactedReads, CurrentReads, PastReads, FutureReads int
	// Compactions that succeeded, and compactions refused (at a revision compacted already, or a
	// future one).
	Compactions, RefusedCompactions int
	// WatchesFromHistory started at a revision the store had passed when they were created, and
	// caught up from its history; WatchesFromCompactRevision started at exactly a revision compacted
	// before.
	WatchesFromHistory, WatchesFromCompactRevision int
	// LeaseExpiries are the lease expiries the linearization found (0 without one).
	LeaseExpiries int
	// Gaps and GapRevisions count the runs of revisions others made in an open history.
	Gaps, GapRevisions int
}

// String describes the violation on one line, followed by its diff if it has one.
func (v Violation) String() string {
	s := v.Line("response", v.Response)
	if v.Diff != "" {
		s += fmt.Sprintf("\n(-expected +received):\n%s", v.Diff)
	}
	return s
}

// Verdict is the outcome of the linearizability search: check's.
type Verdict = check.Verdict

// The verdicts: a linearization of the KV operations exists (the watch checks used it), none
// exists, or the search ran out of time (then the watch checks that need a reference were skipped).
const (
	VerdictLinearizable    = check.VerdictLinearizable
	VerdictNotLinearizable = check.VerdictNotLinearizable
	VerdictTimeout         = check.VerdictTimeout
)

// Errors Check and Result.Err return, package check's; match them with errors.Is.
var (
	// ErrInvalidHistory: the history is malformed (Check's error names what is wrong).
	ErrInvalidHistory = check.ErrInvalidHistory
	// ErrViolation: at least one guarantee is broken.
	ErrViolation = check.ErrViolation
	// ErrInconclusive: the linearizability search timed out.
	ErrInconclusive = check.ErrInconclusive
)

// Result is what Check found.
type Result struct {
	Verdict    Verdict
	Violations []Violation
	// Linearization lists the indexes of History.Operations in the order of the linearization found
	// (nil unless linearizable). Reads checked as serializable and reads with unknown outcome are
	// not in it; an unknown-outcome write is, where it took effect, unless nothing in the history
	// shows it took effect at all.
	Linearization []int
	// Events is the reference event log: every event the model made replaying the linearization,
	// in revision order (sub-revision order within a revision), with prev_kv filled, as etcd's
	// watch fills it, for every event but a creating put whose key existed at the previous revision.
	Events []Event
	// Notes say what could not be checked and why.
	Notes []string
	// Gaps are the revisions of an open history its writes did not make, in the linearization found.
	Gaps []Gap
	// Coverage is what the history exercised.
	Coverage Coverage
	// Unknown counts the requests of unknown outcome and what the linearization decided of them.
	Unknown UnknownOutcomes

	lin   []*kvOp
	model porcupine.Model
	info  porcupine.LinearizationInfo
	// hasInfo is false when porcupine did not search (the sweep found the linearization) or timed
	// out without producing visualisation data; visualize then runs its search for the report.
	hasInfo   bool
	visualize func(timeout time.Duration) (porcupine.LinearizationInfo, bool)
}

// OK reports whether every guarantee held.
func (r *Result) OK() bool { return r.Verdict == VerdictLinearizable && len(r.Violations) == 0 }

// Guarantees returns the distinct guarantees violated, in the order first reported.
func (r *Result) Guarantees() []Guarantee { return check.Violated(r.Violations, nil) }

// Err returns nil if every guarantee held, an error wrapping ErrViolation that lists the violations
// otherwise, or one wrapping ErrInconclusive if the search timed out and nothing else was found.
func (r *Result) Err() error {
	return check.Err(r.Verdict, len(r.Violations), func() string {
		var b strings.Builder
		fmt.Fprintf(&b, "%d violation(s) of %v", len(r.Violations), r.Guarantees())
		for i, v := range r.Violations {
			if i == 10 {
				fmt.Fprintf(&b, "\n... and %d more", len(r.Violations)-i)
				break
			}
			b.WriteString("\n")
			b.WriteString(v.String())
		}
		return b.String()
	})
}
