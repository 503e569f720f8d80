package watch

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	rpctypes "go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/internal/storagebackend"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

// TestCompactor runs two apiservers' compactors on one etcd, as kube-apiserver runs them: each
// interval one of them compacts at the revision compact_rev_key announced an interval before; the
// other loses the race and only learns the key's version; an interval of 0 runs nothing.
func TestCompactor(t *testing.T) {
	b := storagebackend.StartInProcess(t, store.Options{})
	a, other := otherClient(t, b.Store), otherClient(t, b.Store)
	ctx := context.Background()
	put := func() int64 {
		resp, err := a.Put(ctx, "/registry/configmaps/ns/c", "v")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	put()
	clk := testingclock.NewFakeClock(time.Now())
	var compacted atomic.Int64
	c := StartCompactor(a, time.Minute, clk, testutil.DiscardLogger(), compacted.Store)
	defer c.Stop()
	tick := func(wantVersion int64) {
		t.Helper()
		testutil.WaitFor(t, "the compactor waiting for its interval", clk.HasWaiters)
		clk.Step(time.Minute)
		testutil.WaitFor(t, "compact_rev_key at version "+strconv.FormatInt(wantVersion, 10), func() bool {
			resp, err := a.Get(ctx, compactRevKey)
			return err == nil && len(resp.Kvs) == 1 && resp.Kvs[0].Version == wantVersion
		})
	}
	// The first round writes 0 and compacts nothing: the revision of an interval ago is unknown.
	tick(1)
	seen, err := a.Get(ctx, compactRevKey)
	if err != nil || string(seen.Kvs[0].Value) != "0" || compacted.Load() != 0 {
		t.Fatalf("after the first round: %v %v, compacted %d", seen, err, compacted.Load())
	}
	announced := seen.Header.Revision
	put()
	// The second compacts at the revision the first saw.
	tick(2)
	testutil.WaitFor(t, "the compaction reported", func() bool { return compacted.Load() != 0 })
	if got := compacted.Load(); got != announced {
		t.Fatalf("compacted at %d, want the revision of the first round (%d)", got, announced)
	}
	if _, err := a.Get(ctx, "/registry/configmaps/ns/c", clientv3.WithRev(compacted.Load()-1)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("a read below the compaction: %v", err)
	}

	// Another apiserver's round, from a version it has not seen, loses the race: no write, no
	// compaction; it learns the version for its next round.
	version, _, done, err := Compact(ctx, other, 0, put())
	if err != nil || version != 2 || done != 0 {
		t.Fatalf("the losing round: version %d, compacted %d, %v", version, done, err)
	}
	if resp, _ := a.Get(ctx, compactRevKey); resp.Kvs[0].Version != 2 {
		t.Fatalf("the losing round wrote compact_rev_key: version %d", resp.Kvs[0].Version)
	}
	c.Stop()
	c.Stop()

	// --etcd-compaction-interval=0: nothing runs.
	off := StartCompactor(a, 0, clk, testutil.DiscardLogger(), nil)
	off.Stop()
}
