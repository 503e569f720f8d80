package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/listwatch/listwatch/internal/etcdprocess"
)

// needEtcd skips t without the etcd binary the cluster tests run.
func needEtcd(t *testing.T, binary string) {
	t.Helper()
	if _, err := os.Stat(binary); err != nil {
		t.Skipf("no etcd at %s (%v): install Debian's etcd-server (apt-get install etcd-server) to run the cluster tests", binary, err)
	}
}

// decodeResult decodes check's --output json result, strictly.
func decodeResult(t *testing.T, out string) checkResult {
	t.Helper()
	var res checkResult
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("stdout is not one JSON result: %v\n%s", err, out)
	}
	return res
}

// TestCheckClusterFaults: --cluster 3 --faults N starts three members of Debian's etcd and, while
// the workload runs, kills and restarts, pauses and continues members and moves the leader, N
// faults counted by kind (the kinds in turn), then checks: PASS, or only the known bugs of 3.4.23.
// The requests of unknown outcome are counted, and with a linearization each write of them is
// decided. LISTWATCH_CLUSTER_FAULTS sets N (default 12), LISTWATCH_CLUSTER_ETCD the binary.
func TestCheckClusterFaults(t *testing.T) {
	binary := cmpOr(os.Getenv("LISTWATCH_CLUSTER_ETCD"), defaultEtcdBinary)
	needEtcd(t, binary)
	faults := 12
	if testing.Short() {
		faults = 6 // two of each kind
	}
	if s := os.Getenv("LISTWATCH_CLUSTER_FAULTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 3 {
			t.Fatalf("LISTWATCH_CLUSTER_FAULTS=%q: want a number of at least 3", s)
		}
		faults = n
	}
	code, out, errOut := runCheckCmd(t, "--cluster", "3", "--etcd-binary", binary, "--faults", strconv.Itoa(faults), "--fault-every", "40",
		"--request-timeout", "1s", "--no-scenarios", "--seed", "5", "--output", "json")
	res := decodeResult(t, out)
	t.Logf("verdict %s; %v; unknown outcomes %+v", res.Message, res.Faults, res.Unknown)
	if code != 0 && (code != exitFail || res.Counts["unexplained"] != 0 || res.Counts["known"] == 0) {
		t.Fatalf("exit %d, want PASS or known bugs only: %s\nstderr:\n%s", code, res.Message, errOut)
	}
	if res.Faults == nil || res.Faults.Planned != faults {
		t.Fatalf("faults %+v, want %d planned", res.Faults, faults)
	}
	// the kinds in turn: kill, pause, leader; a leader move the cluster refused is not injected
	each := func(k int) int { return (faults + 2 - k) / 3 }
	inj := res.Faults.Injected
	if inj[faultKill] != each(0) || inj[faultPause] != each(1) || inj[faultLeader]+len(res.Faults.Refused) != each(2) ||
		res.Faults.Total != inj[faultKill]+inj[faultPause]+inj[faultLeader] {
		t.Errorf("faults %+v, want %d kill, %d pause, %d leader", res.Faults, each(0), each(1), each(2))
	}
	u := res.Unknown
	if u == nil || u.Unresolved() != 0 || u.Resolved() != u.Writes {
		t.Errorf("unknown outcomes %+v: want every write of unknown outcome decided", u)
	}
	mustContain(t, "the report", errOut, "cluster: 3 members of "+binary, "fault 1 of ", ": kill http://127.0.0.1:",
		"unknown outcomes: ", "until the faults are done")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestCheckFaultCommand: --fault-cmd runs once per fault, with its environment, against members
// the tool did not start; a command that fails stops the run: COULD NOT RUN, naming the command,
// its exit status and its output.
func TestCheckFaultCommand(t *testing.T) {
	needEtcd(t, etcdprocess.Binary)
	ep := etcdprocess.Start(t)
	log := filepath.Join(t.TempDir(), "faults.log")
	code, out, errOut := runCheckCmd(t, "--endpoints", ep, "--faults", "2", "--fault-every", "20", "--no-scenarios", "--seed", "1",
		"--fault-cmd", `echo "$LISTWATCH_FAULT/$LISTWATCH_FAULTS $LISTWATCH_MEMBER $LISTWATCH_ENDPOINTS $LISTWATCH_SEED" >> `+log, "--output", "json")
	res := decodeResult(t, out)
	if code != 0 && code != exitFail || res.Faults == nil || res.Faults.Injected[faultCommand] != 2 || res.Faults.Total != 2 {
		t.Fatalf("exit %d, faults %+v\nstderr:\n%s", code, res.Faults, errOut)
	}
	got, err := os.ReadFile(log)
	if want := "1/2 0 " + ep + " 1\n2/2 0 " + ep + " 1\n"; err != nil || string(got) != want {
		t.Errorf("the command's log: %q (%v), want %q", got, err, want)
	}

	code, out, errOut = runCheckCmd(t, "--endpoints", ep, "--faults", "2", "--fault-every", "20", "--no-scenarios",
		"--fault-cmd", "echo member stuck >&2; exit 3", "--output", "json")
	res = decodeResult(t, out)
	if code != exitCouldNotRun || res.Verdict != "COULD NOT RUN" {
		t.Fatalf("a failing --fault-cmd: exit %d, result %+v\nstderr:\n%s", code, res, errOut)
	}
	mustContain(t, "the message", res.Message, "the cluster did not recover from a fault: fault 1 of 2: --fault-cmd",
		"failed (exit status 3)", "member stuck")
}

// TestCheckClusterMemberNotBack: a member --cluster started that does not come back after a kill
// (its data directory is gone) stops the run: COULD NOT RUN, naming the member and quoting etcd.
func TestCheckClusterMemberNotBack(t *testing.T) {
	needEtcd(t, etcdprocess.Binary)
	env := defaultCheckEnv
	env.beforeRestart = func(c *etcdprocess.Cluster, member int) {
		dir := c.DataDir(member)
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
			t.Error(err)
		}
	}
	var stdout, stderr bytes.Buffer
	err := env.run(context.Background(), []string{"--cluster", "3", "--faults", "1", "--fault-kinds", "kill", "--fault-every", "20",
		"--no-scenarios", "--recovery-timeout", "30s"}, &stdout, &stderr)
	if exitOf(t, err) != exitCouldNotRun {
		t.Fatalf("%v (exit %d), want could not run\nstdout:\n%s\nstderr:\n%s", err, exitOf(t, err), stdout.String(), stderr.String())
	}
	mustContain(t, "the error", err.Error(), "could not run: the cluster did not recover from a fault: fault 1 of 1: etcd etcd",
		"did not come back after a restart", "exited before it was healthy")
}
