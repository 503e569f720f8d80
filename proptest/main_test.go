package proptest

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain raises rapid's default to 1000 checks per property unless -rapid.checks (or RAPID_CHECKS)
// says otherwise, and verifies that no test leaves a goroutine behind.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	_, env := os.LookupEnv("RAPID_CHECKS")
	rapidChecksChosen = set || env
	if !rapidChecksChosen {
		if err := flag.Set("rapid.checks", "1000"); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}

// rapidChecksChosen reports whether the command line or the environment chose rapid's number of
// checks; properties with their own default keep it only when nobody did.
var rapidChecksChosen bool
