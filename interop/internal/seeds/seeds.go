// Package seeds reads the seeds and the size of a seeded differential run from the environment, so
// that `make test` runs a small default set and a long run names its own: "7", "1-200", "3,9-12".
//
// # Invariants
//
//   - Parse accepts N, N-M (1 <= N <= M) and comma-separated lists of them, and refuses anything else
//     with an error naming the part (TestParse).
//   - FromEnv uses the defaults when the variables are unset and refuses a malformed or
//     non-positive value instead of running something else (TestFromEnv).
//   - Run plays every seed in a subtest of its own and sums their tallies (TestRun).
package seeds

import (
	"cmp"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Parse reads "N", "N-M" and comma-separated lists of them.
func Parse(s string) ([]uint64, error) {
	var seeds []uint64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seed %q: %w", part, err)
		}
		if a == 0 {
			// 0 is how the tests' -seed flags say "no seed given"
			return nil, fmt.Errorf("seed %q: seeds start at 1", part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("seed range %q: want N-M with N <= M", part)
			}
		}
		for n := a; n <= b; n++ {
			seeds = append(seeds, n)
		}
	}
	return seeds, nil
}

// FromEnv returns the seeds named by the variable seedsVar (default defSeeds) and the count named by
// countVar (default defCount).
func FromEnv(seedsVar, defSeeds, countVar string, defCount int) ([]uint64, int, error) {
	spec := os.Getenv(seedsVar)
	if spec == "" {
		spec = defSeeds
	}
	list, err := Parse(spec)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", seedsVar, err)
	}
	count := defCount
	if v := os.Getenv(countVar); v != "" {
		if count, err = strconv.Atoi(v); err != nil || count <= 0 {
			return nil, 0, fmt.Errorf("%s=%q: want a positive number", countVar, v)
		}
	}
	return list, count, nil
}

// Tally is a seeded run's counts, which add up seed by seed.
type Tally[T any] interface {
	*T
	Add(T)
}

// Config is a seeded run's environment and defaults: the variable SeedsVar names the seeds (default
// Seeds) and CountVar the operations per seed (default Count), which Unit names in the log. With
// -short (the inner loop, make stress) the defaults are ShortSeeds and ShortCount where set.
type Config struct {
	SeedsVar, Seeds string
	CountVar        string
	Count           int
	Unit            string
	ShortSeeds      string
	ShortCount      int
}

// defaults are the seeds and count a run uses when the environment names none.
func (c Config) defaults() (string, int) {
	if testing.Short() {
		return cmp.Or(c.ShortSeeds, c.Seeds), cmp.Or(c.ShortCount, c.Count)
	}
	return c.Seeds, c.Count
}

// Run runs one subtest per seed that FromEnv names from c, each playing count operations through
// play, and logs the seeds' summed tallies with the seeds that failed, so that a long run names what
// to rerun alone.
func Run[T any, P Tally[T]](t *testing.T, c Config, play func(t *testing.T, seed uint64, count int) T) {
	t.Helper()
	def, defCount := c.defaults()
	list, count, err := FromEnv(c.SeedsVar, def, c.CountVar, defCount)
	if err != nil {
		t.Fatal(err)
	}
	var total T
	var failed []uint64
	start := time.Now()
	for _, seed := range list {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					failed = append(failed, seed)
				}
			}()
			P(&total).Add(play(t, seed, count))
		})
	}
	t.Logf("%d seeds of %d %s in %v: %v; failing seeds: %v", len(list), count, c.Unit, time.Since(start).Round(time.Second), total, failed)
}
