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
	if _, env := os.LookupEnv("RAPID_CHECKS"); !set && !env {
		if err := flag.Set("rapid.checks", "1000"); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}
