package interop

import (
	"flag"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"

	"github.com/listwatch/listwatch/interop/internal/kinetest"
	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
)

var (
	flagSeed = flag.Uint64("interop.seed", 0, "run the differential test with this seed only")
	flagOps  = flag.Int("interop.ops", 0, "operations per seed (default: each test's own)")
)

func TestMain(m *testing.M) {
	// kubecheck_test.go runs the upstream apiserver, which logs its life through klog
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m, append(kubeapiserver.GoleakOptions(), kinetest.GoleakOptions()...)...)
}
