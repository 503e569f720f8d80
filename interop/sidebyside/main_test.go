package sidebyside

import (
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"go.uber.org/goleak"
	"google.golang.org/grpc/grpclog"
	"k8s.io/klog/v2"

	"github.com/listwatch/listwatch/interop/internal/kubeapiserver"
)

func TestMain(m *testing.M) {
	// The upstream server and cacher log their life through klog, and gRPC its connection chatter;
	// a benchmark says what failed. klog's lines about watchers and errors are kept, so that a
	// benchmark can say why upstream closed a watch. gRPC's is set before any client exists.
	klog.SetLogger(funcr.New(upstreamLog.record, funcr.Options{Verbosity: 1}))
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr))
	goleak.VerifyTestMain(m, kubeapiserver.GoleakOptions()...)
}

// upstreamLog keeps the last klog lines of upstream's that mention a watcher or an error.
var upstreamLog = &logRing{}

type logRing struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRing) record(prefix, args string) {
	line := prefix + " " + args
	if !strings.Contains(line, "atcher") && !strings.Contains(line, `"error"`) && !strings.Contains(line, "rror") {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
	if len(l.lines) > 20 {
		l.lines = l.lines[len(l.lines)-20:]
	}
}

// last returns the last n kept lines, joined.
func (l *logRing) last(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines[max(0, len(l.lines)-n):], "\n")
}
