package etcdgrpc

import (
	"context"
	"errors"
	"net"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"

	"github.com/listwatch/listwatch/store"
)

// bufconnSize is the in-memory pipe's buffer; gRPC's flow control bounds what is in flight anyway.
const bufconnSize = 1 << 20

// bufconnEndpoint names the in-process endpoint; the dialer ignores the address.
const bufconnEndpoint = "bufconn"

// NewClient serves st with NewServer(st, opts) on an in-memory bufconn listener and returns a
// clientv3 client connected to it, and a function that closes the client, stops the server and waits
// for it, after which no goroutine of either is left. The configure functions may change the client
// configuration (call size limits, timeouts, logger; the default logger discards); the endpoint and
// dialer are set afterwards. The caller owns st and closes it after the close function returns.
func NewClient(st *store.Store, opts Options, configure ...func(*clientv3.Config)) (*clientv3.Client, func() error, error) {
	lis := bufconn.Listen(bufconnSize)
	srv := NewServer(st, opts)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	stop := func() error {
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return err
		}
		return nil
	}

	cfg := clientv3.Config{Logger: zap.NewNop()}
	for _, f := range configure {
		f(&cfg)
	}
	cfg.Endpoints = []string{bufconnEndpoint}
	cfg.DialOptions = append(append([]grpc.DialOption(nil), cfg.DialOptions...),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, nil, errors.Join(err, stop())
	}
	closeFn := sync.OnceValue(func() error {
		err := cli.Close()
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		return errors.Join(err, stop())
	})
	return cli, closeFn, nil
}
