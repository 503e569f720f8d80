// Package storagebackend starts the etcd servers the storage tests run against: listwatch's in-process
// store served over gRPC, or a real etcd process. It is an assembler for tests (the watch, cache and
// interop conformance tests), kept out of storage/storagetest so that the suite imports no storage
// implementation.
package storagebackend

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/internal/etcdprocess"
	"github.com/listwatch/listwatch/internal/testutil"
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

// StartInProcess is NewInProcess for a test: the test fails if the server does not start, and the
// server is closed when the test ends.
func StartInProcess(t testing.TB, opts store.Options) *Backend {
	t.Helper()
	b, err := NewInProcess(opts)
	if err != nil {
		t.Fatal(err)
	}
	testutil.CloseAtCleanup(t, "close backend", b.Close)
	return b
}

// StartEtcd starts an etcd process (etcdprocess.Launch: a fresh data directory on free loopback
// ports) and returns it once it is healthy, with a client connected to it. Close closes the client,
// kills the process and removes its data.
func StartEtcd() (*Backend, error) {
	c, err := etcdprocess.Launch(1)
	if err != nil {
		return nil, err
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   c.Endpoints(),
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return &Backend{Client: client, Name: "etcd-process", stop: c.Stop}, nil
}
