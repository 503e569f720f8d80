package workload

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/store"
)

// BenchmarkWorkload runs each workload (4 clients, 4 watchers, 5000 requests, compaction every
// 500 revisions, under a prefix) against a fresh in-memory store and a fresh etcd process, and reports the
// requests/s of the run and the time etcd.Check takes over what was recorded. Against etcd,
// run it with -benchtime 1x: every iteration starts its own etcd, which lives until the end.
func BenchmarkWorkload(b *testing.B) {
	const ops = 5000
	targets := []struct {
		name string
		open func(b *testing.B) *clientv3.Client
	}{
		{"in-memory", func(b *testing.B) *clientv3.Client {
			return inMemory(b, store.Options{ProgressNotifyInterval: 500 * time.Millisecond})
		}},
		{"etcd", func(b *testing.B) *clientv3.Client { return startEtcd(b) }},
	}
	for _, kind := range Kinds {
		for _, target := range targets {
			b.Run(string(kind)+"/"+target.name, func(b *testing.B) {
				var requests int64
				var runTime, checkTime time.Duration
				iterations := 0
				for b.Loop() {
					cli := target.open(b)
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					eps, err := Status(ctx, cli)
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					rec := etcd.NewRecorder(cli, nil)
					start := time.Now()
					snap, err := Run(context.Background(), rec, Config{Kind: kind, Seed: uint64(iterations + 1), Clients: 4,
						Watchers: 4, Ops: ops, CompactEvery: 500, Prefix: "/bench/"})
					if err != nil {
						b.Fatal(err)
					}
					runTime += time.Since(start)
					requests += snap.Operations
					start = time.Now()
					h := rec.History()
					res, err := etcd.Check(h, etcd.Options{Timeout: time.Minute})
					checkTime += time.Since(start)
					if err != nil {
						b.Fatal(err)
					}
					if tally := etcd.TallyLabels(etcd.Classify(h, res, etcd.Target{Product: "etcd", Version: eps[0].Version})); tally.Unexplained > 0 {
						b.Fatalf("%d unexplained violations: %v", tally.Unexplained, res.Err())
					}
					iterations++
				}
				b.ReportMetric(float64(requests)/runTime.Seconds(), "requests/s")
				b.ReportMetric(checkTime.Seconds()*1000/float64(iterations), "check-ms/op")
				b.ReportMetric(float64(requests)/checkTime.Seconds(), "checked-requests/s")
			})
		}
	}
}
