package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/check/etcd/workload"
	"github.com/listwatch/listwatch/internal/etcdprocess"
	"github.com/listwatch/listwatch/internal/testutil"
)

// runCheckCmd runs `listwatch check args...` in process and returns its exit status and output.
func runCheckCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"check"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// passed reports whether the output's verdict is PASS.
func passed(out string) bool { return regexp.MustCompile(`(?m)^PASS`).MatchString(out) }

func mustContain(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, out)
		}
	}
}

// TestCheckPasses: `check` with no target runs the workload against the in-memory store and
// passes, with a summary; --report and --history write their files on success too, and the
// history written checks again.
func TestCheckPasses(t *testing.T) {
	dir := t.TempDir()
	for _, kind := range workload.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			hist, report := filepath.Join(dir, string(kind)+".json"), filepath.Join(dir, string(kind)+".html")
			code, out, errOut := runCheckCmd(t, "--ops", "400", "--seed", "1", "--workload", string(kind),
				"--compact-every", "40", "--history", hist, "--report", report)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			mustContain(t, "stdout", out,
				fmt.Sprintf("listwatch check: %s workload, seed 1, 4 clients, 4 watchers, compaction every 40 revisions, for 400 requests", kind),
				"target: the in-memory store, in process (etcd API 3.7.3)",
				"\nall ", "watches: ", "linearizable    ", "reliable  ", "compaction  ",
				"history: "+hist, "report: "+report, "checked in ", "\nPASS\n", "capabilities (store: etcd, reports etcd 3.7.3",
				"  PASS  tombstone-at-compact-revision", "coverage: ")
			if strings.Contains(out, "not exercised") {
				t.Errorf("the in-memory store's run left something unexercised:\n%s", out)
			}
			if !regexp.MustCompile(`\nrequests +ok +conflict +failed +unknown +total\n`).MatchString(out) {
				t.Errorf("no table of requests:\n%s", out)
			}
			if strings.Contains(out, "known bugs") {
				t.Errorf("the in-memory store has no quirk to avoid:\n%s", out)
			}
			for _, f := range []string{hist, report} {
				if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
					t.Errorf("%s not written: %v", f, err)
				}
			}
			// the report holds the scenarios' results and the coverage of the workload and scenarios
			page, err := os.ReadFile(report)
			for _, want := range []string{`<span class="word">PASS</span>`, `<tr class="scenario pass"><td>PASS</td><td>tombstone-at-compact-revision`, `<section id="coverage">`} {
				if err != nil || !strings.Contains(string(page), want) {
					t.Errorf("report %s (%v) lacks %q", report, err, want)
				}
			}
			code, out, errOut = runCheckCmd(t, "--check-history", hist)
			if code != 0 || !passed(out) {
				t.Fatalf("--check-history of the recorded history: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
		})
	}
}

// recordedHistory records a small passing history and returns it as JSON.
func recordedHistory(t *testing.T) []byte {
	t.Helper()
	recorded.Lock()
	defer recorded.Unlock()
	if recorded.history == nil {
		path := filepath.Join(t.TempDir(), "h.json")
		if code, out, errOut := runCheckCmd(t, "--ops", "300", "--seed", "2", "--clients", "2", "--watchers", "2", "--history", path); code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		recorded.history = b
	}
	return bytes.Clone(recorded.history)
}

// recorded is the history recordedHistory recorded, once for the tests that read one: each run
// takes seconds, most of them the scenarios' real waits.
var recorded struct {
	sync.Mutex
	history []byte
}

// TestCheckHistoryViolation: a submitted history with one tampered watch event fails with exit
// status 1, names the guarantee, and writes the report (to --report, or else a temporary file).
func TestCheckHistoryViolation(t *testing.T) {
	var h etcd.History
	if err := json.Unmarshal(recordedHistory(t), &h); err != nil {
		t.Fatal(err)
	}
	tampered := false
	for wi := range h.Watches {
		for ri := range h.Watches[wi].Responses {
			if evs := h.Watches[wi].Responses[ri].Events; len(evs) > 0 && !tampered {
				evs[0].Kv.Value = "tampered"
				tampered = true
			}
		}
	}
	if !tampered {
		t.Fatal("the recorded history has no watch event to tamper with")
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	var buf bytes.Buffer
	if err := h.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	report := filepath.Join(dir, "report.html")
	code, out, errOut := runCheckCmd(t, "--check-history", bad, "--report", report)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	mustContain(t, "stdout", out, "listwatch check: the history in "+bad, ": 1 violation(s) of reliable\n",
		"[unexplained] reliable: watch ", "\nFAIL: 0 known upstream bugs, 1 unexplained\n",
		"reliable: watch ", "report: "+report)
	if !regexp.MustCompile(`\n\+[^\n]*Value:[^\n]*"tampered"`).MatchString(out) {
		t.Errorf("no diff showing the tampered value:\n%s", out)
	}
	mustContain(t, "stderr", errOut, "listwatch check: FAIL: 0 known upstream bugs, 1 unexplained; report: "+report)
	if strings.Contains(out, "check it again") {
		t.Errorf("a submitted history is not saved again:\n%s", out)
	}
	html, err := os.ReadFile(report)
	if err != nil || !bytes.Contains(html, []byte("reliable")) {
		t.Errorf("report %s: %v, want one naming reliable", report, err)
	}

	code, out, _ = runCheckCmd(t, "--check-history", bad)
	m := regexp.MustCompile(`report: (\S+listwatch-check-report-\S+\.html)\n`).FindStringSubmatch(out)
	if code != 1 || m == nil {
		t.Fatalf("without --report: exit %d, want 1 and a report in a temporary file:\n%s", code, out)
	}
	defer os.Remove(m[1])
	if fi, err := os.Stat(m[1]); err != nil || fi.Size() == 0 {
		t.Errorf("temporary report %s: %v", m[1], err)
	}
}

// TestCheckInvalidHistory: a submitted file that is not a history, an empty one, one of another
// schema version and a missing file are refused with exit status 2 (could not run), naming the
// problem.
func TestCheckInvalidHistory(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		`{"operations": [{"client": 0, "call": 1, "return": 2, "request": {}}]}`: "operation 0",
		`{"operations": [], "extra": 1}`:                                         `unknown field "extra"`,
		`{}`:                                                                     "no operations and no watches: nothing to check",
		`{"operations": [], "watches": []}`:                                      "no operations and no watches: nothing to check",
		`{"operations": [], "run": {"schema": 1}}`:                               "unsupported schema version 1 (this build reads version 2",
		`{"operations": [], "run": {"target": "x"}}`:                             "unsupported schema version 0 (this build reads version 2",
		`{"resource": {"version": "v1", "resource": "configmaps", "kind": "ConfigMap", "namespace": "n"}}`:                       "no operations and no watches",
		`{"resource": {"version": "v1", "resource": "configmaps", "kind": "ConfigMap", "namespace": "n"}, "run": {"schema": 9}}`: "unsupported schema version 9",
	}
	i := 0
	for content, want := range cases {
		i++
		path := filepath.Join(dir, fmt.Sprintf("h%d.json", i))
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runCheckCmd(t, "--check-history", path)
		if code != exitCouldNotRun || !strings.Contains(errOut, "could not run: ") || !strings.Contains(errOut, "invalid history") || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and an invalid history naming %q", content, code, errOut, want)
		}
	}
	if code, _, errOut := runCheckCmd(t, "--check-history", filepath.Join(dir, "missing.json")); code != exitCouldNotRun || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing file: exit %d, stderr %q", code, errOut)
	}
}

// TestCheckInconclusive: a linearizability search that runs out of time ends the check with exit
// status 3, labelled INCONCLUSIVE, and still writes the report.
func TestCheckInconclusive(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "h.json")
	if err := os.WriteFile(path, recordedHistory(t), 0o644); err != nil {
		t.Fatal(err)
	}
	env := defaultCheckEnv
	var gotTimeout time.Duration
	env.checkHistory = func(_ context.Context, h *etcd.History, opts etcd.Options) (*etcd.Result, error) {
		gotTimeout = opts.Timeout
		return &etcd.Result{Verdict: etcd.VerdictTimeout, Notes: []string{"the linearizability search timed out"}}, nil
	}
	report := filepath.Join(dir, "r.html")
	var stdout, stderr bytes.Buffer
	err := env.run(context.Background(), []string{"--check-history", path, "--check-timeout", "3s", "--report", report}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "INCONCLUSIVE: the linearizability search timed out after 3s (raise --check-timeout)") {
		t.Fatalf("error %v, want INCONCLUSIVE\nstdout:\n%s", err, stdout.String())
	}
	if gotTimeout != 3*time.Second {
		t.Errorf("search bounded by %v, want --check-timeout 3s", gotTimeout)
	}
	mustContain(t, "stdout", stdout.String(), ": INCONCLUSIVE: the linearizability search did not finish within --check-timeout 3s",
		"resumable       skipped: no linearization", "note: the linearizability search timed out", "report: "+report)
	if fi, err := os.Stat(report); err != nil || fi.Size() == 0 {
		t.Errorf("report %s: %v", report, err)
	}
	var ec exitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != exitInconclusive {
		t.Errorf("an inconclusive check exits %d, want %d: %v", ec.ExitCode(), exitInconclusive, err)
	}
}

func TestCheckBadFlags(t *testing.T) {
	hist := filepath.Join(t.TempDir(), "h.json")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"extra"}, `listwatch check: unexpected argument "extra"`},
		{[]string{"--workload", "pods"}, `--workload "pods": want one of [k8s etcd]`},
		{[]string{"--ops", "10", "--duration", "1s"}, "--ops and --duration both bound the run: give one"},
		{[]string{"--ops", "0"}, "--ops 0: must be positive"},
		{[]string{"--duration", "-1s"}, "--duration -1s: must be positive"},
		{[]string{"--clients", "0"}, "--clients 0: need at least one"},
		{[]string{"--watchers", "-1"}, "--watchers -1: must not be negative"},
		{[]string{"--compact-every", "-1"}, "--compact-every -1: must not be negative"},
		{[]string{"--dial-timeout", "0s"}, "--dial-timeout 0s: must be positive"},
		{[]string{"--request-timeout", "0s"}, "--request-timeout 0s: must be positive"},
		{[]string{"--check-timeout", "-1s"}, "--check-timeout -1s: must not be negative"},
		{[]string{"--endpoints", ""}, `--endpoints "": empty endpoint`},
		{[]string{"--endpoints", "127.0.0.1:2379,"}, `--endpoints "127.0.0.1:2379,": empty endpoint`},
		{[]string{"--endpoints", "nohostport"}, `endpoint "nohostport": address nohostport: missing port in address`},
		{[]string{"--endpoints", "https://127.0.0.1:2379"}, `only http:// endpoints are supported`},
		{[]string{"--check-history", hist, "--endpoints", "127.0.0.1:2379"}, "--endpoints does not apply to --check-history"},
		{[]string{"--check-history", hist, "--seed", "3"}, "--seed does not apply to --check-history"},
		{[]string{"--check-history", ""}, "--check-history needs a file"},
		{[]string{"--report", "/no/such/dir/r.html"}, "--report /no/such/dir/r.html: no directory /no/such/dir to write it in"},
		{[]string{"--history", ""}, "--history needs a file"},
		{[]string{"--scenarios", "--no-scenarios"}, "--scenarios runs the scenarios alone and --no-scenarios leaves them out: give one"},
		{[]string{"--prefix", ""}, `--prefix "": need a non-empty key prefix`},
		{[]string{"--kube", "http://127.0.0.1:1", "--prefix", "/p/"}, "--prefix does not apply to --kube"},
		{[]string{"--check-history", hist, "--scenarios"}, "--scenarios does not apply to --check-history"},
		{[]string{"--check-history", hist, "--keep"}, "--keep does not apply to --check-history"},
		{[]string{"--output", "yaml"}, `--output "yaml": want text or json`},
		{[]string{"--cluster", "0"}, "--cluster 0: need at least one member"},
		{[]string{"--cluster", "3", "--endpoints", "127.0.0.1:2379"}, "--cluster starts its own members: give it or --endpoints, not both"},
		{[]string{"--etcd-binary", "/x"}, "--etcd-binary applies to --cluster only"},
		{[]string{"--faults", "3"}, "--faults needs --cluster (faults on the members it starts) or --fault-cmd (on members it did not)"},
		{[]string{"--faults", "3", "--fault-cmd", "true"}, "--fault-cmd needs --endpoints: the in-memory store has no members to fault"},
		{[]string{"--cluster", "3", "--faults", "3", "--fault-kinds", "kill,reboot"}, `--fault-kinds "kill,reboot": "reboot" is no fault kind (want kill, pause, leader)`},
		{[]string{"--endpoints", "127.0.0.1:2379", "--faults", "3", "--fault-cmd", "true", "--fault-kinds", "kill"}, "--fault-kinds applies to --cluster only"},
		{[]string{"--fault-cmd", "true"}, "--fault-cmd applies to --faults only"},
		{[]string{"--cluster", "3", "--faults", "3", "--fault-every", "1"}, "--fault-every 1: need at least 2 requests between faults"},
		{[]string{"--kube", "http://127.0.0.1:1", "--cluster", "3"}, "--cluster does not apply to --kube"},
		{[]string{"--check-history", hist, "--faults", "3"}, "--faults does not apply to --check-history"},
		{[]string{"--etcd-flag", "--max-txn-ops=256"}, "--etcd-flag applies to --cluster only"},
		{[]string{"--cluster", "1", "--etcd-flag", "max-txn-ops=256"}, `--etcd-flag "max-txn-ops=256": want an etcd flag, as --name=value`},
		{[]string{"--cluster", "1", "--etcd-flag", "--"}, `--etcd-flag "--": want an etcd flag`},
		{[]string{"--restart-cmd", "true"}, "--restart-cmd needs --endpoints: the in-memory store has no members to restart"},
		{[]string{"--endpoints", "127.0.0.1:2379", "--restart-cmd", ""}, "--restart-cmd needs a shell command"},
		{[]string{"--cluster", "1", "--restart-cmd", "true"}, "--restart-cmd restarts members the tool did not start: --cluster restarts its own"},
		{[]string{"--recovery-timeout", "5s"}, "--recovery-timeout applies to --faults, --cluster and --restart-cmd only"},
		{[]string{"--kube", "http://127.0.0.1:1", "--restart-cmd", "true"}, "--restart-cmd does not apply to --kube"},
		{[]string{"--check-history", hist, "--etcd-flag", "--x=1"}, "--etcd-flag does not apply to --check-history"},
		{[]string{"--skip-probe", "compaction"}, `--skip-probe "compaction": not a probe that can be left out; want one of "watch filters", "watch fragment", "watch progress_notify", "client-chosen watch IDs"`},
		{[]string{"--skip-probe", "client-chosen watch IDs", "--skip-probe", "watch ids"}, `--skip-probe "watch ids": not a probe that can be left out`},
		{[]string{"--kube", "http://127.0.0.1:1", "--skip-probe", "watch filters"}, "--skip-probe does not apply to --kube"},
		{[]string{"--check-history", hist, "--skip-probe", "watch filters"}, "--skip-probe does not apply to --check-history"},
	}
	for _, c := range cases {
		code, out, errOut := runCheckCmd(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("check %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
	if code, _, errOut := runCheckCmd(t, "-h"); code != 0 || !strings.Contains(errOut, "usage: listwatch check [flags]") || !strings.Contains(errOut, "-check-history file") ||
		!strings.Contains(errOut, "Exit status: 0 PASS; 1 FAIL") || !strings.Contains(errOut, "130 interrupted") {
		t.Errorf("check -h: exit %d, stderr %q", code, errOut)
	}
}

// TestCheckSkipProbe: --skip-probe leaves the probe out: the capability table says so, the
// workload runs without the feature, the scenario that needs it is skipped, and the run passes.
func TestCheckSkipProbe(t *testing.T) {
	code, out, errOut := runCheckCmd(t, "--ops", "200", "--seed", "1", "--workload", "etcd",
		"--skip-probe", "client-chosen watch IDs", "--skip-probe", "watch filters")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !regexp.MustCompile(`\n  client-chosen watch IDs +skipped +left out by the run\n`).MatchString(out) ||
		!regexp.MustCompile(`\n  watch filters +skipped +left out by the run\n`).MatchString(out) {
		t.Errorf("the capability table does not say skipped:\n%s", out)
	}
	mustContain(t, "stdout", out, "the workload runs without: watch filters, client-chosen watch IDs",
		"SKIP  filters", "skipped: the run skips watch filters", "\nPASS\n")
}

// TestCheckAgainstEtcd: --endpoints runs the scenarios and the workload against a real etcd (3.4.23,
// Debian's), provoking everything: it fails, every violation one of the known bugs of 3.4.23 and
// none unexplained. The workload's history checks again to the verdict of its run. A store already
// written to runs again, under another prefix; one that does not answer cannot be checked (exit 2).
func TestCheckAgainstEtcd(t *testing.T) {
	ep := etcdprocess.Start(t, "--experimental-watch-progress-notify-interval=100ms")
	code, out, errOut := runCheckCmd(t, "--endpoints", ep, "--ops", "600", "--seed", "3", "--compact-every", "50", "--workload", "etcd")
	if code != 1 || !regexp.MustCompile(`\nFAIL: [1-9] known upstream bugs?, 0 unexplained\n`).MatchString(out) {
		t.Fatalf("exit %d, want 1 and known bugs only\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	mustContain(t, "stdout", out, "target: "+ep+" (etcd 3.4.23)", "known upstream bug: etcd-io/etcd#18089",
		"  FAIL  tombstone-at-compact-revision", "[known: etcd-io/etcd#18089]")

	// the workload's history re-checks to the same verdict: its run names etcd 3.4.23, whose known
	// bugs its violations are; --keep leaves its keys for the next run to see
	hist := filepath.Join(t.TempDir(), "h.json")
	code, out, errOut = runCheckCmd(t, "--endpoints", ep, "--ops", "600", "--seed", "3", "--compact-every", "50", "--workload", "etcd",
		"--no-scenarios", "--history", hist, "--keep")
	verdict := regexp.MustCompile(`\n(PASS[^\n]*|FAIL: [^\n]*)\n`)
	ran := verdict.FindStringSubmatch(out)
	if ran == nil || code != 0 && code != exitFail || strings.Contains(ran[1], " 0 known") && !strings.Contains(ran[1], "0 unexplained") {
		t.Fatalf("--no-scenarios: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code2, out2, errOut2 := runCheckCmd(t, "--check-history", hist)
	if again := verdict.FindStringSubmatch(out2); again == nil || again[1] != ran[1] || code2 != code {
		t.Errorf("--check-history of the run's history: exit %d, %q; the run: exit %d, %q\nstdout:\n%s\nstderr:\n%s", code2, again, code, ran[1], out2, errOut2)
	}
	mustContain(t, "--check-history", out2, "(store etcd, version 3.4.23)")

	code, out, errOut = runCheckCmd(t, "--endpoints", "http://"+ep, "--scenarios", "--prefix", "/again/")
	if code != 1 || !strings.Contains(out, "under /again/") || !regexp.MustCompile(`\nFAIL: [1-9] known upstream bugs?, 0 unexplained\n`).MatchString(out) ||
		!strings.Contains(out, "note: the store holds ") {
		t.Errorf("second run on the same store: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	// the apiserver's gating: no RequestProgress to 3.4.23, so the scenarios that send one are skipped
	code, out, errOut = runCheckCmd(t, "--endpoints", ep, "--scenarios", "--apiserver-gating")
	mustContain(t, "stdout", out, "--apiserver-gating: the apiserver sends no RequestProgress to etcd 3.4.23",
		"  SKIP  request-progress-answered", "skipped: the apiserver sends no RequestProgress to this version",
		"  SKIP  tombstone-after-restart", "skipped: it restarts the store, and there is no way to (--cluster, or --restart-cmd)")
	if code != 1 || strings.Contains(out, "etcd-io/etcd#15220") {
		t.Errorf("gated run: exit %d, want 1 (the tombstone bug) without the progress bug\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	code, _, errOut = runCheckCmd(t, "--endpoints", closed, "--dial-timeout", "300ms", "--ops", "10")
	if code != exitCouldNotRun || !strings.Contains(errOut, "could not run: no answer within --dial-timeout 300ms") {
		t.Errorf("endpoint nobody listens on: exit %d, stderr %q", code, errOut)
	}
}

// TestCheckAgainstEtcdCluster: --endpoints takes every member of a cluster (in either form), and
// across them the workload finds nothing but the known bugs of their version.
func TestCheckAgainstEtcdCluster(t *testing.T) {
	eps := etcdprocess.StartCluster(t, 3)
	code, out, errOut := runCheckCmd(t, "--endpoints", eps[0]+", "+eps[1]+",http://"+eps[2], "--ops", "600", "--seed", "6", "--compact-every", "50", "--no-scenarios")
	if !regexp.MustCompile(`\n(PASS|FAIL: [0-9] known upstream bugs?, 0 unexplained\n)`).MatchString(out) {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, ep := range eps {
		mustContain(t, "stdout", out, ep+" (etcd 3.4.23)")
	}
}

// TestCheckInterrupted: when the context ends mid-run (SIGINT), check stops the workload, checks
// what was recorded and reports; finding nothing, it ends INTERRUPTED (exit 130), not PASS.
func TestCheckInterrupted(t *testing.T) {
	started := make(chan *workload.Stats, 1)
	env := defaultCheckEnv
	env.started = func(s *workload.Stats) { started <- s }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- env.run(ctx, []string{"--duration", "10m", "--seed", "4", "--compact-every", "50"}, &stdout, &stderr)
	}()
	var stats *workload.Stats
	select {
	case stats = <-started:
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("the workload did not start")
	}
	testutil.WaitFor(t, "300 requests", func() bool { return stats.Snapshot().Operations >= 300 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, errInterrupted) || exitOf(t, err) != exitInterrupted {
			t.Fatalf("%v (exit %d), want interrupted (exit %d)\nstdout:\n%s\nstderr:\n%s", err, exitOf(t, err), exitInterrupted, stdout.String(), stderr.String())
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("check did not stop after its context ended")
	}
	mustContain(t, "stdout", stdout.String(), "for 10m0s", "interrupted after ", ": checking what was recorded", "every guarantee held",
		"\nINTERRUPTED: no violation in what was recorded before the interrupt; not a PASS\n")
	if passed(stdout.String()) {
		t.Errorf("an interrupted run passed:\n%s", stdout.String())
	}
}

// TestCheckSIGINT: the real command, sent SIGINT while the workload runs, checks what was recorded,
// reports and exits 130 (interrupted).
func TestCheckSIGINT(t *testing.T) {
	cmd := exec.Command(os.Args[0], "check", "--duration", "10m", "--seed", "5")
	cmd.Env = append(os.Environ(), runAsListwatch+"=1")
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1000)
	var scanned sync.WaitGroup
	scanned.Go(func() {
		defer close(lines)
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
	})
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			scanned.Wait()
			cmd.Wait()
		}
	}()
	var got []string
	next := func() (string, bool) {
		select {
		case l, ok := <-lines:
			return l, ok
		case <-time.After(testutil.WaitTimeout):
			t.Fatalf("no output line after %q; stderr %q", got, stderr.String())
			return "", false
		}
	}
	for {
		l, ok := next()
		if !ok {
			t.Fatalf("output ended before the workload started: %q; stderr %q", got, stderr.String())
		}
		got = append(got, l)
		if strings.HasPrefix(l, "target: ") {
			break
		}
	}
	testutil.WaitFor(t, "the recording", func() bool { return strings.Contains(stderr.String(), "recording the k8s workload") })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for {
		l, ok := next()
		if !ok {
			break
		}
		got = append(got, l)
	}
	scanned.Wait()
	err = cmd.Wait()
	all := strings.Join(got, "\n")
	if cmd.ProcessState.ExitCode() != exitInterrupted || !strings.Contains(all, "interrupted after ") ||
		!strings.Contains(all, "\nINTERRUPTED: ") || passed(all) {
		t.Errorf("after SIGINT: %v\nstdout:\n%s\nstderr:\n%s", err, all, stderr.String())
	}
}

// TestCheckProgress: on a terminal the progress line is rewritten in place every second and ended
// by a newline; elsewhere a plain line is written every 10 seconds.
func TestCheckProgress(t *testing.T) {
	for _, terminal := range []bool{true, false} {
		t.Run(fmt.Sprint("terminal=", terminal), func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			env := checkEnv{clock: clk, terminal: func(io.Writer) bool { return terminal }}
			var w testutil.SyncBuffer
			stop := env.progress(&w, &workload.Stats{}, clk.Now(), workload.Config{})
			testutil.WaitFor(t, "the ticker", clk.HasWaiters)
			step := time.Second
			if !terminal {
				clk.Step(9 * time.Second)
			}
			clk.Step(step)
			testutil.WaitFor(t, "a line", func() bool { return strings.Contains(w.String(), "requests 0") })
			clk.Step(10 * time.Second)
			testutil.WaitFor(t, "a second line", func() bool { return strings.Count(w.String(), "requests 0") == 2 })
			stop()
			got := w.String()
			var want *regexp.Regexp
			if terminal {
				want = regexp.MustCompile(`^\r +1\.0s  requests 0 \(0/s\)  errors 0 failed, 0 unknown  watches 0  events 0  revision 0\r +11\.0s  requests 0 \(0/s\)[^\n]*\n$`)
			} else {
				want = regexp.MustCompile(`^ +10\.0s  requests 0 \(0/s\)[^\r\n]*\n +20\.0s  requests 0 \(0/s\)[^\r\n]*\n$`)
			}
			if !want.MatchString(got) {
				t.Errorf("progress output %q does not match %v", got, want)
			}
		})
	}
}

// exitOf is the exit status run gives err.
func exitOf(t *testing.T, err error) int {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c := &command{name: "check", run: func(context.Context, []string, io.Writer, io.Writer) error { return err }}
	commands["test-exit"] = c
	defer delete(commands, "test-exit")
	return run(context.Background(), []string{"test-exit"}, &stdout, &stderr)
}

// TestCheckExitCodes: each outcome has its exit status, and an error that is none (a target that
// does not answer) is "could not run".
func TestCheckExitCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{fmt.Errorf("%w: 1 known upstream bug, 0 unexplained", errFail), exitFail},
		{fmt.Errorf("%w: timed out", errInconclusive), exitInconclusive},
		{interruptedVerdict(3), exitInterrupted},
		{errors.Join(fmt.Errorf("%w: x", errFail), errors.New("writing the report")), exitFail},
		{couldNotRun(errors.New("no answer within --dial-timeout 1s")), exitCouldNotRun},
		{couldNotRun(badFlags("--ops 0")), 2},
		{errors.New("another command's failure"), 1},
	} {
		if got := exitOf(t, c.err); got != c.want {
			t.Errorf("%v: exit %d, want %d", c.err, got, c.want)
		}
	}
}

// TestNotifySignals: the first SIGINT ends ctx alone, the second ends abort.
func TestNotifySignals(t *testing.T) {
	ctx, abort, stop := notifySignals(true)
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the first signal", func() bool { return ctx.Err() != nil })
	if abort.Err() != nil {
		t.Fatal("the first signal ended abort too")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the second signal", func() bool { return abort.Err() != nil })
}

// TestCheckInterruptedTwice: the first interrupt stops the recording and the check runs over what was
// recorded; the second stops the check, which ends "interrupted" (exit 130), never PASS, once the
// checker (etcd.CheckContext, given the stop context) has returned context.Canceled.
func TestCheckInterruptedTwice(t *testing.T) {
	started := make(chan *workload.Stats, 1)
	checking := make(chan struct{})
	checked := make(chan error, 1)
	env := defaultCheckEnv
	env.started = func(s *workload.Stats) { started <- s }
	env.checkHistory = func(ctx context.Context, h *etcd.History, opts etcd.Options) (*etcd.Result, error) {
		close(checking)
		<-ctx.Done() // the second interrupt
		res, err := etcd.CheckContext(ctx, h, opts)
		checked <- err
		return res, err
	}
	first, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	second, abort := context.WithCancel(context.Background())
	defer abort()
	var stdout, stderr testutil.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- env.run(withAbort(first, second), []string{"--duration", "10m", "--seed", "4", "--no-scenarios"}, &stdout, &stderr)
	}()
	stats := <-started
	testutil.WaitFor(t, "100 requests", func() bool { return stats.Snapshot().Operations >= 100 })
	interrupt()
	select {
	case <-checking:
	case err := <-done:
		t.Fatalf("check ended before checking: %v\n%s", err, stdout.String())
	}
	abort()
	err := <-done
	select {
	case cerr := <-checked:
		if !errors.Is(cerr, context.Canceled) {
			t.Errorf("the checker returned %v, want context.Canceled", cerr)
		}
	default:
		t.Error("check returned before the checker did")
	}
	if exitOf(t, err) != exitInterrupted || !strings.Contains(err.Error(), "interrupted while checking") {
		t.Errorf("error %v (exit %d), want interrupted while checking (exit %d)", err, exitOf(t, err), exitInterrupted)
	}
	mustContain(t, "stdout", stdout.String(), "interrupted after ", "checking what was recorded (interrupt again to stop the check)",
		"Interrupted while checking ", "cleanup: revoked ")
	m := regexp.MustCompile(`history: (\S+listwatch-check-history-\S+\.json) \(check it again`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("the history of a run whose check was interrupted is not kept:\n%s", stdout.String())
	}
	defer os.Remove(m[1])
	if h, err := os.ReadFile(m[1]); err != nil || !bytes.Contains(h, []byte(`"interrupted": true`)) {
		t.Errorf("kept history %s: %v, want one whose run says it was interrupted", m[1], err)
	}
	// checked again, the history of an interrupted run is INTERRUPTED too, never PASS
	code, out, errOut := runCheckCmd(t, "--check-history", m[1])
	if code != exitInterrupted || passed(out) || !strings.Contains(out, "\nINTERRUPTED: no violation in what was recorded before the interrupt") {
		t.Errorf("--check-history of an interrupted run's history: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if passed(stdout.String()) {
		t.Errorf("an interrupted check passed:\n%s", stdout.String())
	}
}

// TestCheckOutputJSON: --output json writes the result alone on stdout, one JSON document, the
// report on stderr; --quiet leaves the report and the progress out.
func TestCheckOutputJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.json")
	code, out, errOut := runCheckCmd(t, "--ops", "300", "--seed", "2", "--clients", "2", "--watchers", "2", "--history", path, "--output", "json", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if errOut != "" {
		t.Errorf("--quiet --output json wrote to stderr: %q", errOut)
	}
	var res checkResult
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil || dec.More() {
		t.Fatalf("stdout is not one JSON result: %v\n%s", err, out)
	}
	if res.Verdict != "PASS" || res.ExitCode != 0 || res.Counts["requests"] == 0 || res.Counts["watches"] == 0 || len(res.Counts) != 5 || len(res.Scenarios) != len(workload.Scenarios) ||
		res.Run == nil || res.Run.Schema != check.SchemaVersion || res.Run.Seed != 2 || res.Run.Version == "" || res.History != path {
		t.Errorf("result %+v", res)
	}

	code, out, errOut = runCheckCmd(t, "--check-history", filepath.Join(t.TempDir(), "missing.json"), "--output", "json")
	res = checkResult{}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitCouldNotRun || res.Verdict != "COULD NOT RUN" ||
		res.ExitCode != exitCouldNotRun || !strings.Contains(res.Message, "no such file") {
		t.Errorf("missing history: exit %d, result %+v (%v), stderr %q", code, res, err, errOut)
	}
}

// tamperProgress moves the first progress notification of h that some event follows on its watch
// up to that event's revision: the signature of etcd-io/etcd#15220 (etcd-progress-ahead).
func tamperProgress(t *testing.T, h *etcd.History) {
	t.Helper()
	for wi := range h.Watches {
		rs := h.Watches[wi].Responses
		for ri := range rs {
			if !rs[ri].IsProgressNotify() {
				continue
			}
			for _, later := range rs[ri+1:] {
				if len(later.Events) > 0 {
					rs[ri].Revision = later.Events[0].Kv.ModRevision
					return
				}
			}
		}
	}
	t.Fatal("no progress notification followed by an event in the history")
}

// TestCheckHistoryRun: a recorded history carries its run (schema, tool, target, store, version,
// seed, flags), and --check-history judges it by the target's version: the same violation is a
// known bug of etcd 3.4.23, a regression of the version recorded, and unexplained in a history
// without run (written by hand).
func TestCheckHistoryRun(t *testing.T) {
	var h etcd.History
	if err := json.Unmarshal(recordedHistory(t), &h); err != nil {
		t.Fatal(err)
	}
	r := h.Run
	if r == nil || r.Schema != check.SchemaVersion || r.Tool == "" || r.Target != "in-memory store" || r.Store != "etcd" ||
		r.Version != "3.7.3" || r.Workload != "k8s" || r.Seed != 2 || !slices.Contains(r.Flags, "--seed") || r.Started.IsZero() || r.Interrupted {
		t.Fatalf("run %+v", r)
	}
	tamperProgress(t, &h)
	dir := t.TempDir()
	write := func(name string, run *check.Run) string {
		h := h
		h.Run = run
		path := filepath.Join(dir, name)
		var buf bytes.Buffer
		if err := h.WriteJSON(&buf); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	old := *r
	old.Version = "3.4.23"
	for _, c := range []struct {
		name  string
		run   *check.Run
		wants []string
	}{
		{"old.json", &old, []string{"against in-memory store (store etcd, version 3.4.23)", "[known: etcd-io/etcd#15220]", "\nFAIL: 1 known upstream bug, 0 unexplained\n"}},
		{"recorded.json", r, []string{"[unexplained: the signature of etcd-io/etcd#15220, fixed in", "\nFAIL: 0 known upstream bugs, "}},
		{"byhand.json", nil, []string{"no run metadata: checked as a history written by hand", "[unexplained] bookmarkable", "\nFAIL: 0 known upstream bugs, "}},
	} {
		code, out, errOut := runCheckCmd(t, "--check-history", write(c.name, c.run), "--report", filepath.Join(dir, c.name+".html"))
		if code != exitFail {
			t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", c.name, code, exitFail, out, errOut)
		}
		mustContain(t, c.name, out, c.wants...)
	}

	// the same as JSON: the verdict, its counts, the labelled violation, the known bug, the run
	code, out, errOut := runCheckCmd(t, "--check-history", filepath.Join(dir, "old.json"), "--output", "json", "--report", filepath.Join(dir, "j.html"))
	var res checkResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != exitFail {
		t.Fatalf("--output json: exit %d, %v\nstdout:\n%s\nstderr:\n%s", code, err, out, errOut)
	}
	if res.Verdict != "FAIL" || res.ExitCode != exitFail || res.Counts["known"] == 0 || res.Counts["unexplained"] != 0 || len(res.KnownBugs) != 1 ||
		!strings.HasPrefix(res.KnownBugs[0], "etcd-io/etcd#15220") || len(res.Violations) == 0 || res.Violations[0].Label != "known: etcd-io/etcd#15220" ||
		res.Run == nil || res.Run.Version != "3.4.23" || res.Report != filepath.Join(dir, "j.html") || !strings.HasPrefix(res.Message, "FAIL: 1 known upstream bug, 0 unexplained") {
		t.Errorf("result %+v", res)
	}
}

// countLeft counts the keys under prefix and the leases the store holds.
func countLeft(t *testing.T, cli *clientv3.Client, prefix string) (keys int64, leases int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	ls, err := cli.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count, len(ls.Leases)
}

// TestCheckCleanup: a run deletes its prefix and revokes its leases at the end, on the in-memory
// store and on a real etcd; --keep keeps them.
func TestCheckCleanup(t *testing.T) {
	args := []string{"--ops", "300", "--seed", "7", "--clients", "2", "--watchers", "2"}
	for _, keep := range []bool{false, true} {
		env := defaultCheckEnv
		var keys int64
		leases := -1
		env.cleaned = func(cli *clientv3.Client, prefix string) { keys, leases = countLeft(t, cli, prefix) }
		var stdout, stderr bytes.Buffer
		a := args
		if keep {
			a = append(a, "--keep")
			a = append(a, shortNoScenarios()...)
		}
		if err := env.run(context.Background(), a, &stdout, &stderr); err != nil {
			t.Fatalf("%v\n%s\n%s", err, stdout.String(), stderr.String())
		}
		switch {
		case !keep && (keys != 0 || leases != 0):
			t.Errorf("in-memory store: %d keys and %d leases left after the run\n%s", keys, leases, stdout.String())
		case keep && (keys == 0 || leases <= 0):
			t.Errorf("in-memory store, --keep: %d keys and %d leases left, want both kept\n%s", keys, leases, stdout.String())
		}
		mustContain(t, "stdout", stdout.String(), map[bool]string{false: "cleanup: revoked ", true: "--keep: the run's keys under "}[keep])
	}

	if _, err := os.Stat("/usr/bin/etcd"); err != nil {
		t.Skip("no /usr/bin/etcd for the real etcd's part")
	}
	ep := etcdprocess.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, keep := range []bool{false, true} {
		prefix := map[bool]string{false: "/clean/", true: "/kept/"}[keep]
		a := append([]string{"--endpoints", ep, "--prefix", prefix}, args...)
		if keep {
			a = append(a, "--keep")
			a = append(a, shortNoScenarios()...)
		}
		code, out, errOut := runCheckCmd(t, a...)
		if code != 0 && code != exitFail {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
		keys, leases := countLeft(t, cli, prefix)
		switch {
		case !keep && (keys != 0 || leases != 0):
			t.Errorf("etcd: %d keys under %s and %d leases left after the run\n%s", keys, prefix, leases, out)
		case keep && (keys == 0 || leases == 0):
			t.Errorf("etcd, --keep: %d keys under %s and %d leases, want both kept\n%s", keys, prefix, leases, out)
		}
	}
}

// shortNoScenarios is --no-scenarios with -short: the runs that clean up still run the scenarios,
// whose keys and leases the cleanup must find too; those that --keep need only the workload's.
func shortNoScenarios() []string {
	if testing.Short() {
		return []string{"--no-scenarios"}
	}
	return nil
}

// TestCheckingProgress: while a check runs, the progress line names the part running and, during
// the search, what --check-timeout leaves of it.
func TestCheckingProgress(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	env := checkEnv{clock: clk, terminal: func(io.Writer) bool { return true }}
	var w testutil.SyncBuffer
	searching, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- env.checking(context.Background(), &w, "7 requests and 1 watches", 5*time.Second, func(_ context.Context, phase check.PhaseFunc) {
			phase.Begin(check.PhaseSearch)
			close(searching)
			<-release
		})
	}()
	<-searching
	testutil.WaitFor(t, "the ticker", clk.HasWaiters)
	clk.Step(time.Second)
	testutil.WaitFor(t, "a progress line", func() bool { return strings.Contains(w.String(), "1.0s") })
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mustContain(t, "progress", w.String(), "checking 7 requests and 1 watches (the search bounded by --check-timeout 5s)...\n",
		"\r   1.0s  checking 7 requests and 1 watches: the linearizability search (at most 4s more)")
}
