package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/check/etcd/workload"
	"github.com/listwatch/listwatch/check/kube"
	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/internal/etcdprocess"
	"github.com/listwatch/listwatch/store"
)

func init() {
	register(&command{
		name:    "check",
		summary: "run a randomized workload against an etcd v3 store (in-memory or --endpoints) and check its guarantees",
		run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return defaultCheckEnv.run(ctx, args, stdout, stderr)
		},
		twoSignals: true,
	})
}

// Flag defaults.
const (
	defaultCheckDuration = 5 * time.Second
	// defaultCheckOps bounds the default run too: a store in process answers ~20000 requests a
	// second, the check of a history grows faster than its length (100000 requests take minutes),
	// and the default run should end within seconds.
	defaultCheckOps       = 10000
	defaultCompactEvery   = 500
	defaultDialTimeout    = 5 * time.Second
	defaultCheckTimeout   = 5 * time.Minute
	defaultRequestTimeout = workload.DefaultRequestTimeout
)

// Progress lines: overwritten every second on a terminal, a plain line every 10 s otherwise (a
// log file should not get one a second).
const (
	progressTerminalInterval = time.Second
	progressPlainInterval    = 10 * time.Second
)

// inMemoryProgressNotifyInterval is the in-memory store's period of progress notifications, so
// that the watches asking for them get some within a run (etcd's default is 10 minutes).
const inMemoryProgressNotifyInterval = 500 * time.Millisecond

// Exit statuses of check besides 0 (PASS); README.md's check section and --help list them.
const (
	exitFail         = 1
	exitCouldNotRun  = 2 // also a bad command line (usageError)
	exitInconclusive = 3
	exitInterrupted  = 130 // 128 + SIGINT, as a shell reports a command SIGINT ended
)

// outcomeError is an outcome of check other than PASS, with its exit status.
type outcomeError struct {
	name string
	code int
}

func (e *outcomeError) Error() string { return e.name }
func (e *outcomeError) ExitCode() int { return e.code }

// The outcomes that are not PASS; errors wrapping them exit with their status.
var (
	errFail         = &outcomeError{"FAIL", exitFail}
	errInconclusive = &outcomeError{"INCONCLUSIVE", exitInconclusive}
	errInterrupted  = &outcomeError{"interrupted", exitInterrupted}
	// errCouldNotRun: the check could not run (the target did not answer, the history is unreadable).
	errCouldNotRun = &outcomeError{"could not run", exitCouldNotRun}
)

// couldNotRun wraps an error of check that is no outcome (no verdict, no usage error) as errCouldNotRun.
func couldNotRun(err error) error {
	if _, ok := errors.AsType[*outcomeError](err); ok || err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	if _, ok := errors.AsType[usageError](err); ok {
		return err
	}
	return fmt.Errorf("%w: %w", errCouldNotRun, err)
}

// maxViolationsShown is how many violations are printed; the report has them all.
const maxViolationsShown = 10

// checkEnv is what check takes from its surroundings; tests replace parts of it.
type checkEnv struct {
	clock clock.WithTicker
	// terminal reports whether w is a terminal, where progress lines are overwritten in place.
	terminal func(w io.Writer) bool
	// started, if set, is called with the workload's stats once it runs.
	started func(*workload.Stats)
	// checkHistory checks a history: etcd.CheckContext.
	checkHistory func(context.Context, *etcd.History, etcd.Options) (*etcd.Result, error)
	// checkKube checks a Kubernetes API history: kube.CheckContext.
	checkKube func(context.Context, *kube.History, kube.Options) (*kube.Result, error)
	// cleanupTimeout bounds the cleanup at the end of a run (0: cleanupTimeout).
	cleanupTimeout time.Duration
	// cleaned, if set, is called with the target's client and the run's prefix once the cleanup
	// is done, before the client closes.
	cleaned func(cli *clientv3.Client, prefix string)
	// beforeRestart, if set, is called before a member --cluster started and a fault killed is
	// restarted.
	beforeRestart func(c *etcdprocess.Cluster, member int)
}

var defaultCheckEnv = checkEnv{clock: clock.RealClock{}, terminal: isTerminal, checkHistory: etcd.CheckContext, checkKube: kube.CheckContext}

func isTerminal(w io.Writer) bool {
	if l, ok := w.(*lockedWriter); ok {
		w = l.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// checkFlags is the parsed command line.
type checkFlags struct {
	endpoints    []string
	dialTimeout  time.Duration
	cfg          workload.Config
	seedSet      bool
	checkTimeout time.Duration
	report       string
	historyOut   string
	checkHistory string
	// prefix is where the etcd check writes; scenariosOnly and noScenarios choose what it runs;
	// gating keeps the apiserver's gating of RequestProgress.
	prefix        string
	scenariosOnly bool
	noScenarios   bool
	gating        bool
	// skip are the probes --skip-probe leaves out.
	skip workload.Features
	// kube is --kube's URL: check a Kubernetes API server (checkkube.go) instead of an etcd store.
	kube      string
	resource  schema.GroupVersionResource
	namespace string
	// keep leaves the run's keys and leases (or objects and namespace) behind, as evidence.
	keep bool
	// json writes the result as JSON on stdout (--output json), the report on stderr; quiet
	// leaves out the progress lines.
	json, quiet bool
	// run describes the run (nil for --check-history), for the history and the result; result is
	// the result being built, for --output json.
	run    *check.Run
	result *checkResult
	// clusterSize is --cluster, the members to start of etcdBinary; cluster the cluster started.
	clusterSize int
	etcdBinary  string
	cluster     *etcdprocess.Cluster
	// etcdFlags are --etcd-flag, for the members of --cluster; restartCmd is --restart-cmd; recovery
	// bounds a restart (--recovery-timeout).
	etcdFlags  []string
	restartCmd string
	recovery   time.Duration
	// faults is the faults' plan (nil: none).
	faults *faultPlan
}

// workloadFlags apply to a workload run only, not to --check-history.
var workloadFlags = []string{"endpoints", "dial-timeout", "seed", "duration", "ops", "clients", "watchers",
	"compact-every", "workload", "history", "request-timeout", "kube", "resource", "namespace", "prefix", "scenarios",
	"no-scenarios", "apiserver-gating", "keep", "cluster", "etcd-binary", "faults", "fault-every", "fault-kinds", "fault-cmd",
	"recovery-timeout", "etcd-flag", "restart-cmd", "skip-probe"}

// checkArgs are the flags' values as given, before parseCheckFlags checks them; set names the
// flags given.
type checkArgs struct {
	endpoints, prefix, kind, report, historyOut, checkHistory, kube, resource, namespace, output string
	etcdBinary, faultKinds, faultCmd, restartCmd                                                 string
	etcdFlags, skipProbes                                                                        etcdFlagList
	cluster, faults                                                                              int
	faultEvery                                                                                   int64
	recoveryTimeout                                                                              time.Duration
	scenariosOnly, noScenarios, gating, keep, quiet                                              bool
	dialTimeout, duration, requestTimeout, checkTimeout                                          time.Duration
	seed                                                                                         uint64
	ops, compactEvery                                                                            int64
	clients, watchers                                                                            int
	set                                                                                          map[string]bool
}

// checkFlagSet defines check's flags, bound to a's fields.
func checkFlagSet(a *checkArgs, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("listwatch check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: listwatch check [flags]")
		fmt.Fprintln(stderr, "\nChecks an etcd v3 store, fresh or not, under a key prefix of its own: probes what it supports and")
		fmt.Fprintln(stderr, "prints a table of each difference from etcd, runs a suite of scenarios (one per guarantee and per")
		fmt.Fprintln(stderr, "known real-world watch bug), then a seeded randomized workload with what works, recording every")
		fmt.Fprintln(stderr, "request and watch, and checks the histories against etcd's guarantees: linearizable KV operations")
		fmt.Fprintln(stderr, "and every watch guarantee. Violations of known upstream bugs are labelled and counted apart.")
		fmt.Fprintln(stderr, "Without --endpoints the store is listwatch's in-memory store, in process. With --kube")
		fmt.Fprintln(stderr, "it runs a workload of writes, lists and watches against a Kubernetes API server instead, in a")
		fmt.Fprintln(stderr, "namespace of its own, and checks the apiserver's guarantees (package check/kube). At the end it")
		fmt.Fprintln(stderr, "deletes what it wrote (the prefix and its leases, or the namespace and its objects) unless --keep.")
		fmt.Fprintln(stderr, "Progress goes to stderr (--quiet: none). SIGINT stops the recording and checks what was recorded;")
		fmt.Fprintln(stderr, "a second SIGINT stops the check.")
		fmt.Fprintln(stderr, "\nExit status: 0 PASS; 1 FAIL (a guarantee was violated, or the store differs from etcd); 2 a bad")
		fmt.Fprintln(stderr, "command line, or the check could not run (no answer from the target, an unreadable or empty")
		fmt.Fprintln(stderr, "history, a fault the cluster did not recover from); 3 INCONCLUSIVE (the search ran out of")
		fmt.Fprintln(stderr, "--check-timeout); 130 interrupted (no verdict, or nothing found in what was recorded before the")
		fmt.Fprintln(stderr, "interrupt; never PASS).")
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	fs.StringVar(&a.endpoints, "endpoints", "", "comma-separated etcd v3 client `endpoints` (host:port or http://host:port) of any etcd-API store, fresh or not; default: the in-memory store")
	fs.StringVar(&a.prefix, "prefix", "", "the key `prefix` the etcd check writes under, its own alone (default: a fresh random one, /listwatch-check-<hex>/)")
	fs.BoolVar(&a.scenariosOnly, "scenarios", false, "run the scenario suite alone, without the randomized workload")
	fs.BoolVar(&a.noScenarios, "no-scenarios", false, "run the randomized workload alone, without the scenario suite")
	fs.BoolVar(&a.gating, "apiserver-gating", false, "keep the apiserver's gating: no RequestProgress to an etcd version the apiserver sends none to")
	fs.DurationVar(&a.dialTimeout, "dial-timeout", defaultDialTimeout, "how long to wait for --endpoints or --kube to answer")
	fs.Uint64Var(&a.seed, "seed", 0, "seed of the workload's choices (default: drawn, and printed)")
	fs.DurationVar(&a.duration, "duration", 0, fmt.Sprintf("run the workload this long (default: %v or %d requests, whichever comes first, unless --ops)", defaultCheckDuration, defaultCheckOps))
	fs.Int64Var(&a.ops, "ops", 0, "run the workload until its clients have sent this many requests (no time bound)")
	fs.IntVar(&a.clients, "clients", workload.DefaultClients, "concurrent clients")
	fs.IntVar(&a.watchers, "watchers", workload.DefaultWatchers, "concurrent watchers")
	fs.Int64Var(&a.compactEvery, "compact-every", defaultCompactEvery, "compact every this many `revisions` (0: never)")
	fs.StringVar(&a.kind, "workload", string(workload.K8s), fmt.Sprintf("the workload: %v", workload.Kinds))
	fs.DurationVar(&a.requestTimeout, "request-timeout", defaultRequestTimeout, "timeout of each request (a workload's request that runs out has an unknown outcome), and of each wait of the probes and scenarios for an answer (one that does not come within it is a finding)")
	fs.DurationVar(&a.checkTimeout, "check-timeout", defaultCheckTimeout, "bound on the linearizability search (0: none); when it runs out the check is inconclusive")
	fs.StringVar(&a.report, "report", "", "write the HTML report to `file` (on a failure one is always written, to a temporary file if not here)")
	fs.StringVar(&a.historyOut, "history", "", "write the recorded history as JSON to `file`, to check it again with --check-history")
	fs.StringVar(&a.checkHistory, "check-history", "", "check the JSON history in `file` instead of running a workload")
	fs.StringVar(&a.kube, "kube", "", "check the Kubernetes API server at `URL` (http://host:port) instead of an etcd store: its list, watch and write guarantees")
	fs.StringVar(&a.resource, "resource", defaultKubeResource, "with --kube: the namespaced `resource` to run on, as resource, version/resource or group/version/resource; it must accept objects of metadata alone")
	fs.BoolVar(&a.keep, "keep", false, "keep what the run wrote (keys under --prefix and leases, or --kube's namespace and objects) instead of deleting it at the end")
	fs.BoolVar(&a.quiet, "quiet", false, "no progress lines on stderr (with --output json, no report either)")
	fs.StringVar(&a.output, "output", "text", "`format` of the result on stdout: text (the report), or json (one JSON document: verdict, counts, violations, known bugs, findings, run; the report goes to stderr)")
	fs.IntVar(&a.cluster, "cluster", 0, "start a cluster of `N` etcd members (--etcd-binary) on loopback ports and check it, instead of --endpoints; stopped and removed at the end")
	fs.StringVar(&a.etcdBinary, "etcd-binary", defaultEtcdBinary, "with --cluster: the etcd server `executable` to run")
	fs.Var(&a.skipProbes, "skip-probe", fmt.Sprintf("leave out the probe of the `feature` named as the capability table names it, one a store is known to crash on; the run then does without it (repeatable; one of %s)", skippableNames()))
	fs.Var(&a.etcdFlags, "etcd-flag", "with --cluster: a `flag` for each member, as --name=value, after those the tool sets (repeatable)")
	fs.StringVar(&a.restartCmd, "restart-cmd", "", "with --endpoints: a shell `command` that restarts every member of the store and exits once it serves again, for the scenarios that restart it (--cluster restarts its own; without either they are skipped); run with LISTWATCH_ENDPOINTS and LISTWATCH_SEED set, within --recovery-timeout; a failure is the scenario's error")
	fs.IntVar(&a.faults, "faults", 0, "inject `N` faults while the workload runs, one every --fault-every requests, taking --fault-kinds in turn (and --fault-cmd); the workload then runs until they are done unless --ops or --duration")
	fs.Int64Var(&a.faultEvery, "fault-every", defaultFaultEvery, "with --faults: the workload's `requests` between faults (a killed or paused member stays so for half of them)")
	fs.StringVar(&a.faultKinds, "fault-kinds", strings.Join(clusterFaultKinds, ","), "with --cluster --faults: the `kinds` of fault, comma-separated: kill (SIGKILL, then restart), pause (SIGSTOP, then SIGCONT), leader (MoveLeader to another member)")
	fs.StringVar(&a.faultCmd, "fault-cmd", "", "with --faults: a shell `command` that injects a fault into members the tool did not start, and recovers them before it exits; run with LISTWATCH_FAULT, LISTWATCH_FAULTS, LISTWATCH_MEMBER, LISTWATCH_ENDPOINTS, LISTWATCH_SEED set; a failure stops the run (COULD NOT RUN)")
	fs.DurationVar(&a.recoveryTimeout, "recovery-timeout", defaultRecoveryTimeout, "with --faults: how long a fault's recovery (a restart, every endpoint answering with a leader, --fault-cmd) may take before the run stops (COULD NOT RUN); also the bound of a scenario's restart of the store")
	fs.StringVar(&a.namespace, "namespace", "", "with --kube: the `namespace` of the run, created if the server serves namespaces (default listwatch-check-<seed>)")
	return fs
}

// skippableNames lists the names --skip-probe takes, quoted.
func skippableNames() string {
	var names []string
	for _, f := range workload.SkippableProbes.List() {
		names = append(names, strconv.Quote(f.String()))
	}
	return strings.Join(names, ", ")
}

// badFlags is a usage error saying what is wrong with the command line.
func badFlags(format string, a ...any) error { return usageError{err: fmt.Errorf(format, a...)} }

// parseCheckFlags parses check's command line and checks it, one concern at a time; its errors are
// usageErrors (exit status 2) naming the flag.
func parseCheckFlags(args []string, stderr io.Writer) (*checkFlags, error) {
	a := &checkArgs{set: map[string]bool{}}
	fs := checkFlagSet(a, stderr)
	if err := fs.Parse(args); err != nil {
		return nil, usageError{err: err, reported: true}
	}
	if fs.NArg() > 0 {
		return nil, usageError{err: fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	fs.Visit(func(f *flag.Flag) { a.set[f.Name] = true })
	f := &checkFlags{dialTimeout: a.dialTimeout, seedSet: a.set["seed"], checkTimeout: a.checkTimeout,
		report: a.report, historyOut: a.historyOut, checkHistory: a.checkHistory, keep: a.keep, quiet: a.quiet}
	for _, validate := range []func(*checkFlags) error{a.validateHistory, a.validateKube, a.validateEtcd, a.validateWorkload, a.validateCluster, a.validateFaults, a.validateRestart, a.validateOutputs} {
		if err := validate(f); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// validateHistory: --check-history takes a file, and no flag of a workload run.
func (a *checkArgs) validateHistory(*checkFlags) error {
	if !a.set["check-history"] {
		return nil
	}
	if a.checkHistory == "" {
		return badFlags("--check-history needs a file")
	}
	for _, name := range workloadFlags {
		if a.set[name] {
			return badFlags("--%s does not apply to --check-history, which checks a recorded history instead of running a workload", name)
		}
	}
	return nil
}

// validateKube: --kube takes a URL, --resource and --namespace, and no flag of an etcd target.
func (a *checkArgs) validateKube(f *checkFlags) error {
	if !a.set["kube"] {
		for _, name := range []string{"resource", "namespace"} {
			if a.set[name] {
				return badFlags("--%s applies to --kube only", name)
			}
		}
		return nil
	}
	for _, name := range etcdFlags {
		if a.set[name] {
			return badFlags("--%s does not apply to --kube, which checks a Kubernetes API server", name)
		}
	}
	if err := checkKubeURL(a.kube); err != nil {
		return badFlags("--kube %q: %v", a.kube, err)
	}
	gvr, err := parseResource(a.resource)
	if err != nil {
		return badFlags("--resource %q: %v", a.resource, err)
	}
	f.kube, f.resource, f.namespace = a.kube, gvr, a.namespace
	if a.set["namespace"] {
		if errs := validation.IsDNS1123Label(a.namespace); len(errs) > 0 {
			return badFlags("--namespace %q: %s", a.namespace, strings.Join(errs, "; "))
		}
	}
	for _, name := range []string{"prefix", "scenarios", "no-scenarios", "apiserver-gating"} {
		if a.set[name] {
			return badFlags("--%s does not apply to --kube, which checks a Kubernetes API server", name)
		}
	}
	return nil
}

// validateEtcd: the etcd check's prefix, scenarios and endpoints.
func (a *checkArgs) validateEtcd(f *checkFlags) error {
	switch {
	case a.scenariosOnly && a.noScenarios:
		return badFlags("--scenarios runs the scenarios alone and --no-scenarios leaves them out: give one")
	case a.set["prefix"] && (a.prefix == "" || strings.ContainsRune(a.prefix, 0)):
		return badFlags("--prefix %q: need a non-empty key prefix", a.prefix)
	}
	f.prefix, f.scenariosOnly, f.noScenarios, f.gating = a.prefix, a.scenariosOnly, a.noScenarios, a.gating
	for _, name := range a.skipProbes {
		feat, ok := workload.SkippableProbe(name)
		if !ok {
			return badFlags("--skip-probe %q: not a probe that can be left out; want one of %s", name, skippableNames())
		}
		f.skip = f.skip.With(feat)
	}
	if a.set["endpoints"] {
		eps, err := parseEndpoints(a.endpoints)
		if err != nil {
			return badFlags("--endpoints %q: %v", a.endpoints, err)
		}
		f.endpoints = eps
	}
	return nil
}

// validateWorkload: the workload's kind, bounds and timeouts.
func (a *checkArgs) validateWorkload(f *checkFlags) error {
	k, err := workload.ParseKind(a.kind)
	if err != nil {
		return badFlags("--workload %q: want one of %v", a.kind, workload.Kinds)
	}
	switch {
	case a.set["ops"] && a.set["duration"]:
		return badFlags("--ops and --duration both bound the run: give one")
	case a.set["ops"] && a.ops <= 0:
		return badFlags("--ops %d: must be positive", a.ops)
	case a.set["duration"] && a.duration <= 0:
		return badFlags("--duration %v: must be positive", a.duration)
	case a.clients < 1:
		return badFlags("--clients %d: need at least one", a.clients)
	case a.watchers < 0:
		return badFlags("--watchers %d: must not be negative", a.watchers)
	case a.compactEvery < 0:
		return badFlags("--compact-every %d: must not be negative (0 never compacts)", a.compactEvery)
	case a.dialTimeout <= 0:
		return badFlags("--dial-timeout %v: must be positive", a.dialTimeout)
	case a.requestTimeout <= 0:
		return badFlags("--request-timeout %v: must be positive", a.requestTimeout)
	case a.checkTimeout < 0:
		return badFlags("--check-timeout %v: must not be negative (0 is no bound)", a.checkTimeout)
	}
	duration, ops := a.duration, a.ops
	if !a.set["ops"] && !a.set["duration"] && a.faults == 0 {
		duration, ops = defaultCheckDuration, defaultCheckOps
	}
	f.cfg = workload.Config{Kind: k, Seed: a.seed, Clients: a.clients, Watchers: a.watchers, Ops: ops,
		Duration: duration, CompactEvery: a.compactEvery, RequestTimeout: a.requestTimeout}
	return nil
}

// validateOutputs: --report and --history name a file in a directory that exists; --output is
// text or json.
func (a *checkArgs) validateOutputs(f *checkFlags) error {
	switch a.output {
	case "text":
	case "json":
		f.json = true
	default:
		return badFlags("--output %q: want text or json", a.output)
	}
	for _, out := range []struct{ name, path string }{{"report", a.report}, {"history", a.historyOut}} {
		if !a.set[out.name] {
			continue
		}
		if out.path == "" {
			return badFlags("--%s needs a file", out.name)
		}
		if fi, err := os.Stat(filepath.Dir(out.path)); err != nil || !fi.IsDir() {
			return badFlags("--%s %s: no directory %s to write it in", out.name, out.path, filepath.Dir(out.path))
		}
	}
	return nil
}

// parseEndpoints splits a comma-separated endpoint list: host:port, or http://host:port as etcdctl
// takes them. TLS is not configured, so https endpoints are refused.
func parseEndpoints(s string) ([]string, error) {
	var eps []string
	for _, ep := range strings.Split(s, ",") {
		ep = strings.TrimSpace(ep)
		hostport := ep
		if scheme, rest, ok := strings.Cut(ep, "://"); ok {
			if scheme != "http" {
				return nil, fmt.Errorf("endpoint %q: only http:// endpoints are supported (no TLS flags)", ep)
			}
			hostport = rest
		}
		if ep == "" {
			return nil, errors.New("empty endpoint")
		}
		if _, _, err := net.SplitHostPort(hostport); err != nil {
			return nil, fmt.Errorf("endpoint %q: %v", ep, err)
		}
		eps = append(eps, ep)
	}
	return eps, nil
}

// run is `listwatch check`: it parses the command line, runs the check, and with --output json
// writes the result to stdout.
func (env checkEnv) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseCheckFlags(args, stderr)
	if err != nil {
		return err
	}
	f.result = &checkResult{Counts: map[string]int{"requests": 0, "watches": 0, "known": 0, "unexplained": 0, "deviations": 0}}
	text, progress := f.streams(stdout, stderr)
	err = couldNotRun(env.runParsed(ctx, f, args, text, progress))
	if f.json {
		f.result.finish(err)
		if werr := f.result.writeJSON(stdout); werr != nil {
			return errors.Join(err, werr)
		}
	}
	return err
}

// runParsed runs the check f describes, writing its report to stdout and its progress to stderr.
func (env checkEnv) runParsed(ctx context.Context, f *checkFlags, args []string, stdout, stderr io.Writer) error {
	if f.checkHistory != "" {
		return env.checkFile(ctx, f, stdout, stderr)
	}
	if !f.seedSet {
		f.cfg.Seed = uint64(env.clock.Now().UnixNano())
	}
	f.run = newRun(f, args, env.clock.Now())
	f.result.Run = f.run
	if f.kube != "" {
		return env.runKube(ctx, f, stdout, stderr)
	}
	return env.runEtcd(ctx, f, stdout, stderr)
}

// runEtcd is `listwatch check` of an etcd store: the survey, the workload, the cleanup, the check.
func (env checkEnv) runEtcd(ctx context.Context, f *checkFlags, stdout, stderr io.Writer) error {
	if f.prefix == "" {
		f.prefix = fmt.Sprintf("/listwatch-check-%016x/", rand.Uint64())
	}
	if f.clusterSize > 0 {
		stop, err := env.startCluster(f, stdout, stderr)
		if err != nil {
			return err
		}
		defer stop()
	}
	target, err := openTarget(ctx, f)
	if err != nil {
		return err
	}
	defer target.close()
	f.cfg.Clock = env.clock
	if f.scenariosOnly {
		fmt.Fprintf(stdout, "listwatch check: the scenario suite, under %s\n", f.prefix)
	} else {
		fmt.Fprintf(stdout, "listwatch check: %s workload, seed %d, %d clients, %d watchers, %s, %s, under %s\n",
			f.cfg.Kind, f.cfg.Seed, f.cfg.Clients, f.cfg.Watchers, compactionText(f.cfg.CompactEvery), boundText(f.cfg), f.prefix)
	}
	fmt.Fprintf(stdout, "target: %s\n", target.description)
	f.run.Target, f.run.Version = target.name, target.endpoints[0].Version
	er, err := env.survey(ctx, target, f, stdout, stderr)
	if err != nil {
		return err
	}
	f.run.Store, f.run.Capabilities = er.target.Product, er.capabilityNames()
	var h *etcd.History
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stdout, "interrupted during the probes or the scenarios: those not begun are skipped; checking what was recorded (interrupt again to stop the check)")
	case !f.scenariosOnly:
		if h, err = env.record(ctx, target, f, stdout, stderr); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		f.run.Interrupted = true
	}
	cleanupErr := target.cleanup(context.WithoutCancel(ctx), f, stdout, stderr)
	if env.cleaned != nil {
		env.cleaned(target.client, f.prefix)
	}
	target.close()
	if h != nil {
		h.Run = f.run
		if err := f.writeHistory(stdout, h.WriteJSON); err != nil {
			return err
		}
	}
	return errors.Join(env.check(ctx, h, f, true, er, stdout, stderr), cleanupErr)
}

// record runs the workload against target and returns its history.
func (env checkEnv) record(ctx context.Context, target *target, f *checkFlags, stdout, stderr io.Writer) (*etcd.History, error) {
	stats := &workload.Stats{}
	f.cfg.Stats = stats
	rec := etcd.NewRecorder(target.client, env.clock)
	start := env.clock.Now()
	// the progress lines and the faults' lines are written from goroutines of their own
	stderr = &lockedWriter{w: stderr}
	fmt.Fprintf(stderr, "recording the %s workload %s...\n", f.cfg.Kind, boundText(f.cfg))
	stopProgress := env.progress(stderr, stats, start, f.cfg)
	if env.started != nil {
		env.started(stats)
	}
	wctx, waitFaults, err := env.startFaults(ctx, f, stats, stderr)
	if err != nil {
		stopProgress()
		return nil, err
	}
	snap, err := workload.Run(wctx, rec, f.cfg)
	ferr := waitFaults()
	stopProgress()
	if err != nil {
		return nil, fmt.Errorf("the workload could not begin: %w", err)
	}
	if ferr != nil {
		return nil, fmt.Errorf("the cluster did not recover from a fault: %w", ferr)
	}
	elapsed := env.clock.Since(start)
	h := rec.History()
	if ctx.Err() != nil {
		fmt.Fprintf(stdout, "interrupted after %v: checking what was recorded (interrupt again to stop the check)\n", elapsed.Round(time.Millisecond))
	}
	rate := float64(snap.Operations) / max(elapsed.Seconds(), 1e-9)
	fmt.Fprintf(stdout, "recorded %d requests and %d watches in %v (%.0f requests/s), from revision %d to %d\n",
		len(h.Operations), len(h.Watches), elapsed.Round(time.Millisecond), rate, h.StartRevision, snap.Revision)
	writeOperations(stdout, snap.ByName)
	if f.result.Faults != nil {
		fmt.Fprintln(stdout, f.result.Faults)
	}
	return h, nil
}

// boundText says what bounds the workload: "for 5s or 10000 requests, whichever comes first".
func boundText(cfg workload.Config) string {
	switch {
	case cfg.Ops > 0 && cfg.Duration > 0:
		return fmt.Sprintf("for %v or %d requests, whichever comes first", cfg.Duration, cfg.Ops)
	case cfg.Ops > 0:
		return fmt.Sprintf("for %d requests", cfg.Ops)
	case cfg.Duration == 0:
		return "until the faults are done"
	}
	return fmt.Sprintf("for %v", cfg.Duration)
}

func compactionText(every int64) string {
	if every == 0 {
		return "no compaction"
	}
	return fmt.Sprintf("compaction every %d revisions", every)
}

// checkFile is `listwatch check --check-history FILE`. A file that carries its run (check.Run) is
// checked as that run checked it: against its target's version and capabilities. One without is
// taken for a history written by hand, checked with no target version (no violation is a known
// bug); one with neither operations nor watches is refused.
func (env checkEnv) checkFile(ctx context.Context, f *checkFlags, stdout, stderr io.Writer) error {
	file, err := os.Open(f.checkHistory)
	if err != nil {
		return err
	}
	defer file.Close()
	if kube.IsHistory(file) {
		return env.checkKubeFile(ctx, f, file, stdout, stderr)
	}
	h, err := etcd.ReadJSON(file)
	if err != nil {
		return fmt.Errorf("%s: %w", f.checkHistory, err)
	}
	if len(h.Operations) == 0 && len(h.Watches) == 0 {
		return fmt.Errorf("%s: %w: no operations and no watches: nothing to check", f.checkHistory, check.ErrInvalidHistory)
	}
	fmt.Fprintf(stdout, "listwatch check: the history in %s: %d requests, %d watches\n", f.checkHistory, len(h.Operations), len(h.Watches))
	// the file's run stands for this one: an interrupted run's history checks again to INTERRUPTED
	f.run, f.result.Run = h.Run, h.Run
	er := &etcdRun{}
	if h.Run == nil {
		fmt.Fprintln(stdout, "no run metadata: checked as a history written by hand, with no target version (no violation is a known upstream bug)")
	} else {
		er = runOf(h.Run)
		fmt.Fprintf(stdout, "recorded by %s against %s (store %s, version %s), seed %d\n", h.Run.Tool, h.Run.Target, orUnknown(h.Run.Store), orUnknown(h.Run.Version), h.Run.Seed)
	}
	writeOperations(stdout, h.Counts())
	return env.check(ctx, h, f, false, er, stdout, stderr)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// check checks h (nil when only the scenarios ran) and reports, with what the etcd check learned
// besides (er); recorded says h comes from a run (saved on a failure if --history did not save it).
func (env checkEnv) check(ctx context.Context, h *etcd.History, f *checkFlags, recorded bool, er *etcdRun, stdout, stderr io.Writer) error {
	var res *etcd.Result
	var took time.Duration
	if h != nil {
		writeWatches(stdout, h)
		f.result.Counts["requests"], f.result.Counts["watches"] = len(h.Operations), len(h.Watches)
		opts := etcd.Options{Timeout: f.checkTimeout, IgnoreVersions: er.noVersions()}
		if opts.IgnoreVersions {
			fmt.Fprintln(stdout, "the store keeps no key versions: answers and events are compared without them")
		}
		start := env.clock.Now()
		var err error
		what := fmt.Sprintf("%d requests and %d watches", len(h.Operations), len(h.Watches))
		if ierr := env.checking(checkStop(ctx), stderr, what, f.checkTimeout, func(stop context.Context, phase check.PhaseFunc) {
			opts.Phase = phase
			res, err = env.checkHistory(stop, h, opts)
		}); ierr != nil {
			fmt.Fprintln(stdout, strings.ToUpper(ierr.Error()[:1])+ierr.Error()[1:])
			return f.keepHistory(stdout, ierr, recorded, h.WriteJSON)
		}
		if err != nil {
			return err
		}
		took = env.clock.Since(start).Round(time.Millisecond)
	}
	writeGuarantees(stdout, h, res, er.scenarios)
	if res != nil {
		f.result.Notes = append(f.result.Notes, res.Notes...)
		for _, n := range res.Notes {
			fmt.Fprintf(stdout, "note: %s\n", n)
		}
	}
	if res != nil {
		f.result.Unknown = &res.Unknown
		writeUnknown(stdout, res.Unknown)
	}
	missing := writeCoverage(stdout, res, er.scenarios)
	f.result.NotExercised = missing
	var labels []etcd.Label
	if res != nil {
		labels = etcd.Classify(h, res, er.target)
		f.result.setViolations(baseViolations(res.Violations), labels)
	}
	sum := workload.Summarize(labels, er.scenarios, er.caps, len(er.findings))
	f.result.setSummary(sum)
	f.result.setScenarios(er.scenarios)
	verdict := writeEtcdVerdict(stdout, res, labels, took, f.checkTimeout)
	f.result.Findings = writeFindings(stdout, er, sum)
	if sum.Failed() {
		verdict = fmt.Errorf("%w: %s", errFail, sum)
	}
	writeVerdict(stdout, f, verdict, missing)
	if h == nil {
		return interruptedOr(f, verdict, 0)
	}
	verdict = interruptedOr(f, verdict, len(h.Operations))
	return f.keepEvidence(stdout, verdict, recorded, func(w io.Writer) error {
		return etcd.WriteReport(w, h, res, etcdReportInput(er, res, labels, sum))
	}, h.WriteJSON)
}

func baseViolations(vs []etcd.Violation) []check.Violation {
	out := make([]check.Violation, len(vs))
	for i := range vs {
		out[i] = vs[i].Violation
	}
	return out
}

// writeEtcdVerdict writes what the check of the workload's history found: its violations, or that the
// search ran out (the INCONCLUSIVE verdict, returned), or that every guarantee held.
func writeEtcdVerdict(stdout io.Writer, res *etcd.Result, labels []etcd.Label, took, checkTimeout time.Duration) error {
	switch {
	case res != nil && len(res.Violations) > 0:
		fmt.Fprintf(stdout, "checked in %v: %d violation(s) of %s\n", took, len(res.Violations), check.List(res.Guarantees()))
		for i, v := range res.Violations {
			if i == maxViolationsShown {
				fmt.Fprintf(stdout, "... and %d more, in the report\n", len(res.Violations)-i)
				break
			}
			fmt.Fprintf(stdout, "%s %s\n", labelText(labels[i]), v.String())
		}
	case res != nil && res.Verdict == etcd.VerdictTimeout:
		fmt.Fprintf(stdout, "checked in %v: INCONCLUSIVE: the linearizability search did not finish within --check-timeout %v, so the watch checks that need a linearization were skipped; no violation was found in what could be checked\n",
			took, checkTimeout)
		return fmt.Errorf("%w: the linearizability search timed out after %v (raise --check-timeout)", errInconclusive, checkTimeout)
	case res != nil:
		fmt.Fprintf(stdout, "checked in %v: every guarantee held\n", took)
	}
	return nil
}

// writeVerdict writes the verdict's line: PASS (saying what was not exercised, or that the run was
// interrupted), or the verdict.
func writeVerdict(stdout io.Writer, f *checkFlags, verdict error, missing []string) {
	switch {
	case verdict != nil:
		fmt.Fprintf(stdout, "%v\n", verdict)
		f.result.Message = verdict.Error()
	case f.run != nil && f.run.Interrupted:
		fmt.Fprintln(stdout, "INTERRUPTED: no violation in what was recorded before the interrupt; not a PASS")
	case len(missing) > 0:
		fmt.Fprintf(stdout, "PASS, but not exercised: %s\n", strings.Join(missing, ", "))
	default:
		fmt.Fprintln(stdout, "PASS")
	}
}

// interruptedOr is verdict, or for a run interrupted while recording that found nothing, the
// interrupted verdict.
func interruptedOr(f *checkFlags, verdict error, requests int) error {
	if verdict == nil && f.run != nil && f.run.Interrupted {
		return interruptedVerdict(requests)
	}
	return verdict
}

// writeHistory writes the recorded history to --history, if given.
func (f *checkFlags) writeHistory(stdout io.Writer, write func(io.Writer) error) error {
	if f.historyOut == "" {
		return nil
	}
	if err := writeFile(f.historyOut, write); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "history: %s\n", f.historyOut)
	f.result.History = f.historyOut
	return nil
}

// keepEvidence writes the HTML report to --report, and on a failure always (to a temporary file
// without --report); a failed run that recorded its history without --history also keeps that
// history in a temporary file, to check again with --check-history. It returns verdict, naming
// the report, joined with any error writing either.
func (f *checkFlags) keepEvidence(stdout io.Writer, verdict error, recorded bool, writeReport, writeHistory func(io.Writer) error) error {
	report := f.report
	if verdict != nil && report == "" {
		var err error
		if report, err = tempFile("listwatch-check-report-*.html"); err != nil {
			return errors.Join(verdict, err)
		}
	}
	if report != "" {
		if err := writeFile(report, writeReport); err != nil {
			return errors.Join(verdict, err)
		}
		fmt.Fprintf(stdout, "report: %s\n", report)
		f.result.Report = report
		if verdict != nil {
			verdict = fmt.Errorf("%w; report: %s", verdict, report)
		}
	}
	return f.keepHistory(stdout, verdict, recorded, writeHistory)
}

// keepHistory keeps the history of a run that did not pass (recorded) in a temporary file unless
// --history wrote it, to check it again with --check-history; it returns verdict joined with any
// error writing it.
func (f *checkFlags) keepHistory(stdout io.Writer, verdict error, recorded bool, writeHistory func(io.Writer) error) error {
	if verdict == nil || !recorded || f.historyOut != "" {
		return verdict
	}
	path, err := tempFile("listwatch-check-history-*.json")
	if err == nil {
		err = writeFile(path, writeHistory)
	}
	if err != nil {
		return errors.Join(verdict, err)
	}
	fmt.Fprintf(stdout, "history: %s (check it again with --check-history %s)\n", path, path)
	f.result.History = path
	return verdict
}

func tempFile(pattern string) (string, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return "", err
	}
	return f.Name(), f.Close()
}

func writeFile(path string, write func(io.Writer) error) error {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(file); err != nil {
		file.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return file.Close()
}

// target is the store a workload runs against.
type target struct {
	client *clientv3.Client
	// name is what --endpoints named, or "in-memory store"; description adds what each endpoint said.
	name, description string
	endpoints         []workload.Endpoint
	leases            *leaseTracker
	closeOnce         sync.Once
	closeFn           func()
}

func (t *target) close() { t.closeOnce.Do(t.closeFn) }

// cleanup deletes what the run wrote, unless --keep, saying so on w (progress on stderr).
func (t *target) cleanup(ctx context.Context, f *checkFlags, w, stderr io.Writer) error {
	leases := t.leases.granted()
	if f.keep {
		fmt.Fprintf(w, "--keep: the run's keys under %s and its %d leases are kept\n", f.prefix, len(leases))
		return nil
	}
	fmt.Fprintf(stderr, "cleaning up: revoking %d leases, deleting %s...\n", len(leases), f.prefix)
	return cleanupEtcd(ctx, t.client, f.prefix, leases, w)
}

// openTarget connects to --endpoints, or starts the in-memory store, and asks each endpoint its
// status. Any store will do, fresh or not: the check writes under a prefix of its own. The client
// notes the leases granted through it, for the cleanup.
func openTarget(ctx context.Context, f *checkFlags) (*target, error) {
	leases := &leaseTracker{}
	track := grpc.WithChainUnaryInterceptor(leases.intercept)
	var t *target
	if len(f.endpoints) == 0 {
		st := store.New(store.Options{ProgressNotifyInterval: inMemoryProgressNotifyInterval, Seed: f.cfg.Seed})
		cli, closeClient, err := etcdgrpc.NewClient(st, etcdgrpc.Options{}, func(c *clientv3.Config) { c.DialOptions = append(c.DialOptions, track) })
		if err != nil {
			st.Close()
			return nil, err
		}
		t = &target{client: cli, name: "in-memory store", closeFn: func() {
			_ = closeClient()
			_ = st.Close()
		}}
	} else {
		cli, err := clientv3.New(clientv3.Config{Endpoints: f.endpoints, DialTimeout: f.dialTimeout, Logger: zap.NewNop(),
			DialOptions: []grpc.DialOption{track}})
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", strings.Join(f.endpoints, ","), err)
		}
		t = &target{client: cli, name: strings.Join(f.endpoints, ","), closeFn: func() { _ = cli.Close() }}
	}
	t.leases = leases
	sctx, cancel := context.WithTimeout(ctx, f.dialTimeout)
	defer cancel()
	eps, err := workload.Status(sctx, t.client)
	if err != nil {
		t.close()
		return nil, fmt.Errorf("no answer within --dial-timeout %v: %w", f.dialTimeout, err)
	}
	t.endpoints = eps
	if len(f.endpoints) == 0 {
		t.description = fmt.Sprintf("the in-memory store, in process (etcd API %s)", eps[0].Version)
		return t, nil
	}
	var parts []string
	for _, ep := range eps {
		parts = append(parts, fmt.Sprintf("%s (etcd %s)", ep.Endpoint, ep.Version))
	}
	t.description = strings.Join(parts, ", ")
	return t, nil
}

// progress prints a progress line of the workload cfg runs to w until the returned function is
// called: overwritten in place every second on a terminal, a plain line every 10 s otherwise.
func (env checkEnv) progress(w io.Writer, stats *workload.Stats, start time.Time, cfg workload.Config) (stop func()) {
	return env.progressLines(w, start, func(elapsed time.Duration) string {
		s := stats.Snapshot()
		return progressLine(s, elapsed) + remainingText(cfg, s.Operations, elapsed)
	})
}

// remainingText estimates what is left of a run bounded by cfg, from its rate so far.
func remainingText(cfg workload.Config, done int64, elapsed time.Duration) string {
	left := time.Duration(-1)
	if cfg.Duration > 0 {
		left = max(0, cfg.Duration-elapsed)
	}
	if cfg.Ops > 0 && done > 0 {
		byOps := time.Duration(float64(elapsed) * float64(max(0, cfg.Ops-done)) / float64(done))
		if left < 0 || byOps < left {
			left = byOps
		}
	}
	if left < 0 {
		return ""
	}
	return fmt.Sprintf("  ~%v left", left.Round(100*time.Millisecond))
}

// progressLines prints line(time since start) to w until the returned function is called, as
// progress does.
func (env checkEnv) progressLines(w io.Writer, start time.Time, line func(time.Duration) string) (stop func()) {
	terminal := env.terminal(w)
	interval := progressPlainInterval
	if terminal {
		interval = progressTerminalInterval
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := env.clock.NewTicker(interval)
		defer t.Stop()
		width := 0
		for {
			select {
			case <-done:
				if terminal && width > 0 {
					fmt.Fprintln(w)
				}
				return
			case <-t.C():
				line := line(env.clock.Since(start))
				if terminal {
					pad := max(0, width-len(line))
					width = len(line)
					fmt.Fprintf(w, "\r%s%s", line, strings.Repeat(" ", pad))
				} else {
					fmt.Fprintln(w, line)
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

func progressLine(s workload.Snapshot, elapsed time.Duration) string {
	rate := float64(s.Operations) / max(elapsed.Seconds(), 1e-9)
	return fmt.Sprintf("%6.1fs  requests %d (%.0f/s)  errors %d failed, %d unknown  watches %d  events %d  revision %d",
		elapsed.Seconds(), s.Operations, rate, s.Failed, s.Unknown, s.Watches, s.WatchEvents, s.Revision)
}

func writeOperations(w io.Writer, counts []check.NameCount) {
	width := len("requests")
	for _, c := range counts {
		width = max(width, len(c.Name))
	}
	row := func(name string, cells []string) {
		fmt.Fprintf(w, "%-*s", width, name)
		for _, c := range cells {
			fmt.Fprintf(w, "  %8s", c)
		}
		fmt.Fprintln(w)
	}
	var header []string
	for _, o := range check.Outcomes {
		header = append(header, o.String())
	}
	fmt.Fprintln(w)
	row("requests", append(header, "total"))
	var total check.NameCount
	for _, c := range append(counts, check.NameCount{Name: ""}) {
		if c.Name == "" {
			c = total
			c.Name = "all"
		}
		var cells []string
		for _, o := range check.Outcomes {
			cells = append(cells, fmt.Sprint(c.Outcomes[o]))
			total.Outcomes[o] += c.Outcomes[o]
		}
		row(c.Name, append(cells, fmt.Sprint(c.Total())))
	}
	fmt.Fprintln(w)
}

func writeWatches(w io.Writer, h *etcd.History) {
	c := etcd.CountWatches(h)
	fmt.Fprintf(w, "watches: %d, %d responses: %d events in %d responses, %d progress notifications, %d compaction answers\n",
		c.Watches, c.Responses, c.Events, c.EventResponses, c.Progress, c.Compacted)
}

// writeGuarantees lists each guarantee with what the workload's history h checked it over (h nil
// when only the scenarios ran), the scenarios that exercised it, and the violations of both.
func writeGuarantees(w io.Writer, h *etcd.History, res *etcd.Result, scenarios []workload.ScenarioResult) {
	violations := map[etcd.Guarantee]int{}
	if res != nil {
		check.Tally(violations, res.Violations)
	}
	ran, passed := map[etcd.Guarantee]int{}, map[etcd.Guarantee]int{}
	for _, r := range scenarios {
		if r.Skipped != "" {
			continue
		}
		ran[r.Scenario.Guarantee]++
		if r.Passed() {
			passed[r.Scenario.Guarantee]++
		}
		if r.Result != nil {
			check.Tally(violations, r.Result.Violations)
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "guarantee\tchecked over\tscenarios\tviolations")
	listed := map[etcd.Guarantee]bool{}
	for _, g := range etcd.Guarantees {
		listed[g.Guarantee] = true
		sc := "-"
		if ran[g.Guarantee] > 0 {
			sc = fmt.Sprintf("%d/%d passed", passed[g.Guarantee], ran[g.Guarantee])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", g.Guarantee, etcd.CheckedOver(g, h, res), sc, violations[g.Guarantee])
	}
	for _, g := range slices.Sorted(maps.Keys(violations)) {
		if !listed[g] {
			fmt.Fprintf(tw, "%s\t\t\t%d\n", g, violations[g])
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// lockedWriter serializes the writes of several goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
