package seeds

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	got, err := Parse("3, 7-9,12")
	if err != nil || fmt.Sprint(got) != "[3 7 8 9 12]" {
		t.Errorf("Parse: %v %v", got, err)
	}
	for _, bad := range []string{"", "x", "0", "0-2", "5-2", "1-x", "1,,2", "-3", "1-"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv("SEEDS_TEST_SEEDS", "")
	t.Setenv("SEEDS_TEST_COUNT", "")
	s, n, err := FromEnv("SEEDS_TEST_SEEDS", "1-2", "SEEDS_TEST_COUNT", 5)
	if err != nil || fmt.Sprint(s) != "[1 2]" || n != 5 {
		t.Errorf("defaults: %v %d %v", s, n, err)
	}
	t.Setenv("SEEDS_TEST_SEEDS", "4")
	t.Setenv("SEEDS_TEST_COUNT", "9")
	s, n, err = FromEnv("SEEDS_TEST_SEEDS", "1-2", "SEEDS_TEST_COUNT", 5)
	if err != nil || fmt.Sprint(s) != "[4]" || n != 9 {
		t.Errorf("from the environment: %v %d %v", s, n, err)
	}
	for _, bad := range [][2]string{{"x", "9"}, {"4", "0"}, {"4", "many"}} {
		t.Setenv("SEEDS_TEST_SEEDS", bad[0])
		t.Setenv("SEEDS_TEST_COUNT", bad[1])
		if _, _, err := FromEnv("SEEDS_TEST_SEEDS", "1-2", "SEEDS_TEST_COUNT", 5); err == nil {
			t.Errorf("FromEnv accepted %q", bad)
		}
	}
}

type tally struct{ seeds, ops int }

func (t *tally) Add(o tally) { t.seeds += o.seeds; t.ops += o.ops }

// TestRun: every seed the environment names is played once, in its own subtest, with the count
// asked for.
func TestRun(t *testing.T) {
	t.Setenv("SEEDS_TEST_SEEDS", "3,5-6")
	t.Setenv("SEEDS_TEST_COUNT", "4")
	var played []uint64
	Run(t, Config{SeedsVar: "SEEDS_TEST_SEEDS", Seeds: "1", CountVar: "SEEDS_TEST_COUNT", Count: 2, Unit: "ops"}, func(st *testing.T, seed uint64, n int) tally {
		if want := fmt.Sprintf("%s/seed=%d", t.Name(), seed); st.Name() != want {
			t.Errorf("subtest %q, want %q", st.Name(), want)
		}
		if n != 4 {
			t.Errorf("seed %d: count %d, want 4", seed, n)
		}
		played = append(played, seed)
		return tally{1, n}
	})
	if fmt.Sprint(played) != "[3 5 6]" {
		t.Errorf("played %v", played)
	}
}
