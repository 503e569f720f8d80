package workload

import (
	"fmt"

	"github.com/listwatch/listwatch/check/etcd"
)

// Errored reports whether the scenario could not run to its end (a request it needed failed)
// without finding anything: a failure nothing explains.
func (r *ScenarioResult) Errored() bool {
	return r.Err != nil && r.Finding == "" && (r.Result == nil || r.Result.OK())
}

// Status is the scenario's status as a table shows it: SKIP, ERROR (Errored), FAIL or PASS.
func (r *ScenarioResult) Status() string {
	switch {
	case r.Skipped != "":
		return "SKIP"
	case r.Errored():
		return "ERROR"
	case !r.Passed():
		return "FAIL"
	}
	return "PASS"
}

// Failure says what a scenario that ran and did not pass found: its finding, else its first
// violation of its own guarantee (else its first violation), else its error.
func (r *ScenarioResult) Failure() string {
	what := r.Finding
	if what == "" && r.Result != nil && len(r.Result.Violations) > 0 {
		what = r.Result.Violations[0].Message
		for _, v := range r.Result.Violations {
			if v.Guarantee == r.Scenario.Guarantee {
				what = v.Message
				break
			}
		}
	}
	if what == "" && r.Err != nil {
		what = r.Err.Error()
	}
	return what
}

// Summary counts what makes a check of a store fail: any violation or finding, explained by a
// known upstream bug or not, and any difference from etcd's API.
type Summary struct {
	// Bugs are the distinct known bugs seen, in the order first seen.
	Bugs []*etcd.KnownBug
	// Known counts the violations and findings they explain, Unexplained the others (and the
	// scenarios that could not run to their end).
	Known, Unexplained int
	// Deviations counts the capabilities refused or different, and the store's own findings.
	Deviations int
}

// Summarize counts a check's labels (of the workload's violations, etcd.Classify), its scenarios',
// the capabilities' deviations (caps may be nil) and the findings of what the store said of
// itself.
func Summarize(labels []etcd.Label, scenarios []ScenarioResult, caps *Capabilities, findings int) Summary {
	var s Summary
	seen := map[*etcd.KnownBug]bool{}
	count := func(l etcd.Label) {
		if !l.Known() {
			s.Unexplained++
			return
		}
		s.Known++
		if !seen[l.Bug] {
			seen[l.Bug] = true
			s.Bugs = append(s.Bugs, l.Bug)
		}
	}
	for _, l := range labels {
		count(l)
	}
	for i := range scenarios {
		r := &scenarios[i]
		for _, l := range r.Labels {
			count(l)
		}
		if r.Finding != "" {
			count(etcd.Label{Bug: r.FindingBug})
		}
		if r.Errored() {
			s.Unexplained++
		}
	}
	if caps != nil {
		s.Deviations += len(caps.Deviations())
	}
	s.Deviations += findings
	return s
}

// Failed reports whether anything counted fails the check.
func (s Summary) Failed() bool { return s.Known+s.Unexplained+s.Deviations > 0 }

// String is the verdict's count: "2 known upstream bugs, 0 unexplained", and the differences from
// etcd's API if any.
func (s Summary) String() string {
	out := plural(len(s.Bugs), "known upstream bug", "known upstream bugs") + fmt.Sprintf(", %d unexplained", s.Unexplained)
	if s.Deviations > 0 {
		out += "; " + plural(s.Deviations, "difference from etcd's API", "differences from etcd's API")
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
