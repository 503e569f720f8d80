package check

import (
	"encoding/json"
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

// Err is a result's error: nil for a pass, one wrapping errViolation (with detail, which lists the
// violations) when a guarantee is broken, errInconclusive when the search timed out and nothing
// else was found.
func Err(v Verdict, violations int, detail func() string, errViolation, errInconclusive error) error {
	switch {
	case violations > 0:
		return fmt.Errorf("%w: %s", errViolation, detail())
	case v == VerdictTimeout:
		return errInconclusive
	}
	return nil
}

// ReadJSON decodes a history H from r, refusing unknown fields, and validates it; a decoding
// error wraps errInvalid (the checker's ErrInvalidHistory), as Validate's errors do.
func ReadJSON[H any, P interface {
	*H
	Validate() error
}](r io.Reader, errInvalid error) (*H, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var h H
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("%w: %v", errInvalid, err)
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
