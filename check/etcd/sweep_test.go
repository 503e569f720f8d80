package etcd

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// porcupineVerdict is the verdict of porcupine's search alone (guided, then unguided), the reference
// the sweep is held to.
func porcupineVerdict(t testing.TB, h *History) Verdict {
	t.Helper()
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	c := newChecker(h)
	res := &Result{model: c.model()}
	c.search(res, time.Minute)
	return res.Verdict
}

// sweepVerdict is what the fast path decides: linearizable (the sweep placed everything), not
// linearizable (an inversion), or nothing ("").
func sweepVerdict(h *History) Verdict {
	c := newChecker(h)
	hasUnknown := false
	for _, op := range c.ops {
		hasUnknown = hasUnknown || op.unknown
	}
	if hasUnknown && (len(c.guides) > 0 || len(c.serializable) > 0) {
		c.guided = true
		_, ok, _ := sweepWithRestarts(c, append(c.ops, c.sweepObservations()...), time.Time{})
		c.guided = false
		if ok {
			return VerdictLinearizable
		}
	}
	if _, ok, _ := sweepWithRestarts(c, c.ops, time.Time{}); ok {
		return VerdictLinearizable
	}
	if a, _ := c.inversion(); a != nil {
		return VerdictNotLinearizable
	}
	return ""
}

// perturbations change a valid history's KV operations so that it may no longer be linearizable.
var perturbations = []struct {
	name  string
	apply func(h *History, pick func(int) int) bool
}{
	{"header revision off by one", func(h *History, pick func(int) int) bool {
		var c []int
		for i, o := range h.Operations {
			if o.Response != nil && o.Request.LeaseKeepAlive == nil {
				c = append(c, i)
			}
		}
		if len(c) == 0 {
			return false
		}
		r := h.Operations[c[pick(len(c))]].Response
		r.Revision += int64(2*pick(2) - 1)
		return true
	}},
	{"an operation earlier", func(h *History, pick func(int) int) bool {
		if len(h.Operations) < 2 {
			return false
		}
		o := &h.Operations[pick(len(h.Operations))]
		at := h.Operations[pick(len(h.Operations))].Call
		if at >= o.Call {
			return false
		}
		o.Return, o.Call = at+(o.Return-o.Call)/4, at
		return true
	}},
	{"a failure for a success", func(h *History, pick func(int) int) bool {
		var c []int
		for i, o := range h.Operations {
			if o.Response != nil {
				c = append(c, i)
			}
		}
		if len(c) == 0 {
			return false
		}
		o := &h.Operations[c[pick(len(c))]]
		o.Response, o.Error = nil, []string{"etcdserver: mvcc: required revision has been compacted",
			"etcdserver: requested lease not found", "etcdserver: mvcc: required revision is a future revision"}[pick(3)]
		return true
	}},
}

// TestSweepAgreesWithPorcupine: on recorded histories, valid ones, ones made valid with unknown
// outcomes, and ones made invalid, the sweep's verdict, where it gives one, is porcupine's, and
// Check's verdict is porcupine's; and the sweep decides every faithfully recorded history.
func TestSweepAgreesWithPorcupine(t *testing.T) {
	decided, undecided := map[string]int{}, map[string]int{}
	rapid.Check(t, func(rt *rapid.T) {
		h := runWorkload(t, drawWorkload(rt, 25))
		if got := sweepVerdict(h); got != VerdictLinearizable {
			dumpHistory(t, h)
			rt.Fatalf("the sweep does not decide a faithfully recorded history (%q)", got)
		}
		pick := func(n int) int { return rapid.IntRange(0, n-1).Draw(rt, "pick") }
		var compareOne func(name string, th *History)
		compare := func(name string, th *History) {
			// and as an open history from revision 1, where the store may move on by others' writes
			// (not always valid: its compaction revision is unknown, so a read at a negative
			// revision may have been compacted)
			open := cloneHistory(t, th)
			open.StartRevision = 1
			compareOne(name, th)
			compareOne(name+" (open)", open)
		}
		compareOne = func(name string, th *History) {
			want := porcupineVerdict(t, th)
			got := sweepVerdict(th)
			if got == "" {
				undecided[name+" "+string(want)]++
			} else {
				decided[name]++
			}
			if got != "" && got != want {
				dumpHistory(t, th)
				rt.Fatalf("%s: the sweep says %s, porcupine %s", name, got, want)
			}
			res, err := Check(th, Options{Timeout: time.Minute})
			if err != nil {
				dumpHistory(t, th)
				rt.Fatalf("%s: %v", name, err)
			}
			if res.Verdict != want {
				dumpHistory(t, th)
				rt.Fatalf("%s: Check says %s, porcupine %s", name, res.Verdict, want)
			}
		}
		compare("as recorded", h)
		for _, tr := range validTransforms {
			if th := cloneHistory(t, h); tr.apply(th, pick) {
				compare(tr.name, th)
			}
		}
		for _, p := range perturbations {
			if th := cloneHistory(t, h); p.apply(th, pick) {
				compare(p.name, th)
			}
		}
	})
	t.Logf("decided by the sweep %v, left to porcupine %v", decided, undecided)
}
