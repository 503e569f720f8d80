package check

import "fmt"

// Outcome is how a request ended.
type Outcome int

// The outcomes.
const (
	// OK: the request succeeded (an etcd txn: its compares held).
	OK Outcome = iota
	// Conflict: the request lost a race: an etcd txn whose compares failed, a Kubernetes write
	// answered 409.
	Conflict
	// Failed: the server refused the request with a definite error (etcd.IsDefiniteError, a
	// Kubernetes status below 500).
	Failed
	// Unknown: the request may or may not have taken effect (a timeout, a lost connection, a 5xx).
	Unknown
	// NumOutcomes is the number of outcomes.
	NumOutcomes
)

// Outcomes lists the outcomes in the order a table of requests shows them.
var Outcomes = []Outcome{OK, Conflict, Failed, Unknown}

// String names the outcome as the summary shows it.
func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Conflict:
		return "conflict"
	case Failed:
		return "failed"
	case Unknown:
		return "unknown"
	}
	return "outcome?"
}

// NameCount is how the requests of one name ended, indexed by Outcome.
type NameCount struct {
	Name     string
	Outcomes [NumOutcomes]int64
}

// Total is the number of requests of the name.
func (n NameCount) Total() int64 {
	var t int64
	for _, c := range n.Outcomes {
		t += c
	}
	return t
}

// CountNames counts items by name and outcome: name(i) is item i's index into names, outcome(i)
// its outcome. It returns the names with at least one request, in names' order.
func CountNames(names []string, items int, name func(i int) int, outcome func(i int) Outcome) []NameCount {
	counts := make([]NameCount, len(names))
	for i, n := range names {
		counts[i].Name = n
	}
	for i := range items {
		counts[name(i)].Outcomes[outcome(i)]++
	}
	var out []NameCount
	for _, c := range counts {
		if c.Total() > 0 {
			out = append(out, c)
		}
	}
	return out
}

// Count is one line of a coverage: how many of something a check exercised.
type Count struct {
	Name string
	N    int
}

// String is "N name".
func (c Count) String() string { return fmt.Sprintf("%d %s", c.N, c.Name) }

// Missing names the counts that are zero: what the check did not exercise.
func Missing(cs []Count) []string {
	var out []string
	for _, c := range cs {
		if c.N == 0 {
			out = append(out, c.Name)
		}
	}
	return out
}
