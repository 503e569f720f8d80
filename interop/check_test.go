package interop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/listwatch/listwatch/internal/etcdprocess"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/etcdtest"
)

// checkCommandTimeout bounds one run of the command: a build, or a workload plus its check.
const checkCommandTimeout = 5 * time.Minute

// built is the listwatch command, built once for all of the package's tests; TestMain removes it.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// buildListwatch returns the listwatch command built in the root module, as a user would build it
// (with the race detector, so a race in check against a real peer fails the run). The first call
// builds it into a temporary directory; the others reuse that build.
func buildListwatch(t *testing.T) string {
	t.Helper()
	built.once.Do(func() { built.bin, built.err = buildCommand() })
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

func buildCommand() (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go command on PATH to build cmd/listwatch with: %w", err)
	}
	built.dir, err = os.MkdirTemp("", "listwatch-interop-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(built.dir, "listwatch")
	ctx, cancel := context.WithTimeout(context.Background(), checkCommandTimeout)
	defer cancel()
	build := exec.CommandContext(ctx, goTool, "build", "-race", "-o", bin, "./cmd/listwatch")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build cmd/listwatch: %w\n%s", err, out)
	}
	return bin, nil
}

// removeBuilt removes the command buildListwatch built, if it did.
func removeBuilt() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// checkOps is the size of the check command's workload in these tests: 1500 requests, 500 with
// -short (every guarantee is still exercised, and every known bug found, on each peer).
func checkOps() string {
	if testing.Short() {
		return "500"
	}
	return "1500"
}

// runListwatch runs the command and returns its exit status, standard output and standard error.
func runListwatch(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), checkCommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit) && exit.Exited():
		return exit.ExitCode(), stdout.String(), stderr.String()
	default:
		t.Fatalf("listwatch %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		return 0, "", ""
	}
}

// endpointOf is the host:port clientv3 reaches the member at.
func endpointOf(t *testing.T, endpoints []string) string {
	t.Helper()
	if len(endpoints) != 1 {
		t.Fatalf("want one client endpoint, got %v", endpoints)
	}
	return strings.TrimPrefix(endpoints[0], "http://")
}

// guaranteeRow matches a row of the guarantee table: the guarantee, what the workload checked it
// over, and the scenarios.
var guaranteeRow = regexp.MustCompile(`(?m)^([a-z_]+) {2,}(.+?) {2,}(-|\d+/\d+ passed) {2,}(\d+)$`)

// everyGuaranteeCovered fails the test unless each guarantee of the table was checked over
// something by the workload or by a passing scenario, and nothing went unexercised.
func everyGuaranteeCovered(t *testing.T, stdout string) {
	t.Helper()
	rows := guaranteeRow.FindAllStringSubmatch(stdout, -1)
	if len(rows) < 14 {
		t.Fatalf("%d rows in the guarantee table:\n%s", len(rows), stdout)
	}
	for _, r := range rows {
		workloadChecked := !strings.HasPrefix(r[2], "0 ") && r[2] != "-" && !strings.HasPrefix(r[2], "skipped")
		scenarioPassed := r[3] != "-" && !strings.HasPrefix(r[3], "0/")
		if !workloadChecked && !scenarioPassed {
			t.Errorf("guarantee %s: checked over %q, scenarios %q: not covered", r[1], r[2], r[3])
		}
	}
	if strings.Contains(stdout, "not exercised") {
		t.Errorf("something was not exercised:\n%s", stdout)
	}
}

// TestCheckCommandAgainstEmbeddedEtcd runs `listwatch check --endpoints` with each workload against
// an embedded etcd v3.7.3: the capabilities are etcd's, every scenario passes, the recorded history is
// linearizable and every watch keeps etcd's guarantees, so the command passes, with every guarantee
// covered and everything exercised. A member that has been written to (the first run keeps its keys)
// is checked again the same way, under another prefix.
func TestCheckCommandAgainstEmbeddedEtcd(t *testing.T) {
	bin := buildListwatch(t)
	for _, kind := range []string{"k8s", "etcd"} {
		t.Run(kind, func(t *testing.T) {
			cli, stop, err := etcdtest.Start(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			testutil.CloseAtCleanup(t, "stop etcd", stop)
			ep := endpointOf(t, cli.Endpoints())
			// --keep: the second run below finds the first's keys
			code, stdout, stderr := runListwatch(t, bin, "check", "--endpoints", ep, "--workload", kind,
				"--seed", "7", "--ops", checkOps(), "--compact-every", "200", "--keep")
			if code != 0 || !strings.Contains(stdout, "\nPASS\n") {
				t.Fatalf("exit status %d, want 0 and PASS\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			for _, want := range []string{"target: " + ep + " (etcd 3.7.3)", "seed 7", "compaction every 200 revisions",
				"capabilities (store: etcd, reports etcd 3.7.3"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("the summary lacks %q:\n%s", want, stdout)
				}
			}
			if strings.Contains(stdout, "REFUSED") || strings.Contains(stdout, "DIFFERS") || strings.Contains(stdout, "  FAIL ") {
				t.Errorf("a deviation of etcd itself:\n%s", stdout)
			}
			everyGuaranteeCovered(t, stdout)
			if testing.Verbose() {
				t.Logf("stdout:\n%s", stdout)
			}

			// the member is now far past revision 1: a second run checks it all the same
			code, stdout, stderr = runListwatch(t, bin, "check", "--endpoints", ep, "--scenarios", "--prefix", "/again/")
			if code != 0 || !strings.Contains(stdout, "\nPASS") || !strings.Contains(stdout, "note: the store holds ") {
				t.Fatalf("against a used member: exit status %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
		})
	}
}

// TestCheckCommandAgainstEtcd34 runs `listwatch check --endpoints` against Debian's etcd 3.4.23 (a
// process, skipped without it): provoking everything, it fails, and every violation and finding is
// one of the known upstream bugs of 3.4.23, named, none unexplained.
func TestCheckCommandAgainstEtcd34(t *testing.T) {
	bin := buildListwatch(t)
	ep := etcdprocess.Start(t, "--experimental-watch-progress-notify-interval=100ms")
	code, stdout, stderr := runListwatch(t, bin, "check", "--endpoints", ep, "--seed", "7", "--ops", checkOps(), "--compact-every", "100")
	if code != 1 || !regexp.MustCompile(`\nFAIL: [1-9] known upstream bugs?, 0 unexplained\n`).MatchString(stdout) {
		t.Fatalf("exit status %d, want 1 and known bugs only\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"target: " + ep + " (etcd 3.4.23)", "known upstream bug: etcd-io/etcd#18089",
		"  FAIL  tombstone-at-compact-revision"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}
