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

	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/etcdgrpc"
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
func runChecked(t *testing.T, cli *clientv3.Client, cfg Config) (Snapshot, *etcd.History, *etcd.Result) {
	t.Helper()
	rec := etcd.NewRecorder(cli, nil)
	snap, err := Run(context.Background(), rec, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := rec.History()
	res, err := etcd.Check(h, etcd.Options{Timeout: time.Minute})
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

// checkLabelled checks h and fails the test on a violation that no known bug of target explains
// (writing the history to $WORKLOAD_DUMP if set); it returns the result and the known bugs seen.
func checkLabelled(t *testing.T, h *etcd.History, target etcd.Target) (*etcd.Result, etcd.Tally) {
	t.Helper()
	res, err := etcd.Check(h, etcd.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	labels := etcd.Classify(h, res, target)
	tally := etcd.TallyLabels(labels)
	if tally.Unexplained > 0 || res.Verdict != etcd.VerdictLinearizable {
		if path := os.Getenv("WORKLOAD_DUMP"); path != "" {
			if f, err := os.Create(path); err == nil {
				h.WriteJSON(f)
				f.Close()
			}
		}
		for i, v := range res.Violations {
			if !labels[i].Known() {
				t.Errorf("unexplained: %v", v)
			}
		}
		t.Fatalf("%s %s: %d unexplained violations, verdict %s; notes %v", target.Product, target.Version, tally.Unexplained, res.Verdict, res.Notes)
	}
	for _, b := range tally.Bugs {
		t.Logf("known bug of %s %s provoked: %s", target.Product, target.Version, b.Reference())
	}
	return res, tally
}

func statusOf(t *testing.T, cli *clientv3.Client) Endpoint {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	eps, err := Status(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	return eps[0]
}

// TestWorkloadsAgainstEtcd: both workloads, provoking everything, under a prefix, against a real
// etcd: every violation is one of the known bugs of its version.
func TestWorkloadsAgainstEtcd(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			cli := startEtcd(t, "--experimental-watch-progress-notify-interval=100ms")
			ep := statusOf(t, cli)
			if ep.Revision != 1 || ep.MemberID == 0 {
				t.Fatalf("status %+v", ep)
			}
			rec := etcd.NewRecorder(cli, nil)
			snap, err := Run(context.Background(), rec, Config{Kind: kind, Seed: 2, Clients: 4, Watchers: 3, Ops: 1500, CompactEvery: 60, Prefix: "/run/"})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("etcd %s: %+v", ep.Version, snap)
			checkLabelled(t, rec.History(), etcd.Target{Product: "etcd", Version: ep.Version})
			if snap.WatchEvents == 0 || count(snap, "compact", OK) == 0 {
				t.Errorf("%d watch events, %d compactions: want some of each", snap.WatchEvents, count(snap, "compact", OK))
			}
		})
	}
}

// lastSeen is the revision up to which a watch received every event.
func lastSeen(w *etcd.Watch) int64 {
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
		// seed 2's watcher watches /registry/pods/: a third of the writes, enough to end watches. How
		// many of them reach it while the clients still write is the scheduler's choice (once they are
		// done it no longer ends a watch; a watcher starved meanwhile sees them all in one catch-up), so
		// a run that ended no watch is run again, up to five times; every run passes the checker.
		var h *etcd.History
		for run := 1; ; run++ {
			cli := inMemory(t, store.Options{ProgressNotifyInterval: 100 * time.Millisecond})
			_, h, _ = runChecked(t, cli, Config{Kind: K8s, Seed: 2, Clients: 3, Watchers: 1, Ops: 2000})
			if len(h.Watches) >= 3 {
				break
			}
			if run == 5 {
				t.Fatalf("%d runs: the watcher did not resume (%d watches in the last)", run, len(h.Watches))
			}
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
			if r := op.Request.Range; r != nil && r.Key == "compact_rev_key" && op.Response != nil {
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

// TestWorkloadsAgainstEtcdCluster: both workloads against a three-member etcd, with the requests
// spread over every member (linearizable reads through the leader's read index, serializable ones
// answered by followers, leases granted through them, watches served by any): every violation is
// one of the known bugs of its version.
func TestWorkloadsAgainstEtcdCluster(t *testing.T) {
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
			members, err := Status(ctx, cli)
			if err != nil {
				t.Fatal(err)
			}
			if len(members) != 3 {
				t.Fatalf("status: %+v", members)
			}
			rec := etcd.NewRecorder(cli, nil)
			snap, err := Run(context.Background(), rec, Config{Kind: kind, Seed: 7, Clients: 4, Watchers: 3, Ops: 1000, CompactEvery: 60, Prefix: "/run/"})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", snap)
			checkLabelled(t, rec.History(), etcd.Target{Product: "etcd", Version: members[0].Version})
		})
	}
}

// normalized is a history in JSON without its times, and with the lease IDs the store chose
// (from the clock, as etcd does) replaced by their order of appearance.
func normalized(t *testing.T, h *etcd.History) string {
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
				rec := etcd.NewRecorder(cli, nil)
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
	rec := etcd.NewRecorder(cli, nil)
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
	res, err := etcd.Check(rec.History(), etcd.Options{Timeout: time.Minute})
	if err != nil || !res.OK() {
		t.Fatalf("check after a stop: %v %v", err, res.Err())
	}
}

// TestDurationBound: Duration is measured on the config's clock.
func TestDurationBound(t *testing.T) {
	cli := inMemory(t, store.Options{})
	rec := etcd.NewRecorder(cli, nil)
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

// TestAvoidRequestProgress: a run that avoids RequestProgress (the apiserver's gating) gets no
// progress notification (the store sends them only every 10 minutes here); one that does not, does.
func TestAvoidRequestProgress(t *testing.T) {
	for _, avoid := range []bool{false, true} {
		t.Run(fmt.Sprint(avoid), func(t *testing.T) {
			cli := inMemory(t, store.Options{})
			var features Features
			if avoid {
				features = features.With(FeatRequestProgress)
			}
			snap, h, _ := runChecked(t, cli, Config{Kind: K8s, Seed: 9, Clients: 2, Watchers: 2, Ops: 300, Avoid: features})
			// the final write is in one watched prefix at most: the other watch reaches the final
			// revision only by a progress notification
			if a, b := h.Watches[0].Request.Key, h.Watches[1].Request.Key; strings.HasPrefix(string(a), string(b)) || strings.HasPrefix(string(b), string(a)) {
				t.Fatalf("seed 9 now draws overlapping watches %q and %q: pick another", a, b)
			}
			if got := snap.ProgressNotifications > 0; got == avoid {
				t.Errorf("avoiding RequestProgress %v: %d progress notifications", avoid, snap.ProgressNotifications)
			}
		})
	}
}

// TestKnownBugsAreReal: on an etcd version that has them, the known bugs the workload no longer
// avoids do break the guarantees, and Classify names them.
func TestKnownBugsAreReal(t *testing.T) {
	t.Run("etcd-progress-ahead", func(t *testing.T) {
		cli := startEtcd(t)
		target := skipUnlessAffected(t, cli, "etcd-progress-ahead")
		rec := etcd.NewRecorder(cli, nil)
		ctx := context.Background()
		const writes = 300
		for i := range writes {
			if _, err := rec.Do(ctx, etcd.Request{Put: &etcd.PutRequest{Key: etcd.Bytes(fmt.Sprintf("p/%d", i%10)), Value: "v"}}); err != nil {
				t.Fatal(err)
			}
		}
		// a watch from the start catches up from history; a progress request meanwhile is answered
		// at once, at the current revision, ahead of the events still to come. Whether the request
		// lands before the catch-up pass (etcd's unsynced loop runs every 100 ms) depends on the
		// machine's load, so a fresh watch tries again until one does, within a bound.
		const attempts = 20
		for attempt := 1; ; attempt++ {
			progressAhead(t, rec, writes)
			h := rec.History()
			res, err := etcd.Check(h, etcd.Options{Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Violations) > 0 || attempt == attempts {
				t.Logf("%d watches until the progress request came first", attempt)
				wantKnown(t, h, target, "etcd-progress-ahead")
				break
			}
		}
	})
	t.Run("etcd-compacted-tombstone", func(t *testing.T) {
		cli := startEtcd(t)
		target := skipUnlessAffected(t, cli, "etcd-compacted-tombstone")
		rec := etcd.NewRecorder(cli, nil)
		ctx := context.Background()
		for _, req := range []etcd.Request{
			{Put: &etcd.PutRequest{Key: "a", Value: "1"}},                // 2
			{Put: &etcd.PutRequest{Key: "b", Value: "1"}},                // 3
			{DeleteRange: &etcd.DeleteRangeRequest{Key: "a"}},            // 4
			{Compact: &etcd.CompactRequest{Revision: 4, Physical: true}}, // at the delete
		} {
			if _, err := rec.Do(ctx, req); err != nil {
				t.Fatal(err)
			}
		}
		watchThrough(t, rec, etcd.WatchRequest{Key: "a", RangeEnd: "z", StartRevision: 4}, 5, func() {
			if _, err := rec.Do(ctx, etcd.Request{Put: &etcd.PutRequest{Key: "c", Value: "1"}}); err != nil { // 5
				t.Fatal(err)
			}
		})
		wantKnown(t, rec.History(), target, "etcd-compacted-tombstone")
	})
}

func skipUnlessAffected(t *testing.T, cli *clientv3.Client, bug string) etcd.Target {
	t.Helper()
	ep := statusOf(t, cli)
	if !etcd.BugNamed(bug).Affects(ep.Version) {
		t.Skipf("etcd %s does not have %s", ep.Version, bug)
	}
	return etcd.Target{Product: "etcd", Version: ep.Version}
}

// progressAhead opens a watch over p/ from revision 2, requests progress as soon as it is
// created, and returns once the watch has delivered the event at revision writes+1.
func progressAhead(t *testing.T, rec *etcd.Recorder, writes int64) {
	t.Helper()
	watchThrough(t, rec, etcd.WatchRequest{Key: "p/", RangeEnd: "p0", StartRevision: 2}, writes+1, func() {
		if err := rec.RequestProgress(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// watchThrough opens a recorded watch, calls onCreated once the watch is created, and returns,
// the watch stopped, once it has delivered an event at revision through (its last so far).
func watchThrough(t *testing.T, rec *etcd.Recorder, req etcd.WatchRequest, through int64, onCreated func()) {
	t.Helper()
	var mu sync.Mutex
	var created bool
	var last int64
	stop := watchInBackground(t, rec, req, func(r etcd.WatchResponse) {
		mu.Lock()
		defer mu.Unlock()
		created = created || r.Created
		for _, ev := range r.Events {
			last = ev.Kv.ModRevision
		}
	})
	defer stop()
	testutil.WaitFor(t, "the watch", func() bool { mu.Lock(); defer mu.Unlock(); return created })
	onCreated()
	testutil.WaitFor(t, fmt.Sprintf("the event at %d", through), func() bool { mu.Lock(); defer mu.Unlock(); return last == through })
}

// watchInBackground runs a recorded watch until the returned function is called.
func watchInBackground(t *testing.T, rec *etcd.Recorder, req etcd.WatchRequest, observe func(etcd.WatchResponse)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = rec.Watch(ctx, req, observe) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return func() { cancel(); wg.Wait() }
}

// wantKnown checks h and wants violations, every one of them the known bug named.
func wantKnown(t *testing.T, h *etcd.History, target etcd.Target, bug string) {
	t.Helper()
	res, err := etcd.Check(h, etcd.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Violations) == 0 {
		t.Fatal("no violation")
	}
	for i, l := range etcd.Classify(h, res, target) {
		if !l.Known() || l.Bug.Name != bug {
			t.Fatalf("violation %v: label %+v, want %s", res.Violations[i], l, bug)
		}
	}
	t.Logf("as expected: %v", res.Violations[0])
}

// TestWorkloadsUnderPrefix: on a store that holds keys of the prefix already and that another
// client writes to outside it meanwhile, both workloads run under the prefix, from the store's
// revision, and pass; the others' revisions are gaps.
func TestWorkloadsUnderPrefix(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			cli := inMemory(t, store.Options{ProgressNotifyInterval: 100 * time.Millisecond})
			ctx := context.Background()
			for _, k := range []string{"/other/a", "/run/key/05", "/run/registry/pods/default/pod-1"} {
				if _, err := cli.Put(ctx, k, "before"); err != nil {
					t.Fatal(err)
				}
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := cli.Put(ctx, fmt.Sprintf("/other/%d", i%7), "x"); err != nil {
						t.Error(err)
						return
					}
				}
			})
			rec := etcd.NewRecorder(cli, nil)
			_, err := Run(ctx, rec, Config{Kind: kind, Seed: 4, Clients: 3, Watchers: 2, Ops: 800, CompactEvery: 80, Prefix: "/run/"})
			close(stop)
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			h := rec.History()
			if h.StartRevision < 4 || len(h.Initial) != 2 {
				t.Fatalf("start revision %d, initial %+v", h.StartRevision, h.Initial)
			}
			res, err := etcd.Check(h, etcd.Options{Timeout: time.Minute})
			if err != nil || !res.OK() {
				t.Fatalf("%v %v", err, res.Err())
			}
			if len(res.Gaps) == 0 {
				t.Error("no gap, though another client wrote all along")
			}
			t.Logf("%d gaps over %d revisions, coverage %+v", len(res.Gaps), res.Coverage.GapRevisions, res.Coverage)
		})
	}
}

// TestRunBeginsOnce: a run under a prefix on a recorder that recorded already fails.
func TestRunBeginsOnce(t *testing.T) {
	cli := inMemory(t, store.Options{})
	rec := etcd.NewRecorder(cli, nil)
	if _, err := rec.Do(context.Background(), etcd.Request{Put: &etcd.PutRequest{Key: "/x", Value: "1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), rec, Config{Kind: Etcd, Clients: 1, Ops: 1, Prefix: "/run/"}); !errors.Is(err, etcd.ErrBegun) {
		t.Fatalf("%v, want ErrBegun", err)
	}
}

// TestClientsStartOnceWatchersWatch: no client request is sent before every watcher has its first
// watch created, so that even a run short enough to end before a watcher has listed gives its
// watches the traffic to check, whatever the schedule.
func TestClientsStartOnceWatchersWatch(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			cli := inMemory(t, store.Options{})
			cfg := Config{Kind: kind, Seed: 7, Clients: 4, Watchers: 3, Ops: 24}
			_, h, _ := runChecked(t, cli, cfg)
			var created []int64
			for _, w := range h.Watches {
				if len(w.Responses) > 0 && w.Responses[0].Created {
					created = append(created, w.Responses[0].Time)
				}
			}
			if len(created) < cfg.Watchers {
				t.Fatalf("%d watches created, want at least %d", len(created), cfg.Watchers)
			}
			slices.Sort(created)
			gate := created[cfg.Watchers-1]
			for _, op := range h.Operations {
				if op.Request.Range == nil && op.Call < gate {
					t.Errorf("client %d sent %+v at %d, before the watchers' watches were all created (%d)", op.Client, op.Request, op.Call, gate)
				}
			}
		})
	}
}
