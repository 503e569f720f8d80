// Package etcdtest starts a real single-member etcd v3.7 (go.etcd.io/etcd/server/v3/embed) for tests
// and benchmarks that compare listwatch with upstream.
//
// The member runs in a directory the caller owns (usually t.TempDir()), listens only on 127.0.0.1
// ports the kernel picks, never waits for fsync, logs nothing, and elects itself within a few
// heartbeats. Start returns once the member serves requests; the stop function it returns closes
// the client, then the member, and returns when every goroutine either started has exited. No
// goroutine of the embedded server outlives stop (goleak finds none in this package's tests or in
// interop's, with no ignore option), so test mains need no exceptions for it.
//
// Listwatch serves the member's listwatch twin for the same comparisons: a fresh store with the
// member's lease TTL floor and etcdgrpc's member ID, through etcdgrpc's in-process client, stopped
// at the test's cleanup (TestListwatchLikeTheMember). Store is that store alone, for callers that
// serve it another way (kubeapiserver.ListwatchEtcd over TCP).
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Timing of the member: 10 ms heartbeats and a 100 ms election timeout, so a fresh single member
// leads within about 100 ms.
const (
	TickMs     = 10
	ElectionMs = 100
)

// MinLeaseTTL is the lease TTL floor, in seconds, that a member with TickMs and ElectionMs applies:
// etcdserver.NewServer sets it to ceil(3/2 election timeouts).
const MinLeaseTTL = (3*(ElectionMs/TickMs)/2*TickMs + 999) / 1000

// readyTimeout bounds how long Start waits for the member to serve.
const readyTimeout = 30 * time.Second

// ErrNotReady is returned by Start when the member did not become ready in time.
var ErrNotReady = errors.New("etcdtest: embedded etcd did not become ready")

// Start runs a fresh single-member etcd in dir, which must be empty or absent, and returns a client
// connected to it and the function that stops both. The configure functions may change the member
// configuration after the defaults above are set and before it starts.
func Start(dir string, configure ...func(*embed.Config)) (*clientv3.Client, func() error, error) {
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.Name = "default"
	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{loopback}
	cfg.AdvertiseClientUrls = []url.URL{loopback}
	cfg.ListenPeerUrls = []url.URL{loopback}
	cfg.AdvertisePeerUrls = []url.URL{loopback}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = true
	cfg.TickMs = TickMs
	cfg.ElectionMs = ElectionMs
	cfg.EnableGRPCGateway = false
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	for _, f := range configure {
		f(cfg)
	}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("etcdtest: start: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, nil, fmt.Errorf("etcdtest: start: %w", err)
	case <-time.After(readyTimeout):
		e.Close()
		return nil, nil, ErrNotReady
	}

	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"http://" + e.Clients[0].Addr().String()},
		DialTimeout: readyTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		e.Close()
		return nil, nil, fmt.Errorf("etcdtest: client: %w", err)
	}
	// The member is ready once it applied its own election; wait for a linearizable read to be
	// sure the client's connection is up too.
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if _, err := cli.Get(ctx, "health"); err != nil {
		cli.Close()
		e.Close()
		return nil, nil, fmt.Errorf("etcdtest: first read: %w", err)
	}

	stop := func() error {
		err := cli.Close()
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		e.Close()
		// Err is closed once every handler goroutine of the member has returned.
		for range e.Err() {
		}
		return err
	}
	return cli, stop, nil
}
