package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/history"
	"github.com/listwatch/listwatch/internal/etcdprocess"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

// inMemory serves a fresh store in process and returns a client of it.
func inMemory(t testing.TB, opts store.Options) *clientv3.Client {
	t.Helper()
	st := store.New(opts)
	cli, closeClient, err := etcdgrpc.NewClient(st, etcdgrpc.Options{})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := closeClient(); err != nil {
			t.Error(err)
		}
		st.Close()
	})
	return cli
}

// startEtcd starts a real etcd (skipping the test without one) and returns a client of it.
func startEtcd(t testing.TB, flags ...string) *clientv3.Client {
	t.Helper()
	ep := etcdprocess.Start(t, flags...)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// runChecked runs cfg against cli, checks the history and fails the test on a violation; a failing
// history is written to $WORKLOAD_DUMP if set.
func runChecked(t *testing.T, cli *clientv3.Client, cfg Config) (Snapshot, *history.History, *history.Result) {
	t.Helper()
	rec := history.NewRecorder(cli, nil)
	snap, err := Run(context.Background(), rec, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := rec.History()
	res, err := history.Check(h, history.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		if path := os.Getenv("WORKLOAD_DUMP"); path != "" {
			if f, err := os.Create(path); err == nil {
				h.WriteJSON(f)
				f.Close()
			}
		}
		t.Fatalf("%s workload, seed %d: %v\nnotes: %v", cfg.Kind, cfg.Seed, res.Err(), res.Notes)
	}
	return snap, h, res
}

func count(snap Snapshot, name string, o Outcome) int64 {
	for _, n := range snap.ByName {
		if n.Name == name {
			return n.Outcomes[o]
		}
	}
	return 0
}

// TestWorkloadsPassInMemory: both workloads pass against listwatch's store, and do what they are
// for: watches that receive events and resume, compactions, lost races.
func TestWorkloadsPassInMemory(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			cli := inMemory(t, store.Options{ProgressNotifyInterval: 100 * time.Millisecond})
			cfg := Config{Kind: kind, Seed: 1, Clients: 4, Watchers: 3, Ops: 3000, CompactEvery: 60}
			snap, h, _ := runChecked(t, cli, cfg)
			t.Logf("%+v", snap)
			if snap.Operations < cfg.Ops || snap.WatchEvents == 0 {
				t.Errorf("%d requests, %d watch events: want at least %d requests and some events", snap.Operations, snap.WatchEvents, cfg.Ops)
			}
			if count(snap, "compact", OK) == 0 {
				t.Errorf("no compaction in %d revisions with CompactEvery %d", snap.Revision, cfg.CompactEvery)
			}
			conflicts := count(snap, "update", Conflict) + count(snap, "txn", Conflict)
			if conflicts == 0 {
				t.Error("no txn ever lost its compare: the clients do not contend")
			}
			if int64(len(h.Operations)) != snap.Operations {
				t.Errorf("history has %d operations, stats %d", len(h.Operations), snap.Operations)
			}
		})
	}
}

// TestWorkloadsPassAgainstEtcd: both workloads pass against a real etcd, avoiding the bugs its
// version is known for.
func TestWorkloadsPassAgainstEtcd(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			cli := startEtcd(t, "--experimental-watch-progress-notify-interval=100ms")
			ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
			defer cancel()
			eps, quirks, err := Probe(ctx, cli)
			if err != nil {
				t.Fatal(err)
			}
			if len(eps) != 1 || eps[0].Revision != 1 || quirks != QuirksOf(eps[0].Version) {
				t.Fatalf("probe: %+v, quirks %+v", eps, quirks)
			}
			t.Logf("etcd %s, quirks %v", eps[0].Version, quirks.Names())
			snap, _, _ := runChecked(t, cli, Config{Kind: kind, Seed: 2, Clients: 4, Watchers: 3, Ops: 1500, CompactEvery: 60, Quirks: quirks})
			t.Logf("%+v", snap)
			if snap.WatchEvents == 0 || count(snap, "compact", OK) == 0 {
				t.Errorf("%d watch events, %d compactions: want some of each", snap.WatchEvents, count(snap, "compact", OK))
			}
		})
	}
}

// lastSeen is the revision up to which a watch received every event.
func lastSeen(w *history.Watch) int64 {
	last := w.Request.StartRevision - 1
	for _, r := range w.Responses {
		switch {
		case r.Created && w.Request.StartRevision == 0:
			last = r.Revision
		case r.IsProgressNotify():
			last = max(last, r.Revision)
		}
		for _, ev := range r.Events {
			last = max(last, ev.Kv.ModRevision)
		}
	}
	return last
}

// TestWatchersResume: a k8s watcher lists, watches from the list's revision + 1, after ending
// a watch resumes from the last revision it saw + 1, and its watch still open at the end is closed
// only once it has reached the final read's revision; an etcd watcher answered "compacted at C"
// resumes from C.
func TestWatchersResume(t *testing.T) {
	t.Run("k8s", func(t *testing.T) {
		cli := inMemory(t, store.Options{ProgressNotifyInterval: 100 * time.Millisecond})
		// seed 2's watcher watches /registry/pods/: a third of the writes, enough to end watches
		_, h, _ := runChecked(t, cli, Config{Kind: K8s, Seed: 2, Clients: 3, Watchers: 1, Ops: 2000})
		if len(h.Watches) < 3 {
			t.Fatalf("%d watches: the watcher did not resume", len(h.Watches))
		}
		first := h.Watches[0]
		if first.Request.Key != "/registry/pods/" || first.Request.RangeEnd != "/registry/pods0" || !first.Request.PrevKV || !first.Request.ProgressNotify {
			t.Fatalf("first watch %+v: want /registry/pods/ with prev_kv and progress_notify", first.Request)
		}
		listed := false
		for _, op := range h.Operations {
			if r := op.Request.Range; r != nil && r.Key == first.Request.Key && r.Limit == k8sWatchListLimit && op.Response != nil &&
				op.Response.Revision+1 == first.Request.StartRevision && op.Return <= first.Call {
				listed = true
			}
		}
		if !listed {
			t.Errorf("the first watch starts at %d, after no list of its prefix at %d", first.Request.StartRevision, first.Request.StartRevision-1)
		}
		for i := 1; i < len(h.Watches); i++ {
			prev, w := &h.Watches[i-1], h.Watches[i]
			want := prev.Request
			want.StartRevision = lastSeen(prev) + 1
			if diff := cmp.Diff(want, w.Request); diff != "" {
				t.Errorf("watch %d does not resume watch %d (-want +got):\n%s", i, i-1, diff)
			}
		}
		// The end: the watch still open once the clients were done is closed only after it has
		// reached the revision of the final read.
		final := int64(0)
		for _, op := range h.Operations {
			if r := op.Request.Range; r != nil && r.Key == compactRevKey && op.Response != nil {
				final = op.Response.Revision
			}
		}
		if final == 0 {
			t.Fatal("no final read in the history")
		}
		if got := lastSeen(&h.Watches[len(h.Watches)-1]); got < final {
			t.Errorf("the last watch was closed at revision %d, before the final read's %d", got, final)
		}
	})
	t.Run("etcd", func(t *testing.T) {
		cli := inMemory(t, store.Options{})
		_, h, _ := runChecked(t, cli, Config{Kind: Etcd, Seed: 3, Clients: 3, Watchers: 1, Ops: 2000, CompactEvery: 20})
		resumed, compacted := 0, 0
		for i := 1; i < len(h.Watches); i++ {
			prev := &h.Watches[i-1]
			last := prev.Responses[len(prev.Responses)-1]
			if !last.IsCompacted() {
				continue
			}
			if compacted++; compacted%2 == 0 {
				continue // every other compaction answer draws a new watch
			}
			want := prev.Request
			want.StartRevision = last.CompactRevision
			if diff := cmp.Diff(want, h.Watches[i].Request); diff != "" {
				t.Errorf("watch %d does not resume watch %d from its compaction revision (-want +got):\n%s", i, i-1, diff)
			}
			resumed++
		}
		t.Logf("%d watches, %d compaction answers, %d resumed", len(h.Watches), compacted, resumed)
	})
}

// TestWorkloadsPassAgainstEtcdCluster: both workloads pass against a three-member etcd, with the
// requests spread over every member: linearizable reads through the leader's read index,
// serializable ones answered by followers, leases granted through them, watches served by any.
func TestWorkloadsPassAgainstEtcdCluster(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			eps := etcdprocess.StartCluster(t, 3, "--experimental-watch-progress-notify-interval=100ms")
			cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
			defer cancel()
			members, quirks, err := Probe(ctx, cli)
			if err != nil {
				t.Fatal(err)
			}
			if len(members) != 3 {
				t.Fatalf("probe: %+v", members)
			}
			snap, _, _ := runChecked(t, cli, Config{Kind: kind, Seed: 7, Clients: 4, Watchers: 3, Ops: 1000, CompactEvery: 60, Quirks: quirks})
			t.Logf("%+v", snap)
		})
	}
}

// normalized is a history in JSON without its times, and with the lease IDs the store chose
// (from the clock, as etcd does) replaced by their order of appearance.
func normalized(t *testing.T, h *history.History) string {
	var ids []int64
	for i := range h.Operations {
		op := &h.Operations[i]
		op.Call, op.Return = 0, 0
		if op.Request.LeaseGrant != nil && op.Request.LeaseGrant.ID == 0 && op.Response != nil {
			ids = append(ids, op.Response.LeaseGrant.ID)
		}
	}
	var b strings.Builder
	if err := h.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for i, id := range ids {
		s = strings.ReplaceAll(s, strconv.FormatInt(id, 10), fmt.Sprintf("lease#%d", i))
	}
	return s
}

// TestDeterministic: one client on a fresh store makes the same requests, and gets the same
// answers, in every run with the same seed; another seed makes others.
func TestDeterministic(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			run := func(seed uint64) string {
				cli := inMemory(t, store.Options{})
				rec := history.NewRecorder(cli, nil)
				if _, err := Run(context.Background(), rec, Config{Kind: kind, Seed: seed, Clients: 1, Ops: 300}); err != nil {
					t.Fatal(err)
				}
				return normalized(t, rec.History())
			}
			a, b, c := run(7), run(7), run(8)
			if diff := cmp.Diff(strings.Split(a, "\n"), strings.Split(b, "\n")); diff != "" {
				t.Errorf("two runs with seed 7 differ (-first +second):\n%s", diff)
			}
			if a == c {
				t.Error("seeds 7 and 8 give the same history")
			}
		})
	}
}

// TestStopsWhenContextEnds: without a bound the clients go on until ctx ends; they then finish the
// request in flight rather than abandon it, and the history is whole.
func TestStopsWhenContextEnds(t *testing.T) {
	cli := inMemory(t, store.Options{})
	rec := history.NewRecorder(cli, nil)
	stats := &Stats{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan Snapshot)
	go func() {
		snap, err := Run(ctx, rec, Config{Kind: Etcd, Seed: 3, Clients: 3, Watchers: 2, CompactEvery: 50, Stats: stats})
		if err != nil {
			t.Error(err)
		}
		done <- snap
	}()
	testutil.WaitFor(t, "500 requests", func() bool { return stats.Snapshot().Operations >= 500 })
	cancel()
	var snap Snapshot
	select {
	case snap = <-done:
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("Run did not return after its context ended")
	}
	if snap.Unknown != 0 {
		t.Errorf("%d requests with unknown outcome: stopping must not cancel requests in flight", snap.Unknown)
	}
	res, err := history.Check(rec.History(), history.Options{Timeout: time.Minute})
	if err != nil || !res.OK() {
		t.Fatalf("check after a stop: %v %v", err, res.Err())
	}
}

// TestDurationBound: Duration is measured on the config's clock.
func TestDurationBound(t *testing.T) {
	cli := inMemory(t, store.Options{})
	rec := history.NewRecorder(cli, nil)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	stats := &Stats{}
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), rec, Config{Kind: K8s, Seed: 4, Clients: 2, Duration: time.Hour, Clock: clk, Stats: stats})
		done <- err
	}()
	testutil.WaitFor(t, "100 requests and the timer", func() bool { return stats.Snapshot().Operations >= 100 && clk.HasWaiters() })
	select {
	case err := <-done:
		t.Fatalf("Run returned before its duration: %v", err)
	default:
	}
	clk.Step(time.Hour)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("Run did not return once its duration had passed")
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Kind: K8s, Clients: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Kind = "pods" }, `kind: workload: unknown workload "pods" (want one of [k8s etcd])`},
		{func(c *Config) { c.Clients = 0 }, "clients 0: need at least one"},
		{func(c *Config) { c.Watchers = -1 }, "watchers -1: must not be negative"},
		{func(c *Config) { c.Ops = -1 }, "ops -1: must not be negative"},
		{func(c *Config) { c.Duration = -time.Second }, "duration -1s: must not be negative"},
		{func(c *Config) { c.CompactEvery = -5 }, "compact-every -5: must not be negative"},
		{func(c *Config) { c.RequestTimeout = -1 }, "request timeout -1ns: must not be negative"},
	}
	for _, c := range cases {
		cfg := ok
		c.mutate(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate() = %v, want ErrInvalidConfig with %q", err, c.want)
		}
		if _, err := Run(context.Background(), nil, cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Run with %+v: %v, want ErrInvalidConfig", cfg, err)
		}
	}
	if k, err := ParseKind("etcd"); k != Etcd || err != nil {
		t.Errorf("ParseKind(etcd) = %q, %v", k, err)
	}
	if _, err := ParseKind("K8S"); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("ParseKind(K8S) = %v, want ErrUnknownKind", err)
	}
}

func TestQuirksOf(t *testing.T) {
	both := Quirks{ProgressAhead: true, CompactedTombstone: true}
	tombstone := Quirks{CompactedTombstone: true}
	cases := map[string]Quirks{
		"3.3.27": both, "3.4.23": both, "3.4.30": both, "3.4.31": tombstone, "3.4.35": tombstone,
		"3.4.36": {}, "3.5.0": both, "3.5.12": both, "3.5.13": tombstone, "3.5.17": tombstone,
		"3.5.18": {}, "3.6.0": {}, "3.7.3": {}, "not-a-version": both, "": both,
	}
	for v, want := range cases {
		if got := QuirksOf(v); got != want {
			t.Errorf("QuirksOf(%q) = %+v, want %+v", v, got, want)
		}
	}
	if got := both.Names(); !slices.Equal(got, []string{"ProgressAhead", "CompactedTombstone"}) {
		t.Errorf("Names() = %v", got)
	}
}

// TestQuirkCompactedTombstoneAvoided: with the quirk, every compaction is at a revision that
// deletes nothing, in both workloads.
func TestQuirkCompactedTombstoneAvoided(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			cli := inMemory(t, store.Options{})
			snap, h, res := runChecked(t, cli, Config{Kind: kind, Seed: 5, Clients: 4, Watchers: 1, Ops: 2000,
				CompactEvery: 30, Quirks: Quirks{CompactedTombstone: true}})
			deletes := map[int64]bool{}
			for _, ev := range res.Events {
				if ev.Type == history.Delete {
					deletes[ev.Kv.ModRevision] = true
				}
			}
			if len(deletes) == 0 {
				t.Fatal("the workload deleted nothing")
			}
			compactions := 0
			for _, op := range h.Operations {
				if c := op.Request.Compact; c != nil && op.Response != nil {
					compactions++
					if deletes[c.Revision] {
						t.Errorf("compaction at revision %d, which deletes keys", c.Revision)
					}
				}
			}
			if compactions == 0 {
				t.Errorf("no compaction in %d revisions", snap.Revision)
			}
		})
	}
}

// TestQuirkProgressAheadAvoided: with the quirk the workload sends no RequestProgress (the store
// sends progress notifications only every 10 minutes here); without it, it does.
func TestQuirkProgressAheadAvoided(t *testing.T) {
	for _, quirk := range []bool{false, true} {
		t.Run(fmt.Sprint(quirk), func(t *testing.T) {
			cli := inMemory(t, store.Options{})
			snap, h, _ := runChecked(t, cli, Config{Kind: K8s, Seed: 9, Clients: 2, Watchers: 2, Ops: 300,
				Quirks: Quirks{ProgressAhead: quirk}})
			// the final write is in one watched prefix at most: the other watch reaches the final
			// revision only by a progress notification
			if a, b := h.Watches[0].Request.Key, h.Watches[1].Request.Key; strings.HasPrefix(string(a), string(b)) || strings.HasPrefix(string(b), string(a)) {
				t.Fatalf("seed 9 now draws overlapping watches %q and %q: pick another", a, b)
			}
			if got := snap.ProgressNotifications > 0; got == quirk {
				t.Errorf("ProgressAhead %v: %d progress notifications", quirk, snap.ProgressNotifications)
			}
		})
	}
}

// TestQuirksAreReal: the etcd versions QuirksOf flags do break the guarantees, and the checker
// says so; this is why the workloads avoid them there.
func TestQuirksAreReal(t *testing.T) {
	t.Run("ProgressAhead", func(t *testing.T) {
		cli := startEtcd(t)
		skipUnless(t, cli, func(q Quirks) bool { return q.ProgressAhead })
		rec := history.NewRecorder(cli, nil)
		ctx := context.Background()
		const writes = 300
		for i := range writes {
			if _, err := rec.Do(ctx, history.Request{Put: &history.PutRequest{Key: history.Bytes(fmt.Sprintf("p/%d", i%10)), Value: "v"}}); err != nil {
				t.Fatal(err)
			}
		}
		// a watch from the start catches up from history; a progress request meanwhile is answered
		// at once, at the current revision, ahead of the events still to come
		var mu sync.Mutex
		var created bool
		var last int64
		stop := watchInBackground(t, rec, history.WatchRequest{Key: "p/", RangeEnd: "p0", StartRevision: 2}, func(r history.WatchResponse) {
			mu.Lock()
			defer mu.Unlock()
			created = created || r.Created
			for _, ev := range r.Events {
				last = ev.Kv.ModRevision
			}
		})
		testutil.WaitFor(t, "the watch", func() bool { mu.Lock(); defer mu.Unlock(); return created })
		if err := rec.RequestProgress(ctx); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, "every event", func() bool { mu.Lock(); defer mu.Unlock(); return last == writes+1 })
		stop()
		wantViolation(t, rec.History(), history.Bookmarkable)
	})
	t.Run("CompactedTombstone", func(t *testing.T) {
		cli := startEtcd(t)
		skipUnless(t, cli, func(q Quirks) bool { return q.CompactedTombstone })
		rec := history.NewRecorder(cli, nil)
		ctx := context.Background()
		for _, req := range []history.Request{
			{Put: &history.PutRequest{Key: "a", Value: "1"}},                // 2
			{Put: &history.PutRequest{Key: "b", Value: "1"}},                // 3
			{DeleteRange: &history.DeleteRangeRequest{Key: "a"}},            // 4
			{Compact: &history.CompactRequest{Revision: 4, Physical: true}}, // at the delete
		} {
			if _, err := rec.Do(ctx, req); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		var created bool
		var last int64
		stop := watchInBackground(t, rec, history.WatchRequest{Key: "a", RangeEnd: "z", StartRevision: 4}, func(r history.WatchResponse) {
			mu.Lock()
			defer mu.Unlock()
			created = created || r.Created
			for _, ev := range r.Events {
				last = ev.Kv.ModRevision
			}
		})
		testutil.WaitFor(t, "the watch", func() bool { mu.Lock(); defer mu.Unlock(); return created })
		if _, err := rec.Do(ctx, history.Request{Put: &history.PutRequest{Key: "c", Value: "1"}}); err != nil { // 5
			t.Fatal(err)
		}
		testutil.WaitFor(t, "the event at 5", func() bool { mu.Lock(); defer mu.Unlock(); return last == 5 })
		stop()
		wantViolation(t, rec.History(), history.Resumable)
	})
}

func skipUnless(t *testing.T, cli *clientv3.Client, has func(Quirks) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	eps, quirks, err := Probe(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if !has(quirks) {
		t.Skipf("etcd %s does not have the bug", eps[0].Version)
	}
}

// watchInBackground runs a recorded watch until the returned function is called.
func watchInBackground(t *testing.T, rec *history.Recorder, req history.WatchRequest, observe func(history.WatchResponse)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = rec.Watch(ctx, req, observe) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return func() { cancel(); wg.Wait() }
}

func wantViolation(t *testing.T, h *history.History, g history.Guarantee) {
	t.Helper()
	res, err := history.Check(h, history.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(res.Guarantees(), g) {
		t.Fatalf("want a violation of %s, got %v: %v", g, res.Guarantees(), res.Err())
	}
	t.Logf("as expected: %v", res.Violations[0])
}
