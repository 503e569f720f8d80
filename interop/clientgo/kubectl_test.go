package clientgo

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/httpwatch/watchclient"
	"github.com/listwatch/listwatch/internal/testutil"
)

// TestKubectlRawWatch: `kubectl get --raw` of a watch prints the server's frames unchanged: the
// current ConfigMaps as ADDED, then a change made while it watches, until timeoutSeconds ends the
// stream and kubectl exits 0. It needs a kubectl binary on PATH.
func TestKubectlRawWatch(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skipf("no kubectl on PATH (%v): the kubectl raw watch is not checked", err)
	}
	e := newEnv(t, envOptions{})
	a := e.create(configMapsGVR, "default", "a")
	e.create(configMapsGVR, "default", "b")
	e.create(configMapsGVR, "other", "c") // not in the watched namespace

	// No kubeconfig, no discovery cache: only --server speaks.
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, "--server", e.chain.URL(), "--cache-dir", filepath.Join(home, "cache"),
		"get", "--raw", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=2")
	cmd.Env = append(os.Environ(), "HOME="+home, "KUBECONFIG="+filepath.Join(home, "kubeconfig"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	isKubectlWatch := func(r *request) bool { return r.isWatch() && strings.HasPrefix(r.userAgent, "kubectl") }
	var w *request
	e.waitFor("kubectl's watch", func() bool {
		if ws := e.log.requests("", isKubectlWatch); len(ws) > 0 {
			w = ws[0]
		}
		return w != nil && w.status() != 0
	})
	// Sent once the initial events are out, so that it follows them.
	e.waitFor("the initial events", func() bool { f, _ := w.frames(); return len(f) == 2 })
	a = e.touch(configMapsGVR, "default", "a", "kubectl")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kubectl: %v\nstderr: %s", err, stderr.Bytes())
	}
	if !w.finished() || w.status() != 200 {
		t.Fatalf("kubectl's watch %s did not end with 200", w)
	}
	sent, err := w.plainBody()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stdout.Bytes(), sent) {
		t.Errorf("kubectl printed\n%s\nthe server sent\n%s", stdout.Bytes(), sent)
	}
	var got []string
	dec := watchclient.NewDecoder(bytes.NewReader(stdout.Bytes()))
	for {
		f, err := dec.Decode()
		if err != nil {
			break
		}
		_, m := frameMeta(t, f)
		got = append(got, string(f.Type)+" "+m.Name+" "+m.ResourceVersion)
	}
	want := []string{
		string(watch.Added) + " a", string(watch.Added) + " b",
		string(watch.Modified) + " a " + a.GetResourceVersion(),
	}
	if len(got) != len(want) {
		t.Fatalf("kubectl printed %v, want %v", got, want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("frame %d: %s, want %s", i, got[i], want[i])
		}
	}
}

// kubectlRunner runs the real kubectl against a server, with its own kubeconfig and caches.
type kubectlRunner struct {
	t       *testing.T
	bin     string
	env     []string
	workDir string
}

func newKubectl(t *testing.T, server string) *kubectlRunner {
	t.Helper()
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skipf("no kubectl on PATH (%v)", err)
	}
	home := t.TempDir()
	kubeconfig := filepath.Join(home, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: lw\n  cluster:\n    server: "+server+
		"\ncontexts:\n- name: lw\n  context:\n    cluster: lw\n    namespace: default\ncurrent-context: lw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &kubectlRunner{t: t, bin: bin, env: append(os.Environ(), "HOME="+home, "KUBECONFIG="+kubeconfig), workDir: home}
}

// run runs kubectl with args and returns its output; a failure fails the test.
func (k *kubectlRunner) run(args ...string) string {
	k.t.Helper()
	out, err := k.try(args...)
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// try runs kubectl with args and returns its combined output and error.
func (k *kubectlRunner) try(args ...string) (string, error) {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.bin, args...)
	cmd.Env, cmd.Dir = k.env, k.workDir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// file writes a manifest to the runner's directory and returns its path.
func (k *kubectlRunner) file(name, content string) string {
	k.t.Helper()
	path := filepath.Join(k.workDir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		k.t.Fatal(err)
	}
	return path
}

// TestKubectl drives the real kubectl through what a user does: create from literals (a protobuf
// body), apply twice (client-side: OpenAPI-validated, the second a three-way strategic merge
// patch), label, patch with each patch type, get -o yaml, get -w while objects change,
// server-side apply with a conflict, a custom resource, and delete. It needs kubectl on PATH.
func TestKubectl(t *testing.T) {
	e := newEnv(t, envOptions{})
	k := newKubectl(t, e.chain.URL())

	if out := k.run("create", "configmap", "lit", "--from-literal=a=b"); !strings.Contains(out, "configmap/lit created") {
		t.Errorf("create: %s", out)
	}
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  x: \"1\"\n"
	if out := k.run("apply", "-f", k.file("app.yaml", manifest)); !strings.Contains(out, "configmap/app created") {
		t.Errorf("first apply: %s", out)
	}
	if out := k.run("apply", "-f", k.file("app.yaml", strings.Replace(manifest, `x: "1"`, "x: \"2\"\n  z: \"3\"", 1))); !strings.Contains(out, "configmap/app configured") {
		t.Errorf("second apply: %s", out)
	}
	k.run("label", "configmap", "app", "tier=web")
	k.run("patch", "configmap", "app", "-p", `{"data":{"s":"strategic"}}`)
	k.run("patch", "configmap", "app", "--type=merge", "-p", `{"data":{"m":"merge"}}`)
	k.run("patch", "configmap", "app", "--type=json", "-p", `[{"op":"add","path":"/data/j","value":"json"}]`)
	yamlOut := k.run("get", "configmap", "app", "-o", "yaml")
	for _, want := range []string{"  x: \"2\"", "  z: \"3\"", "  s: strategic", "  m: merge", "  j: json", "    tier: web", "kubectl.kubernetes.io/last-applied-configuration"} {
		if !strings.Contains(yamlOut, want) {
			t.Errorf("get -o yaml lacks %q:\n%s", want, yamlOut)
		}
	}
	if out := k.run("get", "configmaps"); !strings.Contains(out, "NAME") || !strings.Contains(out, "DATA") || !strings.Contains(out, "app    5") {
		t.Errorf("get (a Table):\n%s", out)
	}

	// get -w prints the changes made while it watches.
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	watchCmd := exec.CommandContext(ctx, k.bin, "get", "configmaps", "-w", "--output-watch-events")
	watchCmd.Env = k.env
	var watched testutil.SyncBuffer
	watchCmd.Stdout, watchCmd.Stderr = &watched, &watched
	if err := watchCmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitFor("kubectl get -w to list", func() bool { return strings.Contains(watched.String(), "app") })
	k.run("create", "configmap", "watched", "--from-literal=w=1")
	k.run("delete", "configmap", "watched")
	e.waitFor("kubectl get -w to print the delete", func() bool { return strings.Contains(watched.String(), "DELETED") })
	cancel()
	_ = watchCmd.Wait()
	if out := watched.String(); !strings.Contains(out, "ADDED") || !strings.Contains(out, "watched") {
		t.Errorf("get -w printed:\n%s", out)
	}

	// Server-side apply: a second manager conflicts until it forces.
	k.run("apply", "--server-side", "--field-manager=one", "-f", k.file("ssa.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  k: one\n"))
	out, err := k.try("apply", "--server-side", "--field-manager=two", "-f", k.file("ssa2.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  k: two\n"))
	if err == nil || !strings.Contains(out, `conflict with "one": .data.k`) {
		t.Errorf("conflicting server-side apply: %v\n%s", err, out)
	}
	k.run("apply", "--server-side", "--field-manager=two", "--force-conflicts", "-f", k.file("ssa2.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  k: two\n"))

	// A custom resource: apply, merge patch; a strategic merge patch is refused as upstream.
	widget := "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  size: 1\n"
	k.run("apply", "-f", k.file("w.yaml", widget))
	k.run("apply", "-f", k.file("w.yaml", strings.Replace(widget, "size: 1", "size: 2", 1)))
	k.run("patch", "widget", "w", "--type=merge", "-p", `{"spec":{"color":"red"}}`)
	if out, err := k.try("patch", "widget", "w", "-p", `{"spec":{"size":3}}`); err == nil || !strings.Contains(out, "application/strategic-merge-patch+json is not supported") {
		t.Errorf("strategic merge patch of a widget: %v\n%s", err, out)
	}
	if out := k.run("get", "widget", "w", "-o", "jsonpath={.spec.size} {.spec.color}"); out != "2 red" {
		t.Errorf("widget spec %q", out)
	}

	// Failure modes: an unknown field is refused by the server's strict validation; a missing
	// object is NotFound.
	if out, err := k.try("apply", "-f", k.file("bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\nbogus: 1\n")); err == nil || !strings.Contains(out, `unknown field "bogus"`) {
		t.Errorf("apply with an unknown field: %v\n%s", err, out)
	}
	if out, err := k.try("delete", "configmap", "nothere"); err == nil || !strings.Contains(out, `configmaps "nothere" not found`) {
		t.Errorf("delete of a missing object: %v\n%s", err, out)
	}
	for _, name := range []string{"lit", "app", "ssa"} {
		if out := k.run("delete", "configmap", name); !strings.Contains(out, `configmap "`+name+`" deleted`) {
			t.Errorf("delete %s: %s", name, out)
		}
	}
	k.run("delete", "-f", k.file("w.yaml", widget))
	if out := k.run("get", "configmaps,widgets", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("left after deletes: %s", out)
	}
}
