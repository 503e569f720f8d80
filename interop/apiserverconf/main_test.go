package apiserverconf

import (
	"io"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"google.golang.org/grpc/grpclog"
	"k8s.io/klog/v2"

	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
)

func TestMain(m *testing.M) {
	// gRPC's info and warning logs are connection chatter of servers the tests stop on purpose;
	// errors still reach stderr. Set before any client exists, as the logger is not swapped safely
	// under concurrent use.
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
	// Upstream's Cacher logs its life (initialization, relists, watcher terminations) through klog,
	// which is process-wide; the tests say what failed.
	klog.SetLogger(logr.Discard())
	// Upstream's watch cache leaves one goroutine per read that waited for a resourceVersion
	// running for up to 3 s after the read (kubeapiserver.GoleakOptions says which and why).
	goleak.VerifyTestMain(m, kubeapiserver.GoleakOptions()...)
}
