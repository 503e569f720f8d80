// Package backend starts the etcd servers the watch tests run against: listwatch's in-process store
// served over gRPC, or a real etcd process.
package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/store"
)

// Backend is one etcd server and a client connected to it.
type Backend struct {
	// Client is connected to the server; Close closes it.
	Client *clientv3.Client
	// Name says which server this is, for test names and failure messages.
	Name string
	// Store is the in-process store, nil for an etcd process.
	Store *store.Store

	closeOnce   sync.Once
	closeErr    error
	stop        func() error
	closeClient func() error
}

// Close closes the client and stops the server. It is idempotent.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		var err error
		if b.closeClient != nil {
			err = b.closeClient()
		} else if err = b.Client.Close(); errors.Is(err, context.Canceled) {
			err = nil
		}
		if b.stop != nil {
			err = errors.Join(err, b.stop())
		}
		b.closeErr = err
	})
	return b.closeErr
}

// NewInProcess serves a new store.Store with opts over gRPC in process and connects a client to it.
// Close closes the client, the server and the store.
func NewInProcess(opts store.Options) (*Backend, error) {
	st := store.New(opts)
	srvOpts := etcdgrpc.Options{MaxRequestBytes: opts.MaxRequestBytes}
	client, closeFn, err := etcdgrpc.NewClient(st, srvOpts)
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	return &Backend{
		Client:      client,
		Name:        "in-process",
		Store:       st,
		stop:        st.Close,
		closeClient: closeFn,
	}, nil
}

// EtcdBinary is the etcd executable StartEtcd runs.
var EtcdBinary = "/usr/bin/etcd"

// StartEtcd starts an etcd process with a fresh data directory on free loopback ports and returns it
// once it answers. Close kills it and removes the directory.
func StartEtcd() (*Backend, error) {
	if _, err := os.Stat(EtcdBinary); err != nil {
		return nil, fmt.Errorf("etcd binary: %w", err)
	}
	dir, err := os.MkdirTemp("", "listwatch-etcd-")
	if err != nil {
		return nil, err
	}
	clientPort, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	peerPort, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	var out bytes.Buffer
	cmd := exec.Command(EtcdBinary,
		"--name", "default",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", clientURL,
		"--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL,
		"--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL,
		"--log-level", "error",
		"--logger", "zap",
	)
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stop := func() error {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return os.RemoveAll(dir)
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{clientURL},
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		stop()
		return nil, err
	}
	b := &Backend{Client: client, Name: "etcd-process", stop: stop}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		c, cc := context.WithTimeout(ctx, time.Second)
		_, err := client.Get(c, "health")
		cc()
		if err == nil {
			return b, nil
		}
		if ctx.Err() != nil {
			b.Close()
			return nil, fmt.Errorf("etcd did not start: %v; output:\n%s", err, out.String())
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
