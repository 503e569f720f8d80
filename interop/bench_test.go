package interop

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/listwatch/listwatch/store"
)

const (
	fanoutWatchers = 100
	fanoutPrefix   = "/fanout/"
	fanoutKeys     = 1000
	fanoutValue    = 100 // bytes per value
)

// fanoutRun is one measured run of the write + watch fan-out workload.
type fanoutRun struct {
	puts    int
	elapsed time.Duration // from the first put until every watcher has every event
}

func (r fanoutRun) putsPerSec() float64 { return float64(r.puts) / r.elapsed.Seconds() }
func (r fanoutRun) eventsPerSec() float64 {
	return float64(r.puts*fanoutWatchers) / r.elapsed.Seconds()
}

// fanout runs n puts from one writer while fanoutWatchers clientv3 watches on one prefix (sharing
// the client, so multiplexed on one gRPC watch stream as clientv3 does) each receive all n events.
// The watches are set up before the clock starts.
func fanout(b *testing.B, cli *clientv3.Client, n int) fanoutRun {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var all, drained sync.WaitGroup
	var short atomic.Bool
	all.Add(fanoutWatchers)
	for i := 0; i < fanoutWatchers; i++ {
		ch := cli.Watch(ctx, fanoutPrefix, clientv3.WithPrefix())
		drained.Add(1)
		go func() {
			defer drained.Done()
			got, counted := 0, false
			for wr := range ch {
				got += len(wr.Events)
				if !counted && got >= n {
					counted = true
					all.Done()
				}
			}
			if !counted {
				short.Store(true)
				all.Done()
			}
		}()
	}
	value := strings.Repeat("v", fanoutValue)
	keys := make([]string, fanoutKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%04d", fanoutPrefix, i)
	}

	b.StartTimer()
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := cli.Put(ctx, keys[i%fanoutKeys], value); err != nil {
			b.Fatal(err)
		}
	}
	all.Wait()
	elapsed := time.Since(start)
	b.StopTimer()

	cancel()
	drained.Wait()
	if short.Load() {
		b.Fatalf("a watch closed before it got all %d events", n)
	}
	return fanoutRun{puts: n, elapsed: elapsed}
}

// fanoutStore runs the same workload on a listwatch store directly, without gRPC or clientv3: one
// store watch stream holding the watchers, as etcdgrpc keeps one per gRPC watch stream, and one
// reader counting each watcher's events. It shows how much of the clientv3 figure the store itself
// costs.
func fanoutStore(b *testing.B, n int) fanoutRun {
	st := store.New(store.Options{})
	defer st.Close()
	ws, err := st.NewWatchStream()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < fanoutWatchers; i++ {
		if _, err := ws.Watch(ctx, &store.WatchRequest{Key: []byte(fanoutPrefix), RangeEnd: []byte(clientv3.GetPrefixRangeEnd(fanoutPrefix))}); err != nil {
			b.Fatal(err)
		}
	}
	read := make(chan error, 1)
	go func() {
		got := map[int64]int{}
		complete := 0
		for wr := range ws.Chan() {
			if len(wr.Events) == 0 {
				continue
			}
			got[wr.WatchID] += len(wr.Events)
			if got[wr.WatchID] == n {
				if complete++; complete == fanoutWatchers {
					read <- nil
					for range ws.Chan() {
					}
					return
				}
			}
		}
		read <- fmt.Errorf("store watch stream closed with %d of %d watchers complete", complete, fanoutWatchers)
	}()
	value := []byte(strings.Repeat("v", fanoutValue))
	keys := make([][]byte, fanoutKeys)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("%s%04d", fanoutPrefix, i))
	}

	b.StartTimer()
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := st.Put(&store.PutRequest{Key: keys[i%fanoutKeys], Value: value}); err != nil {
			b.Fatal(err)
		}
	}
	err = <-read
	elapsed := time.Since(start)
	b.StopTimer()
	ws.Close()
	if err != nil {
		b.Fatal(err)
	}
	return fanoutRun{puts: n, elapsed: elapsed}
}

// BenchmarkPutWatchFanout measures put + watch fan-out throughput of an embedded etcd and of
// listwatch (its store served by etcdgrpc over an in-process connection) with the same workload in
// the same run: b.N puts by one writer, each delivered to 100 watchers. It reports puts/s and
// events delivered/s for both and the listwatch/etcd ratio; ns/op covers all runs together. For
// scale it also runs the workload on the store alone (store-*), without gRPC and clientv3.
func BenchmarkPutWatchFanout(b *testing.B) {
	b.StopTimer()
	etcd := startEtcd(b, "etcd")
	lw := startListwatch(b, "listwatch")
	// Each invocation starts both servers fresh, untimed, so every b.N round writes to an empty
	// store; b.Cleanup stops them when it returns.
	e := fanout(b, etcd.cli, b.N)
	l := fanout(b, lw.cli, b.N)
	st := fanoutStore(b, b.N)
	b.ReportMetric(e.putsPerSec(), "etcd-puts/s")
	b.ReportMetric(e.eventsPerSec(), "etcd-events/s")
	b.ReportMetric(l.putsPerSec(), "listwatch-puts/s")
	b.ReportMetric(l.eventsPerSec(), "listwatch-events/s")
	b.ReportMetric(l.eventsPerSec()/e.eventsPerSec(), "listwatch/etcd")
	b.ReportMetric(st.eventsPerSec(), "store-events/s")
	b.ReportMetric(st.eventsPerSec()/e.eventsPerSec(), "store/etcd")
}
