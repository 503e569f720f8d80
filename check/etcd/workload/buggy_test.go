package workload

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

// A buggy store is listwatch's store served through client interceptors that give it one known
// bug's behaviour, deterministically, so that the bug's trigger makes it fail every time:
//
//   - progress-ahead (etcd-io/etcd#15220, k3s-io/kine#731): a RequestProgress is answered at once,
//     at the store's current revision, ahead of the events queued on the stream (etcd 3.4's
//     ctrlStream overtaking the watch channel); the latest events response is always still queued
//     until something follows it.
//   - history-behind (k3s-io/kine#731, kine v0.17.0's watcher.watch and ProgressAll): a watch from
//     the past is answered created before its history, and a RequestProgress is answered at once,
//     at the store's current revision; the history (a watch from the past's responses from its
//     first events on) is held until a RequestProgress has been answered or another response
//     follows.
//   - unsynced (etcd-io/etcd#17507): a RequestProgress on a stream with a watch from the past that
//     has received no event is never answered.
//   - tombstone (etcd-io/etcd#18089): a watch from a compaction revision never gets the DELETE at it.
//   - tombstone-after-restart (etcd-io/etcd#19179): once the store has been restarted (restart), a
//     watch from the revision of a compaction made before the restart never gets the DELETE at it.
//   - compact-revision-watch (k3s-io/kine#747): a watch from exactly a compaction revision is
//     canceled as compacted.
type buggyStore struct {
	st  *store.Store
	bug string

	mu        sync.Mutex
	compacted []int64 // revisions compacted at
	restarted int     // how many of them were made before the last restart
}

func (b *buggyStore) compactedAt(rev int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Contains(b.compacted, rev)
}

// dropsDeleteAt reports whether a watch from rev loses the DELETE at rev.
func (b *buggyStore) dropsDeleteAt(rev int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.bug {
	case "tombstone":
		return slices.Contains(b.compacted, rev)
	case "tombstone-after-restart":
		return slices.Contains(b.compacted[:b.restarted], rev)
	}
	return false
}

// restart is the store's ScenarioConfig.Restart: it serves on, but forgets the tombstones at the
// compactions made so far, as etcd's restore of its index did.
func (b *buggyStore) restart(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.restarted = len(b.compacted)
	return nil
}

// buggyClient serves a fresh store with bug's behaviour.
func buggyClient(t *testing.T, bug string) (*clientv3.Client, *buggyStore) {
	b := &buggyStore{st: store.New(store.Options{}), bug: bug}
	t.Cleanup(func() { b.st.Close() })
	return interceptedClient(t, b.st, grpc.WithChainUnaryInterceptor(b.unary), grpc.WithChainStreamInterceptor(b.stream)), b
}

// interceptedClient serves st to a client whose calls go through the interceptors of opts; the
// client is closed when the test ends.
func interceptedClient(t *testing.T, st *store.Store, opts ...grpc.DialOption) *clientv3.Client {
	cli, closeClient, err := etcdgrpc.NewClient(st, etcdgrpc.Options{}, func(cfg *clientv3.Config) {
		cfg.DialOptions = append(cfg.DialOptions, opts...)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := closeClient(); err != nil {
			t.Error(err)
		}
	})
	return cli
}

// unary notes the compactions that succeed.
func (b *buggyStore) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if c, ok := req.(*pb.CompactionRequest); ok && err == nil {
		b.mu.Lock()
		b.compacted = append(b.compacted, c.Revision)
		b.mu.Unlock()
	}
	return err
}

func (b *buggyStore) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Watch/Watch" {
		return s, err
	}
	bs := &buggyStream{ClientStream: s, b: b, recv: make(chan recvd, 1), wake: make(chan struct{}, 1),
		startOf: map[int64]int64{}, dead: map[int64]bool{}, holding: map[int64]bool{}, caught: map[int64]bool{}}
	go bs.pump()
	return bs, nil
}

type recvd struct {
	m   *pb.WatchResponse
	err error
}

// buggyStream is one watch stream of a buggy store. Its pump goroutine reads the real stream
// until it ends; the stream's context ending stops it.
type buggyStream struct {
	grpc.ClientStream
	b    *buggyStore
	recv chan recvd
	wake chan struct{}

	mu      sync.Mutex
	ctrl    []*pb.WatchResponse // answers that overtake the stream
	out     []*pb.WatchResponse // responses to deliver, in order
	held    *pb.WatchResponse   // progress-ahead: the latest events response, still queued
	err     error               // the real stream's end, once out and held are delivered
	creates []int64             // start revisions of the creates not yet answered
	startOf map[int64]int64     // watch ID -> start revision
	dead    map[int64]bool      // watches canceled as compacted by the bug
	past    bool                // a watch from the past has received no event yet
	behind  []*pb.WatchResponse // history-behind: the histories held
	holding map[int64]bool      // history-behind: watches whose history is held
	caught  map[int64]bool      // history-behind: watches from the past whose history has come
}

func (s *buggyStream) pump() {
	for {
		m := new(pb.WatchResponse)
		err := s.ClientStream.RecvMsg(m)
		select {
		case s.recv <- recvd{m, err}:
		case <-s.Context().Done():
			return
		}
		if err != nil {
			return
		}
	}
}

func (s *buggyStream) SendMsg(m any) error {
	r, ok := m.(*pb.WatchRequest)
	if !ok {
		return s.ClientStream.SendMsg(m)
	}
	s.mu.Lock()
	if c := r.GetCreateRequest(); c != nil {
		s.creates = append(s.creates, c.StartRevision)
		s.past = s.past || c.StartRevision > 0
	}
	if r.GetProgressRequest() != nil {
		switch {
		case s.b.bug == "progress-ahead" || s.b.bug == "history-behind":
			s.ctrl = append(s.ctrl, &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: s.b.st.Rev()}, WatchId: clientv3.InvalidWatchID})
			s.release()
			s.mu.Unlock()
			s.poke()
			return nil
		case s.b.bug == "unsynced" && s.past:
			s.mu.Unlock()
			return nil
		}
	}
	s.mu.Unlock()
	return s.ClientStream.SendMsg(m)
}

// release queues the held responses for delivery.
func (s *buggyStream) release() {
	if s.held != nil {
		s.out = append(s.out, s.held)
		s.held = nil
	}
	s.out = append(s.out, s.behind...)
	s.behind = nil
	clear(s.holding)
}

// holdsHistory reports whether m is held as a watch's history still to come (history-behind).
func (s *buggyStream) holdsHistory(m *pb.WatchResponse) bool {
	id := m.WatchId
	if s.b.bug != "history-behind" || !s.holding[id] && (s.startOf[id] == 0 || s.caught[id] || len(m.Events) == 0) {
		return false
	}
	s.caught[id] = true
	s.holding[id] = true
	s.behind = append(s.behind, m)
	return true
}

func (s *buggyStream) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *buggyStream) RecvMsg(m any) error {
	for {
		s.mu.Lock()
		var next *pb.WatchResponse
		switch {
		case len(s.ctrl) > 0:
			next, s.ctrl = s.ctrl[0], s.ctrl[1:]
		case len(s.out) > 0:
			next, s.out = s.out[0], s.out[1:]
		case s.err != nil:
			err := s.err
			s.mu.Unlock()
			return err
		}
		s.mu.Unlock()
		if next != nil {
			proto.Merge(m.(*pb.WatchResponse), next)
			return nil
		}
		select {
		case <-s.wake:
		case r := <-s.recv:
			s.mu.Lock()
			s.take(r)
			s.mu.Unlock()
		case <-s.Context().Done():
			return s.Context().Err()
		}
	}
}

// take passes a response of the real stream through the bug.
func (s *buggyStream) take(r recvd) {
	if r.err != nil {
		s.release()
		s.err = r.err
		return
	}
	m := r.m
	if m.Created && len(s.creates) > 0 {
		start := s.creates[0]
		s.creates = s.creates[1:]
		s.startOf[m.WatchId] = start
		if s.b.bug == "compact-revision-watch" && start > 0 && s.b.compactedAt(start) && !m.Canceled {
			s.dead[m.WatchId] = true
			s.out = append(s.out, m, &pb.WatchResponse{Header: m.Header, WatchId: m.WatchId, Canceled: true, CompactRevision: start,
				CancelReason: "mvcc: required revision has been compacted"})
			return
		}
	}
	if s.dead[m.WatchId] {
		return
	}
	if start := s.startOf[m.WatchId]; start > 0 && len(m.Events) > 0 && s.b.dropsDeleteAt(start) {
		m.Events = slices.DeleteFunc(m.Events, func(ev *mvccpb.Event) bool {
			return ev.Type == mvccpb.DELETE && ev.Kv.ModRevision == start
		})
		if len(m.Events) == 0 {
			return // an empty response would read as a progress notification
		}
	}
	if len(m.Events) > 0 {
		s.past = false
	}
	if s.holdsHistory(m) {
		return
	}
	if s.b.bug == "progress-ahead" && len(m.Events) > 0 {
		s.release()
		s.held = m
		return
	}
	s.release()
	s.out = append(s.out, m)
}

// buggyTargets: what each buggy store is taken for, a version with the bug.
type buggyTarget struct {
	bug, behaviour string
	target         etcd.Target
}

var buggyTargets = []buggyTarget{
	{"etcd-progress-ahead", "progress-ahead", etcd.Target{Product: "etcd", Version: "3.5.7"}},
	{"kine-progress-ahead", "history-behind", etcd.Target{Product: "kine", Version: "3.5.13"}},
	{"etcd-progress-unsynced", "unsynced", etcd.Target{Product: "etcd", Version: "3.5.12"}},
	{"etcd-compacted-tombstone", "tombstone", etcd.Target{Product: "etcd", Version: "3.5.12"}},
	// 3.4.23 has etcd-compacted-tombstone too, which comes first in the catalogue
	{"etcd-tombstone-after-restart", "tombstone-after-restart", etcd.Target{Product: "etcd", Version: "3.4.23"}},
	{"kine-compact-revision-watch", "compact-revision-watch", etcd.Target{Product: "kine", Version: "3.5.13"}},
}

// notProvokable names the catalogued bugs no scenario can provoke against a store it did not
// start, each with why; every other bug must have a buggy store and a scenario here.
var notProvokable = map[string]string{}

// buggyWorkloadRuns is how many seeds each workload is run with against a buggy store.
const buggyWorkloadRuns = 3

// buggyRuns is how many times each bug's trigger is tried: every one must show it.
const buggyRuns = 3

// TestKnownBugsFailEveryRun: every catalogued bug has a scenario that mirrors it, and against a
// store with the bug that scenario reports it, labelled, every time; against listwatch's store the
// same scenarios pass (TestScenariosPassInMemory).
func TestKnownBugsFailEveryRun(t *testing.T) {
	for _, b := range etcd.KnownBugs {
		if why, ok := notProvokable[b.Name]; ok {
			t.Logf("%s: not provoked by a scenario: %s", b.Name, why)
			continue
		}
		i := slices.IndexFunc(buggyTargets, func(bt buggyTarget) bool { return bt.bug == b.Name })
		if i < 0 {
			t.Errorf("%s: no buggy store to provoke it on", b.Name)
			continue
		}
		bt := buggyTargets[i]
		var mirrors []*Scenario
		for _, sc := range Scenarios {
			if slices.Contains(sc.Mirrors, b.Name) {
				mirrors = append(mirrors, sc)
			}
		}
		if len(mirrors) == 0 {
			t.Errorf("%s: no scenario mirrors it", b.Name)
			continue
		}
		t.Run(b.Name, func(t *testing.T) {
			for run := range buggyRuns {
				cli, bs := buggyClient(t, bt.behaviour)
				cfg := ScenarioConfig{Prefix: "/sc/", Compaction: true, Restart: bs.restart, Target: bt.target, Timeout: testutil.WaitTimeout}
				if bt.behaviour == "unsynced" {
					// its scenario waits all of it for the answer that never comes; long enough for
					// a request of a loaded machine
					cfg.Timeout = 5 * time.Second
				}
				for _, sc := range mirrors {
					began := time.Now()
					r := runScenario(context.Background(), cli, cfg.withDefaults(), sc)
					t.Logf("run %d, %s: %v, %v", run, sc.Name, time.Since(began), r.Result.Err())
					if err := reportsBug(&r, b); err != nil {
						t.Errorf("run %d, %s: %v", run, sc.Name, err)
					}
				}
			}
		})
	}
}

// reportsBug says what is wrong with a scenario's result for a store with bug b: it must fail, and
// everything it found must be b.
func reportsBug(r *ScenarioResult, b *etcd.KnownBug) error {
	switch {
	case r.Skipped != "" || r.Err != nil:
		return fmt.Errorf("skipped %q, err %v", r.Skipped, r.Err)
	case r.Passed():
		return fmt.Errorf("passed")
	case r.Finding != "" && r.FindingBug != b:
		return fmt.Errorf("finding %q labelled %v", r.Finding, r.FindingBug)
	}
	for i, l := range r.Labels {
		if !l.Known() || l.Bug != b {
			return fmt.Errorf("violation %v labelled %+v", r.Result.Violations[i], l)
		}
	}
	return nil
}

// TestWorkloadsProvokeProgressAhead: both workloads send etcd-io/etcd#15220's trigger (writes, then
// at once a RequestProgress) often enough that a store with the bug fails every run, every
// violation labelled with it; listwatch's store passes them (TestWorkloadsPassInMemory).
func TestWorkloadsProvokeProgressAhead(t *testing.T) {
	target := etcd.Target{Product: "etcd", Version: "3.5.7"}
	for _, kind := range Kinds {
		for seed := uint64(1); seed <= buggyWorkloadRuns; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", kind, seed), func(t *testing.T) {
				cli, _ := buggyClient(t, "progress-ahead")
				rec := etcd.NewRecorder(cli, nil)
				if _, err := Run(context.Background(), rec, Config{Kind: kind, Seed: seed, Clients: 3, Watchers: 3, Ops: 600, CompactEvery: 40}); err != nil {
					t.Fatal(err)
				}
				wantKnown(t, rec.History(), target, "etcd-progress-ahead")
			})
		}
	}
}

// TestProgressAheadOfHistory: against a store with kine v0.17.0's way (history-behind), the last
// part of request-progress-not-ahead, its watches from the past opened many at once, fails on
// those watches, labelled kine-progress-ahead; listwatch's store passes it
// (TestScenariosPassInMemory).
func TestProgressAheadOfHistory(t *testing.T) {
	cli, _ := buggyClient(t, "history-behind")
	sc := Scenarios[slices.IndexFunc(Scenarios, func(sc *Scenario) bool { return sc.Name == "request-progress-not-ahead" })]
	cfg := ScenarioConfig{Prefix: "/sc/", Target: etcd.Target{Product: "kine", Version: "3.6.11", StoreVersion: "v0.17.0"}, Timeout: testutil.WaitTimeout}
	r := runScenario(context.Background(), cli, cfg.withDefaults(), sc)
	if err := reportsBug(&r, etcd.BugNamed("kine-progress-ahead")); err != nil {
		t.Fatal(err)
	}
	onHistory := 0
	for _, v := range r.Result.Violations {
		if v.Watch >= 0 && strings.HasPrefix(string(r.History.Watches[v.Watch].Request.Key), "/sc/request-progress-not-ahead/h/") {
			onHistory++
		}
	}
	if onHistory == 0 {
		t.Fatalf("no violation on the watches of the history, of %d", len(r.Result.Violations))
	}
	t.Logf("%d of %d violations on the watches of the history", onHistory, len(r.Result.Violations))
}
