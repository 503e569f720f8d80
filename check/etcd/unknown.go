package etcd

// UnknownOutcomes counts a history's requests of unknown outcome (timeouts, dropped connections)
// and what the linearization found decided of each: a write took effect where it made a change the
// later reads and watch events show, or it took none (left out of the linearization, or placed
// where it changed nothing). A read of unknown outcome changes nothing and needs no decision.
type UnknownOutcomes struct {
	// Reads and Writes are the requests of unknown outcome, read-only or not (lease requests
	// count as writes).
	Reads  int `json:"reads"`
	Writes int `json:"writes"`
	// TookEffect and NoEffect are the writes the linearization decided (both 0 without one).
	TookEffect int `json:"took_effect"`
	NoEffect   int `json:"no_effect"`
}

// Total is the number of requests of unknown outcome.
func (u UnknownOutcomes) Total() int { return u.Reads + u.Writes }

// Resolved is the number of writes of unknown outcome the linearization decided.
func (u UnknownOutcomes) Resolved() int { return u.TookEffect + u.NoEffect }

// Unresolved is the number of writes of unknown outcome left undecided: all of them when the
// history has no linearization (or the search timed out).
func (u UnknownOutcomes) Unresolved() int { return u.Writes - u.Resolved() }

// countUnknown counts h's requests of unknown outcome into res.Unknown; changed is the number of
// them the replay of the linearization found making a change (-1: no linearization).
func countUnknown(h *History, res *Result, changed int) {
	var u UnknownOutcomes
	for i := range h.Operations {
		o := &h.Operations[i]
		switch {
		case !o.Unknown:
		case isReadOnly(&o.Request):
			u.Reads++
		default:
			u.Writes++
		}
	}
	if changed >= 0 {
		u.TookEffect, u.NoEffect = changed, u.Writes-changed
	}
	res.Unknown = u
}
