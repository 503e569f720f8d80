package etcd

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

// TestWildSequentialHistoriesPass: one client sends random requests, shape errors included (reqGen's
// wild mode), to the in-process store while a watch over every key with prev_kv runs. A sequential
// history has one linearization, so Check accepting it says every answer of the store is the
// model's; and the model's event log must be exactly what the store's watch delivered. It is the
// differential test of the model against the store at the level of single requests; proptest's
// TestCheckerReferenceMatchesStore is the one over concurrent workloads.
func TestWildSequentialHistoriesPass(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		st := store.New(store.Options{SyncInterval: 5 * time.Millisecond})
		defer st.Close()
		rec := newStoreRecorder(st)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var (
			mu       sync.Mutex
			received []Event
			created  bool
			progress int64
			wg       sync.WaitGroup
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = rec.Watch(ctx, WatchRequest{Key: "\x00", RangeEnd: "\x00", PrevKV: true}, func(r WatchResponse) {
				mu.Lock()
				defer mu.Unlock()
				created = created || r.Created
				received = append(received, r.Events...)
				if r.IsProgressNotify() {
					progress = max(progress, r.Revision)
				}
			})
		}()
		testutil.WaitFor(t, "watch created", func() bool { mu.Lock(); defer mu.Unlock(); return created })
		rev := int64(1)
		g := &reqGen{t: rt, rev: func() int64 { return rev }, wild: true}
		for i := range rapid.IntRange(1, 60).Draw(rt, "n") {
			req := g.request(fmt.Sprintf("op%d", i), true)
			resp, err := rec.Do(ctx, req)
			if err != nil {
				continue
			}
			rev = max(rev, resp.Revision)
			if req.LeaseGrant != nil {
				g.leases = append(g.leases, resp.LeaseGrant.ID)
			}
		}
		final := st.Rev()
		testutil.WaitFor(t, "watch at the final revision", func() bool {
			_ = rec.RequestProgress(ctx)
			mu.Lock()
			defer mu.Unlock()
			return progress >= final
		})
		cancel()
		wg.Wait()
		h := rec.History()
		res := mustCheck(t, h)
		if !res.OK() {
			dumpHistory(t, h)
			rt.Fatalf("a sequential history of the store fails: %v\nnotes: %v", res.Err(), res.Notes)
		}
		// A lease a request found missing may have expired: the search may then place its expiry
		// after the last revision the store reached, which nothing contradicts.
		owed := res.Events
		for len(owed) > 0 && owed[len(owed)-1].Kv.ModRevision > final {
			owed = owed[:len(owed)-1]
		}
		if diff := cmp.Diff(owed, received, diffOptions); diff != "" {
			rt.Fatalf("the model's event log differs from the store's watch (-model +store):\n%s", diff)
		}
	})
}

// TestStateEquality: states reached by different paths are equal exactly when their current
// keyspace, leases, compaction and whole revision history are.
func TestStateEquality(t *testing.T) {
	apply := func(s *mstate, reqs ...Request) *mstate {
		for i := range reqs {
			op := &kvOp{req: &reqs[i]}
			if reqs[i].LeaseGrant != nil {
				op.grantID = reqs[i].LeaseGrant.ID
			}
			s = eval(s, op).state
		}
		return s
	}
	grant := func(id int64) Request { return Request{LeaseGrant: &LeaseGrantRequest{ID: id, TTL: 60}} }
	s0 := initialState(&History{})
	a := apply(s0, put("a", "1"), put("b", "1"), grant(1), grant(2))
	b := apply(s0, put("a", "1"), put("b", "1"), grant(2), grant(1))
	if !statesEqual(a, b) || a.hash != b.hash {
		t.Fatal("same writes with leases granted in another order: states differ")
	}
	c := apply(s0, put("a", "1"), put("b", "1"), del("b"))
	d := apply(s0, put("a", "1"), put("c", "1"), del("c"))
	if sizeOf(c.kv()) != sizeOf(d.kv()) || !treapEqual(c.kv(), d.kv()) {
		t.Fatal("expected the same live keyspace")
	}
	if statesEqual(c, d) {
		t.Fatal("states with different histories (b vs c at revision 3) compare equal")
	}
	e := apply(s0, put("a", "1"), put("b", "1"), del("b"))
	if !statesEqual(c, e) {
		t.Fatal("identical histories built twice compare unequal")
	}
	if statesEqual(apply(s0, put("a", "1")), apply(s0, put("a", "2"))) {
		t.Fatal("different values compare equal")
	}
}
