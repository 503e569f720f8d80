package etcdtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/listwatch/listwatch/etcdgrpc"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestStartServesAndStops(t *testing.T) {
	start := time.Now()
	cli, stop, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("started in %v", time.Since(start))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	put, err := cli.Put(ctx, "a", "1")
	if err != nil {
		t.Fatal(err)
	}
	if put.Header.Revision != 2 {
		t.Errorf("first put revision = %d, want 2", put.Header.Revision)
	}
	lease, err := cli.Grant(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if lease.TTL != MinLeaseTTL {
		t.Errorf("granted TTL = %d, want the floor %d", lease.TTL, MinLeaseTTL)
	}
	wch := cli.Watch(ctx, "a", clientv3.WithRev(2))
	wr := <-wch
	if len(wr.Events) != 1 || string(wr.Events[0].Kv.Value) != "1" {
		t.Errorf("watch from 2 = %+v", wr)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestStartFailsOnUnusableDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	cli, stop, err := Start(file)
	if err == nil {
		stop()
		t.Fatalf("Start in a regular file returned client %v and no error", cli)
	}
	if !strings.HasPrefix(err.Error(), "etcdtest: start: ") {
		t.Errorf("error %q does not say which step failed", err)
	}
}

// TestListwatchLikeTheMember: the listwatch twin answers as the embedded member does where the
// comparisons need it (the first write's revision, the lease TTL floor), presents etcdgrpc's member
// ID, and applies the client configuration it is given.
func TestListwatchLikeTheMember(t *testing.T) {
	configured := false
	cli := Listwatch(t, 0, func(*clientv3.Config) { configured = true })
	if !configured {
		t.Error("the client configuration was not applied")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	put, err := cli.Put(ctx, "a", "1")
	if err != nil {
		t.Fatal(err)
	}
	member := etcdgrpc.Options{}.WithDefaults().MemberID
	if put.Header.Revision != 2 || put.Header.MemberId != member {
		t.Errorf("first put: revision %d, member %x; want 2, %x", put.Header.Revision, put.Header.MemberId, member)
	}
	lease, err := cli.Grant(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if lease.TTL != MinLeaseTTL {
		t.Errorf("granted TTL = %d, want the floor %d", lease.TTL, MinLeaseTTL)
	}
}
