package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/chain"
	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/controllers"
	"github.com/listwatch/listwatch/internal/testutil"
)

// startAPI starts listwatch's whole chain (what `listwatch serve` serves) and returns its URL.
func startAPI(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := chain.New(ctx, chain.Config{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CloseAtCleanup(t, "Close", c.Close)
	return c.URL()
}

// startNamespaceController runs listwatch's namespace controller against the API at url, which
// empties a deleted namespace and removes it, as `listwatch serve` does.
func startNamespaceController(t *testing.T, url string) {
	t.Helper()
	c, err := controllers.Start(context.Background(), controllers.Config{REST: &rest.Config{Host: url}, Names: []string{controllers.Namespace}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
}

// TestCheckKubePasses: `check --kube` against listwatch's API passes with its summary, deletes its
// namespace and waits until it is gone, and the history it wrote checks again; the same history
// with a watch event dropped fails, naming the guarantee, with a report.
func TestCheckKubePasses(t *testing.T) {
	url := startAPI(t)
	startNamespaceController(t, url)
	dir := t.TempDir()
	hist, report := filepath.Join(dir, "kube.json"), filepath.Join(dir, "kube.html")
	code, out, errOut := runCheckCmd(t, "--kube", url, "--ops", "800", "--seed", "1", "--history", hist, "--report", report)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	mustContain(t, "stdout", out, "listwatch check: kube workload, seed 1", "v1/configmaps (kind ConfigMap) in namespace listwatch-check-1",
		"requests/s", "lists by resourceVersion:", "watches:", "resumed", "initial-events-end bookmarks", "410 Expired",
		"linearizable", "watch_replay", "bookmark", "checked in", "PASS", "and namespace listwatch-check-1\n")
	if code, body := httpGet(t, url+"/api/v1/namespaces/listwatch-check-1"); code != http.StatusNotFound {
		t.Errorf("the run's namespace is still there after it: %d %s", code, body)
	}
	if _, err := os.Stat(report); err != nil {
		t.Errorf("report: %v", err)
	}
	b, err := os.ReadFile(hist)
	if err != nil {
		t.Fatal(err)
	}
	var recorded struct{ Run *check.Run }
	if err := json.Unmarshal(b, &recorded); err != nil || recorded.Run == nil || recorded.Run.Schema != check.SchemaVersion ||
		recorded.Run.Target != url || recorded.Run.Store != "kube-apiserver" || recorded.Run.Version == "" || recorded.Run.Workload != "kube" || recorded.Run.Seed != 1 {
		t.Errorf("the history's run: %+v (%v)", recorded.Run, err)
	}
	code, out, errOut = runCheckCmd(t, "--check-history", hist)
	if code != 0 || !strings.Contains(out, "the Kubernetes API history in") || !strings.Contains(out, "PASS") {
		t.Fatalf("--check-history: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	// drop the second event of the first watch with two events or more
	var h map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&h); err != nil {
		t.Fatal(err)
	}
	dropped := false
	for _, w := range h["watches"].([]any) {
		frames, _ := w.(map[string]any)["frames"].([]any)
		var events []int
		for i, f := range frames {
			if ty := f.(map[string]any)["type"]; ty == "ADDED" || ty == "MODIFIED" || ty == "DELETED" {
				events = append(events, i)
			}
		}
		if len(events) >= 3 {
			w.(map[string]any)["frames"] = append(frames[:events[1]:events[1]], frames[events[1]+1:]...)
			dropped = true
			break
		}
	}
	if !dropped {
		t.Fatal("no watch with three events in the history")
	}
	bad := filepath.Join(dir, "bad.json")
	b, _ = json.Marshal(h)
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCheckCmd(t, "--check-history", bad, "--report", report)
	if code != 1 {
		t.Fatalf("exit %d for a history with a dropped event, want 1:\n%s\n%s", code, out, errOut)
	}
	mustContain(t, "stdout", out+errOut, "FAIL", "watch_replay", "report: "+report)
}

// TestCheckKubeKeep: --keep leaves the namespace and the run's objects; without it a namespace the
// run did not create (--namespace of an existing one) is kept, its objects deleted; a namespace
// that does not go (no namespace controller finalizes it) is waited for a bounded time, and the
// run says it is still there.
func TestCheckKubeKeep(t *testing.T) {
	url := startAPI(t)
	code, out, errOut := runCheckCmd(t, "--kube", url, "--ops", "100", "--seed", "2", "--keep")
	if code != 0 || !strings.Contains(out, "--keep: the namespace listwatch-check-2 and the run's objects are kept") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if code, body := httpGet(t, url+"/api/v1/namespaces/listwatch-check-2"); code != http.StatusOK {
		t.Errorf("--keep: namespace: %d %s", code, body)
	}
	code, body := httpGet(t, url+"/api/v1/namespaces/listwatch-check-2/configmaps")
	if code != http.StatusOK || !strings.Contains(body, `"name"`) {
		t.Errorf("--keep: objects: %d %s", code, body)
	}

	code, out, errOut = runCheckCmd(t, "--kube", url, "--ops", "100", "--seed", "3", "--namespace", "listwatch-check-2")
	if code != 0 || !strings.Contains(out, "cleanup: deleted the run's ") || !strings.Contains(out, "in namespace listwatch-check-2 (not created by the run, so kept)") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, body = httpGet(t, url+"/api/v1/namespaces/listwatch-check-2/configmaps")
	if code != http.StatusOK || strings.Contains(body, `"name"`) {
		t.Errorf("objects left after the run: %d %s", code, body)
	}

	env := defaultCheckEnv
	env.cleanupTimeout = time.Second
	var stdout, stderr bytes.Buffer
	if err := env.run(context.Background(), []string{"--kube", url, "--ops", "100", "--seed", "4"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	mustContain(t, "stdout", stdout.String(), "namespace listwatch-check-4 is still there (Terminating) after 1s")
}

// TestCheckKubeBadFlags: --kube's flags are checked before anything runs (exit 2), and a
// resource the server does not serve cannot be checked (exit 2) naming it.
func TestCheckKubeBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--kube", "http://127.0.0.1:1", "--endpoints", "127.0.0.1:2379"}, "--endpoints does not apply to --kube"},
		{[]string{"--kube", "http://127.0.0.1:1", "--compact-every", "5"}, "--compact-every does not apply to --kube"},
		{[]string{"--kube", "127.0.0.1:1"}, "want http://host:port"},
		{[]string{"--resource", "pods"}, "--resource applies to --kube only"},
		{[]string{"--kube", "http://127.0.0.1:1", "--resource", "a/b/c/d"}, "want resource"},
		{[]string{"--kube", "http://127.0.0.1:1", "--namespace", "Not_A_Label"}, "--namespace"},
		{[]string{"--kube", "http://127.0.0.1:1", "--check-history", "h.json"}, "--kube does not apply to --check-history"},
	} {
		code, _, errOut := runCheckCmd(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	url := startAPI(t)
	code, _, errOut := runCheckCmd(t, "--kube", url, "--resource", "example.com/v1/gadgets", "--ops", "10")
	if code != exitCouldNotRun || !strings.Contains(errOut, "could not run: ") || !strings.Contains(errOut, "does not serve example.com/v1, Resource=gadgets") {
		t.Errorf("unknown resource: exit %d, stderr %q", code, errOut)
	}
}
