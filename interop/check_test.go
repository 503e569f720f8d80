package interop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/listwatch/listwatch/interop/internal/etcdtest"
)

// checkCommandTimeout bounds one run of the command: a build, or a workload plus its check.
const checkCommandTimeout = 5 * time.Minute

// buildListwatch builds the listwatch command in the root module, as a user would (with the race
// detector, so a race in check against a real peer fails the run), into a temporary directory and
// returns its path.
func buildListwatch(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on PATH to build cmd/listwatch with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "listwatch")
	ctx, cancel := context.WithTimeout(context.Background(), checkCommandTimeout)
	defer cancel()
	build := exec.CommandContext(ctx, goTool, "build", "-race", "-o", bin, "./cmd/listwatch")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/listwatch: %v\n%s", err, out)
	}
	return bin
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

// TestCheckCommandAgainstEmbeddedEtcd runs `listwatch check --endpoints` with each workload against
// a fresh embedded etcd v3.7.3: the recorded history is linearizable and every watch keeps etcd's
// guarantees, so the command passes. A member that has been written to is refused, with exit status
// 1 and the revision named, before any workload runs.
func TestCheckCommandAgainstEmbeddedEtcd(t *testing.T) {
	bin := buildListwatch(t)
	for _, kind := range []string{"k8s", "etcd"} {
		t.Run(kind, func(t *testing.T) {
			cli, stop, err := etcdtest.Start(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := stop(); err != nil {
					t.Errorf("stop etcd: %v", err)
				}
			})
			ep := endpointOf(t, cli.Endpoints())
			code, stdout, stderr := runListwatch(t, bin, "check", "--endpoints", ep, "--workload", kind,
				"--seed", "7", "--ops", "1500", "--compact-every", "200")
			if code != 0 || !strings.Contains(stdout, ": PASS\n") {
				t.Fatalf("exit status %d, want 0 and PASS\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			for _, want := range []string{"target: " + ep + " (etcd 3.7.3)", "seed 7", "compaction every 200 revisions"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("the summary lacks %q:\n%s", want, stdout)
				}
			}

			// The member is now far past revision 1: a second run must refuse it.
			code, stdout, stderr = runListwatch(t, bin, "check", "--endpoints", ep, "--workload", kind, "--ops", "10")
			resp, err := cli.Get(context.Background(), "probe")
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("endpoint %s is at revision %d: check needs a fresh store", ep, resp.Header.Revision)
			if code != 1 || !strings.Contains(stderr, want) || strings.Contains(stdout, "recorded") {
				t.Fatalf("against a used member: exit status %d, want 1 with %q and no workload\nstdout:\n%s\nstderr:\n%s", code, want, stdout, stderr)
			}
		})
	}
}
