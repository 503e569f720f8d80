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
	"github.com/listwatch/listwatch/interop/internal/kubectltest"
)

// TestKubectlRawWatch: `kubectl get --raw` of a watch prints the server's frames unchanged: the
// current ConfigMaps as ADDED, then a change made while it watches, until timeoutSeconds ends the
// stream and kubectl exits 0. It needs a kubectl binary on PATH.
func TestKubectlRawWatch(t *testing.T) {
	kubectl := kubectltest.Path(t, "the kubectl raw watch")
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

// TestKubectl drives the real kubectl through what a user does: create from literals (a protobuf
// body), apply twice (client-side: OpenAPI-validated, the second a three-way strategic merge
// patch), label, patch with each patch type, get -o yaml, get -w while objects change,
// server-side apply with a conflict, a custom resource, and delete. It needs kubectl on PATH.
func TestKubectl(t *testing.T) {
	e := newEnv(t, envOptions{})
	k := kubectltest.ForServer(t, kubectltest.Path(t, "kubectl against listwatch's HTTP API"), e.chain.URL())

	if out := k.Run("", "create", "configmap", "lit", "--from-literal=a=b"); !strings.Contains(out, "configmap/lit created") {
		t.Errorf("create: %s", out)
	}
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  x: \"1\"\n"
	if out := k.Run("", "apply", "-f", k.File("app.yaml", manifest)); !strings.Contains(out, "configmap/app created") {
		t.Errorf("first apply: %s", out)
	}
	if out := k.Run("", "apply", "-f", k.File("app.yaml", strings.Replace(manifest, `x: "1"`, "x: \"2\"\n  z: \"3\"", 1))); !strings.Contains(out, "configmap/app configured") {
		t.Errorf("second apply: %s", out)
	}
	k.Run("", "label", "configmap", "app", "tier=web")
	k.Run("", "patch", "configmap", "app", "-p", `{"data":{"s":"strategic"}}`)
	k.Run("", "patch", "configmap", "app", "--type=merge", "-p", `{"data":{"m":"merge"}}`)
	k.Run("", "patch", "configmap", "app", "--type=json", "-p", `[{"op":"add","path":"/data/j","value":"json"}]`)
	yamlOut := k.Run("", "get", "configmap", "app", "-o", "yaml")
	for _, want := range []string{"  x: \"2\"", "  z: \"3\"", "  s: strategic", "  m: merge", "  j: json", "    tier: web", "kubectl.kubernetes.io/last-applied-configuration"} {
		if !strings.Contains(yamlOut, want) {
			t.Errorf("get -o yaml lacks %q:\n%s", want, yamlOut)
		}
	}
	if out := k.Run("", "get", "configmaps"); !strings.Contains(out, "NAME") || !strings.Contains(out, "DATA") || !strings.Contains(out, "app    5") {
		t.Errorf("get (a Table):\n%s", out)
	}

	// get -w prints the changes made while it watches.
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	watchCmd := k.Command(ctx, "get", "configmaps", "-w", "--output-watch-events")
	var watched testutil.SyncBuffer
	watchCmd.Stdout, watchCmd.Stderr = &watched, &watched
	if err := watchCmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitFor("kubectl get -w to list", func() bool { return strings.Contains(watched.String(), "app") })
	k.Run("", "create", "configmap", "watched", "--from-literal=w=1")
	k.Run("", "delete", "configmap", "watched")
	e.waitFor("kubectl get -w to print the delete", func() bool { return strings.Contains(watched.String(), "DELETED") })
	cancel()
	_ = watchCmd.Wait()
	if out := watched.String(); !strings.Contains(out, "ADDED") || !strings.Contains(out, "watched") {
		t.Errorf("get -w printed:\n%s", out)
	}

	// Server-side apply: a second manager conflicts until it forces.
	k.Run("", "apply", "--server-side", "--field-manager=one", "-f", k.File("ssa.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  k: one\n"))
	out, err := k.Try("apply", "--server-side", "--field-manager=two", "-f", k.File("ssa2.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  k: two\n"))
	if err == nil || !strings.Contains(out, `conflict with "one": .data.k`) {
		t.Errorf("conflicting server-side apply: %v\n%s", err, out)
	}
	k.Run("", "apply", "--server-side", "--field-manager=two", "--force-conflicts", "-f", k.File("ssa2.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  k: two\n"))

	// A custom resource: apply, merge patch; a strategic merge patch is refused as upstream.
	widget := "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  size: 1\n"
	k.Run("", "apply", "-f", k.File("w.yaml", widget))
	k.Run("", "apply", "-f", k.File("w.yaml", strings.Replace(widget, "size: 1", "size: 2", 1)))
	k.Run("", "patch", "widget", "w", "--type=merge", "-p", `{"spec":{"color":"red"}}`)
	if out, err := k.Try("patch", "widget", "w", "-p", `{"spec":{"size":3}}`); err == nil || !strings.Contains(out, "application/strategic-merge-patch+json is not supported") {
		t.Errorf("strategic merge patch of a widget: %v\n%s", err, out)
	}
	if out := k.Run("", "get", "widget", "w", "-o", "jsonpath={.spec.size} {.spec.color}"); out != "2 red" {
		t.Errorf("widget spec %q", out)
	}

	// Failure modes: an unknown field is refused by the server's strict validation; a missing
	// object is NotFound.
	if out, err := k.Try("apply", "-f", k.File("bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\nbogus: 1\n")); err == nil || !strings.Contains(out, `unknown field "bogus"`) {
		t.Errorf("apply with an unknown field: %v\n%s", err, out)
	}
	if out, err := k.Try("delete", "configmap", "nothere"); err == nil || !strings.Contains(out, `configmaps "nothere" not found`) {
		t.Errorf("delete of a missing object: %v\n%s", err, out)
	}
	for _, name := range []string{"lit", "app", "ssa"} {
		if out := k.Run("", "delete", "configmap", name); !strings.Contains(out, `configmap "`+name+`" deleted`) {
			t.Errorf("delete %s: %s", name, out)
		}
	}
	k.Run("", "delete", "-f", k.File("w.yaml", widget))
	if out := k.Run("", "get", "configmaps,widgets", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("left after deletes: %s", out)
	}
}
