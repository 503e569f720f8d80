package check

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestViolationWhere: a violation names the watch and its part, the watch, the operation, or
// nothing, and its line starts with the guarantee.
func TestViolationWhere(t *testing.T) {
	for _, c := range []struct {
		v     Violation
		index int
		want  string
	}{
		{Violation{Guarantee: "g", Operation: -1, Watch: 3, Message: "m"}, 2, "g: watch 3 frame 2: m"},
		{Violation{Guarantee: "g", Operation: -1, Watch: 3, Message: "m"}, -1, "g: watch 3: m"},
		{Violation{Guarantee: "g", Operation: 7, Watch: -1, Message: "m"}, -1, "g: operation 7: m"},
		{Violation{Guarantee: "g", Operation: -1, Watch: -1, Message: "m"}, -1, "g: m"},
	} {
		if got := c.v.Line("frame", c.index); got != c.want {
			t.Errorf("%+v.Line(frame, %d) = %q, want %q", c.v, c.index, got, c.want)
		}
	}
}

type ownViolation struct {
	Violation
	Frame int
}

// TestViolated: the guarantees violated, each once, in the checker's order, then those it does
// not list in the order first seen; with no order, all in the order first seen. Tally counts them.
func TestViolated(t *testing.T) {
	vs := []ownViolation{{Violation: Violation{Guarantee: "c"}}, {Violation: Violation{Guarantee: "x"}},
		{Violation: Violation{Guarantee: "a"}}, {Violation: Violation{Guarantee: "c"}}}
	order := []Info{{Guarantee: "a"}, {Guarantee: "b"}, {Guarantee: "c"}}
	if got, want := Violated(vs, order), []Guarantee{"a", "c", "x"}; !slices.Equal(got, want) {
		t.Errorf("Violated in order = %v, want %v", got, want)
	}
	if got, want := Violated(vs, nil), []Guarantee{"c", "x", "a"}; !slices.Equal(got, want) {
		t.Errorf("Violated first seen = %v, want %v", got, want)
	}
	if got := Tally(map[Guarantee]int{"a": 1}, vs); got["a"] != 2 || got["c"] != 2 || got["x"] != 1 || len(got) != 3 {
		t.Errorf("Tally = %v", got)
	}
	if got := List([]Guarantee{"a", "c"}); got != "a, c" {
		t.Errorf("List = %q", got)
	}
}

// TestVerdicts: a violation fails whatever the search found, a timeout without one is
// inconclusive, and Skipped holds only for a guarantee that needs a reference when there is none.
func TestVerdicts(t *testing.T) {
	errV, errI := ErrViolation, ErrInconclusive
	detail := func() string { return "1 violation" }
	for _, c := range []struct {
		v     Verdict
		n     int
		word  string
		isErr error
	}{
		{VerdictLinearizable, 0, "PASS", nil},
		{VerdictLinearizable, 1, "FAIL", errV},
		{VerdictTimeout, 1, "FAIL", errV},
		{VerdictTimeout, 0, "INCONCLUSIVE", errI},
		{VerdictNotLinearizable, 2, "FAIL", errV},
	} {
		if got := Word(c.v, c.n); got != c.word {
			t.Errorf("Word(%s, %d) = %s, want %s", c.v, c.n, got, c.word)
		}
		err := Err(c.v, c.n, detail)
		if c.isErr == nil && err != nil || c.isErr != nil && !errors.Is(err, c.isErr) {
			t.Errorf("Err(%s, %d) = %v, want %v", c.v, c.n, err, c.isErr)
		}
	}
	if err := Err(VerdictLinearizable, 1, detail); !strings.Contains(err.Error(), "1 violation") {
		t.Errorf("Err does not carry its detail: %v", err)
	}
	needs, not := Info{Guarantee: "n", NeedsReference: true}, Info{Guarantee: "o"}
	if !needs.Skipped(VerdictTimeout) || !needs.Skipped(VerdictNotLinearizable) || needs.Skipped(VerdictLinearizable) ||
		not.Skipped(VerdictTimeout) {
		t.Error("Skipped: want true only for a guarantee that needs a reference, without a linearization")
	}
}

type doc struct {
	N int `json:"n"`
}

func (d *doc) Validate() error {
	if d.N < 0 {
		return Invalid(ErrInvalidHistory, "n %d: must not be negative", d.N)
	}
	return nil
}

// TestReadJSON: what WriteJSON writes reads back; unknown fields, bad JSON and what Validate
// refuses are errors wrapping the checker's error.
func TestReadJSON(t *testing.T) {
	var b strings.Builder
	if err := WriteJSON(&b, &doc{N: 3}); err != nil {
		t.Fatal(err)
	}
	d, err := ReadJSON[doc](strings.NewReader(b.String()))
	if err != nil || d.N != 3 {
		t.Fatalf("round trip: %+v, %v", d, err)
	}
	for in, want := range map[string]string{`{"n":1,"m":2}`: "unknown field", `{"n":`: "unexpected EOF", `{"n":-1}`: "must not be negative"} {
		if _, err := ReadJSON[doc](strings.NewReader(in)); !errors.Is(err, ErrInvalidHistory) || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadJSON(%s) = %v, want ErrInvalidHistory mentioning %q", in, err, want)
		}
	}
}

// TestLoadValidate: a load with no client, or a negative count or duration, is refused, naming the
// field; a good one passes.
func TestLoadValidate(t *testing.T) {
	errCfg := errors.New("invalid config")
	good := Load{Clients: 1, Watchers: 0, Ops: 0, Duration: time.Second, RequestTimeout: time.Second}
	if err := good.Validate(errCfg); err != nil {
		t.Fatal(err)
	}
	for want, l := range map[string]Load{
		"clients":         {Clients: 0},
		"watchers":        {Clients: 1, Watchers: -1},
		"ops":             {Clients: 1, Ops: -1},
		"duration":        {Clients: 1, Duration: -1},
		"request timeout": {Clients: 1, RequestTimeout: -1},
	} {
		if err := l.Validate(errCfg); !errors.Is(err, errCfg) || !strings.HasPrefix(strings.TrimPrefix(err.Error(), "invalid config: "), want) {
			t.Errorf("%+v: %v, want an error naming %s", l, err, want)
		}
	}
}

// TestCountNames: items counted by name and outcome, names without any left out, in the names'
// order; Missing names the zero counts.
func TestCountNames(t *testing.T) {
	names := []string{"a", "b", "c"}
	items := []struct {
		name int
		o    Outcome
	}{{2, OK}, {0, Unknown}, {2, Conflict}, {2, OK}}
	got := CountNames(names, len(items), func(i int) int { return items[i].name }, func(i int) Outcome { return items[i].o })
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "c" || got[0].Outcomes[Unknown] != 1 ||
		got[1].Outcomes[OK] != 2 || got[1].Outcomes[Conflict] != 1 || got[1].Total() != 3 {
		t.Errorf("CountNames = %+v", got)
	}
	if m := Missing([]Count{{"x", 1}, {"y", 0}, {"z", 0}}); !slices.Equal(m, []string{"y", "z"}) {
		t.Errorf("Missing = %v", m)
	}
	if s := (Count{"events", 4}).String(); s != "4 events" {
		t.Errorf("Count.String = %q", s)
	}
}
