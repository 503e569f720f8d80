package apiserverconf

import (
	"io"
	"os"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc/grpclog"
)

func TestMain(m *testing.M) {
	// gRPC's info and warning logs are connection chatter of servers the tests stop on purpose;
	// errors still reach stderr. Set before any client exists, as the logger is not swapped safely
	// under concurrent use.
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
	goleak.VerifyTestMain(m)
}
