package etcdgrpc_test

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newClient starts a store and an in-process server, and returns the store and a clientv3 client;
// both are closed when the test ends, client and server first.
func newClient(t *testing.T, so store.Options, configure ...func(*clientv3.Config)) (*store.Store, *clientv3.Client) {
	t.Helper()
	return newClientWith(t, so, etcdgrpc.Options{}, configure...)
}

// newClientWith is newClient with the server's options given.
func newClientWith(t *testing.T, so store.Options, opts etcdgrpc.Options, configure ...func(*clientv3.Config)) (*store.Store, *clientv3.Client) {
	t.Helper()
	st := store.New(so)
	cli, closeFn, err := etcdgrpc.NewClient(st, opts, configure...)
	if err != nil {
		st.Close()
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() {
		if err := closeFn(); err != nil {
			t.Errorf("close client: %v", err)
		}
		st.Close()
	})
	return st, cli
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	t.Cleanup(cancel)
	return ctx
}
