package check

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Verdict is the outcome of a checker's linearizability search.
type Verdict string

// The verdicts.
const (
	// VerdictLinearizable: a linearization exists; the checks that need a reference used it.
	VerdictLinearizable Verdict = "linearizable"
	// VerdictNotLinearizable: none exists; the checks that need a reference were skipped.
	VerdictNotLinearizable Verdict = "not linearizable"
	// VerdictTimeout: the search ran out of time; the checks that need a reference were skipped.
	VerdictTimeout Verdict = "timeout"
)

// Word is the word a report or a command line gives a checked history: "PASS", "FAIL" (some
// guarantee broken) or "INCONCLUSIVE" (the search timed out, and nothing else was found).
func Word(v Verdict, violations int) string {
	switch {
	case violations > 0:
		return "FAIL"
	case v == VerdictTimeout:
		return "INCONCLUSIVE"
	}
	return "PASS"
}

// Errors of both checkers; match them with errors.Is. Package etcd and package kube export them
// under the same names.
var (
	// ErrInvalidHistory: a history is malformed (the error names what is wrong).
	ErrInvalidHistory = errors.New("check: invalid history")
	// ErrViolation: a guarantee is broken (a result's Err).
	ErrViolation = errors.New("check: guarantee violated")
	// ErrInconclusive: the linearizability search timed out, and nothing else was found (a
	// result's Err).
	ErrInconclusive = errors.New("check: linearizability check timed out")
)

// Err is a result's error: nil for a pass, one wrapping ErrViolation (with detail, which lists the
// violations) when a guarantee is broken, ErrInconclusive when the search timed out and nothing
// else was found.
func Err(v Verdict, violations int, detail func() string) error {
	switch {
	case violations > 0:
		return fmt.Errorf("%w: %s", ErrViolation, detail())
	case v == VerdictTimeout:
		return ErrInconclusive
	}
	return nil
}

// ReadJSON decodes a history H from r, refusing unknown fields, and validates it; a decoding
// error wraps ErrInvalidHistory, as Validate's errors must.
func ReadJSON[H any, P interface {
	*H
	Validate() error
}](r io.Reader) (*H, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var h H
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidHistory, err)
	}
	if err := P(&h).Validate(); err != nil {
		return nil, err
	}
	return &h, nil
}

// WriteJSON encodes a history as indented JSON, the form ReadJSON reads.
func WriteJSON(w io.Writer, h any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(h)
}

// Invalid returns an error wrapping err (a checker's ErrInvalidHistory or ErrInvalidConfig) that
// says what is wrong.
func Invalid(err error, format string, a ...any) error {
	return fmt.Errorf("%w: %s", err, fmt.Sprintf(format, a...))
}
