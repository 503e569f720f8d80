package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/check/etcd/workload"
	"github.com/listwatch/listwatch/internal/etcdprocess"
	"github.com/listwatch/listwatch/internal/runplan"
)

// The kinds of fault: the first three on the members --cluster started, the last --fault-cmd's.
const (
	faultKill    = "kill"    // SIGKILL a member, then restart it on its data
	faultPause   = "pause"   // SIGSTOP a member, then SIGCONT it
	faultLeader  = "leader"  // move the leadership to another member (Maintenance.MoveLeader)
	faultCommand = "command" // run --fault-cmd
)

// clusterFaultKinds are the kinds --fault-kinds takes, in their default order.
var clusterFaultKinds = []string{faultKill, faultPause, faultLeader}

// Defaults of the fault flags.
const (
	defaultFaultEvery      = 100
	defaultRecoveryTimeout = time.Minute
	defaultEtcdBinary      = "/usr/bin/etcd"
)

// roleFaults seeds the choice of the member each fault strikes (runplan.Rand); the workload's
// roles are 1 to 3.
const roleFaults uint64 = 100

// faultPlan is what the fault flags ask for: count faults, one every `every` requests of the
// workload, taking the kinds in turn; each must be recovered from (every endpoint answering with a
// leader) within recovery.
type faultPlan struct {
	count    int
	every    int64
	kinds    []string
	cmd      string
	recovery time.Duration
}

// faultSummary is what the run's faults were: the JSON result's "faults".
type faultSummary struct {
	// Planned is --faults; Injected counts the faults injected by kind, and Total all of them.
	Planned  int            `json:"planned"`
	Total    int            `json:"total"`
	Injected map[string]int `json:"injected"`
	// Refused are the faults the cluster refused (a leader move to a member not caught up), each
	// with the error: not faults injected.
	Refused []string `json:"refused,omitempty"`
}

func (s *faultSummary) String() string {
	var parts []string
	for _, k := range append(clusterFaultKinds, faultCommand) {
		if n := s.Injected[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	line := fmt.Sprintf("faults: %d of %d injected", s.Total, s.Planned)
	if len(parts) > 0 {
		line += " (" + strings.Join(parts, ", ") + ")"
	}
	if len(s.Refused) > 0 {
		line += fmt.Sprintf("; %d refused: %s", len(s.Refused), strings.Join(s.Refused, "; "))
	}
	return line
}

// faulter injects a faultPlan's faults while the workload runs, spaced by the workload's requests.
type faulter struct {
	env       checkEnv
	plan      faultPlan
	cluster   *etcdprocess.Cluster // nil: members the tool did not start
	endpoints []string
	seed      uint64
	stats     *workload.Stats
	client    *clientv3.Client
	rng       *rand.Rand
	progress  io.Writer
	summary   faultSummary
}

// newFaulter connects to endpoints for the faults' own requests (status and leader moves).
func newFaulter(env checkEnv, f *checkFlags, stats *workload.Stats, progress io.Writer) (*faulter, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: f.endpoints, DialTimeout: f.dialTimeout, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("connect to %s for the faults: %w", strings.Join(f.endpoints, ","), err)
	}
	return &faulter{env: env, plan: *f.faults, cluster: f.cluster, endpoints: f.endpoints, seed: f.cfg.Seed, stats: stats,
		client: cli, rng: runplan.Rand(f.cfg.Seed, roleFaults, 0), progress: progress,
		summary: faultSummary{Planned: f.faults.count, Injected: map[string]int{}}}, nil
}

// run injects the faults, one every plan.every requests, until all are injected or stop closes;
// once all are, and the workload has run plan.every requests more, it calls done, which ends the
// workload. It returns the first fault the cluster did not recover from.
func (fr *faulter) run(stop <-chan struct{}, done func()) error {
	defer fr.client.Close()
	next := fr.plan.every
	for i := range fr.plan.count {
		if !fr.waitOps(next, stop, 0) {
			return nil
		}
		if err := fr.inject(i, stop); err != nil {
			done()
			return fmt.Errorf("fault %d of %d: %w", i+1, fr.plan.count, err)
		}
		next = fr.stats.Snapshot().Operations + fr.plan.every
	}
	fr.waitOps(next, stop, 0)
	done()
	return nil
}

// waitOps waits until the workload has sent n requests, or stop closes (false), or bound passes
// (0: no bound).
func (fr *faulter) waitOps(n int64, stop <-chan struct{}, bound time.Duration) bool {
	var deadline <-chan time.Time
	if bound > 0 {
		deadline = fr.env.clock.After(bound)
	}
	tick := fr.env.clock.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for fr.stats.Snapshot().Operations < n {
		select {
		case <-stop:
			return false
		case <-deadline:
			return true
		case <-tick.C():
		}
	}
	return true
}

// inject injects fault i, and waits for the cluster to recover from it.
func (fr *faulter) inject(i int, stop <-chan struct{}) error {
	kind := fr.plan.kinds[i%len(fr.plan.kinds)]
	member := fr.rng.IntN(len(fr.endpoints))
	var err error
	switch kind {
	case faultKill:
		err = fr.kill(member, stop)
	case faultPause:
		err = fr.pause(member, stop)
	case faultLeader:
		var rerr error
		if member, rerr = fr.moveLeader(member); rerr != nil {
			fr.summary.Refused = append(fr.summary.Refused, fmt.Sprintf("leader move %d: %v", i+1, rerr))
			kind = ""
		}
	case faultCommand:
		err = fr.command(i, member)
	}
	if err != nil {
		return err
	}
	if kind != "" {
		fr.summary.Injected[kind]++
		fr.summary.Total++
		fmt.Fprintf(fr.progress, "fault %d of %d: %s %s\n", i+1, fr.plan.count, kind, fr.memberName(kind, member))
	}
	return fr.recovered()
}

func (fr *faulter) memberName(kind string, member int) string {
	if kind == faultLeader {
		return "to " + fr.endpoints[member]
	}
	if kind == faultCommand {
		return fmt.Sprintf("(LISTWATCH_MEMBER=%d)", member)
	}
	return fr.endpoints[member]
}

// kill kills member and restarts it once the workload has run half the spacing without it.
func (fr *faulter) kill(member int, stop <-chan struct{}) error {
	if err := fr.cluster.Kill(member); err != nil {
		return err
	}
	fr.waitOps(fr.stats.Snapshot().Operations+fr.plan.every/2, stop, fr.plan.recovery)
	if fr.env.beforeRestart != nil {
		fr.env.beforeRestart(fr.cluster, member)
	}
	return fr.cluster.Restart(member, fr.plan.recovery)
}

// pause stops member and continues it once the workload has run half the spacing without it (or
// plan.recovery has passed: the requests it holds time out).
func (fr *faulter) pause(member int, stop <-chan struct{}) error {
	if err := fr.cluster.Pause(member); err != nil {
		return err
	}
	fr.waitOps(fr.stats.Snapshot().Operations+fr.plan.every/2, stop, fr.plan.recovery)
	return fr.cluster.Resume(member)
}

// moveLeader moves the leadership to member, or to the next when member leads, and returns the
// member it moved to.
func (fr *faulter) moveLeader(member int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), fr.plan.recovery)
	defer cancel()
	ids, leader, err := fr.members(ctx)
	if err != nil {
		return member, err
	}
	if member == leader {
		member = (member + 1) % len(ids)
	}
	leaderEp := fr.endpoints[leader]
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{leaderEp}, DialTimeout: fr.plan.recovery, Logger: zap.NewNop()})
	if err != nil {
		return member, err
	}
	defer cli.Close()
	_, err = cli.MoveLeader(ctx, ids[member])
	return member, err
}

// members asks each endpoint its member ID, and returns them and the index of the one that leads.
func (fr *faulter) members(ctx context.Context) (ids []uint64, leader int, err error) {
	leader = -1
	for i, ep := range fr.endpoints {
		st, err := fr.client.Status(ctx, ep)
		if err != nil {
			return nil, 0, err
		}
		ids = append(ids, st.Header.MemberId)
		if st.Leader == st.Header.MemberId {
			leader = i
		}
	}
	if leader < 0 {
		return nil, 0, errors.New("no member says it leads")
	}
	return ids, leader, nil
}

// command runs --fault-cmd for fault i (the contract is in README's check section).
func (fr *faulter) command(i, member int) error {
	ctx, cancel := context.WithTimeout(context.Background(), fr.plan.recovery)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", fr.plan.cmd)
	cmd.Env = append(os.Environ(),
		fmt.Sprintf("LISTWATCH_FAULT=%d", i+1),
		fmt.Sprintf("LISTWATCH_FAULTS=%d", fr.plan.count),
		fmt.Sprintf("LISTWATCH_MEMBER=%d", member),
		"LISTWATCH_ENDPOINTS="+strings.Join(fr.endpoints, ","),
		fmt.Sprintf("LISTWATCH_SEED=%d", fr.seed))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("--fault-cmd %q failed (%v); its output:\n%s", fr.plan.cmd, err, tail(string(out), 2000))
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// recovered waits until every endpoint answers its status with a leader, within plan.recovery.
func (fr *faulter) recovered() error {
	ctx, cancel := context.WithTimeout(context.Background(), fr.plan.recovery)
	defer cancel()
	for _, ep := range fr.endpoints {
		for {
			st, err := fr.client.Status(ctx, ep)
			if err == nil && st.Leader != 0 {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%s did not answer with a leader within %v after the fault: %v", ep, fr.plan.recovery, err)
			}
			select {
			case <-ctx.Done():
			case <-fr.env.clock.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// startFaults runs the faulter of f's plan beside the workload; wctx, the workload's context, ends
// when the faults are done. wait stops it and returns its error.
func (env checkEnv) startFaults(ctx context.Context, f *checkFlags, stats *workload.Stats, progress io.Writer) (wctx context.Context, wait func() error, err error) {
	if f.faults == nil {
		return ctx, func() error { return nil }, nil
	}
	fr, err := newFaulter(env, f, stats, progress)
	if err != nil {
		return nil, nil, err
	}
	wctx, end := context.WithCancel(ctx)
	stop := make(chan struct{})
	var ferr error
	var wg sync.WaitGroup
	wg.Go(func() { ferr = fr.run(stop, end) })
	return wctx, func() error {
		close(stop)
		wg.Wait()
		end()
		f.result.Faults = &fr.summary
		return ferr
	}, nil
}

// validateCluster: --cluster and its binary.
func (a *checkArgs) validateCluster(f *checkFlags) error {
	switch {
	case a.cluster < 0 || a.set["cluster"] && a.cluster == 0:
		return badFlags("--cluster %d: need at least one member", a.cluster)
	case a.cluster > 0 && a.set["endpoints"]:
		return badFlags("--cluster starts its own members: give it or --endpoints, not both")
	case a.set["etcd-binary"] && a.cluster == 0:
		return badFlags("--etcd-binary applies to --cluster only")
	}
	f.clusterSize, f.etcdBinary = a.cluster, a.etcdBinary
	return nil
}

// validateFaults: the faults' plan.
func (a *checkArgs) validateFaults(f *checkFlags) error {
	switch {
	case a.faults < 0:
		return badFlags("--faults %d: must not be negative", a.faults)
	case a.faultEvery < 2:
		return badFlags("--fault-every %d: need at least 2 requests between faults", a.faultEvery)
	case a.recoveryTimeout <= 0:
		return badFlags("--recovery-timeout %v: must be positive", a.recoveryTimeout)
	}
	for _, name := range []string{"fault-every", "fault-kinds", "fault-cmd"} {
		if a.set[name] && a.faults == 0 {
			return badFlags("--%s applies to --faults only", name)
		}
	}
	if a.set["recovery-timeout"] && a.faults == 0 && a.cluster == 0 && !a.set["restart-cmd"] {
		return badFlags("--recovery-timeout applies to --faults, --cluster and --restart-cmd only")
	}
	if a.faults == 0 {
		return nil
	}
	plan := &faultPlan{count: a.faults, every: a.faultEvery, cmd: a.faultCmd, recovery: a.recoveryTimeout}
	switch {
	case a.cluster == 0 && a.faultCmd == "":
		return badFlags("--faults needs --cluster (faults on the members it starts) or --fault-cmd (on members it did not)")
	case a.cluster == 0 && !a.set["endpoints"]:
		return badFlags("--fault-cmd needs --endpoints: the in-memory store has no members to fault")
	case a.cluster == 0 && a.set["fault-kinds"]:
		return badFlags("--fault-kinds applies to --cluster only: --fault-cmd is the fault on --endpoints")
	case a.cluster > 0:
		kinds, err := parseFaultKinds(a.faultKinds)
		if err != nil {
			return badFlags("--fault-kinds %q: %v", a.faultKinds, err)
		}
		plan.kinds = kinds
	}
	if a.faultCmd != "" {
		plan.kinds = append(plan.kinds, faultCommand)
	}
	f.faults = plan
	return nil
}

func parseFaultKinds(s string) ([]string, error) {
	var kinds []string
	for k := range strings.SplitSeq(s, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(clusterFaultKinds, k) {
			return nil, fmt.Errorf("%q is no fault kind (want %s)", k, strings.Join(clusterFaultKinds, ", "))
		}
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	return kinds, nil
}

// startCluster starts --cluster's members and points f at them; stop stops them and removes
// their data.
func (env checkEnv) startCluster(f *checkFlags, stdout, stderr io.Writer) (stop func(), err error) {
	fmt.Fprintf(stderr, "starting a cluster of %d members of %s...\n", f.clusterSize, f.etcdBinary)
	c, err := etcdprocess.LaunchBinary(f.etcdBinary, f.clusterSize, f.etcdFlags...)
	if err != nil {
		return nil, err
	}
	f.cluster = c
	f.endpoints = nil
	for _, ep := range c.Endpoints() {
		f.endpoints = append(f.endpoints, "http://"+ep)
	}
	fmt.Fprintf(stdout, "cluster: %d members of %s started, at %s\n", f.clusterSize, f.etcdBinary, strings.Join(c.Endpoints(), ","))
	return func() {
		if err := c.Stop(); err != nil {
			fmt.Fprintf(stderr, "stopping the cluster: %v\n", err)
		}
	}, nil
}

// writeUnknown says how many of the workload's requests had an unknown outcome and what the checker
// decided of them.
func writeUnknown(w io.Writer, u etcd.UnknownOutcomes) {
	if u.Total() == 0 {
		fmt.Fprintln(w, "unknown outcomes: none")
		return
	}
	fmt.Fprintf(w, "unknown outcomes: %d (%d reads, which change nothing; %d writes): %d writes resolved by the checker from later reads and watch events (%d took effect, %d did not), %d unresolved\n",
		u.Total(), u.Reads, u.Writes, u.Resolved(), u.TookEffect, u.NoEffect, u.Unresolved())
}
