package check

import "time"

// Load is what every checker's workload config bounds: how many clients send requests and how
// many watchers watch, how many requests and for how long, and how long each request may take.
type Load struct {
	Clients, Watchers int
	Ops               int64
	Duration          time.Duration
	RequestTimeout    time.Duration
}

// Validate checks the ranges: at least one client, no negative count or duration. Its errors wrap
// errInvalid (the workload's ErrInvalidConfig) and name the field.
func (l Load) Validate(errInvalid error) error {
	switch {
	case l.Clients < 1:
		return Invalid(errInvalid, "clients %d: need at least one", l.Clients)
	case l.Watchers < 0:
		return Invalid(errInvalid, "watchers %d: must not be negative", l.Watchers)
	case l.Ops < 0:
		return Invalid(errInvalid, "ops %d: must not be negative", l.Ops)
	case l.Duration < 0:
		return Invalid(errInvalid, "duration %v: must not be negative", l.Duration)
	case l.RequestTimeout < 0:
		return Invalid(errInvalid, "request timeout %v: must not be negative", l.RequestTimeout)
	}
	return nil
}

// PhaseFunc is told the name of each part of a check as it begins (Options.Phase of the
// checkers), for a progress line; nil is told nothing.
type PhaseFunc func(name string)

// Begin tells f that the part name begins.
func (f PhaseFunc) Begin(name string) {
	if f != nil {
		f(name)
	}
}

// The parts both checkers have, as they name them to a PhaseFunc.
const (
	PhaseSearch  = "the linearizability search"
	PhaseWatches = "the watches"
)
