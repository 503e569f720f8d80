package kube

import (
	"fmt"

	"github.com/listwatch/listwatch/check"
)

// Guarantee names a property Check verifies; doc.go defines each one.
type Guarantee = check.Guarantee

// The guarantees, in the order doc.go defines them.
const (
	Linearizable     Guarantee = "linearizable"
	ReadRV           Guarantee = "read_rv"
	ReadContent      Guarantee = "read_content"
	WatchStart       Guarantee = "watch_start"
	WatchReplay      Guarantee = "watch_replay"
	BookmarkOrder    Guarantee = "bookmark"
	InitialEventsEnd Guarantee = "initial_events_end"
	Expired          Guarantee = "expired"
	Validation       Guarantee = "validation"
)

// Guarantees lists every guarantee, in doc.go's order. Those that need a reference are judged in
// part without a linearization: read_rv's and watch_start's bounds from what requests had shown,
// the initial-events-end bookmark's place.
var Guarantees = []check.Info{{Guarantee: Linearizable}, {Guarantee: ReadRV, NeedsReference: true},
	{Guarantee: ReadContent, NeedsReference: true}, {Guarantee: WatchStart, NeedsReference: true},
	{Guarantee: WatchReplay, NeedsReference: true}, {Guarantee: BookmarkOrder, NeedsReference: true},
	{Guarantee: InitialEventsEnd, NeedsReference: true}, {Guarantee: Expired}, {Guarantee: Validation}}

// Violation is one broken guarantee: check.Violation says which and where (Operation and Watch
// index the history's Operations and Watches), Frame indexes the watch's Frames (-1 when not about
// one).
type Violation struct {
	check.Violation
	Frame int `json:"frame"`
	// Expected and Received, when set, are what the reference expects and what the wire said.
	Expected string `json:"expected,omitempty"`
	Received string `json:"received,omitempty"`
}

// String describes the violation on one line, then what was expected and received.
func (v Violation) String() string {
	s := v.Line("frame", v.Frame)
	if v.Expected != "" || v.Received != "" {
		s += fmt.Sprintf("\n  expected: %s\n  received: %s", v.Expected, v.Received)
	}
	return s
}

// Result is what Check found.
type Result struct {
	// Verdict is the outcome of the linearizability search.
	Verdict    check.Verdict
	Violations []Violation
	// Linearization lists the indexes of the operations in the linearization found: the writes
	// that took effect and the consistent reads (nil unless linearizable).
	Linearization []int
	// Writes is the reference write log: the writes that took effect, in resourceVersion order.
	Writes []WriteRecord
	// Coverage is what the history exercised.
	Coverage Coverage
	// Notes say what was not judged, and why.
	Notes []string
}

// WriteRecord is one write of the reference log. RV is its resourceVersion, or 0 when no answer
// and no watch showed it; then it lies in [MinRV, MaxRV].
type WriteRecord struct {
	Operation int
	Name      string
	Before    *Object
	After     *Object
	RV        uint64
	MinRV     uint64
	MaxRV     uint64
}

// Coverage counts what the history exercised, so that a PASS over nothing says so.
type Coverage struct {
	Requests, Writes, Conflicts, NotFound, Unknown int
	// Lists by resourceVersion semantics: MostRecent (""), Any ("0"), NotOlderThan, Exact,
	// Continue (pages after the first), Invalid (combinations the apiserver refuses).
	Lists map[string]int
	Gets  int
	// Watches by start: "exact" (from N), "initial" (with initial events), "now" (from an unknown
	// current point).
	Watches          map[string]int
	Resumed          int
	Events           int
	EventsChecked    int
	Bookmarks        int
	InitialEventsEnd int
	Expired          int // 410 answers and ERROR frames
	Errors           int // other ERROR frames and refused watches
	SelectorWatches  int
	// BeforeStart counts the lists and watches at a resourceVersion before the run began, whose
	// state the history does not hold: only what came after the start is judged.
	BeforeStart int
}

// OK reports whether the history passed: linearizable and no violation.
func (r *Result) OK() bool { return r.Verdict == check.VerdictLinearizable && len(r.Violations) == 0 }

// Err is nil for a pass, wraps ErrViolation when a guarantee is broken and ErrInconclusive when the
// search timed out without any violation found.
func (r *Result) Err() error {
	return check.Err(r.Verdict, len(r.Violations), func() string { return fmt.Sprintf("%d violation(s)", len(r.Violations)) })
}

// Guarantees lists the guarantees violated, in doc.go's order.
func (r *Result) Guarantees() []Guarantee { return check.Violated(r.Violations, Guarantees) }

// maxPerWatch bounds the violations of one guarantee listed per watch or list chain.
const maxPerWatch = 5
