package kubeapiserver

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/etcdtest"
	"github.com/listwatch/listwatch/store"
)

// ServeEtcdAPI serves listwatch's etcd API for st (etcdgrpc.NewServer) on a fresh 127.0.0.1 port
// and returns its client URL and the function that stops the server and waits for its handlers.
// The caller owns st and closes it after stop. opts.ClientURLs, if empty, is set to the URL, so
// member list answers with it as etcd would.
func ServeEtcdAPI(st *store.Store, opts etcdgrpc.Options) (endpoint string, stop func() error, err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("%w: listen: %v", ErrServer, err)
	}
	endpoint = "http://" + lis.Addr().String()
	if len(opts.ClientURLs) == 0 {
		opts.ClientURLs = []string{endpoint}
	}
	srv := etcdgrpc.NewServer(st, opts.WithDefaults())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	stop = sync.OnceValue(func() error {
		// Stop, not GracefulStop: the apiserver's watch streams would hold a graceful stop forever.
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return err
		}
		return nil
	})
	return endpoint, stop, nil
}

// EmbeddedEtcd starts a fresh embedded etcd v3.7 (etcdtest.Start) in a temporary directory of tb,
// stopped at tb's cleanup, and returns its client URLs.
func EmbeddedEtcd(tb testing.TB) []string {
	tb.Helper()
	cli, stop, err := etcdtest.Start(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	testutil.CloseAtCleanup(tb, "stopping embedded etcd", stop)
	return cli.Endpoints()
}

// ListwatchEtcd serves a fresh listwatch store, with the lease TTL floor of the embedded etcd,
// through ServeEtcdAPI; both are stopped at tb's cleanup. It returns the client URL and the store.
func ListwatchEtcd(tb testing.TB) ([]string, *store.Store) {
	tb.Helper()
	st, opts := etcdtest.Store(tb, 0)
	endpoint, stop, err := ServeEtcdAPI(st, opts)
	if err != nil {
		tb.Fatal(err)
	}
	testutil.CloseAtCleanup(tb, "stopping listwatch's etcd API", stop)
	return []string{endpoint}, st
}

// StartT starts a server with Start and stops it at tb's cleanup; an error fails tb.
func StartT(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := Start(tb.Context(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	testutil.CloseAtCleanup(tb, "stopping the apiserver", s.Stop)
	return s
}
