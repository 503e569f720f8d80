package kube

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/chain"
	"github.com/listwatch/listwatch/internal/testutil"
)

// startChain starts listwatch's whole chain and returns a client configuration for its API.
func startChain(t *testing.T, cfg chain.Config) *rest.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := chain.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	testutil.CloseAtCleanup(t, "Close", c.Close)
	return &rest.Config{Host: c.URL()}
}

// runWorkload runs the workload against cfg and returns the history.
func runWorkload(t *testing.T, rc *rest.Config, res Resource, wcfg Config) *History {
	t.Helper()
	ctx := context.Background()
	rec, err := NewRecorder(rc, res, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	if _, err := Run(ctx, rec, wcfg); err != nil {
		t.Fatal(err)
	}
	return rec.History()
}

func TestRunAgainstChain(t *testing.T) {
	rc := startChain(t, chain.Config{})
	res, err := Discover(context.Background(), rc, configMaps)
	if err != nil {
		t.Fatal(err)
	}
	res.Namespace = "check"
	h := runWorkload(t, rc, res, Config{Seed: 1, Clients: 4, Watchers: 4, Duration: 5 * time.Second})
	r, err := Check(h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range r.Violations {
		t.Errorf("%v", v)
	}
	if path := os.Getenv("KUBECHECK_HISTORY"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := h.WriteJSON(f); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("verdict %s, %d writes, coverage %+v, notes %v", r.Verdict, len(r.Writes), r.Coverage, r.Notes)
}

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
