package interop

import (
	"flag"
	"testing"

	"github.com/listwatch/listwatch/interop/internal/kinetest"
	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
)

var (
	flagSeed = flag.Uint64("interop.seed", 0, "run the differential test with this seed only")
	flagOps  = flag.Int("interop.ops", 0, "operations per seed (default: each test's own)")
)

// TestMain: kubecheck_test.go runs the upstream apiserver, kine_test.go kine.
func TestMain(m *testing.M) { kubeapiserver.VerifyTestMain(m, kinetest.GoleakOptions()...) }
