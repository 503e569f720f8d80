package kubectltest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/listwatch/listwatch/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestKubectl: a Kubectl for a server that is not there runs in its own home with the kubeconfig
// written for it (kubectl config view shows the server and the namespace), puts its fixed arguments
// first, writes manifests into its home, and reports a command that fails: Try with the error and
// the output, Run by failing the test with both.
func TestKubectl(t *testing.T) {
	bin := Path(t, "kubectltest")
	k := ForServer(t, bin, "http://127.0.0.1:1")
	view := k.Run("server: http://127.0.0.1:1", "config", "view")
	if !strings.Contains(view, "namespace: default") {
		t.Errorf("config view: %s", view)
	}
	path := k.File("m.yaml", "kind: ConfigMap\n")
	if got, err := os.ReadFile(path); err != nil || string(got) != "kind: ConfigMap\n" || filepath.Dir(path) != k.home {
		t.Errorf("File wrote %q (%v) at %s, want it in %s", got, err, path, k.home)
	}
	if cmd := New(t, bin, "/nowhere", "--namespace", "n").Command(t.Context(), "get", "pods"); strings.Join(cmd.Args[1:], " ") != "--namespace n get pods" {
		t.Errorf("command args %q, want the fixed ones first", cmd.Args)
	}
	out, err := k.Try("get", "pods", "--request-timeout=5s")
	if err == nil || !strings.Contains(out, "127.0.0.1:1") {
		t.Errorf("get pods from nowhere: %v, %s; want an error naming the server", err, out)
	}

	rec := testutil.Record(t, func(tb testing.TB) {
		ForServer(tb, bin, "http://127.0.0.1:1").Run("", "get", "pods", "--request-timeout=5s")
	})
	if msg := rec.FatalMessage(); !strings.Contains(msg, "kubectl get pods --request-timeout=5s") || !strings.Contains(msg, "127.0.0.1:1") {
		t.Errorf("Run of a failing command reported %q, want the command and its output", msg)
	}
}
