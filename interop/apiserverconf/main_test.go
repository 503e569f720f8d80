package apiserverconf

import (
	"io"
	"os"
	"testing"

	"google.golang.org/grpc/grpclog"

	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
)

func TestMain(m *testing.M) {
	// gRPC's info and warning logs are connection chatter of servers the tests stop on purpose;
	// errors still reach stderr. Set before any client exists, as the logger is not swapped safely
	// under concurrent use.
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
	// Upstream's Cacher logs its life through klog; its watch cache leaves one goroutine per read
	// that waited for a resourceVersion running for up to 3 s after the read
	// (kubeapiserver.GoleakOptions says which and why).
	kubeapiserver.VerifyTestMain(m)
}
