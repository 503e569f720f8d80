package interop

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/check/etcd/workload"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/etcdtest"
)

var flagUpdateRecorded = flag.Bool("update-recorded", false, "rewrite ../check/etcd/testdata/recorded/embedded-etcd-*.json")

// embeddedRecorded are the scenarios whose histories against embedded etcd are kept, as workload's
// TestRecordedHistories keeps them against listwatch's store.
var embeddedRecorded = []string{"lease-expiry", "watch-from-compact-revision", "tombstone-at-compact-revision",
	"txn-in-one-response", "compacted-watch-canceled-first", "recreate-is-create", "prev-kv-only-when-asked"}

// TestRecordEmbeddedEtcdHistories records both workloads (a few hundred operations each, with
// etcd-io/etcd#15220's trigger) and some scenarios against embedded etcd v3.7.3, which must pass;
// with -update-recorded they are written to check/etcd/testdata/recorded, where check/etcd's
// TestMutationsAtEveryPosition applies every mutation to them.
func TestRecordEmbeddedEtcdHistories(t *testing.T) {
	start := func() *etcd.Recorder {
		cli, stop, err := etcdtest.Start(t.TempDir(), func(cfg *embed.Config) { cfg.WatchProgressNotifyInterval = 100 * time.Millisecond })
		if err != nil {
			t.Fatal(err)
		}
		testutil.CloseAtCleanup(t, "stop etcd", stop)
		return etcd.NewRecorder(cli, nil)
	}
	kept := map[string]*etcd.History{}
	for _, kind := range workload.Kinds {
		rec := start()
		if _, err := workload.Run(context.Background(), rec, workload.Config{Kind: kind, Seed: 1, Clients: 3, Watchers: 3, Ops: 200, CompactEvery: 40}); err != nil {
			t.Fatal(err)
		}
		kept[fmt.Sprintf("%s-workload-seed1", kind)] = rec.History()
	}
	cli, stop, err := etcdtest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	testutil.CloseAtCleanup(t, "stop etcd", stop)
	results := workload.RunScenarios(context.Background(), cli, workload.ScenarioConfig{Prefix: "/sc/", Compaction: true,
		Target: etcd.Target{Product: "etcd", Version: "3.7.3"}, Timeout: testutil.WaitTimeout})
	for _, r := range results {
		for _, name := range embeddedRecorded {
			if r.Scenario.Name == name {
				kept["scenario-"+name] = r.History
			}
		}
	}
	for name, h := range kept {
		res, err := etcd.Check(h, etcd.Options{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if !res.OK() {
			t.Errorf("%s: %v", name, res.Err())
			continue
		}
		if !*flagUpdateRecorded {
			continue
		}
		var buf bytes.Buffer
		err = h.WriteJSON(&buf)
		if err == nil {
			err = os.WriteFile(filepath.Join("..", "check", "etcd", "testdata", "recorded", "embedded-etcd-3.7.3-"+name+".json"), buf.Bytes(), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
