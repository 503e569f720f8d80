package kube

import (
	"slices"
	"strings"
	"testing"

	"github.com/listwatch/listwatch/check"
)

// TestCounts: the base history's requests counted by verb and outcome, each once, in Counts'
// order; each guarantee listed once, with what it was checked over, "partly skipped" for those
// that need a linearization when there is none.
func TestCounts(t *testing.T) {
	h := baseHistory()
	res := mustCheck(t, h)
	h.Operations = append(h.Operations, Operation{Verb: Update, Status: 409}, Operation{Verb: Delete, Unknown: true},
		Operation{Verb: Delete, Status: 503}, Operation{Verb: Get, Status: 404})
	want := []check.NameCount{{Name: "create", Outcomes: [check.NumOutcomes]int64{2, 0, 0, 0}},
		{Name: "update", Outcomes: [check.NumOutcomes]int64{1, 1, 0, 0}}, {Name: "delete", Outcomes: [check.NumOutcomes]int64{1, 0, 0, 2}},
		{Name: "get", Outcomes: [check.NumOutcomes]int64{1, 0, 1, 0}}, {Name: "list", Outcomes: [check.NumOutcomes]int64{4, 0, 0, 0}}}
	if got := h.Counts(); !slices.Equal(got, want) {
		t.Errorf("Counts = %v, want %v", got, want)
	}
	seen := map[Guarantee]bool{}
	timedOut := &Result{Verdict: check.VerdictTimeout}
	for _, g := range Guarantees {
		if seen[g.Guarantee] {
			t.Errorf("%s listed twice", g.Guarantee)
		}
		seen[g.Guarantee] = true
		if over := CheckedOver(g, res); over == "" || strings.Contains(over, "skipped") {
			t.Errorf("%s checked over %q", g.Guarantee, over)
		}
		if got := CheckedOver(g, timedOut); strings.Contains(got, "skipped") != g.NeedsReference {
			t.Errorf("%s without a linearization: checked over %q", g.Guarantee, got)
		}
	}
	if got := CheckedOver(Guarantees[0], res); !strings.Contains(got, "writes") {
		t.Errorf("linearizable checked over %q", got)
	}
}

// TestIsHistory: a history WriteJSON wrote is one, and is left at its start to be read; package
// etcd's JSON (no resource) and what is not JSON are not.
func TestIsHistory(t *testing.T) {
	var b strings.Builder
	if err := baseHistory().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	r := strings.NewReader(b.String())
	if !IsHistory(r) {
		t.Fatal("a written history is not one")
	}
	if _, err := ReadJSON(r); err != nil {
		t.Fatalf("read after IsHistory: %v", err)
	}
	for _, in := range []string{`{"operations": [], "watches": []}`, `not json`, ``} {
		if IsHistory(strings.NewReader(in)) {
			t.Errorf("%q taken for a Kubernetes API history", in)
		}
	}
}
