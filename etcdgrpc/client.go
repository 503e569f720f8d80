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

// ErrInProcessClosed is returned by InProcess.Dial once the InProcess is closed.
var ErrInProcessClosed = errors.New("etcdgrpc: in-process server closed")

// InProcess is NewServer(st, opts) served on an in-memory bufconn listener, to which Dial connects
// any number of clientv3 clients, each over a gRPC connection of its own, as several clients of one
// etcd member each dial it: a client's watches share the gRPC watch streams of that client only.
type InProcess struct {
	lis    *bufconn.Listener
	srv    *grpc.Server
	served chan error

	mu      sync.Mutex
	clients []*clientv3.Client
	closed  bool

	close func() error
}

// ServeInProcess starts serving st with NewServer(st, opts) on an in-memory listener. The caller owns
// st and closes it after Close returns.
func ServeInProcess(st *store.Store, opts Options) *InProcess {
	p := &InProcess{lis: bufconn.Listen(bufconnSize), srv: NewServer(st, opts), served: make(chan error, 1)}
	go func() { p.served <- p.srv.Serve(p.lis) }()
	p.close = sync.OnceValue(p.shut)
	return p
}

// Dial returns a new clientv3 client on a new connection to the server. The configure functions may
// change the client configuration (call size limits, timeouts, logger; the default logger discards);
// the endpoint and dialer are set afterwards. Close closes the client; closing it earlier is allowed.
// After Close, Dial fails with ErrInProcessClosed.
func (p *InProcess) Dial(configure ...func(*clientv3.Config)) (*clientv3.Client, error) {
	cfg := clientv3.Config{Logger: zap.NewNop()}
	for _, f := range configure {
		f(&cfg)
	}
	cfg.Endpoints = []string{bufconnEndpoint}
	cfg.DialOptions = append(append([]grpc.DialOption(nil), cfg.DialOptions...),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return p.lis.DialContext(ctx) }))
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, ErrInProcessClosed
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed { // Close ran meanwhile and did not see this client
		cli.Close()
		return nil, ErrInProcessClosed
	}
	p.clients = append(p.clients, cli)
	return cli, nil
}

// Close closes every client Dial returned, then stops the server and waits for it, after which no
// goroutine of the clients or the server is left. It is idempotent.
func (p *InProcess) Close() error { return p.close() }

func (p *InProcess) shut() error {
	p.mu.Lock()
	p.closed = true
	clients := p.clients
	p.clients = nil
	p.mu.Unlock()
	var errs []error
	for _, cli := range clients {
		if err := cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	p.srv.Stop()
	if err := <-p.served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// NewClient serves st with ServeInProcess and returns one client Dialed to it, and the InProcess's
// Close: it closes the client, then stops the server and waits for it, after which no goroutine of
// either is left. The caller owns st and closes it after the close function returns.
func NewClient(st *store.Store, opts Options, configure ...func(*clientv3.Config)) (*clientv3.Client, func() error, error) {
	p := ServeInProcess(st, opts)
	cli, err := p.Dial(configure...)
	if err != nil {
		return nil, nil, errors.Join(err, p.Close())
	}
	return cli, p.Close, nil
}
