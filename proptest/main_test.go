package proptest

import (
	"flag"
	"os"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

// TestMain raises rapid's default to packageChecks checks per property (shortChecks of that with
// -short) unless -rapid.checks (or RAPID_CHECKS) says otherwise, and verifies that no test leaves a
// goroutine behind.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	_, env := os.LookupEnv("RAPID_CHECKS")
	rapidChecksChosen = set || env
	if !rapidChecksChosen {
		if err := flag.Set("rapid.checks", strconv.Itoa(shortChecks(packageChecks))); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}

// packageChecks is the package's default number of checks per property.
const packageChecks = 1000

// shortChecks is n, or a tenth of it (at least 2) with -short: every property still runs, on
// fewer cases.
func shortChecks(n int) int {
	if testing.Short() {
		return max(n/10, 2)
	}
	return n
}

// rapidChecksChosen reports whether the command line or the environment chose rapid's number of
// checks; properties with their own default keep it only when nobody did.
var rapidChecksChosen bool
