package kinetest

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/k3s-io/kine/pkg/drivers"
	"github.com/k3s-io/kine/pkg/drivers/sqlite"
	"github.com/k3s-io/kine/pkg/server"
	"github.com/sirupsen/logrus"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
)

// kine's command line defaults (pkg/app/app.go).
const (
	PollInterval     = time.Second
	NotifyInterval   = 5 * time.Second
	EmulatedVersion  = "3.6.11"
	compactBatchSize = 1000
	compactTimeout   = 5 * time.Second
	pollBatchSize    = 500
)

// maxRecvBytes is etcd's default request limit plus the gRPC overhead kine's endpoint allows.
const maxRecvBytes = 3*512*1024 + 512*1024

// Options are the kine flags a test may change.
type Options struct {
	// CompactMinRetain is kine's --compact-min-retain: the revisions a compaction keeps below the
	// current one. Kine's default, 1000, makes a Compact request of a short test a no-op that
	// answers success; 0 lets it compact where asked, as etcd does.
	CompactMinRetain int64
}

// DefaultCompactMinRetain is kine's default --compact-min-retain.
const DefaultCompactMinRetain = 1000

// Start starts kine over a SQLite database in dir and returns its client endpoint (host:port) and
// the function that stops it.
func Start(dir string, opts Options) (endpoint string, stop func() error, err error) {
	// kine logs every request error through logrus at the error level; the tests read the answers
	logrus.SetOutput(io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	_, backend, err := sqlite.New(ctx, &wg, &drivers.Config{
		DataSourceName:   filepath.Join(dir, "state.db") + "?" + sqlite.DefaultParams,
		PollInterval:     PollInterval,
		CompactMinRetain: opts.CompactMinRetain,
		CompactBatchSize: compactBatchSize,
		CompactTimeout:   compactTimeout,
		PollBatchSize:    pollBatchSize,
	})
	if err != nil {
		cancel()
		wg.Wait()
		return "", nil, err
	}
	if err := backend.Start(ctx); err != nil {
		cancel()
		wg.Wait()
		return "", nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		wg.Wait()
		return "", nil, err
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(maxRecvBytes), grpc.MaxSendMsgSize(math.MaxInt32))
	server.New(backend, "http", NotifyInterval, EmulatedVersion).Register(gs)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() {
			gs.Stop()
			if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				stopErr = err
			}
			cancel()
			wg.Wait()
		})
		return stopErr
	}
	return lis.Addr().String(), stop, nil
}

// GoleakOptions are what a test main running kine passes goleak: kine's TTL loop
// (pkg/ttl Run), which no WaitGroup counts, ends with the backend's context but may still be
// returning when the test ends.
func GoleakOptions() []goleak.Option {
	return []goleak.Option{goleak.IgnoreAnyFunction("github.com/k3s-io/kine/pkg/ttl.Run")}
}
