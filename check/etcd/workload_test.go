package etcd

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

// workload is a drawn plan: per client, a sequence of requests and watch starts.
type workload struct {
	setup   []Request // run in order before anything else
	clients [][]action
	watches []WatchRequest // opened before the clients start
}

type action struct {
	req   *Request
	watch *WatchRequest
}

func drawWatch(rt *rapid.T, g *reqGen, label string, est int64) WatchRequest {
	k := g.key(label + "Key")
	if k == "" {
		k = "a"
	}
	w := WatchRequest{Key: k, RangeEnd: g.rangeEnd(k, label+"End"),
		PrevKV:         rapid.Bool().Draw(rt, label+"PrevKV"),
		ProgressNotify: rapid.IntRange(0, 3).Draw(rt, label+"Progress") == 0}
	if rapid.Bool().Draw(rt, label+"FromRev") {
		w.StartRevision = rapid.Int64Range(1, max(1, est)).Draw(rt, label+"Start")
	}
	switch rapid.IntRange(0, 5).Draw(rt, label+"Filter") {
	case 0:
		w.Filters = []WatchFilter{FilterNoPut}
	case 1:
		w.Filters = []WatchFilter{FilterNoDelete}
	}
	return w
}

func drawWorkload(rt *rapid.T, maxOps int) workload {
	var est int64 = 1
	g := &reqGen{t: rt, rev: func() int64 { return est }, leases: []int64{1, 2, 3}}
	var wl workload
	for _, id := range g.leases {
		wl.setup = append(wl.setup, Request{LeaseGrant: &LeaseGrantRequest{ID: id, TTL: 3600}})
	}
	for i := range rapid.IntRange(1, 3).Draw(rt, "watches") {
		wl.watches = append(wl.watches, drawWatch(rt, g, fmt.Sprintf("w%d", i), 1))
	}
	nc := rapid.IntRange(1, 3).Draw(rt, "clients")
	for c := range nc {
		// a conservative guess of the store's revision when the client's next request runs
		est = 1
		var acts []action
		for i := range rapid.IntRange(1, maxOps).Draw(rt, fmt.Sprintf("c%dOps", c)) {
			label := fmt.Sprintf("c%d_%d", c, i)
			if rapid.IntRange(0, 15).Draw(rt, label+"IsWatch") == 0 {
				w := drawWatch(rt, g, label+"W", est)
				acts = append(acts, action{watch: &w})
				continue
			}
			req := g.request(label, rapid.IntRange(0, 3).Draw(rt, label+"MayCompact") == 0)
			acts = append(acts, action{req: &req})
			if req.Put != nil || req.Txn != nil {
				est += max(1, int64(nc)/2)
			}
		}
		wl.clients = append(wl.clients, acts)
	}
	return wl
}

// runWorkload drives a fresh store with the workload, concurrently, and returns the recorded history.
// Every watch still open at the end is brought up to date with a progress notification before it
// is closed, so that its whole window can be checked.
func runWorkload(t testing.TB, wl workload) *History {
	return runWorkloadOn(t, wl, func(st *store.Store) (*Recorder, func()) { return newStoreRecorder(st), func() {} })
}

// runWorkloadOn is runWorkload with a recorder of the caller's making; done is called once every
// watch has ended.
func runWorkloadOn(t testing.TB, wl workload, recorder func(st *store.Store) (rec *Recorder, done func())) *History {
	st := store.New(store.Options{SyncInterval: 5 * time.Millisecond, ProgressNotifyInterval: 100 * time.Millisecond})
	defer st.Close()
	rec, done := recorder(st)
	defer done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	watches := newWatchTracker(ctx, rec)
	for _, req := range wl.setup {
		if _, err := rec.Do(ctx, req); err != nil {
			t.Fatalf("setup %s: %v", DescribeRequest(&req), err)
		}
	}
	for _, w := range wl.watches {
		watches.waitCreated(t, watches.start(w))
	}
	var cwg sync.WaitGroup
	for _, acts := range wl.clients {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for _, a := range acts {
				if a.watch != nil {
					watches.start(*a.watch)
					continue
				}
				_, _ = rec.Do(ctx, *a.req)
			}
		}()
	}
	cwg.Wait()
	watches.waitUpToDate(t, st.Rev())
	cancel()
	watches.wait()
	return rec.History()
}

// watchTracker runs recorded watches and follows each one's progress, so that a test can bring
// every open watch up to date with the store before it stops them and checks the history.
type watchTracker struct {
	ctx    context.Context
	rec    *Recorder
	wg     sync.WaitGroup
	mu     sync.Mutex
	states []*trackedWatch
}

type trackedWatch struct {
	created, ended bool
	progress       int64
	start          int64
}

func newWatchTracker(ctx context.Context, rec *Recorder) *watchTracker {
	return &watchTracker{ctx: ctx, rec: rec}
}

// start runs a watch until it is canceled or ctx ends.
func (tr *watchTracker) start(req WatchRequest) *trackedWatch {
	ws := &trackedWatch{start: req.StartRevision}
	tr.mu.Lock()
	tr.states = append(tr.states, ws)
	tr.mu.Unlock()
	tr.wg.Go(func() {
		_ = tr.rec.Watch(tr.ctx, req, func(r WatchResponse) {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			switch {
			case r.Canceled:
				ws.ended = true
			case r.Created:
				ws.created = true
			case r.IsProgressNotify():
				ws.progress = max(ws.progress, r.Revision)
			}
		})
		tr.mu.Lock()
		ws.ended = true
		tr.mu.Unlock()
	})
	return ws
}

// waitCreated waits until the watch is created (or has already ended).
func (tr *watchTracker) waitCreated(t testing.TB, ws *trackedWatch) {
	t.Helper()
	testutil.WaitFor(t, "watch created", func() bool { tr.mu.Lock(); defer tr.mu.Unlock(); return ws.created || ws.ended })
}

// waitUpToDate requests progress until every open watch that started at or below final has been
// told a revision of final or later.
func (tr *watchTracker) waitUpToDate(t testing.TB, final int64) {
	t.Helper()
	testutil.WaitFor(t, "watches up to date", func() bool {
		_ = tr.rec.RequestProgress(tr.ctx)
		tr.mu.Lock()
		defer tr.mu.Unlock()
		for _, ws := range tr.states {
			if !ws.ended && ws.progress < final && ws.start <= final {
				return false
			}
		}
		return true
	})
}

// wait waits for every watch to end; ctx must have ended, or every watch been canceled.
func (tr *watchTracker) wait() { tr.wg.Wait() }

// TestValidHistoriesPass: a history recorded faithfully from the in-process store driven by
// concurrent clients passes, and so does one where some write responses were lost (unknown outcome)
// or where writes that never reached the store are recorded as unknown.
func TestValidHistoriesPass(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := runWorkload(t, drawWorkload(rt, 25))
		res := mustCheck(t, h)
		if !res.OK() {
			dumpHistory(t, h)
			rt.Fatalf("a faithfully recorded history fails: %v\nnotes: %v", res.Err(), res.Notes)
		}
		pick := func(n int) int { return rapid.IntRange(0, n-1).Draw(rt, "pick") }
		for _, tr := range validTransforms {
			if !rapid.Bool().Draw(rt, tr.name) {
				continue
			}
			th := cloneHistory(t, h)
			if !tr.apply(th, pick) {
				continue
			}
			if res := mustCheck(t, th); !res.OK() {
				dumpHistory(t, th)
				rt.Fatalf("after %q the history fails: %v\nnotes: %v", tr.name, res.Err(), res.Notes)
			}
		}
	})
}

// TestMutatedHistoriesFail: a valid history with one mutation is reported with the guarantee the
// mutation breaks, and none but those it may break besides.
func TestMutatedHistoriesFail(t *testing.T) {
	applied := map[string]int{}
	rapid.Check(t, func(rt *rapid.T) {
		h := runWorkload(t, drawWorkload(rt, 25))
		res := mustCheck(t, h)
		if !res.OK() {
			dumpHistory(t, h)
			rt.Fatalf("a faithfully recorded history fails: %v", res.Err())
		}
		var usable []mutation
		for _, m := range mutations {
			if m.apply(cloneHistory(t, h), res, func(int) int { return 0 }) {
				usable = append(usable, m)
			}
		}
		if len(usable) == 0 {
			return
		}
		m := rapid.SampledFrom(usable).Draw(rt, "mutation")
		mh := cloneHistory(t, h)
		m.apply(mh, res, func(n int) int { return rapid.IntRange(0, n-1).Draw(rt, "pick") })
		applied[m.name]++
		mres := mustCheck(t, mh)
		if err := m.judge(mres.Guarantees()); err != nil {
			dumpHistory(t, mh)
			rt.Fatalf("mutation %q: %v:\n%v", m.name, err, mres.Err())
		}
	})
	t.Logf("mutations applied: %v", applied)
}

// dumpHistory writes a failing history to $HISTORY_DUMP, for debugging.
func dumpHistory(t testing.TB, h *History) {
	path := os.Getenv("HISTORY_DUMP")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := h.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
}
