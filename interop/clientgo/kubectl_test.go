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
