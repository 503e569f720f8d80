package etcd

import (
	"context"
	"sync"
	"testing"

	"pgregory.net/rapid"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/store"
)

func clientRecorder(t testing.TB) func(st *store.Store) (*Recorder, func()) {
	return func(st *store.Store) (*Recorder, func()) {
		cli, closeFn, err := etcdgrpc.NewClient(st, etcdgrpc.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return NewRecorder(cli, nil), func() {
			if err := closeFn(); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestRecorderWithClientv3: concurrent clientv3 workloads against the store served by etcdgrpc, recorded
// by a Recorder, pass; and the recorded history has what a check needs (created revisions, errors
// classified, progress notifications, compaction answers).
func TestRecorderWithClientv3(t *testing.T) {
	var definite, progress, compacted int
	rapid.Check(t, func(rt *rapid.T) {
		h := runWorkloadOn(t, drawWorkload(rt, 20), clientRecorder(t))
		for _, o := range h.Operations {
			if o.Error != "" && !o.Unknown {
				definite++
			}
			if o.Unknown {
				rt.Fatalf("no request can time out here, yet %s: %s", DescribeRequest(&o.Request), o.Error)
			}
		}
		for _, w := range h.Watches {
			// a watch opened just before the end may have received nothing
			if len(w.Responses) > 0 && !w.Responses[0].Created && (!w.Responses[0].Canceled || w.Responses[0].CancelReason == "") {
				rt.Fatalf("watch %+v: first response %+v is neither the created one nor a refusal", w.Request, w.Responses)
			}
			for _, r := range w.Responses {
				if r.IsProgressNotify() {
					progress++
				}
				if r.IsCompacted() {
					compacted++
				}
			}
		}
		res := mustCheck(t, h)
		if !res.OK() {
			dumpHistory(t, h)
			rt.Fatalf("a history recorded through clientv3 fails: %v", res.Err())
		}
	})
	if definite == 0 || progress == 0 {
		t.Fatalf("workloads recorded %d definite errors and %d progress notifications", definite, progress)
	}
	t.Logf("%d definite errors, %d progress notifications, %d compaction answers", definite, progress, compacted)
}

// TestRecorderConcurrentUse records from many goroutines at once and checks every operation landed
// in a lane of its own while in flight.
func TestRecorderConcurrentUse(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	rec, done := clientRecorder(t)(st)
	defer done()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				if _, err := rec.Do(context.Background(), put(string(rune('a'+g)), string(rune('0'+i%10)))); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	h := rec.History()
	if len(h.Operations) != 200 {
		t.Fatalf("%d operations recorded", len(h.Operations))
	}
	byLane := map[int][]Operation{}
	for _, o := range h.Operations {
		byLane[o.Client] = append(byLane[o.Client], o)
	}
	for lane, ops := range byLane {
		for i := 1; i < len(ops); i++ {
			if ops[i].Call < ops[i-1].Return {
				t.Fatalf("lane %d: operations overlap", lane)
			}
		}
	}
	wantOK(t, h)
}

// TestRecorderUnknownOutcome: a request whose context ends first is recorded with an unknown outcome.
func TestRecorderUnknownOutcome(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	rec, done := clientRecorder(t)(st)
	defer done()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := rec.Do(ctx, put("a", "1")); err == nil {
		t.Fatal("a put with a canceled context succeeded")
	}
	if _, err := rec.Do(context.Background(), Request{Range: &RangeRequest{Key: "a", Revision: 5}}); err == nil {
		t.Fatal("a range at a future revision succeeded")
	}
	h := rec.History()
	if o := h.Operations[0]; !o.Unknown || o.Error == "" {
		t.Fatalf("canceled put recorded as %+v", o)
	}
	if o := h.Operations[1]; o.Unknown || o.Error != store.ErrFutureRev.Error() {
		t.Fatalf("future-revision range recorded as %+v", o)
	}
	wantOK(t, h)
}
