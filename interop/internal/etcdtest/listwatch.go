package etcdtest

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

// Listwatch serves a fresh listwatch store through etcdgrpc's in-process client, as the embedded
// member would: with its lease TTL floor (MinLeaseTTL) and the member ID etcdgrpc presents, and
// the progress-notify interval progressNotify (0: the store's default). configure may change the
// client's configuration. Client and store are stopped at tb's cleanup.
func Listwatch(tb testing.TB, progressNotify time.Duration, configure ...func(*clientv3.Config)) *clientv3.Client {
	tb.Helper()
	st, opts := Store(tb, progressNotify)
	cli, stop, err := etcdgrpc.NewClient(st, opts, configure...)
	if err != nil {
		tb.Fatal(err)
	}
	testutil.CloseAtCleanup(tb, "stopping listwatch's in-process etcd API", stop)
	return cli
}

// Store is a fresh listwatch store as the embedded member would be: its lease TTL floor
// (MinLeaseTTL), the member ID of the etcdgrpc options returned, and the progress-notify interval
// progressNotify (0: the store's default). It is closed at tb's cleanup, after the server that the
// caller registers later.
func Store(tb testing.TB, progressNotify time.Duration) (*store.Store, etcdgrpc.Options) {
	opts := etcdgrpc.Options{}.WithDefaults()
	st := store.New(store.Options{MinLeaseTTL: MinLeaseTTL, MemberID: opts.MemberID, ProgressNotifyInterval: progressNotify})
	testutil.CloseAtCleanup(tb, "closing listwatch's store", st.Close)
	return st, opts
}
