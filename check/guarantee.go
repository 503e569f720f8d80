package check

import (
	"fmt"
	"strings"
)

// Guarantee names a property a checker verifies; each checker's doc.go defines its own.
type Guarantee string

// Info is what a checker says of one of its guarantees besides its name.
type Info struct {
	Guarantee Guarantee
	// NeedsReference: the guarantee is judged against the reference log a linearization gives
	// (the events or the writes it replays); without one it is skipped, or judged in part.
	NeedsReference bool
}

// Skipped reports whether a result with verdict v judged the guarantee only in part, or not at all.
func (i Info) Skipped(v Verdict) bool { return i.NeedsReference && v != VerdictLinearizable }

// List names the guarantees comma-separated, as the command line prints them.
func List(gs []Guarantee) string {
	names := make([]string, len(gs))
	for i, g := range gs {
		names[i] = string(g)
	}
	return strings.Join(names, ", ")
}

// Violation is what every violation says, whichever checker found it: the guarantee broken, where
// (Operation and Watch index the history's operations and watches, -1 when not about one) and
// how. Each checker's violation embeds it and adds what locates it within a watch and what was
// expected.
type Violation struct {
	Guarantee Guarantee `json:"guarantee"`
	Operation int       `json:"operation"`
	Watch     int       `json:"watch"`
	Message   string    `json:"message"`
}

// Where locates the violation: "watch 3 response 2" (part names the watch's part, index its index,
// -1 when the violation is about the whole watch), "watch 3", "operation 7", or "" when it is about
// neither.
func (v Violation) Where(part string, index int) string {
	switch {
	case v.Watch >= 0 && index >= 0:
		return fmt.Sprintf("watch %d %s %d", v.Watch, part, index)
	case v.Watch >= 0:
		return fmt.Sprintf("watch %d", v.Watch)
	case v.Operation >= 0:
		return fmt.Sprintf("operation %d", v.Operation)
	}
	return ""
}

// Line is the violation on one line: "guarantee: where: message".
func (v Violation) Line(part string, index int) string {
	where := v.Where(part, index)
	if where == "" {
		return fmt.Sprintf("%s: %s", v.Guarantee, v.Message)
	}
	return fmt.Sprintf("%s: %s: %s", v.Guarantee, where, v.Message)
}

// Common is the part of the violation every checker's has; a checker's violation embeds it, and
// has Common by promotion.
func (v Violation) Common() Violation { return v }

// Tally adds to counts (made if nil) the violations of vs by guarantee, and returns it.
func Tally[V interface{ Common() Violation }](counts map[Guarantee]int, vs []V) map[Guarantee]int {
	if counts == nil {
		counts = map[Guarantee]int{}
	}
	for _, v := range vs {
		counts[v.Common().Guarantee]++
	}
	return counts
}

// Violated returns the distinct guarantees of vs, in the order order lists them (nil: the order
// first seen); those order does not list follow in the order first seen.
func Violated[V interface{ Common() Violation }](vs []V, order []Info) []Guarantee {
	seen := map[Guarantee]bool{}
	var first []Guarantee
	for _, v := range vs {
		if g := v.Common().Guarantee; !seen[g] {
			seen[g] = true
			first = append(first, g)
		}
	}
	var out []Guarantee
	for _, i := range order {
		if seen[i.Guarantee] {
			out = append(out, i.Guarantee)
			delete(seen, i.Guarantee)
		}
	}
	for _, g := range first {
		if seen[g] {
			out = append(out, g)
		}
	}
	return out
}
