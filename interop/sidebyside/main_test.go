package sidebyside

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
	// The upstream server and cacher log their life through klog, and gRPC its connection chatter;
	// a benchmark says what failed. Set before any client exists.
	if os.Getenv("SIDEBYSIDE_KLOG") == "" {
		klog.SetLogger(logr.Discard())
	}
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
	goleak.VerifyTestMain(m, kubeapiserver.GoleakOptions()...)
}
