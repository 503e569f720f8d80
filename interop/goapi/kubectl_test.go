package goapi

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/listwatch/listwatch/internal/testutil"
)

// kubectl runs the real kubectl against a target, in the test's namespace, with a home of its own
// (no discovery cache shared between runs).
type kubectl struct {
	t    *testing.T
	bin  string
	env  []string
	dir  string
	args []string // before every command's own
}

func newKubectl(t *testing.T, bin string, tg *target) *kubectl {
	home := t.TempDir()
	return &kubectl{t: t, bin: bin, dir: home,
		env:  append(os.Environ(), "HOME="+home, "KUBECONFIG="+tg.kubeconfig),
		args: []string{"--namespace", tg.namespace}}
}

// command is kubectl with args, ended at the latest when ctx ends.
func (k *kubectl) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.bin, append(append([]string(nil), k.args...), args...)...)
	cmd.Env, cmd.Dir = k.env, k.dir
	return cmd
}

// run runs kubectl and returns its output, failing the test if it fails or prints nothing of want.
func (k *kubectl) run(want string, args ...string) string {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	out, err := k.command(ctx, args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), want) {
		k.t.Fatalf("kubectl %s: %v\n%s\nwant output with %q", strings.Join(args, " "), err, out, want)
	}
	return string(out)
}

// file writes a manifest to kubectl's directory and returns its path.
func (k *kubectl) file(name, content string) string {
	k.t.Helper()
	path := filepath.Join(k.dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		k.t.Fatal(err)
	}
	return path
}

// TestKubectl drives the real kubectl with the kubeconfig of the target (Env.Kubeconfig for the Go
// API): create, apply twice (the second a change), label, patch with each patch type, get -o
// yaml, get -w while objects come and go, and delete. It skips, saying so, without kubectl on
// PATH.
func TestKubectl(t *testing.T) {
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skipf("no kubectl on PATH (%v): kubectl against the Go API is not checked", err)
	}
	forEachTarget(t, func(t *testing.T, tg *target) {
		k := newKubectl(t, bin, tg)
		k.run("configmap/lit created", "create", "configmap", "lit", "--from-literal=a=b")
		manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  x: \"1\"\n  y: \"1\"\n"
		k.run("configmap/app created", "apply", "-f", k.file("app.yaml", manifest))
		changed := strings.Replace(manifest, "  y: \"1\"\n", "  z: \"2\"\n", 1)
		k.run("configmap/app configured", "apply", "-f", k.file("app.yaml", changed))
		k.run("configmap/app labeled", "label", "configmap", "app", "tier=web")
		k.run("configmap/app patched", "patch", "configmap", "app", "-p", `{"data":{"s":"strategic"}}`)
		k.run("configmap/app patched", "patch", "configmap", "app", "--type=merge", "-p", `{"data":{"m":"merge"}}`)
		k.run("configmap/app patched", "patch", "configmap", "app", "--type=json", "-p", `[{"op":"add","path":"/data/j","value":"json"}]`)
		out := k.run("name: app", "get", "configmap", "app", "-o", "yaml")
		for _, want := range []string{`  x: "1"`, `  z: "2"`, "  s: strategic", "  m: merge", "  j: json", "    tier: web", "namespace: " + tg.namespace} {
			if !strings.Contains(out, want) {
				t.Errorf("get -o yaml lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, `  y: "1"`) {
			t.Errorf("the second apply left the key it removed:\n%s", out)
		}

		// get -w prints what changes while it watches.
		ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
		defer cancel()
		watch := k.command(ctx, "get", "configmaps", "-w", "--output-watch-events")
		var watched testutil.SyncBuffer
		watch.Stdout, watch.Stderr = &watched, &watched
		if err := watch.Start(); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, "kubectl get -w to list", func() bool { return strings.Contains(watched.String(), "app") })
		k.run("configmap/watched created", "create", "configmap", "watched", "--from-literal=w=1")
		k.run(`configmap "watched" deleted`, "delete", "configmap", "watched")
		testutil.WaitFor(t, "kubectl get -w to print the deletion", func() bool {
			return strings.Contains(watched.String(), "DELETED") && strings.Contains(watched.String(), "watched")
		})
		cancel()
		_ = watch.Wait() // killed by the cancel
		lines := strings.Split(watched.String(), "\n")
		added, deleted := -1, -1
		for i, l := range lines {
			if f := strings.Fields(l); len(f) >= 2 && f[1] == "watched" {
				switch f[0] {
				case "ADDED":
					added = i
				case "DELETED":
					deleted = i
				}
			}
		}
		if added < 0 || deleted < added {
			t.Errorf("get -w printed, out of order or incomplete:\n%s", watched.String())
		}

		k.run(`configmap "lit" deleted`, "delete", "configmap", "lit")
		k.run(`configmap "app" deleted`, "delete", "configmap", "app")
		if out := k.run("", "get", "configmaps", "-o", "name"); strings.Contains(out, "configmap/lit") || strings.Contains(out, "configmap/app") {
			t.Errorf("left after the deletes: %s", out)
		}
	})
}
