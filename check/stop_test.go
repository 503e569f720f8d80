package check

import (
	"context"
	"errors"
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestStoppable: once the context ends, porcupine's search with a Stoppable model takes no step
// of the model (one with Step, or with StepContext as a NondeterministicModel's ToModel gives), and
// returns; Stopped then wraps context.Canceled. Until then the model is the one given.
func TestStoppable(t *testing.T) {
	var ops []porcupine.Operation
	for i := range 200 { // 200 overlapping writes of 1 to a counter: every order linearizes
		ops = append(ops, porcupine.Operation{ClientId: i, Input: 1, Call: int64(i), Return: int64(1000 + i), Output: i})
	}
	step := func(st, in, _ any) (bool, any) { return true, st.(int) + in.(int) }
	nd := porcupine.NondeterministicModel{Init: func() []any { return []any{0} },
		Step: func(st, in, out any) []any { _, n := step(st, in, out); return []any{n} }}
	for name, m := range map[string]porcupine.Model{"Step": {Init: func() any { return 0 }, Step: step}, "StepContext": nd.ToModel()} {
		if got := porcupine.CheckOperations(Stoppable(context.Background(), m), ops); !got {
			t.Errorf("%s: uncancelled, the search refused a linearizable history", name)
		}
		ctx, cancel := context.WithCancel(context.Background())
		steps, after := 0, 0
		count := func() {
			if steps++; steps == 100 {
				cancel()
			} else if steps > 100 {
				after++
			}
		}
		if inner := m.StepContext; inner != nil { // porcupine calls it rather than Step
			m.StepContext = func(c context.Context, st, in, out any) (bool, any) { count(); return inner(c, st, in, out) }
		} else {
			inner := m.Step
			m.Step = func(st, in, out any) (bool, any) { count(); return inner(st, in, out) }
		}
		porcupine.CheckOperations(Stoppable(ctx, m), ops)
		if err := Stopped(ctx, "the search"); !errors.Is(err, context.Canceled) || steps != 100 || after > 0 {
			t.Errorf("%s: %d steps, %d after the cancel at the 100th; error %v", name, steps, after, err)
		}
		cancel()
	}
}
