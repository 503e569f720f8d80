package etcdtest

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/store"
)

// Listwatch serves a fresh listwatch store through etcdgrpc's in-process client, as the embedded
// member would: with its lease TTL floor (MinLeaseTTL) and the member ID etcdgrpc presents, and
// the progress-notify interval progressNotify (0: the store's default). configure may change the
// client's configuration. Client and store are stopped at tb's cleanup.
func Listwatch(tb testing.TB, progressNotify time.Duration, configure ...func(*clientv3.Config)) *clientv3.Client {
	tb.Helper()
	opts := etcdgrpc.Options{}.WithDefaults()
	st := store.New(store.Options{MinLeaseTTL: MinLeaseTTL, MemberID: opts.MemberID, ProgressNotifyInterval: progressNotify})
	cli, stop, err := etcdgrpc.NewClient(st, opts, configure...)
	if err != nil {
		st.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := stop(); err != nil {
			tb.Errorf("stopping listwatch's in-process etcd API: %v", err)
		}
		if err := st.Close(); err != nil {
			tb.Errorf("closing listwatch's store: %v", err)
		}
	})
	return cli
}
