// Package kubectltest runs the real kubectl in tests (interop/clientgo against listwatch's HTTP
// API, interop/goapi against the Go test API and a real cluster).
//
// # Invariants
//
//   - Path skips the test, saying what is not checked, when there is no kubectl on PATH; it never
//     fails it (TestKubectl skips alike).
//   - Every Kubectl has a home of its own (HOME, so no discovery cache is shared between runs), runs
//     in it, reads only the kubeconfig it is given, and puts its fixed arguments before every
//     command's own (TestKubectl).
//   - A command run by Run or Try ends within testutil.WaitTimeout; Run fails the test when kubectl
//     fails or prints nothing of what it wants, naming the command and its output; Try returns both
//     (TestKubectl).
package kubectltest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/listwatch/listwatch/internal/testutil"
)

// Path is the kubectl on PATH; without one it skips t, saying that what is not checked.
func Path(t testing.TB, what string) string {
	t.Helper()
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skipf("no kubectl on PATH (%v): %s is not checked", err, what)
	}
	return bin
}

// Kubectl runs bin with a home of its own and one kubeconfig.
type Kubectl struct {
	t    testing.TB
	bin  string
	env  []string
	home string
	args []string // before every command's own
}

// New is bin with a fresh home, reading the kubeconfig at kubeconfig, with args before every
// command's own.
func New(t testing.TB, bin, kubeconfig string, args ...string) *Kubectl {
	home := t.TempDir()
	return &Kubectl{t: t, bin: bin, home: home, args: args,
		env: append(os.Environ(), "HOME="+home, "KUBECONFIG="+kubeconfig)}
}

// ForServer is bin with a fresh home and a kubeconfig of its own naming server, in namespace
// default, with no credentials.
func ForServer(t testing.TB, bin, server string) *Kubectl {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: lw\n  cluster:\n    server: "+server+
		"\ncontexts:\n- name: lw\n  context:\n    cluster: lw\n    namespace: default\ncurrent-context: lw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return New(t, bin, kubeconfig)
}

// Command is kubectl with args, ended at the latest when ctx ends.
func (k *Kubectl) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.bin, append(append([]string(nil), k.args...), args...)...)
	cmd.Env, cmd.Dir = k.env, k.home
	return cmd
}

// Try runs kubectl with args and returns its combined output and error.
func (k *Kubectl) Try(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	out, err := k.Command(ctx, args...).CombinedOutput()
	return string(out), err
}

// Run runs kubectl with args and returns its output, failing the test if kubectl fails or prints
// nothing of want.
func (k *Kubectl) Run(want string, args ...string) string {
	k.t.Helper()
	out, err := k.Try(args...)
	if err != nil || !strings.Contains(out, want) {
		k.t.Fatalf("kubectl %s: %v\n%s\nwant output with %q", strings.Join(args, " "), err, out, want)
	}
	return out
}

// File writes a manifest to kubectl's home and returns its path.
func (k *Kubectl) File(name, content string) string {
	k.t.Helper()
	path := filepath.Join(k.home, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		k.t.Fatal(err)
	}
	return path
}
