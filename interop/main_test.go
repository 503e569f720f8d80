package interop

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/listwatch/listwatch/interop/internal/kinetest"
	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
)

var (
	flagSeed = flag.Uint64("interop.seed", 0, "run the differential test with this seed only")
	flagOps  = flag.Int("interop.ops", 0, "operations per seed (default: each test's own)")
)

// TestMain: kubecheck_test.go runs the upstream apiserver, kine_test.go kine; check_test.go's
// command, built once, is removed at the end.
func TestMain(m *testing.M) {
	kubeapiserver.VerifyTestMain(m, append(kinetest.GoleakOptions(), goleak.Cleanup(func(code int) {
		removeBuilt()
		os.Exit(code)
	}))...)
}
