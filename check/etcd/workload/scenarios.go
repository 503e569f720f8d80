package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/check/etcd"
)

// Scenario is a short deterministic sequence of requests and watches that exercises one guarantee,
// most of them the way a known real-world bug broke it. Its recorded history is judged by
// etcd.Check like any other; a scenario that waits for an answer (a progress notification, a
// lease expiry) also fails, with a Finding, when none comes.
type Scenario struct {
	// Name is short and unique; Guarantee the guarantee it exercises.
	Name      string
	Guarantee etcd.Guarantee
	// Mirrors names the real-world bugs it reproduces: etcd.KnownBugs names, or tracker
	// references of bugs without a signature there.
	Mirrors []string
	// Needs are the features it cannot run without: it is skipped where one is refused.
	Needs Features
	// Restarts: it restarts the store (ScenarioConfig.Restart), and is skipped where it cannot.
	Restarts bool
	run      func(e *scenarioEnv) error
}

// ScenarioResult is what one scenario found.
type ScenarioResult struct {
	Scenario *Scenario
	// Skipped says why it did not run ("" if it ran).
	Skipped string
	// Err: it could not complete (a request it needed failed); the history is what was recorded.
	Err     error
	History *etcd.History
	Result  *etcd.Result
	// Finding is the scenario's own failure: an answer that did not come.
	Finding string
	// FindingBug is the known bug the finding is, for the target; nil if none.
	FindingBug *etcd.KnownBug
	// Labels label Result's violations (etcd.Classify).
	Labels []etcd.Label
	// Fragments counts the fragmented watch responses it received.
	Fragments int
}

// Passed reports whether the scenario ran and found nothing.
func (r *ScenarioResult) Passed() bool {
	return r.Skipped == "" && r.Err == nil && r.Finding == "" && r.Result != nil && r.Result.OK()
}

// ScenarioConfig tunes RunScenarios.
type ScenarioConfig struct {
	// Prefix is where the scenarios write: each under Prefix + its name + "/".
	Prefix string
	// Capabilities are the store's (ProbeCapabilities), nil: all as etcd.
	Capabilities *Capabilities
	// Compaction: the scenarios that compact the store may run (the store is the run's alone).
	Compaction bool
	// Restart restarts every member of the store and returns once it serves again; nil: the
	// scenarios that restart the store are skipped.
	Restart func(ctx context.Context) error
	// NoRequestProgress: the scenarios that send RequestProgress are skipped (the apiserver's gating).
	NoRequestProgress bool
	// Target is what the store is, for labelling.
	Target etcd.Target
	// Timeout bounds each request and each wait for an answer; default 3 s.
	Timeout time.Duration
	// CheckTimeout bounds each history's check; default 1 min.
	CheckTimeout time.Duration
	// Clock times the waits. Default: the real clock.
	Clock clock.Clock
	// Stop, once closed, skips the scenarios not yet begun (the one running runs to its end): an
	// interrupt. Nil: never.
	Stop <-chan struct{}
	// Starting, if set, is called before each scenario runs, with its index in Scenarios.
	Starting func(i int, sc *Scenario)
}

// Scenarios is the suite, in the order RunScenarios runs it.
var Scenarios = []*Scenario{
	{Name: "read-your-writes", Guarantee: etcd.Linearizable, run: scReadYourWrites},
	{Name: "serializable-read", Guarantee: etcd.Serializable, Needs: Features(FeatSerializable), run: scSerializable},
	{Name: "watch-from-now", Guarantee: etcd.FirstRevision, run: scWatchFromNow},
	{Name: "watch-from-the-past", Guarantee: etcd.Reliable, Needs: Features(FeatWatchFromPast), run: scWatchFromPast},
	{Name: "prev-kv-only-when-asked", Guarantee: etcd.PrevKV, run: scPrevKV},
	{Name: "filters", Guarantee: etcd.Filter, Needs: Features(FeatWatchFilters), run: scFilters},
	{Name: "txn-in-one-response", Guarantee: etcd.Atomic, Needs: Features(FeatMultiOpTxn), run: scAtomic},
	{Name: "recreate-is-create", Guarantee: etcd.IsCreate, run: scRecreate},
	{Name: "fragmented-revision", Guarantee: etcd.Reliable, Needs: Features(FeatFragment | FeatMultiOpTxn), run: scFragment},
	{Name: "revision-window", Guarantee: etcd.Linearizable, Needs: Features(FeatCompaction | FeatPastRevision), run: scRevisionWindow},
	{Name: "compacted-watch-canceled-first", Guarantee: etcd.Compaction, Mirrors: []string{"k3s-io/kine#238"},
		Needs: Features(FeatCompaction | FeatWatchFromPast), run: scCompactedWatch},
	{Name: "watch-from-compact-revision", Guarantee: etcd.Compaction, Mirrors: []string{"kine-compact-revision-watch"},
		Needs: Features(FeatCompaction | FeatWatchFromPast), run: scWatchFromCompactRevision},
	{Name: "tombstone-at-compact-revision", Guarantee: etcd.Resumable, Mirrors: []string{"etcd-compacted-tombstone"},
		Needs: Features(FeatCompaction | FeatWatchFromPast), run: scTombstone},
	// these two test that RequestProgress is answered: they run where it was found not to be
	{Name: "request-progress-answered", Guarantee: etcd.Bookmarkable, Mirrors: []string{"k3s-io/kine#267", "kubernetes/kubernetes#59848"},
		run: scProgressAnswered},
	{Name: "request-progress-after-catching-up", Guarantee: etcd.Bookmarkable, Mirrors: []string{"etcd-progress-unsynced"},
		Needs: Features(FeatWatchFromPast), run: scProgressUnsynced},
	{Name: "request-progress-not-ahead", Guarantee: etcd.Bookmarkable, Mirrors: []string{"etcd-progress-ahead", "kine-progress-ahead"},
		Needs: Features(FeatRequestProgress | FeatWatchFromPast), run: scProgressNotAhead},
	{Name: "lease-expiry", Guarantee: etcd.Genuine, Needs: Features(FeatLeases), run: scLeaseExpiry},
	// last: a restart leaves the store otherwise than the scenarios before it found it (on etcd
	// 3.5.12 request-progress-after-catching-up then found etcd-progress-unsynced in 2 runs of 4,
	// against 5 of 5 without)
	{Name: "tombstone-after-restart", Guarantee: etcd.Resumable, Mirrors: []string{"etcd-tombstone-after-restart"},
		Needs: Features(FeatCompaction | FeatWatchFromPast | FeatMultiOpTxn), Restarts: true, run: scTombstoneAfterRestart},
}

// RunScenarios runs the suite against c, one scenario after the other, each recorded under a prefix
// of its own and checked.
func RunScenarios(ctx context.Context, c *clientv3.Client, cfg ScenarioConfig) []ScenarioResult {
	cfg = cfg.withDefaults()
	var out []ScenarioResult
	for i, sc := range Scenarios {
		select {
		case <-cfg.Stop:
			out = append(out, ScenarioResult{Scenario: sc, Skipped: "interrupted"})
			continue
		default:
		}
		if cfg.Starting != nil {
			cfg.Starting(i, sc)
		}
		out = append(out, runScenario(ctx, c, cfg, sc))
	}
	return out
}

func (cfg ScenarioConfig) withDefaults() ScenarioConfig {
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.CheckTimeout == 0 {
		cfg.CheckTimeout = time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return cfg
}

func runScenario(ctx context.Context, c *clientv3.Client, cfg ScenarioConfig, sc *Scenario) ScenarioResult {
	res := ScenarioResult{Scenario: sc}
	if res.Skipped = skipReason(cfg, sc); res.Skipped != "" {
		return res
	}
	e := newScenarioEnv(ctx, c, cfg, cfg.Prefix+sc.Name+"/")
	if err := e.rec.Begin(ctx, etcd.Bytes(e.prefix)); err != nil {
		res.Err = err
		return res
	}
	res.Err = sc.run(e)
	e.stop()
	res.Finding, res.Fragments = e.finding, e.fragments
	res.History = e.rec.History()
	noVersions := cfg.Capabilities != nil && cfg.Capabilities.NoKeyVersions()
	r, err := etcd.CheckContext(ctx, res.History, etcd.Options{Timeout: cfg.CheckTimeout, IgnoreVersions: noVersions})
	if err != nil {
		res.Err = errors.Join(res.Err, err)
		return res
	}
	res.Result = r
	res.Labels = etcd.Classify(res.History, r, cfg.Target)
	mirroredLabels(sc, res.History, r, res.Labels, cfg.Target)
	if res.Finding != "" {
		for _, m := range sc.Mirrors {
			if b := etcd.BugNamed(m); b != nil && b.Product == cfg.Target.Product && len(b.Signatures) == 0 && b.AffectsTarget(cfg.Target) {
				res.FindingBug = b
			}
		}
	}
	return res
}

// skipReason says why sc cannot run with cfg, "" if it can.
func skipReason(cfg ScenarioConfig, sc *Scenario) string {
	var refused, skipped []string
	for _, f := range sc.Needs.List() {
		switch {
		case cfg.Capabilities == nil:
		case cfg.Capabilities.status(f) == Skipped:
			skipped = append(skipped, f.String())
		case !cfg.Capabilities.runnable(f):
			refused = append(refused, f.String())
		}
	}
	switch {
	case len(refused) > 0:
		return "the store refuses " + strings.Join(refused, ", ")
	case len(skipped) > 0:
		return "the run skips " + strings.Join(skipped, ", ")
	case sc.Needs.Has(FeatCompaction) && !cfg.Compaction:
		return "it compacts the store (--compact-every 0)"
	case strings.HasPrefix(sc.Name, "request-progress") && cfg.NoRequestProgress:
		return "the apiserver sends no RequestProgress to this version"
	case sc.Restarts && cfg.Restart == nil:
		return "it restarts the store, and there is no way to (--cluster, or --restart-cmd)"
	}
	return ""
}

// mirroredLabels gives a violation that Classify labelled with a known bug the bug sc mirrors
// instead, when that one matches it too and the target has it: Classify, which knows no scenario,
// prefers the first in etcd.KnownBugs, while the scenario was built to provoke the one it mirrors
// (etcd-tombstone-after-restart's violations look like etcd-compacted-tombstone's, and the
// versions before 3.4.36 have both).
func mirroredLabels(sc *Scenario, h *etcd.History, r *etcd.Result, labels []etcd.Label, t etcd.Target) {
	for i, l := range labels {
		if !l.Known() {
			continue
		}
		for _, m := range sc.Mirrors {
			b := etcd.BugNamed(m)
			if b != nil && b != l.Bug && b.Product == l.Bug.Product && b.AffectsTarget(t) && b.Matches(h, &r.Violations[i]) {
				labels[i] = etcd.Label{Bug: b}
			}
		}
	}
}

// runnable reports whether f may be used: not refused, nor left unprobed for a refusal it needs.
func (c *Capabilities) runnable(f Feature) bool {
	for _, r := range c.Results {
		if r.Feature == f {
			return r.Status == Supported || r.Status == Differs || r.Status == NotProbed && r.Detail == ""
		}
	}
	return true
}

func (c *Capabilities) status(f Feature) CapStatus {
	for _, r := range c.Results {
		if r.Feature == f {
			return r.Status
		}
	}
	return NotProbed
}

// scenarioEnv is what a scenario runs with: a recorder under its prefix, and watches it owns.
type scenarioEnv struct {
	ctx       context.Context
	cli       *clientv3.Client
	cfg       ScenarioConfig
	rec       *etcd.Recorder
	prefix    string
	finding   string
	fragments int

	watchCtx context.Context
	stopAll  context.CancelFunc
	wg       sync.WaitGroup
}

func newScenarioEnv(ctx context.Context, c *clientv3.Client, cfg ScenarioConfig, prefix string) *scenarioEnv {
	wctx, cancel := context.WithCancel(ctx)
	return &scenarioEnv{ctx: ctx, cli: c, cfg: cfg, rec: etcd.NewRecorder(c, cfg.Clock), prefix: prefix,
		watchCtx: wctx, stopAll: cancel}
}

// stop ends the scenario's watches and waits for them.
func (e *scenarioEnv) stop() {
	e.stopAll()
	e.wg.Wait()
}

func (e *scenarioEnv) key(s string) etcd.Bytes { return etcd.Bytes(e.prefix + s) }

func (e *scenarioEnv) refused(f Feature) bool {
	return e.cfg.Capabilities != nil && e.cfg.Capabilities.status(f) == Refused
}

// do sends a recorded request; an error is returned as the scenario's.
func (e *scenarioEnv) do(req etcd.Request) (*etcd.Response, error) {
	ctx, cancel := context.WithTimeout(e.ctx, e.cfg.Timeout)
	defer cancel()
	resp, err := e.rec.Do(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", etcd.DescribeRequest(&req), rpctypes.ErrorDesc(err))
	}
	return resp, nil
}

func (e *scenarioEnv) put(k, v string) (int64, error) {
	resp, err := e.do(etcd.Request{Put: &etcd.PutRequest{Key: e.key(k), Value: etcd.Bytes(v)}})
	if err != nil {
		return 0, err
	}
	return resp.Revision, nil
}

// del deletes a key with the delete RPC, or the apiserver's conditional delete where that is refused.
func (e *scenarioEnv) del(k string) (int64, error) {
	if !e.refused(FeatDeleteRPC) {
		resp, err := e.do(etcd.Request{DeleteRange: &etcd.DeleteRangeRequest{Key: e.key(k)}})
		if err != nil {
			return 0, err
		}
		return resp.Revision, nil
	}
	resp, err := e.do(etcd.Request{Range: &etcd.RangeRequest{Key: e.key(k)}})
	if err != nil || resp.Range == nil || len(resp.Range.Kvs) == 0 {
		return 0, fmt.Errorf("read %s before deleting it: %v", e.key(k), err)
	}
	resp, err = e.do(etcd.Request{Txn: &etcd.TxnRequest{
		Compare: []etcd.Compare{{Result: etcd.CompareEqual, Target: etcd.CompareMod, Key: e.key(k), ModRevision: resp.Range.Kvs[0].ModRevision}},
		Success: []etcd.RequestOp{{DeleteRange: &etcd.DeleteRangeRequest{Key: e.key(k)}}},
		Failure: []etcd.RequestOp{{Range: &etcd.RangeRequest{Key: e.key(k)}}},
	}})
	if err != nil {
		return 0, err
	}
	return resp.Revision, nil
}

func (e *scenarioEnv) compact(rev int64) error {
	_, err := e.do(etcd.Request{Compact: &etcd.CompactRequest{Revision: rev, Physical: true}})
	return err
}

// scWatch is a recorded watch running in the background.
type scWatch struct {
	mu    sync.Mutex
	resps []etcd.WatchResponse
}

func (w *scWatch) snapshot() []etcd.WatchResponse {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]etcd.WatchResponse(nil), w.resps...)
}

func (w *scWatch) count(pred func(*etcd.WatchResponse) int) int {
	n := 0
	for _, r := range w.snapshot() {
		n += pred(&r)
	}
	return n
}

func (w *scWatch) events() int {
	return w.count(func(r *etcd.WatchResponse) int { return len(r.Events) })
}

func (w *scWatch) progress() int {
	return w.count(func(r *etcd.WatchResponse) int {
		if r.IsProgressNotify() {
			return 1
		}
		return 0
	})
}

// lastRevision is the revision of the last event received, 0 if none.
func (w *scWatch) lastRevision() int64 {
	var last int64
	for _, r := range w.snapshot() {
		for _, ev := range r.Events {
			last = max(last, ev.Kv.ModRevision)
		}
	}
	return last
}

func (w *scWatch) ended() bool {
	return w.count(func(r *etcd.WatchResponse) int {
		if r.Canceled || r.IsCompacted() {
			return 1
		}
		return 0
	}) > 0
}

// startWatch starts a recorded watch without waiting for an answer.
func (e *scenarioEnv) startWatch(req etcd.WatchRequest) *scWatch {
	w := &scWatch{}
	e.wg.Go(func() {
		_ = e.rec.Watch(e.watchCtx, req, func(r etcd.WatchResponse) {
			w.mu.Lock()
			w.resps = append(w.resps, r)
			w.mu.Unlock()
		})
	})
	return w
}

// watch starts a recorded watch and waits for its created (or canceling) answer.
func (e *scenarioEnv) watch(req etcd.WatchRequest) (*scWatch, error) {
	w := e.startWatch(req)
	if !e.waitFor(e.cfg.Timeout, func() bool { return len(w.snapshot()) > 0 }) {
		return nil, fmt.Errorf("watch of %s: no answer within %v", req.Key, e.cfg.Timeout)
	}
	return w, nil
}

// waitFor polls cond until it holds or d passes on the scenario's clock.
func (e *scenarioEnv) waitFor(d time.Duration, cond func() bool) bool {
	deadline := e.cfg.Clock.Now().Add(d)
	for !cond() {
		if e.cfg.Clock.Now().After(deadline) {
			return false
		}
		select {
		case <-e.cfg.Clock.After(20 * time.Millisecond):
		case <-e.ctx.Done():
			return false
		}
	}
	return true
}

// waitAskingProgress is waitFor over the request timeout, asking every watch for progress again at
// each look: a store may answer only once a watch caught up, or hold events until something
// follows them.
func (e *scenarioEnv) waitAskingProgress(cond func() bool) bool {
	return e.waitFor(e.cfg.Timeout, func() bool {
		_ = e.requestProgress()
		return cond()
	})
}

// requestProgress asks every watch of the scenario for a progress notification.
func (e *scenarioEnv) requestProgress() error {
	ctx, cancel := context.WithTimeout(e.ctx, e.cfg.Timeout)
	defer cancel()
	return e.rec.RequestProgress(ctx)
}

func scReadYourWrites(e *scenarioEnv) error {
	if _, err := e.put("k", "1"); err != nil {
		return err
	}
	if _, err := e.do(etcd.Request{Range: &etcd.RangeRequest{Key: e.key("k")}}); err != nil {
		return err
	}
	if _, err := e.put("k", "2"); err != nil {
		return err
	}
	_, err := e.do(etcd.Request{Range: &etcd.RangeRequest{Key: e.key(""), RangeEnd: etcd.PrefixEnd(e.key(""))}})
	return err
}

func scSerializable(e *scenarioEnv) error {
	if _, err := e.put("k", "1"); err != nil {
		return err
	}
	_, err := e.do(etcd.Request{Range: &etcd.RangeRequest{Key: e.key("k"), Serializable: true}})
	return err
}

func scWatchFromNow(e *scenarioEnv) error {
	if _, err := e.put("k", "0"); err != nil {
		return err
	}
	w, err := e.watch(etcd.WatchRequest{Key: e.key("k")})
	if err != nil {
		return err
	}
	if _, err := e.put("k", "1"); err != nil {
		return err
	}
	e.waitFor(e.cfg.Timeout, func() bool { return w.events() >= 1 })
	return nil
}

func scWatchFromPast(e *scenarioEnv) error {
	first, err := e.put("a", "1")
	if err != nil {
		return err
	}
	for _, k := range []string{"b", "a", "c"} {
		if _, err := e.put(k, "2"); err != nil {
			return err
		}
	}
	w, err := e.watch(etcd.WatchRequest{Key: e.key(""), RangeEnd: etcd.PrefixEnd(e.key("")), StartRevision: first})
	if err != nil {
		return err
	}
	e.waitFor(e.cfg.Timeout, func() bool { return w.events() >= 4 })
	return nil
}

func scPrevKV(e *scenarioEnv) error {
	if _, err := e.put("k", "1"); err != nil {
		return err
	}
	without, err := e.watch(etcd.WatchRequest{Key: e.key("k")})
	if err != nil {
		return err
	}
	with, err := e.watch(etcd.WatchRequest{Key: e.key("k"), PrevKV: true})
	if err != nil {
		return err
	}
	if _, err := e.put("k", "2"); err != nil {
		return err
	}
	if _, err := e.del("k"); err != nil {
		return err
	}
	e.waitFor(e.cfg.Timeout, func() bool { return without.events() >= 2 && with.events() >= 2 })
	return nil
}

func scFilters(e *scenarioEnv) error {
	noPut, err := e.watch(etcd.WatchRequest{Key: e.key("k"), Filters: []etcd.WatchFilter{etcd.FilterNoPut}})
	if err != nil {
		return err
	}
	noDel, err := e.watch(etcd.WatchRequest{Key: e.key("k"), Filters: []etcd.WatchFilter{etcd.FilterNoDelete}})
	if err != nil {
		return err
	}
	if _, err := e.put("k", "1"); err != nil {
		return err
	}
	if _, err := e.del("k"); err != nil {
		return err
	}
	if _, err := e.put("k", "2"); err != nil {
		return err
	}
	e.waitFor(e.cfg.Timeout, func() bool { return noPut.events() >= 1 && noDel.events() >= 2 })
	return nil
}

func scAtomic(e *scenarioEnv) error {
	w, err := e.watch(etcd.WatchRequest{Key: e.key(""), RangeEnd: etcd.PrefixEnd(e.key(""))})
	if err != nil {
		return err
	}
	var ops []etcd.RequestOp
	for _, k := range []string{"a", "b", "c"} {
		ops = append(ops, etcd.RequestOp{Put: &etcd.PutRequest{Key: e.key(k), Value: "1"}})
	}
	if _, err := e.do(etcd.Request{Txn: &etcd.TxnRequest{Success: ops}}); err != nil {
		return err
	}
	if _, err := e.put("d", "1"); err != nil {
		return err
	}
	e.waitFor(e.cfg.Timeout, func() bool { return w.events() >= 4 })
	return nil
}

func scRecreate(e *scenarioEnv) error {
	w, err := e.watch(etcd.WatchRequest{Key: e.key("k")})
	if err != nil {
		return err
	}
	if _, err := e.put("k", "1"); err != nil {
		return err
	}
	if _, err := e.del("k"); err != nil {
		return err
	}
	if _, err := e.put("k", "2"); err != nil {
		return err
	}
	e.waitFor(e.cfg.Timeout, func() bool { return w.events() >= 3 })
	return nil
}

// fragmentValue is the size of each value of the fragmented revision: three of them with their
// prev_kv exceed etcd's 1.5 MiB request limit, from which a watch with fragment splits a response.
const fragmentValue = 400 << 10

func scFragment(e *scenarioEnv) error {
	big := strings.Repeat("v", fragmentValue)
	var puts []etcd.RequestOp
	for _, k := range []string{"a", "b", "c"} {
		if _, err := e.put(k, big); err != nil {
			return err
		}
		puts = append(puts, etcd.RequestOp{Put: &etcd.PutRequest{Key: e.key(k), Value: etcd.Bytes(big + "2")}})
	}
	w, err := e.watch(etcd.WatchRequest{Key: e.key(""), RangeEnd: etcd.PrefixEnd(e.key("")), PrevKV: true, Fragment: true})
	if err != nil {
		return err
	}
	// a raw stream beside it counts the fragments clientv3 joins
	counted := make(chan int, 1)
	rctx, cancel := context.WithCancel(e.watchCtx)
	defer cancel()
	stream, err := pb.NewWatchClient(e.cli.ActiveConnection()).Watch(rctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte(e.key("")), RangeEnd: []byte(etcd.PrefixEnd(e.key(""))), PrevKv: true, Fragment: true}}}); err != nil {
		return err
	}
	if r, err := stream.Recv(); err != nil || !r.Created {
		return fmt.Errorf("raw watch with fragment: %v %v", r, err)
	}
	e.wg.Go(func() {
		n, events := 0, 0
		for events < 3 {
			r, err := stream.Recv()
			if err != nil {
				break
			}
			if r.Fragment {
				n++
			}
			events += len(r.Events)
		}
		counted <- n
	})
	if _, err := e.do(etcd.Request{Txn: &etcd.TxnRequest{Success: puts}}); err != nil {
		return err
	}
	e.waitFor(e.cfg.Timeout, func() bool { return w.events() >= 3 })
	select {
	case e.fragments = <-counted:
	case <-e.cfg.Clock.After(e.cfg.Timeout):
	}
	return nil
}

func scRevisionWindow(e *scenarioEnv) error {
	first, err := e.put("k", "1")
	if err != nil {
		return err
	}
	second, err := e.put("k", "2")
	if err != nil {
		return err
	}
	if _, err := e.put("k", "3"); err != nil {
		return err
	}
	read := func(rev int64) {
		_, _ = e.do(etcd.Request{Range: &etcd.RangeRequest{Key: e.key("k"), Revision: rev}})
	}
	cur, err := e.do(etcd.Request{Range: &etcd.RangeRequest{Key: e.key("k")}})
	if err != nil {
		return err
	}
	read(cur.Revision + 1000) // future
	read(cur.Revision)        // current
	read(first)               // past
	if err := e.compact(second); err != nil {
		return err
	}
	read(first)  // compacted
	read(second) // the compact revision itself
	_, _ = e.do(etcd.Request{Compact: &etcd.CompactRequest{Revision: first}})
	return nil
}

func scCompactedWatch(e *scenarioEnv) error {
	first, err := e.put("k", "1")
	if err != nil {
		return err
	}
	if _, err := e.put("k", "2"); err != nil {
		return err
	}
	last, err := e.put("k", "3")
	if err != nil {
		return err
	}
	if err := e.compact(last); err != nil {
		return err
	}
	w, err := e.watch(etcd.WatchRequest{Key: e.key("k"), StartRevision: first})
	if err != nil {
		return err
	}
	e.waitFor(e.cfg.Timeout, w.ended)
	return nil
}

func scWatchFromCompactRevision(e *scenarioEnv) error {
	if _, err := e.put("k", "1"); err != nil {
		return err
	}
	at, err := e.put("k", "2")
	if err != nil {
		return err
	}
	last, err := e.put("k", "3")
	if err != nil {
		return err
	}
	return e.watchFromCompaction(at, last)
}

// scTombstone is etcd-io/etcd#18089's reproduction: put, delete, put, compact at the delete,
// watch from it.
func scTombstone(e *scenarioEnv) error {
	if _, err := e.put("k", "1"); err != nil {
		return err
	}
	at, err := e.del("k")
	if err != nil {
		return err
	}
	last, err := e.put("k", "2")
	if err != nil {
		return err
	}
	return e.watchFromCompaction(at, last)
}

// watchFromCompaction compacts at rev and watches k from rev, the compaction revision itself, until
// the watch has received the write at last (the one after rev) or has ended.
func (e *scenarioEnv) watchFromCompaction(rev, last int64) error {
	if err := e.compact(rev); err != nil {
		return err
	}
	return e.watchUntil(rev, last)
}

// watchUntil watches k from rev until the watch has received the write at last or has ended.
func (e *scenarioEnv) watchUntil(rev, last int64) error {
	w, err := e.watch(etcd.WatchRequest{Key: e.key("k"), StartRevision: rev})
	if err != nil {
		return err
	}
	e.waitFor(e.cfg.Timeout, func() bool { return w.lastRevision() >= last || w.ended() })
	return nil
}

// Sizes of the writes scTombstoneAfterRestart puts between the key's put and its delete: more
// entries than etcd's compaction deletes in one batch (--experimental-compaction-batch-limit, 1000
// by default), in multi-op txns within etcd's --max-txn-ops (128 by default).
const (
	restartFillerTxns = 30
	restartFillerOps  = 100
)

// scTombstoneAfterRestart is etcd-io/etcd#19179's reproduction without a failpoint: put, many
// writes, delete, compact at the delete (not waiting for it), one more write, restart, watch from
// the delete. etcd compacts its database in batches, committing each; a restart in the middle leaves
// the tombstone the key's only revision there, which etcd before #19188 does not restore into its
// index, so the compaction it resumes on starting removes the tombstone. The write after the
// compaction is applied once the first batch, the one with the put, has released the database.
// Versions with etcd-compacted-tombstone lose the DELETE at the compaction already.
func scTombstoneAfterRestart(e *scenarioEnv) error {
	if _, err := e.put("k", "1"); err != nil {
		return err
	}
	if err := e.fill(restartFillerTxns, restartFillerOps); err != nil {
		return err
	}
	at, err := e.del("k")
	if err != nil {
		return err
	}
	if _, err := e.do(etcd.Request{Compact: &etcd.CompactRequest{Revision: at}}); err != nil {
		return err
	}
	if _, err := e.put("other", "1"); err != nil {
		return err
	}
	if err := e.restart(); err != nil {
		return err
	}
	last, err := e.put("k", "2")
	if err != nil {
		return err
	}
	return e.watchUntil(at, last)
}

// fill writes txns txns of ops puts each, to the keys fill/0 to fill/<ops-1>.
func (e *scenarioEnv) fill(txns, ops int) error {
	for range txns {
		puts := make([]etcd.RequestOp, ops)
		for i := range puts {
			puts[i] = etcd.RequestOp{Put: &etcd.PutRequest{Key: e.key(fmt.Sprintf("fill/%d", i)), Value: "v"}}
		}
		if _, err := e.do(etcd.Request{Txn: &etcd.TxnRequest{Success: puts}}); err != nil {
			return err
		}
	}
	return nil
}

// restart restarts the store (ScenarioConfig.Restart) and waits until it serves a read, which the
// client retries while it reconnects.
func (e *scenarioEnv) restart() error {
	if err := e.cfg.Restart(e.ctx); err != nil {
		return fmt.Errorf("restarting the store: %w", err)
	}
	err := errors.New("no answer")
	if !e.waitFor(e.cfg.Timeout, func() bool {
		_, err = e.do(etcd.Request{Range: &etcd.RangeRequest{Key: e.key("k")}})
		return err == nil
	}) {
		return fmt.Errorf("after the restart: %w", err)
	}
	return nil
}

func scProgressAnswered(e *scenarioEnv) error {
	if _, err := e.put("other", "1"); err != nil {
		return err
	}
	w, err := e.watch(etcd.WatchRequest{Key: e.key("quiet")})
	if err != nil {
		return err
	}
	if err := e.requestProgress(); err != nil {
		return err
	}
	if !e.waitFor(e.cfg.Timeout, func() bool { return w.progress() > 0 }) {
		e.finding = fmt.Sprintf("RequestProgress not answered within %v for a watch of a quiet key created at the current revision (etcd answers at once)", e.cfg.Timeout)
	}
	return nil
}

func scProgressUnsynced(e *scenarioEnv) error {
	start, err := e.put("other", "1")
	if err != nil {
		return err
	}
	for range 20 {
		if _, err := e.put("other", "2"); err != nil {
			return err
		}
	}
	w, err := e.watch(etcd.WatchRequest{Key: e.key("quiet"), StartRevision: start})
	if err != nil {
		return err
	}
	// ask until answered: the watch must catch up first, and etcd then answers
	answered := e.waitAskingProgress(func() bool { return w.progress() > 0 })
	if !answered {
		e.finding = fmt.Sprintf("RequestProgress not answered within %v for a watch from a past revision that caught up without an event", e.cfg.Timeout)
	}
	return nil
}

// scProgressNotAhead is etcd-io/etcd#15220's trigger, twice, then kine's. First a watch that is
// synced: a burst of writes to its key, then at once a RequestProgress on its stream, while the
// burst's events are still queued on it (a store with the bug answers at its current revision
// ahead of them, every time the events are still on their way, which the burst makes the rule).
// Then a watch catching up from far behind asked for progress at once, the way etcd 3.4 and 3.5
// were found to break it; then many such watches at once (progressAheadOfHistory). None may be
// told a revision whose events it has not received.
func scProgressNotAhead(e *scenarioEnv) error {
	burst, err := e.watch(etcd.WatchRequest{Key: e.key("burst")})
	if err != nil {
		return err
	}
	const burstWrites = 20
	for i := range burstWrites {
		if _, err := e.put("burst", fmt.Sprint(i)); err != nil {
			return err
		}
	}
	if err := e.requestProgress(); err != nil {
		return err
	}
	// asked again until the burst is in: a store with the bug may keep its last events queued
	// behind the answer until something follows them
	e.waitAskingProgress(func() bool { return burst.events() >= burstWrites })
	start, err := e.put("k/0", "0")
	if err != nil {
		return err
	}
	const writes = 300
	for i := range writes {
		if _, err := e.put(fmt.Sprintf("k/%d", i%10), "v"); err != nil {
			return err
		}
	}
	w, err := e.watch(etcd.WatchRequest{Key: e.key("k/"), RangeEnd: etcd.PrefixEnd(e.key("k/")), StartRevision: start})
	if err != nil {
		return err
	}
	for range 3 {
		if err := e.requestProgress(); err != nil {
			return err
		}
	}
	// and again while it catches up: each request is a new chance for the bug
	e.waitAskingProgress(func() bool { return w.events() >= writes+1 })
	return progressAheadOfHistory(e)
}

// The history progressAheadOfHistory's watches catch up on, and how many of them a round opens:
// enough for kine to spend a good part of its 100 ms progress tick listing and sending them.
const (
	historyWrites  = 200
	historyValue   = 2 << 10
	historyWatches = 25
	historyRounds  = 4
)

// progressAheadOfHistory is kine's trigger (k3s-io/kine#731): before v0.16.5, and in v0.17.0, kine sends a watch's
// created answer before it lists the history the watch owes (server/watch.go watcher.watch), and a
// RequestProgress is answered on a 100 ms tick at the current revision once the poll loop has read
// it, checking only the watches that asked for progress notifications (watcher.ProgressAll): a
// notification sent while a history is listed or sent overtakes it. Each round opens
// historyWatches watches from the first write (on distinct keys: v0.17.0's put of an existing key
// is lost unless the key holds the current revision, server/put.go), asks for progress at once,
// and ends once every history and a progress notification are in. The first round is seldom
// overtaken: the poll loop marks a revision read only when it next wakes (a write, or its 1 s
// tick), and the answer waits for that.
func progressAheadOfHistory(e *scenarioEnv) error {
	value := strings.Repeat("v", historyValue)
	start, err := e.put("h/0", value)
	if err != nil {
		return err
	}
	for i := 1; i < historyWrites; i++ {
		if _, err := e.put(fmt.Sprintf("h/%d", i), value); err != nil {
			return err
		}
	}
	req := etcd.WatchRequest{Key: e.key("h/"), RangeEnd: etcd.PrefixEnd(e.key("h/")), StartRevision: start}
	for range historyRounds {
		ws := make([]*scWatch, historyWatches)
		for i := range ws {
			ws[i] = e.startWatch(req)
		}
		if err := e.requestProgress(); err != nil {
			return err
		}
		done := e.waitAskingProgress(func() bool {
			return !slices.ContainsFunc(ws, func(w *scWatch) bool { return w.events() < historyWrites || w.progress() == 0 })
		})
		if !done {
			// a store that leaves a round unanswered (no progress answer, or a history not sent)
			// would leave the next ones so too: each would only wait out the timeout again
			return nil
		}
	}
	return nil
}

// leaseExpiryWait bounds the wait for a lease of the minimum TTL to expire.
const leaseExpiryWait = 15 * time.Second

func scLeaseExpiry(e *scenarioEnv) error {
	w, err := e.watch(etcd.WatchRequest{Key: e.key("k")})
	if err != nil {
		return err
	}
	g, err := e.do(etcd.Request{LeaseGrant: &etcd.LeaseGrantRequest{TTL: etcdShortTTL}})
	if err != nil {
		return err
	}
	if _, err := e.do(etcd.Request{Put: &etcd.PutRequest{Key: e.key("k"), Value: "1", Lease: g.LeaseGrant.ID}}); err != nil {
		return err
	}
	if !e.waitFor(leaseExpiryWait, func() bool { return w.events() >= 2 }) {
		e.finding = fmt.Sprintf("a lease of a TTL of %d s did not expire within %v", etcdShortTTL, leaseExpiryWait)
	}
	_, err = e.do(etcd.Request{Range: &etcd.RangeRequest{Key: e.key("k")}})
	return err
}
