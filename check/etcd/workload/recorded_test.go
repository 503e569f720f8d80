package workload

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

// updateRecorded rewrites the recorded histories package etcd's mutation tests start from.
var updateRecorded = flag.Bool("update-recorded", false, "rewrite check/etcd/testdata/recorded/*.json from fresh recordings")

// recordedDir is where they are kept, beside package etcd's other test data.
const recordedDir = "../testdata/recorded"

// recordedScenarios are the scenarios whose histories are kept: small ones with what the workloads
// rarely give in a few hundred operations (a lease expiry, a watch from the compaction revision, a
// txn's events in one response, a watch canceled as compacted, RequestProgress while events are
// queued, a recreated key).
var recordedScenarios = []string{"lease-expiry", "watch-from-compact-revision", "tombstone-at-compact-revision",
	"txn-in-one-response", "compacted-watch-canceled-first", "recreate-is-create", "prev-kv-only-when-asked"}

// recorded is a history recorded for the test data, with its name.
type recorded struct {
	name string
	h    *etcd.History
}

// recordAll records the workloads (a few hundred operations each, with watches, compactions and
// progress notifications) and the recordedScenarios against cli; only passing histories are kept,
// a workload's seed is the first of a few whose history passes. A target with known bugs is
// spared RequestProgress, the trigger of the ones about progress notifications, as the apiserver
// spares it.
func recordAll(t *testing.T, newClient func() *clientv3.Client, target etcd.Target) []recorded {
	var avoid Features
	if slices.ContainsFunc(etcd.KnownBugs, func(b *etcd.KnownBug) bool { return b.Product == target.Product && b.Affects(target.Version) }) {
		avoid = Features(FeatRequestProgress)
	}
	var out []recorded
	if h := recordPositions(t, newClient()); passes(t, h) {
		out = append(out, recorded{"positions", h})
	}
	for _, kind := range Kinds {
		for seed := uint64(1); ; seed++ {
			rec := etcd.NewRecorder(newClient(), nil)
			cfg := Config{Kind: kind, Seed: seed, Clients: 3, Watchers: 3, Ops: 200, CompactEvery: 40, Avoid: avoid}
			if _, err := Run(context.Background(), rec, cfg); err != nil {
				t.Fatal(err)
			}
			if h := rec.History(); passes(t, h) {
				out = append(out, recorded{fmt.Sprintf("%s-workload-seed%d", kind, seed), h})
				break
			}
			if seed == 5 {
				t.Fatalf("%s workload: no passing history in seeds 1 to 5", kind)
			}
		}
	}
	cli := newClient()
	cfg := ScenarioConfig{Prefix: "/sc/", Compaction: true, Target: target, Timeout: testutil.WaitTimeout}.withDefaults()
	for _, name := range recordedScenarios {
		sc := Scenarios[slices.IndexFunc(Scenarios, func(sc *Scenario) bool { return sc.Name == name })]
		r := runScenario(context.Background(), cli, cfg, sc)
		if r.Passed() {
			out = append(out, recorded{"scenario-" + name, r.History})
		} else if target.Product == "etcd" && target.Version == "3.7.3" {
			t.Errorf("%s: %v %v %q", name, r.Err, r.Result.Err(), r.Finding)
		}
	}
	return out
}

// TestRecordedHistories records the histories package etcd's mutation tests
// (TestMutationsAtEveryPosition) start from, against listwatch's store and, where installed,
// Debian's etcd, and requires each to pass and the set to hold what the mutations need: progress
// notifications, compactions and compaction answers, a lease expiry. With -update-recorded it
// writes them to check/etcd/testdata/recorded.
func TestRecordedHistories(t *testing.T) {
	var all []recorded
	for _, r := range recordAll(t, func() *clientv3.Client {
		return inMemory(t, store.Options{ProgressNotifyInterval: 100 * time.Millisecond})
	}, etcd.Target{Product: "etcd", Version: "3.7.3"}) {
		all = append(all, recorded{"listwatch-" + r.name, r.h})
	}
	var cov etcd.Coverage
	for _, r := range all {
		res, err := etcd.Check(r.h, etcd.Options{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		cov.Add(res.Coverage)
	}
	if cov.ProgressNotifications == 0 || cov.Compactions == 0 || cov.CompactionAnswers == 0 || cov.LeaseExpiries == 0 {
		t.Errorf("the recorded histories lack what the mutations need: %+v", cov)
	}
	if *updateRecorded && etcdInstalled() {
		cli := func() *clientv3.Client { return startEtcd(t, "--experimental-watch-progress-notify-interval=100ms") }
		ep := statusOf(t, cli())
		for _, r := range recordAll(t, cli, etcd.Target{Product: "etcd", Version: ep.Version}) {
			all = append(all, recorded{"etcd-" + ep.Version + "-" + r.name, r.h})
		}
	}
	if !*updateRecorded {
		return
	}
	if err := os.MkdirAll(recordedDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// the recordings of an earlier run, which may have kept other seeds (interop keeps its own)
	for _, pattern := range []string{"listwatch-*.json", "etcd-*.json"} {
		old, _ := filepath.Glob(filepath.Join(recordedDir, pattern))
		for _, p := range old {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, r := range all {
		writeRecorded(t, filepath.Join(recordedDir, strings.ReplaceAll(r.name, "/", "-")+".json"), r.h)
	}
}

func passes(t *testing.T, h *etcd.History) bool {
	res, err := etcd.Check(h, etcd.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Logf("not kept: %v", res.Err())
	}
	return res.OK()
}

func etcdInstalled() bool {
	_, err := os.Stat("/usr/bin/etcd")
	return err == nil
}

func writeRecorded(t *testing.T, path string, h *etcd.History) {
	var buf bytes.Buffer
	if err := h.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// positionsRecorder runs recordPositions' watches and waits on what they received.
type positionsRecorder struct {
	t   *testing.T
	rec *etcd.Recorder
	ctx context.Context
	wg  sync.WaitGroup
	mu  sync.Mutex
	got [][]etcd.WatchResponse
}

func (p *positionsRecorder) watch(req etcd.WatchRequest) {
	p.mu.Lock()
	i := len(p.got)
	p.got = append(p.got, nil)
	p.mu.Unlock()
	p.wg.Go(func() {
		_ = p.rec.Watch(p.ctx, req, func(r etcd.WatchResponse) {
			p.mu.Lock()
			p.got[i] = append(p.got[i], r)
			p.mu.Unlock()
		})
	})
	testutil.WaitFor(p.t, "the watch's first answer", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return len(p.got[i]) > 0 })
}

func (p *positionsRecorder) do(reqs ...etcd.Request) int64 {
	var rev int64
	for _, req := range reqs {
		resp, err := p.rec.Do(p.ctx, req)
		if err != nil {
			p.t.Fatalf("%s: %v", etcd.DescribeRequest(&req), err)
		}
		rev = resp.Revision
	}
	return rev
}

// synced requests progress until every watch not ended has been told rev or later.
func (p *positionsRecorder) synced(rev int64) {
	testutil.WaitFor(p.t, fmt.Sprintf("the watches at %d", rev), func() bool {
		_ = p.rec.RequestProgress(p.ctx)
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, rs := range p.got {
			last := rs[len(rs)-1]
			if !last.Canceled && !(last.IsProgressNotify() && last.Revision >= rev) {
				return false
			}
		}
		return true
	})
}

func putPrev(k, v string) etcd.Request {
	return etcd.Request{Put: &etcd.PutRequest{Key: etcd.Bytes(k), Value: etcd.Bytes(v), PrevKV: true}}
}

func txnPuts(kvs ...string) etcd.Request {
	var ops []etcd.RequestOp
	for i := 0; i < len(kvs); i += 2 {
		ops = append(ops, etcd.RequestOp{Put: &etcd.PutRequest{Key: etcd.Bytes(kvs[i]), Value: etcd.Bytes(kvs[i+1])}})
	}
	return etcd.Request{Txn: &etcd.TxnRequest{Success: ops}}
}

// recordPositions records, on a fresh store, watches that receive a txn's events at every kind of
// position a mutation can be applied at: as their first events, right after a progress
// notification, at and after a compaction revision, and as their last events, followed by a
// progress notification that covers them; with prev_kv and without, with a filter, from now and
// from the compaction revision, and one canceled as compacted.
func recordPositions(t *testing.T, cli *clientv3.Client) *etcd.History {
	ctx, cancel := context.WithCancel(context.Background())
	p := &positionsRecorder{t: t, rec: etcd.NewRecorder(cli, nil), ctx: ctx}
	p.watch(etcd.WatchRequest{Key: "p/", RangeEnd: "p0", PrevKV: true, ProgressNotify: true})
	p.watch(etcd.WatchRequest{Key: "p/", RangeEnd: "p0", Filters: []etcd.WatchFilter{etcd.FilterNoDelete}})
	p.do(txnPuts("p/a", "1", "p/b", "1"), txnPuts("p/a", "2", "p/c", "1"), putPrev("p/f", "1"))
	rev := p.do(etcd.Request{DeleteRange: &etcd.DeleteRangeRequest{Key: "p/b"}})
	p.synced(rev)
	p.do(txnPuts("p/a", "3", "p/b", "2", "p/c", "2"))
	comp := p.do(txnPuts("p/a", "4", "p/d", "1"))
	p.do(etcd.Request{Compact: &etcd.CompactRequest{Revision: comp}})
	p.watch(etcd.WatchRequest{Key: "p/", RangeEnd: "p0"})
	p.do(putPrev("p/f", "2"), etcd.Request{Range: &etcd.RangeRequest{Key: "p/", RangeEnd: "p0", Serializable: true}})
	rev = p.do(etcd.Request{Txn: &etcd.TxnRequest{Success: []etcd.RequestOp{
		{Put: &etcd.PutRequest{Key: "p/a", Value: "5"}}, {DeleteRange: &etcd.DeleteRangeRequest{Key: "p/c"}}}}})
	p.watch(etcd.WatchRequest{Key: "p/", RangeEnd: "p0", StartRevision: 2})
	p.watch(etcd.WatchRequest{Key: "p/", RangeEnd: "p0", StartRevision: comp, PrevKV: true})
	p.synced(rev)
	// a watch whose first events come right after a progress notification
	p.watch(etcd.WatchRequest{Key: "p/", RangeEnd: "p0", PrevKV: true})
	p.synced(rev)
	rev = p.do(txnPuts("p/e", "1", "p/a", "6"), txnPuts("p/b", "3", "p/e", "2"))
	p.synced(rev)
	cancel()
	p.wg.Wait()
	return p.rec.History()
}
