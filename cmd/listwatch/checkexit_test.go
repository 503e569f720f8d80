package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
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
// recorded; the second stops the check, which ends "interrupted" (exit 130), never PASS.
func TestCheckInterruptedTwice(t *testing.T) {
	started := make(chan *workload.Stats, 1)
	checking, release := make(chan struct{}), make(chan struct{})
	env := defaultCheckEnv
	env.started = func(s *workload.Stats) { started <- s }
	env.checkHistory = func(h *etcd.History, opts etcd.Options) (*etcd.Result, error) {
		close(checking)
		<-release
		return etcd.Check(h, opts)
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
	close(release)
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
	if res.Verdict != "PASS" || res.ExitCode != 0 || res.Requests == 0 || res.Watches == 0 || len(res.Scenarios) != len(workload.Scenarios) ||
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

// TestCheckingProgress: while a check runs, the progress line names the part running and, during
// the search, what --check-timeout leaves of it.
func TestCheckingProgress(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	env := checkEnv{clock: clk, terminal: func(io.Writer) bool { return true }}
	var w testutil.SyncBuffer
	searching, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- env.checking(context.Background(), &w, "7 requests and 1 watches", 5*time.Second, func(phase check.PhaseFunc) {
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
