package workload

import (
	"errors"
	"testing"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/check/etcd"
)

// TestSummarize: labels and scenario findings explained by a known bug count as known, each bug
// once; the others, a regression and a scenario that could not run to its end count as
// unexplained; deviations and the store's findings count apart; any of them fails the check. A
// scenario's status and failure say what it found.
func TestSummarize(t *testing.T) {
	bug := etcd.KnownBugs[0]
	own := &Scenario{Name: "s", Guarantee: etcd.Reliable}
	violation := func(g etcd.Guarantee, msg string) etcd.Violation {
		return etcd.Violation{Violation: check.Violation{Guarantee: g, Operation: -1, Watch: 0, Message: msg}, Response: -1}
	}
	failed := ScenarioResult{Scenario: own, Result: &etcd.Result{Verdict: etcd.VerdictLinearizable,
		Violations: []etcd.Violation{violation(etcd.Ordered, "other"), violation(etcd.Reliable, "its own")}},
		Labels: []etcd.Label{{Bug: bug}, {}}}
	found := ScenarioResult{Scenario: own, Finding: "no answer", FindingBug: bug}
	errored := ScenarioResult{Scenario: own, Err: errors.New("put failed")}
	skipped := ScenarioResult{Scenario: own, Skipped: "needs compaction"}
	passed := ScenarioResult{Scenario: own, Result: &etcd.Result{Verdict: etcd.VerdictLinearizable}}
	caps := &Capabilities{Results: []Capability{{Status: Refused}, {Status: Supported}}}
	s := Summarize([]etcd.Label{{Bug: bug}, {Bug: bug, Regression: true}},
		[]ScenarioResult{failed, found, errored, skipped, passed}, caps, 1)
	if len(s.Bugs) != 1 || s.Known != 3 || s.Unexplained != 3 || s.Deviations != 2 || !s.Failed() {
		t.Errorf("Summarize = %+v", s)
	}
	if got, want := s.String(), "1 known upstream bug, 3 unexplained; 2 differences from etcd's API"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if s := Summarize(nil, []ScenarioResult{passed, skipped}, nil, 0); s.Failed() || s.String() != "0 known upstream bugs, 0 unexplained" {
		t.Errorf("nothing found: %+v %q", s, s)
	}
	for r, want := range map[*ScenarioResult][2]string{&failed: {"FAIL", "its own"}, &found: {"FAIL", "no answer"},
		&errored: {"ERROR", "put failed"}, &skipped: {"SKIP", ""}, &passed: {"PASS", ""}} {
		if r.Status() != want[0] || r.Failure() != want[1] {
			t.Errorf("%+v: status %s failure %q, want %v", r, r.Status(), r.Failure(), want)
		}
	}
}

// TestGated: the apiserver sends RequestProgress to etcd from 3.4.31 and 3.5.13 on, and to any
// other product.
func TestGated(t *testing.T) {
	for _, c := range []struct {
		target etcd.Target
		want   bool
	}{
		{etcd.Target{Product: "etcd", Version: "3.4.23"}, true},
		{etcd.Target{Product: "etcd", Version: "3.4.30"}, true},
		{etcd.Target{Product: "etcd", Version: "3.4.31"}, false},
		{etcd.Target{Product: "etcd", Version: "3.5.7"}, true},
		{etcd.Target{Product: "etcd", Version: "3.5.12"}, true},
		{etcd.Target{Product: "etcd", Version: "3.5.13"}, false},
		{etcd.Target{Product: "etcd", Version: "3.7.3"}, false},
		{etcd.Target{Product: "etcd", Version: "dev"}, true},
		{etcd.Target{Product: "kine", Version: "3.5.7"}, false},
	} {
		if got := Gated(c.target); got != c.want {
			t.Errorf("Gated(%+v) = %v, want %v", c.target, got, c.want)
		}
	}
}
