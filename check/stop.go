package check

import (
	"context"
	"fmt"

	"github.com/anishathalye/porcupine"
)

// PollEvery is how many steps a part of a check takes between looks at the check's context.
const PollEvery = 4096

// Stopped is the error a check stopped by ctx returns from the part phase: one wrapping ctx.Err(),
// or nil while ctx lasts.
func Stopped(ctx context.Context, phase string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("check stopped in %s: %w", phase, err)
	}
	return nil
}

// Polled reports, every PollEvery-th step i, whether ctx has ended.
func Polled(ctx context.Context, i int) bool {
	return i%PollEvery == 0 && ctx.Err() != nil
}

// Stoppable is m refusing every step once ctx ends. Porcupine takes a timeout, not a context; a
// model that refuses everything makes its search backtrack to its start and return, promptly,
// with an answer that then means nothing (the caller looks at ctx first).
func Stoppable(ctx context.Context, m porcupine.Model) porcupine.Model {
	if step := m.Step; step != nil {
		m.Step = func(st, in, out any) (bool, any) {
			if ctx.Err() != nil {
				return false, nil
			}
			return step(st, in, out)
		}
	}
	if step := m.StepContext; step != nil { // a NondeterministicModel's ToModel sets this one
		m.StepContext = func(pctx context.Context, st, in, out any) (bool, any) {
			if ctx.Err() != nil {
				return false, nil
			}
			return step(pctx, st, in, out)
		}
	}
	return m
}
