package etcd

import (
	"strings"
	"testing"

	"github.com/listwatch/listwatch/check"
)

// TestCounts: the example history's operations counted by request type and outcome, each once,
// in Counts' order; its watches' responses counted by kind; each guarantee listed once, and
// what it was checked over said, "skipped" for those that need a linearization when there is
// none.
func TestCounts(t *testing.T) {
	h := readExample(t)
	total, last := int64(0), -1
	for _, c := range h.Counts() {
		i := indexOfName(c.Name)
		if i <= last || c.Total() == 0 {
			t.Errorf("Counts: %s out of order or empty", c.Name)
		}
		last = i
		total += c.Total()
	}
	if total != int64(len(h.Operations)) {
		t.Errorf("Counts add up to %d, want the %d operations", total, len(h.Operations))
	}
	wc := CountWatches(h)
	if wc.Watches != len(h.Watches) || wc.Responses < wc.EventResponses+wc.Progress+wc.Compacted || wc.Events < wc.EventResponses {
		t.Errorf("CountWatches = %+v", wc)
	}
	res := wantOK(t, h)
	seen := map[check.Guarantee]bool{}
	timedOut := &Result{Verdict: VerdictTimeout}
	for _, g := range Guarantees {
		if seen[g.Guarantee] {
			t.Errorf("%s listed twice", g.Guarantee)
		}
		seen[g.Guarantee] = true
		over := CheckedOver(g, h, res)
		if over == "" || strings.Contains(over, "skipped") {
			t.Errorf("%s checked over %q", g.Guarantee, over)
		}
		if got := CheckedOver(g, h, timedOut); strings.Contains(got, "skipped") != g.NeedsReference {
			t.Errorf("%s without a linearization: checked over %q", g.Guarantee, got)
		}
		if got := CheckedOver(g, nil, nil); got != "-" {
			t.Errorf("%s without a history: %q, want -", g.Guarantee, got)
		}
	}
	if got, want := CheckedOver(Guarantees[0], h, res), "11 requests"; got != want || len(h.Operations) != 11 {
		t.Errorf("linearizable checked over %q, want %q", got, want)
	}
}

func indexOfName(name string) int {
	for i, n := range requestNames {
		if n == name {
			return i
		}
	}
	return -1
}
