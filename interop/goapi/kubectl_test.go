package goapi

import (
	"context"
	"strings"
	"testing"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/kubectltest"
)

// TestKubectl drives the real kubectl with the kubeconfig of the target (Env.Kubeconfig for the Go
// API): create, apply twice (the second a change), label, patch with each patch type, get -o
// yaml, get -w while objects come and go, and delete. It skips, saying so, without kubectl on
// PATH.
func TestKubectl(t *testing.T) {
	bin := kubectltest.Path(t, "kubectl against the Go API")
	forEachTarget(t, func(t *testing.T, tg *target) {
		k := kubectltest.New(t, bin, tg.kubeconfig, "--namespace", tg.namespace)
		k.Run("configmap/lit created", "create", "configmap", "lit", "--from-literal=a=b")
		manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  x: \"1\"\n  y: \"1\"\n"
		k.Run("configmap/app created", "apply", "-f", k.File("app.yaml", manifest))
		changed := strings.Replace(manifest, "  y: \"1\"\n", "  z: \"2\"\n", 1)
		k.Run("configmap/app configured", "apply", "-f", k.File("app.yaml", changed))
		k.Run("configmap/app labeled", "label", "configmap", "app", "tier=web")
		k.Run("configmap/app patched", "patch", "configmap", "app", "-p", `{"data":{"s":"strategic"}}`)
		k.Run("configmap/app patched", "patch", "configmap", "app", "--type=merge", "-p", `{"data":{"m":"merge"}}`)
		k.Run("configmap/app patched", "patch", "configmap", "app", "--type=json", "-p", `[{"op":"add","path":"/data/j","value":"json"}]`)
		out := k.Run("name: app", "get", "configmap", "app", "-o", "yaml")
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
		watch := k.Command(ctx, "get", "configmaps", "-w", "--output-watch-events")
		var watched testutil.SyncBuffer
		watch.Stdout, watch.Stderr = &watched, &watched
		if err := watch.Start(); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, "kubectl get -w to list", func() bool { return strings.Contains(watched.String(), "app") })
		k.Run("configmap/watched created", "create", "configmap", "watched", "--from-literal=w=1")
		k.Run(`configmap "watched" deleted`, "delete", "configmap", "watched")
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

		k.Run(`configmap "lit" deleted`, "delete", "configmap", "lit")
		k.Run(`configmap "app" deleted`, "delete", "configmap", "app")
		if out := k.Run("", "get", "configmaps", "-o", "name"); strings.Contains(out, "configmap/lit") || strings.Contains(out, "configmap/app") {
			t.Errorf("left after the deletes: %s", out)
		}
	})
}
