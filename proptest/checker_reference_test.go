package proptest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"pgregory.net/rapid"

	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/check/etcd/workload"
	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/etcdrules"
	"github.com/listwatch/listwatch/store"
)

// checkerReferenceChecks is TestCheckerReferenceMatchesStore's own default number of checks: each
// one runs a workload over gRPC, checks it, and replays it into a second store.
const checkerReferenceChecks = 25

// The checker (package check/etcd) imports nothing of what it judges: its reference model is its own.
// TestCheckerReferenceMatchesStore is the evidence that the model is the store's semantics. Each
// check runs a seeded workload (package workload, either kind, drawn clients, watchers and
// compactions) against the in-process store through etcdgrpc.NewClient and checks the history with
// etcd.Check, which must accept it. Then it replays the linearization the checker found, one
// request at a time, into a fresh store.Store behind etcdgrpc, with a watch over every key with
// prev_kv, and with requests that break one of etcd's request-shape rules (package etcdrules) slipped
// in at drawn places. The replay is a sequential history, whose only linearization is its order, so
// etcd.Check accepting it means every answer of the second store, refusals included, is the
// model's; and the events that store's watch delivered must be exactly the checker's reference event
// log of the first history (PUT and DELETE, create and mod revisions, versions, leases, prev_kv).
func TestCheckerReferenceMatchesStore(t *testing.T) {
	withChecks(t, checkerReferenceChecks)
	var ops, events, probes, compactions int
	rapid.Check(t, func(rt *rapid.T) {
		cfg := workload.Config{
			Kind:     rapid.SampledFrom(workload.Kinds).Draw(rt, "kind"),
			Seed:     rapid.Uint64().Draw(rt, "seed"),
			Clients:  rapid.IntRange(1, 3).Draw(rt, "clients"),
			Watchers: rapid.IntRange(0, 2).Draw(rt, "watchers"),
			Ops:      int64(rapid.IntRange(30, 200).Draw(rt, "ops")),
		}
		if rapid.Bool().Draw(rt, "compact") {
			cfg.CompactEvery = rapid.Int64Range(3, 15).Draw(rt, "compactEvery")
		}
		h := runWorkloadInProcess(t, cfg)
		res := mustPass(rt, h, fmt.Sprintf("%s workload, seed %d", cfg.Kind, cfg.Seed))

		rp := newReplay(t)
		final := int64(1)
		for _, i := range res.Linearization {
			for rapid.IntRange(0, 9).Draw(rt, fmt.Sprintf("probe%d", i)) == 0 {
				p := rapid.SampledFrom(shapeProbes).Draw(rt, fmt.Sprintf("probe%dKind", i))
				rp.refused(rt, p.name, p.req())
				probes++
			}
			o := &h.Operations[i]
			req := o.Request
			if g := req.LeaseGrant; g != nil && g.ID == 0 && o.Response != nil {
				// the first store chose the ID; the second must grant the same one
				req.LeaseGrant = &etcd.LeaseGrantRequest{ID: o.Response.LeaseGrant.ID, TTL: g.TTL}
			}
			if req.Compact != nil {
				compactions++
				rp.caughtUp(t, final) // a compaction must not find the watch behind
			}
			if resp, err := rp.rec.Do(context.Background(), req); err == nil {
				final = max(final, resp.Revision)
			}
			ops++
		}
		received := rp.finish(t, final)
		events += len(received)
		rres := mustPass(rt, rp.rec.History(), "the replay of its linearization")
		for name, log := range map[string][]etcd.Event{"the workload's": res.Events, "the replay's": rres.Events} {
			if diff := cmp.Diff(upTo(log, final), received, cmpopts.EquateEmpty()); diff != "" {
				rt.Fatalf("%s reference event log is not what the store's watch delivered (-reference +store):\n%s", name, diff)
			}
		}
	})
	t.Logf("%d operations replayed, %d events compared, %d shape probes, %d compactions", ops, events, probes, compactions)
}

// runWorkloadInProcess runs cfg against a fresh store served by etcdgrpc and returns its history.
func runWorkloadInProcess(t *testing.T, cfg workload.Config) *etcd.History {
	st := store.New(store.Options{SyncInterval: 5 * time.Millisecond, ProgressNotifyInterval: 100 * time.Millisecond})
	defer st.Close()
	cli, closeClient, err := etcdgrpc.NewClient(st, etcdgrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := closeClient(); err != nil {
			t.Error(err)
		}
	}()
	rec := etcd.NewRecorder(cli, nil)
	if _, err := workload.Run(context.Background(), rec, cfg); err != nil {
		t.Fatal(err)
	}
	return rec.History()
}

func mustPass(rt *rapid.T, h *etcd.History, what string) *etcd.Result {
	res, err := etcd.Check(h, etcd.Options{Timeout: time.Minute})
	if err != nil {
		rt.Fatalf("%s: %v", what, err)
	}
	if !res.OK() || res.Verdict != etcd.VerdictLinearizable {
		rt.Fatalf("%s fails the check: %v\nnotes: %v", what, res.Err(), res.Notes)
	}
	return res
}

// upTo drops the events after rev: the search may place the expiry of a lease that a request found
// missing after everything the history shows, where nothing contradicts it.
func upTo(events []etcd.Event, rev int64) []etcd.Event {
	i := len(events)
	for i > 0 && events[i-1].Kv.ModRevision > rev {
		i--
	}
	return events[:i]
}

// replay is a fresh store behind etcdgrpc, a recorder of it and a watch over every key with prev_kv.
type replay struct {
	st          *store.Store
	cli         *clientv3.Client
	closeClient func() error
	rec         *etcd.Recorder
	cancel      context.CancelFunc
	wg          sync.WaitGroup

	mu       sync.Mutex
	created  bool
	seen     int64 // the highest revision of an event or progress notification received
	received []etcd.Event
}

func newReplay(t *testing.T) *replay {
	rp := &replay{st: store.New(store.Options{SyncInterval: 5 * time.Millisecond})}
	cli, closeClient, err := etcdgrpc.NewClient(rp.st, etcdgrpc.Options{})
	if err != nil {
		rp.st.Close()
		t.Fatal(err)
	}
	rp.cli, rp.closeClient = cli, closeClient
	rp.rec = etcd.NewRecorder(cli, nil)
	ctx, cancel := context.WithCancel(context.Background())
	rp.cancel = cancel
	t.Cleanup(rp.close(t))
	rp.wg.Add(1)
	go func() {
		defer rp.wg.Done()
		_ = rp.rec.Watch(ctx, etcd.WatchRequest{Key: "\x00", RangeEnd: "\x00", PrevKV: true}, func(r etcd.WatchResponse) {
			rp.mu.Lock()
			defer rp.mu.Unlock()
			rp.created = rp.created || r.Created
			rp.received = append(rp.received, r.Events...)
			for _, ev := range r.Events {
				rp.seen = max(rp.seen, ev.Kv.ModRevision)
			}
			if r.IsProgressNotify() {
				rp.seen = max(rp.seen, r.Revision)
			}
		})
	}()
	waitUntil(t, "the replay's watch is created", func() bool { rp.mu.Lock(); defer rp.mu.Unlock(); return rp.created })
	return rp
}

// caughtUp waits until the watch has received everything up to rev.
func (rp *replay) caughtUp(t *testing.T, rev int64) {
	waitUntil(t, fmt.Sprintf("the replay's watch reaches revision %d", rev), func() bool {
		_ = rp.rec.RequestProgress(context.Background())
		rp.mu.Lock()
		defer rp.mu.Unlock()
		return rp.seen >= rev
	})
}

// finish waits for the watch to reach rev, ends it and returns the events it received.
func (rp *replay) finish(t *testing.T, rev int64) []etcd.Event {
	rp.caughtUp(t, rev)
	rp.cancel()
	rp.wg.Wait()
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return slices.Clone(rp.received)
}

func (rp *replay) close(t *testing.T) func() {
	return func() {
		rp.cancel()
		rp.wg.Wait()
		if err := rp.closeClient(); err != nil {
			t.Error(err)
		}
		rp.st.Close()
	}
}

// refused sends req, which breaks a request-shape rule, and fails unless the store refused it with
// one of etcd's errors; whether it is the error the checker's model expects, etcd.Check of the
// replay tells.
func (rp *replay) refused(rt *rapid.T, name string, req etcd.Request) {
	_, err := rp.rec.Do(context.Background(), req)
	if err == nil || !etcd.IsDefiniteError(rpctypes.ErrorDesc(err)) {
		rt.Fatalf("shape probe %q (%s): the store answered %v, not one of etcd's refusals", name, etcd.DescribeRequest(&req), err)
	}
}

// waitUntil polls cond until it holds, failing the test after a generous deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// shapeProbes are requests etcd refuses whatever it holds, one per rule of package etcdrules.
var shapeProbes = []struct {
	name string
	req  func() etcd.Request
}{
	{"put without a key", func() etcd.Request { return etcd.Request{Put: &etcd.PutRequest{Value: "v"}} }},
	{"range without a key", func() etcd.Request {
		return etcd.Request{Range: &etcd.RangeRequest{RangeEnd: "z"}}
	}},
	{"delete without a key", func() etcd.Request {
		return etcd.Request{DeleteRange: &etcd.DeleteRangeRequest{RangeEnd: "z"}}
	}},
	{"unknown sort order", func() etcd.Request {
		return etcd.Request{Range: &etcd.RangeRequest{Key: "key/01", SortOrder: 3}}
	}},
	{"unknown sort target", func() etcd.Request {
		return etcd.Request{Range: &etcd.RangeRequest{Key: "key/01", SortOrder: etcd.SortAscend, SortTarget: 5}}
	}},
	{"ignore_value with a value", func() etcd.Request {
		return etcd.Request{Put: &etcd.PutRequest{Key: "key/01", Value: "v", IgnoreValue: true}}
	}},
	{"ignore_lease with a lease", func() etcd.Request {
		return etcd.Request{Put: &etcd.PutRequest{Key: "key/01", Lease: 7, IgnoreLease: true}}
	}},
	{"too many ops", func() etcd.Request {
		return etcd.Request{Txn: &etcd.TxnRequest{Success: ranges(etcdrules.DefaultMaxTxnOps + 1)}}
	}},
	{"too many ops, nested", func() etcd.Request {
		return etcd.Request{Txn: &etcd.TxnRequest{
			Compare: []etcd.Compare{{Key: "key/01", Target: etcd.CompareVersion}},
			Success: []etcd.RequestOp{{Txn: &etcd.TxnRequest{Failure: ranges(etcdrules.DefaultMaxTxnOps)}}}}}
	}},
	{"compare without a key", func() etcd.Request {
		return etcd.Request{Txn: &etcd.TxnRequest{Compare: []etcd.Compare{{Target: etcd.CompareMod}}}}
	}},
	{"empty op", func() etcd.Request {
		return etcd.Request{Txn: &etcd.TxnRequest{Failure: []etcd.RequestOp{{}}}}
	}},
	{"key put twice", func() etcd.Request {
		return etcd.Request{Txn: &etcd.TxnRequest{Success: []etcd.RequestOp{
			{Put: &etcd.PutRequest{Key: "key/01"}}, {Put: &etcd.PutRequest{Key: "key/01", Value: "v"}}}}}
	}},
	{"put in a deleted range", func() etcd.Request {
		return etcd.Request{Txn: &etcd.TxnRequest{Success: []etcd.RequestOp{
			{DeleteRange: &etcd.DeleteRangeRequest{Key: "key/", RangeEnd: "key0"}}, {Put: &etcd.PutRequest{Key: "key/01"}}}}}
	}},
	{"key put twice, nested", func() etcd.Request {
		return etcd.Request{Txn: &etcd.TxnRequest{Success: []etcd.RequestOp{
			{Put: &etcd.PutRequest{Key: "key/01"}},
			{Txn: &etcd.TxnRequest{Failure: []etcd.RequestOp{{Put: &etcd.PutRequest{Key: "key/01"}}}}}}}}
	}},
	{"request too large", func() etcd.Request {
		return etcd.Request{Put: &etcd.PutRequest{Key: "key/01", Value: etcd.Bytes(strings.Repeat("x", etcdrules.DefaultMaxRequestBytes))}}
	}},
	{"lease TTL too large", func() etcd.Request {
		return etcd.Request{LeaseGrant: &etcd.LeaseGrantRequest{ID: 1 << 40, TTL: etcdrules.MaxLeaseTTL + 1}}
	}},
}

func ranges(n int) []etcd.RequestOp {
	ops := make([]etcd.RequestOp, n)
	for i := range ops {
		ops[i] = etcd.RequestOp{Range: &etcd.RangeRequest{Key: etcd.Bytes(fmt.Sprintf("key/%02d", i%40))}}
	}
	return ops
}
