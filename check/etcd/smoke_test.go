package etcd

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

func TestSmokeSequential(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	rec := newStoreRecorder(st)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var created, events atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = rec.Watch(ctx, WatchRequest{Key: "a", RangeEnd: "b", PrevKV: true}, func(r WatchResponse) {
			if r.Created {
				created.Add(1)
			}
			events.Add(int64(len(r.Events)))
		})
	}()
	testutil.WaitFor(t, "created", func() bool { return created.Load() == 1 })
	for _, req := range []Request{put("a1", "x"), put("a2", "y"), get("a1"), put("a1", "z"), del("a2"), prefix("a"), del("nothing")} {
		if _, err := rec.Do(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, "events", func() bool { return events.Load() == 4 })
	cancel()
	wg.Wait()
	h := rec.History()
	res := mustCheck(t, h)
	if !res.OK() {
		t.Fatalf("valid history failed: %v", res.Err())
	}
	if len(res.Events) != 4 {
		t.Fatalf("reference has %d events, want 4", len(res.Events))
	}
}
