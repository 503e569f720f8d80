package store_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/etcdrules"
	"github.com/listwatch/listwatch/store"
)

func benchKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("/registry/pods/ns-%02d/pod-%06d", i%50, i))
	}
	return keys
}

// BenchmarkPut: puts with no watchers, 1000 keys, 128-byte values.
func BenchmarkPut(b *testing.B) {
	s := store.New(store.Options{ManualTick: true})
	defer s.Close()
	keys := benchKeys(1000)
	val := make([]byte, 128)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := s.Put(&store.PutRequest{Key: keys[i%len(keys)], Value: val}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "puts/s")
}

// BenchmarkTxn: the apiserver's update shape, a compare on mod revision guarding a put.
func BenchmarkTxn(b *testing.B) {
	s := store.New(store.Options{ManualTick: true})
	defer s.Close()
	keys := benchKeys(1000)
	val := make([]byte, 128)
	mods := make([]int64, len(keys))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		k := i % len(keys)
		r, err := s.Txn(&store.TxnRequest{
			Compare: []store.Compare{{Key: keys[k], Target: etcdrules.CompareMod, Result: etcdrules.CompareEqual, ModRevision: mods[k]}},
			Success: []store.RequestOp{{Put: &store.PutRequest{Key: keys[k], Value: val}}},
			Failure: []store.RequestOp{{Range: &store.RangeRequest{Key: keys[k]}}},
		})
		if err != nil || !r.Succeeded {
			b.Fatalf("txn: %v %v", r, err)
		}
		mods[k] = r.Header.Revision
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "txns/s")
}

// BenchmarkRangeOldRevision: 100k revisions of history over 1000 keys; point reads and a 20-key
// prefix range at a revision in the middle of it.
func BenchmarkRangeOldRevision(b *testing.B) {
	s := store.New(store.Options{ManualTick: true})
	defer s.Close()
	keys := benchKeys(1000)
	val := make([]byte, 128)
	for i := range 100_000 {
		if _, err := s.Put(&store.PutRequest{Key: keys[i%len(keys)], Value: val}); err != nil {
			b.Fatal(err)
		}
	}
	old := s.Rev() / 2
	b.Run("key", func(b *testing.B) {
		b.ReportAllocs()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			r, err := s.Range(&store.RangeRequest{Key: keys[i%len(keys)], Revision: old})
			if err != nil || len(r.Kvs) != 1 {
				b.Fatal(r, err)
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ranges/s")
	})
	b.Run("prefix", func(b *testing.B) {
		b.ReportAllocs()
		start := time.Now()
		prefix := []byte("/registry/pods/ns-07/")
		for i := 0; i < b.N; i++ {
			r, err := s.Range(&store.RangeRequest{Key: prefix, RangeEnd: []byte("/registry/pods/ns-070"), Revision: old})
			if err != nil || len(r.Kvs) != 20 {
				b.Fatal(len(r.Kvs), err)
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ranges/s")
	})
}

// BenchmarkFanout: one writer, N synced watchers on one prefix, each on its own stream with its own
// reader, on the store's own goroutine and the real clock. The writer runs at most one window of
// revisions ahead of the slowest reader, less than a stream channel holds, so every watcher stays
// synced: this measures live fan-out, not catch-up (catch-up responses would be counted in
// batched-responses, which must stay 0).
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{1, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { benchFanout(b, n) })
	}
	// the floor the Go runtime sets: the same pattern with bare channels and no store
	b.Run("baseline-channels=1000", func(b *testing.B) { benchChannels(b, 1000) })
}

func benchChannels(b *testing.B, n int) {
	const window = 60
	chs := make([]chan store.WatchResponse, n)
	for i := range chs {
		chs[i] = make(chan store.WatchResponse, 128)
	}
	total := b.N
	barrier := make([]sync.WaitGroup, (total+window-1)/window)
	for i := range barrier {
		barrier[i].Add(n)
	}
	var readers sync.WaitGroup
	ev := []*store.Event{{}}
	b.ResetTimer()
	start := time.Now()
	for _, ch := range chs {
		readers.Add(1)
		go func(ch chan store.WatchResponse) {
			defer readers.Done()
			for got := 1; got <= total; got++ {
				<-ch
				if got%window == 0 || got == total {
					barrier[(got-1)/window].Done()
				}
			}
		}(ch)
	}
	for i := 0; i < total; i++ {
		if i >= 2*window && i%window == 0 {
			barrier[i/window-2].Wait()
		}
		for _, ch := range chs {
			select {
			case ch <- store.WatchResponse{WatchID: 1, Events: ev, Revision: int64(i)}:
			default:
				b.Fatal("channel full")
			}
		}
	}
	readers.Wait()
	b.ReportMetric(float64(total*n)/time.Since(start).Seconds(), "events/s")
}

func benchFanout(b *testing.B, watchers int) {
	// two windows may be in flight: a reader lags at most 2*window-1 < 128 revisions
	const window = 60
	s := store.New(store.Options{})
	defer s.Close()
	prefix := []byte("/registry/pods/")
	end := []byte("/registry/pods0")
	streams := make([]*store.WatchStream, watchers)
	for i := range streams {
		ws, err := s.NewWatchStream()
		if err != nil {
			b.Fatal(err)
		}
		streams[i] = ws
		if _, err := ws.Watch(context.Background(), &store.WatchRequest{Key: prefix, RangeEnd: end}); err != nil {
			b.Fatal(err)
		}
		<-ws.Chan() // created
	}
	total := b.N
	var batched atomic.Int64
	var readers sync.WaitGroup
	barrier := make([]sync.WaitGroup, (total+window-1)/window)
	for i := range barrier {
		barrier[i].Add(watchers)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for _, ws := range streams {
		readers.Add(1)
		go func(ws *store.WatchStream) {
			defer readers.Done()
			got := 0
			for r := range ws.Chan() {
				if len(r.Events) != 1 {
					batched.Add(1)
				}
				for range r.Events {
					got++
					if got%window == 0 || got == total {
						barrier[(got-1)/window].Done()
					}
				}
				if got >= total {
					return
				}
			}
		}(ws)
	}
	keys := benchKeys(1000)
	val := make([]byte, 128)
	for i := 0; i < total; i++ {
		if i >= 2*window && i%window == 0 {
			barrier[i/window-2].Wait()
		}
		if _, err := s.Put(&store.PutRequest{Key: keys[i%len(keys)], Value: val}); err != nil {
			b.Fatal(err)
		}
	}
	readers.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	for _, ws := range streams {
		ws.Close()
	}
	b.ReportMetric(float64(total*watchers)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(total)/elapsed.Seconds(), "puts/s")
	b.ReportMetric(float64(batched.Load()), "batched-responses")
}

// BenchmarkCatchUp: one watcher starting at revision 1 over 1M revisions. The store is driven by
// Tick on a fake clock, so back-to-back sync passes measure the catch-up machinery itself;
// paced-events/s is what etcd's 100 ms sync cadence allows for the same number of passes.
func BenchmarkCatchUp(b *testing.B) {
	const revs = 1_000_000
	fc := clocktesting.NewFakeClock(time.Unix(0, 0))
	s := store.New(store.Options{ManualTick: true, Clock: fc})
	defer s.Close()
	keys := benchKeys(1000)
	val := make([]byte, 64)
	for i := range revs {
		if _, err := s.Put(&store.PutRequest{Key: keys[i%len(keys)], Value: val}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var engine time.Duration
	passes := 0
	for i := 0; i < b.N; i++ {
		ws, err := s.NewWatchStream()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ws.Watch(context.Background(), &store.WatchRequest{Key: []byte("/registry/"), RangeEnd: []byte("/registry0"), StartRevision: 1}); err != nil {
			b.Fatal(err)
		}
		<-ws.Chan()
		got := 0
		start := time.Now()
		for got < revs {
			fc.Step(store.DefaultSyncInterval)
			s.Tick()
			passes++
			for drained := false; !drained; {
				select {
				case r := <-ws.Chan():
					got += len(r.Events)
				default:
					drained = true
				}
			}
		}
		engine += time.Since(start)
		ws.Close()
	}
	events := float64(revs) * float64(b.N)
	b.ReportMetric(events/engine.Seconds(), "events/s")
	paced := engine + time.Duration(passes)*store.DefaultSyncInterval
	b.ReportMetric(events/paced.Seconds(), "paced-events/s")
}

// BenchmarkRetainedBytes measures heap retained per revision beyond the key and value bytes: 1000
// keys written 200 times each, nothing compacted.
func BenchmarkRetainedBytes(b *testing.B) {
	const revs = 200_000
	keys := benchKeys(1000)
	val := make([]byte, 32)
	var perRev, perRevStrict float64
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		s := store.New(store.Options{ManualTick: true})
		payload, values, distinctKeys := 0, 0, 0
		for j := range revs {
			k := keys[j%len(keys)]
			if _, err := s.Put(&store.PutRequest{Key: k, Value: val}); err != nil {
				b.Fatal(err)
			}
			payload += len(k) + len(val)
			values += len(val)
			if j < len(keys) {
				distinctKeys += len(k)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		perRev = float64(heap-int64(payload)) / revs
		// the store keeps one copy of each key, so the figure above is flattered by the key bytes it
		// does not store again; this one charges every byte except values and one copy of each key
		perRevStrict = float64(heap-int64(values)-int64(distinctKeys)) / revs
		runtime.KeepAlive(s)
		s.Close()
	}
	b.ReportMetric(perRev, "overhead-bytes/rev")
	b.ReportMetric(perRevStrict, "strict-overhead-bytes/rev")
}

// BenchmarkLatencyDuringCatchUp: the latency of a Put and of a Range while unsynced watchers catch
// up, next to the same on the idle store just before, as the 99th and 99.9th percentiles and the
// maximum. "1000x100k" is 1000 watchers catching up over 100k revisions (100 batches each);
// "5000x500" is 5000 watchers 500 revisions behind (one batch each), where a catch-up pass ends
// watchers' catch-up and so the passes follow each other at once. The store runs its own goroutine
// on the real clock, as `listwatch serve` does; each of the 100 streams is drained by a goroutine of
// its own; a probe — a Put outside the watched range or a Range inside it, in turn — starts every
// 200 µs, so the samples spread over the catch-up as requests would. etcd's loops hold the store's
// lock for one pass at a time (watchable_store.go syncWatchersLoop, syncVictimsLoop), so a request
// should wait for at most one pass, not for a run of them.
func BenchmarkLatencyDuringCatchUp(b *testing.B) {
	for _, c := range []struct {
		name      string
		perStream int
		behind    int
	}{{"1000x100k", 10, 100_000}, {"5000x500", 50, 500}} {
		b.Run(c.name, func(b *testing.B) { benchLatencyDuringCatchUp(b, 100, c.perStream, c.behind) })
	}
}

func benchLatencyDuringCatchUp(b *testing.B, streams, perStream, behind int) {
	const revs = 100_000
	const probeEvery = 200 * time.Microsecond
	keys := benchKeys(1000)
	val := make([]byte, 64)
	var idlePut, idleRange, busyPut, busyRange []time.Duration
	var catchUp time.Duration
	for range b.N {
		s := store.New(store.Options{})
		for i := range revs {
			if _, err := s.Put(&store.PutRequest{Key: keys[i%len(keys)], Value: val}); err != nil {
				b.Fatal(err)
			}
		}
		// probe writes one key outside the watched range or reads one inside it, and times it.
		probe := func(i int, puts, ranges *[]time.Duration) {
			t0 := time.Now()
			if i%2 == 0 {
				if _, err := s.Put(&store.PutRequest{Key: []byte("/probe"), Value: val}); err != nil {
					b.Error(err)
				}
				*puts = append(*puts, time.Since(t0))
			} else {
				if _, err := s.Range(&store.RangeRequest{Key: keys[i%len(keys)]}); err != nil {
					b.Error(err)
				}
				*ranges = append(*ranges, time.Since(t0))
			}
			time.Sleep(probeEvery)
		}
		for i := range 4000 {
			probe(i, &idlePut, &idleRange)
		}

		// the watched keys changed at revisions 2..revs+1; the probes' puts came after, outside
		from := int64(revs + 2 - behind)
		owed := int64(streams * perStream * behind)
		var received atomic.Int64
		done := make(chan struct{})
		var drains sync.WaitGroup
		var wss []*store.WatchStream
		start := time.Now()
		for range streams {
			ws, err := s.NewWatchStream()
			if err != nil {
				b.Fatal(err)
			}
			wss = append(wss, ws)
			for range perStream {
				if _, err := ws.Watch(context.Background(), &store.WatchRequest{Key: []byte("/registry/"), RangeEnd: []byte("/registry0"), StartRevision: from}); err != nil {
					b.Fatal(err)
				}
			}
			drains.Add(1)
			go func() {
				defer drains.Done()
				for r := range ws.Chan() {
					if received.Add(int64(len(r.Events))) == owed {
						close(done)
					}
				}
			}()
		}
		for i := 0; ; i++ {
			select {
			case <-done:
			default:
				probe(i, &busyPut, &busyRange)
				continue
			}
			break
		}
		catchUp += time.Since(start)
		for _, ws := range wss {
			ws.Close()
		}
		drains.Wait()
		s.Close()
	}
	report := func(ds []time.Duration, name string) {
		slices.Sort(ds)
		for _, q := range []struct {
			unit string
			at   int // per mille
		}{{"p99", 990}, {"p99.9", 999}, {"max", 1000}} {
			b.ReportMetric(float64(ds[min(len(ds)-1, len(ds)*q.at/1000)])/1e3, name+"-"+q.unit+"-µs")
		}
	}
	report(idlePut, "idle-put")
	report(idleRange, "idle-range")
	report(busyPut, "catchup-put")
	report(busyRange, "catchup-range")
	b.ReportMetric(float64(len(busyPut)+len(busyRange))/float64(b.N), "catchup-probes/op")
	b.ReportMetric(catchUp.Seconds()/float64(b.N), "catchup-s/op")
}
