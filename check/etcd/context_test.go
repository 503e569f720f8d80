package etcd

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/internal/testutil"
)

// TestCheckContextStops: a context cancelled as a part of the check begins stops the check of a
// large history in that part: CheckContext returns context.Canceled naming it, and no later part
// begins.
func TestCheckContextStops(t *testing.T) {
	h := concurrentHistory(20_000, 16, 1000, 100, 1)
	phases := []string{check.PhaseSearch, PhaseReplay, check.PhaseWatches}
	testutil.CancelAtEachPhase(t, phases, func(ctx context.Context, onPhase func(string)) (bool, error) {
		res, err := CheckContext(ctx, h, Options{Phase: onPhase})
		return res != nil, err
	})
}

// TestSearchContextStops: porcupine's search, which takes no context, takes no step of the model
// once the check's context ends while it runs, and the search returns no verdict.
func TestSearchContextStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newChecker(concurrentHistory(2000, 8, 50, 50, 1))
	c.ctx = ctx
	model := c.model()
	steps, after := 0, 0
	step := model.Step
	model.Step = func(st, in, out any) (bool, any) {
		if steps++; steps == 500 {
			cancel()
		} else if steps > 500 {
			after++
		}
		return step(st, in, out)
	}
	res := &Result{model: model}
	c.search(res, 0)
	if err := c.stopped(check.PhaseSearch); !errors.Is(err, context.Canceled) || res.Verdict != "" {
		t.Fatalf("search cancelled at its 500th step: verdict %q, error %v", res.Verdict, err)
	}
	if steps < 500 || after > 0 {
		t.Errorf("the search took %d steps, %d after its context was cancelled at the 500th", steps, after)
	}
}

// TestCheckContextUncancelled: with a context that does not end, CheckContext finds what Check
// does, violations included.
func TestCheckContextUncancelled(t *testing.T) {
	bad := concurrentHistory(2000, 8, 50, 50, 1)
	bad.Watches[0].Responses[5].Events[0].Kv.Value = "forged"
	for _, h := range []*History{concurrentHistory(2000, 8, 50, 50, 1), bad} {
		ctx, cancel := context.WithCancel(context.Background())
		got, err := CheckContext(ctx, h, Options{})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		want := mustCheck(t, h)
		if !reflect.DeepEqual(exported(got), exported(want)) {
			t.Errorf("CheckContext found %s with %d violations, Check %s with %d", got.Verdict, len(got.Violations), want.Verdict, len(want.Violations))
		}
	}
	if r := mustCheck(t, bad); r.OK() {
		t.Error("a forged watch event passed")
	}
}

// exported is r without its unexported fields (functions, which never compare equal).
func exported(r *Result) Result {
	return Result{Verdict: r.Verdict, Violations: r.Violations, Linearization: r.Linearization, Events: r.Events,
		Notes: r.Notes, Gaps: r.Gaps, Coverage: r.Coverage}
}
