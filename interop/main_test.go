package interop

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

var (
	flagSeed = flag.Uint64("interop.seed", 0, "run the differential test with this seed only")
	flagOps  = flag.Int("interop.ops", 0, "operations per seed (default: each test's own)")
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
