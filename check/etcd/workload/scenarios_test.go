package workload

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

func scenarioResult(t *testing.T, results []ScenarioResult, name string) *ScenarioResult {
	t.Helper()
	for i := range results {
		if results[i].Scenario.Name == name {
			return &results[i]
		}
	}
	t.Fatalf("no scenario %s", name)
	return nil
}

// TestScenariosStop: once Stop is closed (an interrupt) the scenarios not yet begun are skipped;
// Starting names each scenario that begins.
func TestScenariosStop(t *testing.T) {
	cli := inMemory(t, store.Options{})
	stop := make(chan struct{})
	var started []string
	results := RunScenarios(context.Background(), cli, ScenarioConfig{Prefix: "/sc/", Target: etcd.Target{Product: "etcd", Version: "3.7.3"},
		Timeout: testutil.WaitTimeout, Stop: stop, Starting: func(i int, sc *Scenario) {
			started = append(started, sc.Name)
			if i == 1 {
				close(stop)
			}
		}})
	if len(started) != 2 || started[0] != Scenarios[0].Name || started[1] != Scenarios[1].Name {
		t.Errorf("started %v, want the first two", started)
	}
	for i, r := range results {
		if (i >= 2) != (r.Skipped == "interrupted") {
			t.Errorf("scenario %d %s: skipped %q", i, r.Scenario.Name, r.Skipped)
		}
	}
}

// TestScenariosPassInMemory: every scenario runs and passes against listwatch's store, the
// fragmented one with fragments, the one that restarts the store with a restart that keeps it as
// it is (an in-process store holds what it held), and together they exercise every guarantee.
func TestScenariosPassInMemory(t *testing.T) {
	cli := inMemory(t, store.Options{})
	restarts := 0
	results := RunScenarios(context.Background(), cli, ScenarioConfig{Prefix: "/sc/", Compaction: true, Target: etcd.Target{Product: "etcd", Version: "3.7.3"},
		Timeout: testutil.WaitTimeout, Restart: func(context.Context) error { restarts++; return nil }})
	if restarts != 1 {
		t.Errorf("%d restarts, want 1", restarts)
	}
	if len(results) != len(Scenarios) {
		t.Fatalf("%d results for %d scenarios", len(results), len(Scenarios))
	}
	guarantees := map[etcd.Guarantee]bool{}
	for _, r := range results {
		if !r.Passed() {
			t.Errorf("%s: skipped %q, err %v, finding %q, %v", r.Scenario.Name, r.Skipped, r.Err, r.Finding, r.Result.Err())
			continue
		}
		guarantees[r.Scenario.Guarantee] = true
	}
	if r := scenarioResult(t, results, "fragmented-revision"); r.Fragments == 0 {
		t.Error("the fragmented revision came in one response")
	}
	if r := scenarioResult(t, results, "lease-expiry"); r.Result == nil || r.Result.Coverage.LeaseExpiries != 1 {
		t.Errorf("lease expiry: %+v", r.Result)
	}
	for _, g := range []etcd.Guarantee{etcd.Linearizable, etcd.Serializable, etcd.FirstRevision, etcd.Reliable,
		etcd.PrevKV, etcd.Filter, etcd.Atomic, etcd.IsCreate, etcd.Compaction, etcd.Resumable,
		etcd.Bookmarkable, etcd.Genuine} {
		if !guarantees[g] {
			t.Errorf("no passing scenario for %s", g)
		}
	}
}

// TestScenarioRestartSkipped: without a way to restart the store, the scenario that restarts it is
// skipped, saying so; a restart that fails is the scenario's error.
func TestScenarioRestartSkipped(t *testing.T) {
	sc := scenarioNamed(t, "tombstone-after-restart")
	cfg := ScenarioConfig{Prefix: "/sc/", Compaction: true, Timeout: testutil.WaitTimeout}.withDefaults()
	r := runScenario(context.Background(), inMemory(t, store.Options{}), cfg, sc)
	if !strings.Contains(r.Skipped, "restarts the store") || r.History != nil {
		t.Errorf("skipped %q, history %v", r.Skipped, r.History)
	}
	cfg.Restart = func(context.Context) error { return errors.New("no such member") }
	r = runScenario(context.Background(), inMemory(t, store.Options{}), cfg, sc)
	if r.Skipped != "" || r.Err == nil || !strings.Contains(r.Err.Error(), "restarting the store: no such member") {
		t.Errorf("skipped %q, err %v", r.Skipped, r.Err)
	}
}

func scenarioNamed(t *testing.T, name string) *Scenario {
	t.Helper()
	for _, sc := range Scenarios {
		if sc.Name == name {
			return sc
		}
	}
	t.Fatalf("no scenario %s", name)
	return nil
}

// kineLikeClient serves listwatch's store through interceptors that do what kine does: every watch
// event carries a prev_kv, and progress requests go unanswered.
func kineLikeClient(t *testing.T) *clientv3.Client {
	st := store.New(store.Options{})
	t.Cleanup(func() { st.Close() })
	return interceptedClient(t, st, grpc.WithChainStreamInterceptor(
		func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil || method != "/etcdserverpb.Watch/Watch" {
				return s, err
			}
			return &kineLikeStream{ClientStream: s}, nil
		}))
}

type kineLikeStream struct{ grpc.ClientStream }

func (s *kineLikeStream) SendMsg(m any) error {
	if r, ok := m.(*pb.WatchRequest); ok && r.GetProgressRequest() != nil {
		return nil
	}
	return s.ClientStream.SendMsg(m)
}

func (s *kineLikeStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if r, ok := m.(*pb.WatchResponse); ok && err == nil {
		for _, ev := range r.Events {
			if ev.PrevKv == nil && ev.Kv.CreateRevision != ev.Kv.ModRevision {
				ev.PrevKv = proto.Clone(ev.Kv).(*mvccpb.KeyValue)
			}
		}
	}
	return err
}

// TestScenariosFail: against a store that sends prev_kv unasked and leaves RequestProgress
// unanswered, the scenarios for those fail, naming the guarantee or the answer missing; the others
// find nothing else.
func TestScenariosFail(t *testing.T) {
	cli := kineLikeClient(t)
	// Timeout bounds each request as well as the waits for the progress answers this store never
	// gives (each of those takes all of it): long enough for a request of a loaded machine (1 s was
	// not, under make stress), short enough for those waits.
	results := RunScenarios(context.Background(), cli, ScenarioConfig{Prefix: "/sc/", Timeout: 5 * time.Second})
	for _, r := range results {
		switch r.Scenario.Name {
		case "prev-kv-only-when-asked":
			if r.Passed() || r.Result == nil || len(r.Result.Violations) == 0 || r.Result.Violations[0].Signature != etcd.SigPrevKVUnasked {
				t.Errorf("%s: %+v", r.Scenario.Name, r.Result)
			}
		case "request-progress-answered", "request-progress-after-catching-up":
			if r.Finding == "" || r.FindingBug != nil {
				t.Errorf("%s: finding %q bug %v, want a finding of no known bug", r.Scenario.Name, r.Finding, r.FindingBug)
			}
		default:
			// the others see prev_kv unasked where they watch without it, and nothing else; those
			// that compact are skipped
			if r.Skipped != "" && r.Scenario.Needs.Has(FeatCompaction) {
				continue
			}
			if r.Err != nil || r.Finding != "" || r.Result == nil {
				t.Errorf("%s: err %v finding %q", r.Scenario.Name, r.Err, r.Finding)
				continue
			}
			for _, v := range r.Result.Violations {
				if v.Signature != etcd.SigPrevKVUnasked {
					t.Errorf("%s: %v", r.Scenario.Name, v)
				}
			}
		}
	}
}
