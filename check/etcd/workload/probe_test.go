package workload

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

// TestProbeInMemoryStore: listwatch's store answers every probe as etcd does, and says it is etcd.
func TestProbeInMemoryStore(t *testing.T) {
	cli := inMemory(t, store.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	eps, err := Status(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	caps, err := ProbeCapabilities(ctx, cli, ProbeConfig{Prefix: "/probe/", Compaction: true, Endpoints: eps})
	if err != nil {
		t.Fatal(err)
	}
	if caps.Product != "etcd" {
		t.Errorf("product %q, want etcd", caps.Product)
	}
	if len(caps.Results) != numFeatures {
		t.Fatalf("%d results, want one per feature (%d)", len(caps.Results), numFeatures)
	}
	for _, r := range caps.Results {
		if r.Status != Supported {
			t.Errorf("%s: %s %s", r.Feature, r.Status, r.Detail)
		}
	}
	if caps.Avoid() != 0 {
		t.Errorf("avoid %s", caps.Avoid())
	}
}

// refusing is a client interceptor that answers some calls as kine does, without sending them; it
// lets through the txns of the apiserver's shapes (one compare, on a mod revision).
func refusing(methods map[string]string) func(*clientv3.Config) {
	return func(cfg *clientv3.Config) {
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if t, ok := req.(*pb.TxnRequest); ok && len(t.Compare) == 1 && t.Compare[0].Target == pb.Compare_MOD {
					return invoker(ctx, method, req, reply, cc, opts...) // the apiserver's shapes, which kine takes
				}
				if msg, ok := methods[method]; ok {
					return status.Error(codes.Unimplemented, msg)
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			}))
	}
}

// TestProbeRefusals: a refused call is a finding, not a failure: the probe goes on, marks the
// features refused (and those it could not try for it), and names the product from the refusal.
func TestProbeRefusals(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	cli, closeClient, err := etcdgrpc.NewClient(st, etcdgrpc.Options{}, refusing(map[string]string{
		"/etcdserverpb.KV/DeleteRange":   "delete is not implemented by kine",
		"/etcdserverpb.KV/Txn":           "etcdserver: unsupported operations in txn request",
		"/etcdserverpb.Lease/LeaseGrant": "lease grant is not supported",
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := closeClient(); err != nil {
			t.Error(err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	caps, err := ProbeCapabilities(ctx, cli, ProbeConfig{Prefix: "/probe/", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if caps.Product != "kine" {
		t.Errorf("product %q, want kine (named in a refusal)", caps.Product)
	}
	want := map[Feature]CapStatus{FeatDeleteRPC: Refused, FeatDeleteRange: Refused, FeatTxn: Refused, FeatLeases: Refused,
		FeatMultiOpTxn: NotProbed, FeatCompareValue: NotProbed, FeatCompaction: NotProbed, FeatSort: Supported,
		FeatWatchFilters: Supported, FeatRequestProgress: Supported}
	for f, st := range want {
		if got := caps.status(f); got != st {
			t.Errorf("%s: %s, want %s", f, got, st)
		}
	}
	if r := caps.Results[0]; !strings.Contains(r.Detail, "delete is not implemented by kine") {
		t.Errorf("delete: %q, want the refusal quoted", r.Detail)
	}
	avoid := caps.Avoid()
	if !avoid.Has(FeatTxn) || !avoid.Has(FeatLeases) || avoid.Has(FeatSort) || avoid.Has(FeatMultiOpTxn) {
		t.Errorf("avoid %s", avoid)
	}
	if len(caps.Deviations()) != 4 {
		t.Errorf("deviations %+v", caps.Deviations())
	}

	// the workload then runs with what works, under a prefix, and the history passes
	rec := etcd.NewRecorder(cli, nil)
	snap, err := Run(ctx, rec, Config{Kind: Etcd, Seed: 3, Clients: 3, Watchers: 2, Ops: 600, Prefix: "/run/", Avoid: avoid})
	if err != nil {
		t.Fatal(err)
	}
	h := rec.History()
	for _, op := range h.Operations {
		if r := op.Request; r.DeleteRange != nil || r.LeaseGrant != nil || op.Unknown {
			t.Fatalf("the workload used what the store refuses: %s (%s)", etcd.DescribeRequest(&r), op.Error)
		}
	}
	if count(snap, "delete-range", OK) == 0 {
		t.Error("no delete: a store that refuses the delete RPC gets the apiserver's conditional deletes")
	}
	res, err := etcd.Check(h, etcd.Options{Timeout: time.Minute})
	if err != nil || !res.OK() {
		t.Fatalf("%v %v", err, res.Err())
	}
}

// TestProbeFailsWithoutPuts: a store that refuses plain puts cannot be probed at all.
func TestProbeFailsWithoutPuts(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	cli, closeClient, err := etcdgrpc.NewClient(st, etcdgrpc.Options{}, refusing(map[string]string{"/etcdserverpb.KV/Put": "read-only"}),
		func(c *clientv3.Config) { c.Logger = zap.NewNop() })
	if err != nil {
		t.Fatal(err)
	}
	defer closeClient()
	_, err = ProbeCapabilities(context.Background(), cli, ProbeConfig{Prefix: "/probe/"})
	if err == nil || !strings.Contains(err.Error(), "the store refuses the writes every probe needs: put /probe/a: read-only") {
		t.Fatalf("%v, want ErrProbe naming the put", err)
	}
}

// watchCreates is a client stream interceptor that keeps every watch create request sent.
type watchCreates struct {
	mu   sync.Mutex
	reqs []*pb.WatchCreateRequest
}

func (w *watchCreates) dialOption() grpc.DialOption {
	return grpc.WithChainStreamInterceptor(
		func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			return &sendSpy{ClientStream: cs, w: w}, err
		})
}

func (w *watchCreates) all() []*pb.WatchCreateRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.reqs)
}

type sendSpy struct {
	grpc.ClientStream
	w *watchCreates
}

func (s *sendSpy) SendMsg(m any) error {
	if r, ok := m.(*pb.WatchRequest); ok && r.GetCreateRequest() != nil {
		s.w.mu.Lock()
		s.w.reqs = append(s.w.reqs, r.GetCreateRequest())
		s.w.mu.Unlock()
	}
	return s.ClientStream.SendMsg(m)
}

// TestProbeSkip: the probes ProbeConfig.Skip leaves out show as skipped, and neither they, the
// scenarios nor the workload send a watch that uses the feature: no client-chosen watch ID (which
// panics kine v0.14.12), no filter, fragment or progress_notify; the scenarios that need them say
// the run skips them.
func TestProbeSkip(t *testing.T) {
	st := store.New(store.Options{})
	t.Cleanup(func() { st.Close() })
	spy := &watchCreates{}
	cli := interceptedClient(t, st, spy.dialOption())
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	caps, err := ProbeCapabilities(ctx, cli, ProbeConfig{Prefix: "/probe/", Skip: SkippableProbes})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range SkippableProbes.List() {
		if got := caps.status(f); got != Skipped || got.String() != "skipped" {
			t.Errorf("%s: %s, want skipped", f, got)
		}
	}
	if caps.status(FeatWatchFromPast) != Supported || caps.Avoid() != SkippableProbes || len(caps.Deviations()) != 0 {
		t.Errorf("watch from the past %s, avoid %s, deviations %v", caps.status(FeatWatchFromPast), caps.Avoid(), caps.Deviations())
	}
	results := RunScenarios(ctx, cli, ScenarioConfig{Prefix: "/sc/", Capabilities: caps, Target: etcd.Target{Product: "etcd", Version: "3.7.3"}})
	for _, r := range results {
		if r.Scenario.Name == "filters" && r.Skipped != "the run skips watch filters" ||
			r.Scenario.Name == "fragmented-revision" && r.Skipped != "the run skips watch fragment" {
			t.Errorf("%s: skipped %q", r.Scenario.Name, r.Skipped)
		}
	}
	rec := etcd.NewRecorder(cli, nil)
	if _, err := Run(ctx, rec, Config{Kind: Etcd, Seed: 5, Clients: 2, Watchers: 4, Ops: 400, Prefix: "/run/", Avoid: caps.Avoid()}); err != nil {
		t.Fatal(err)
	}
	creates := spy.all()
	if len(creates) < 10 {
		t.Fatalf("%d watch creates seen: the interceptor sees none", len(creates))
	}
	for _, c := range creates {
		if c.WatchId != clientv3.AutoWatchID || c.StartRevision < 0 || len(c.Filters) > 0 || c.Fragment || c.ProgressNotify {
			t.Errorf("a watch with a skipped feature: %v", c)
		}
	}
}
