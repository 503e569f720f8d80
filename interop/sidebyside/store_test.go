package sidebyside

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"

	"github.com/listwatch/listwatch/store"
)

// kv is one side of the store benchmarks: listwatch's store, or etcd v3.7's own mvcc watchable store
// over a bbolt backend in a temporary directory, as etcd's kvstore_bench_test.go and
// watchable_store_bench_test.go build it (mvcc.New, backend.DefaultBackendConfig, lease.FakeLessor).
type kv struct {
	name      string
	put       func(key, value []byte)
	newStream func() kvStream
}

// kvStream is one watch stream of a side: a store.WatchStream or an mvcc.WatchStream.
type kvStream interface {
	// watch adds a watcher of [key, end) from startRev (0: from now).
	watch(key, end []byte, startRev int64)
	// recv returns the next response with events: how many, and the mod revisions of the first and
	// the last; ok is false once the stream is closed.
	recv() (n int, first, last int64, ok bool)
	// discard reads and drops every response until the stream is closed, so that watches can be
	// added without a reader (listwatch's stream queues a created answer for each, as etcd's gRPC
	// server does; etcd's mvcc stream has none).
	discard()
	close()
}

func newListwatchKV(b *testing.B) kv {
	s := store.New(store.Options{})
	b.Cleanup(func() { s.Close() })
	return kv{
		name: "listwatch",
		put: func(key, value []byte) {
			if _, err := s.Put(&store.PutRequest{Key: key, Value: value}); err != nil {
				b.Fatal(err)
			}
		},
		newStream: func() kvStream {
			ws, err := s.NewWatchStream()
			if err != nil {
				b.Fatal(err)
			}
			return &listwatchStream{b: b, ws: ws}
		},
	}
}

type listwatchStream struct {
	b         *testing.B
	ws        *store.WatchStream
	discarded chan struct{} // closed when discard's goroutine ends; nil without one
}

func (s *listwatchStream) discard() {
	s.discarded = make(chan struct{})
	go func() {
		defer close(s.discarded)
		for range s.ws.Chan() {
		}
	}()
}

func (s *listwatchStream) watch(key, end []byte, startRev int64) {
	if _, err := s.ws.Watch(context.Background(), &store.WatchRequest{Key: key, RangeEnd: end, StartRevision: startRev}); err != nil {
		s.b.Fatal(err)
	}
}

func (s *listwatchStream) recv() (int, int64, int64, bool) {
	for r := range s.ws.Chan() {
		// created answers and progress notifications carry no events
		if len(r.Events) > 0 {
			return len(r.Events), r.Events[0].Kv.ModRevision, r.Events[len(r.Events)-1].Kv.ModRevision, true
		}
	}
	return 0, 0, 0, false
}

func (s *listwatchStream) close() {
	s.ws.Close()
	if s.discarded != nil {
		<-s.discarded
	}
}

func newEtcdKV(b *testing.B) kv {
	cfg := backend.DefaultBackendConfig(zap.NewNop())
	cfg.Path = filepath.Join(b.TempDir(), "db")
	be := backend.New(cfg)
	s := mvcc.New(zap.NewNop(), be, &lease.FakeLessor{}, mvcc.StoreConfig{})
	b.Cleanup(func() {
		s.Close()
		be.Close()
	})
	return kv{
		name: "etcd",
		put:  func(key, value []byte) { s.Put(key, value, lease.NoLease) },
		newStream: func() kvStream {
			return &etcdStream{b: b, ws: s.NewWatchStream()}
		},
	}
}

type etcdStream struct {
	b  *testing.B
	ws mvcc.WatchStream
}

func (s *etcdStream) watch(key, end []byte, startRev int64) {
	if _, err := s.ws.Watch(context.Background(), mvcc.WatchID(clientv3.AutoWatchID), key, end, startRev); err != nil {
		s.b.Fatal(err)
	}
}

func (s *etcdStream) recv() (int, int64, int64, bool) {
	for r := range s.ws.Chan() {
		if len(r.Events) > 0 {
			return len(r.Events), r.Events[0].Kv.ModRevision, r.Events[len(r.Events)-1].Kv.ModRevision, true
		}
	}
	return 0, 0, 0, false
}

func (s *etcdStream) discard() {}

func (s *etcdStream) close() { s.ws.Close() }

// kvSides builds each side of a store benchmark, fresh, by name.
var kvSides = map[string]func(*testing.B) kv{"listwatch": newListwatchKV, "etcd": newEtcdKV}

var kvNames = []string{"listwatch", "etcd"}

const (
	podPrefix = "/registry/pods/"
	podEnd    = "/registry/pods0"
)

func podKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "%sns-%02d/pod-%06d", podPrefix, i%50, i)
	}
	return keys
}

// BenchmarkStorePut: b.N puts over 1000 keys of 128-byte values with no watchers, on each side in
// turn. Reports puts/s of each and the ratio.
//
//	go test -run '^$' -bench StorePut -benchtime 200000x ./sidebyside/
func BenchmarkStorePut(b *testing.B) {
	keys := podKeys(1000)
	val := make([]byte, 128)
	figures := best(kvNames, true, func(name string) float64 {
		s := kvSides[name](b)
		start := time.Now()
		for i := range b.N {
			s.put(keys[i%len(keys)], val)
		}
		return float64(b.N) / time.Since(start).Seconds()
	})
	report(b, figures, "puts/s")
}

// BenchmarkStoreFanout: one writer putting b.N revisions under /registry/pods/, each delivered to N
// synced watchers of the prefix, each watcher on its own stream with its own reader goroutine, as
// listwatch's store BenchmarkFanout. The writer runs at most two windows of 60 revisions ahead of the
// slowest reader, fewer than a stream holds (128), so no watcher falls behind on either side: this is
// live fan-out. Every reader checks that it gets every revision exactly once, in order, and the
// benchmark fails otherwise. Reports deliveries/s of each side and the ratio, and each side's
// process CPU time per delivery.
//
//	go test -run '^$' -bench StoreFanout/watchers=1000 -benchtime 2000x ./sidebyside/
func BenchmarkStoreFanout(b *testing.B) {
	for _, n := range []int{1, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) {
			cpu := lowest{}
			figures := best(kvNames, true, func(name string) float64 {
				perSec, cpuPerDelivery := fanout(b, kvSides[name](b), n)
				cpu.add(name, cpuPerDelivery)
				return perSec
			})
			for _, name := range kvNames {
				b.ReportMetric(cpu[name], name+"-cpu-ns/delivery")
			}
			report(b, figures, "deliveries/s")
		})
	}
}

// fanout runs the fan-out workload on one side and returns deliveries per second and the process's
// CPU time per delivery, in ns.
func fanout(b *testing.B, s kv, watchers int) (float64, float64) {
	const window = 60
	total := b.N
	streams := make([]kvStream, watchers)
	for i := range streams {
		streams[i] = s.newStream()
		streams[i].watch([]byte(podPrefix), []byte(podEnd), 0)
	}
	p := newPacer(watchers, (total+window-1)/window)
	var readers sync.WaitGroup
	// The first put is revision 2 on both sides: both stores start at revision 1.
	const firstRev = 2
	start, cpu0 := time.Now(), processCPU()
	for _, st := range streams {
		readers.Go(func() {
			got := 0
			for got < total {
				n, first, last, ok := st.recv()
				if !ok {
					p.fail(fmt.Sprintf("%s: a stream closed after %d of %d events", s.name, got, total))
					return
				}
				if first != int64(firstRev+got) || last != first+int64(n)-1 {
					p.fail(fmt.Sprintf("%s: after %d events got revisions %d..%d in %d events, want %d onwards, one per event",
						s.name, got, first, last, n, firstRev+got))
					return
				}
				for range n {
					got++
					if got%window == 0 || got == total {
						p.ack((got - 1) / window)
					}
				}
			}
		})
	}
	keys := podKeys(1000)
	val := make([]byte, 128)
	for i := range total {
		if i >= 2*window && i%window == 0 && !p.wait(i/window-2) {
			break
		}
		s.put(keys[i%len(keys)], val)
	}
	if !p.waitTimeout(len(p.acks)-1, 5*time.Minute) {
		p.fail(fmt.Sprintf("%s: the readers did not get every event within 5m", s.name))
	}
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	for _, st := range streams {
		st.close()
	}
	readers.Wait()
	if msg := p.failure(); msg != "" {
		b.Fatal(msg)
	}
	deliveries := float64(total) * float64(watchers)
	return deliveries / elapsed.Seconds(), float64(cpu.Nanoseconds()) / deliveries
}

// BenchmarkStoreCatchUp: a watcher that starts at the first of 20000 revisions already written (over
// 1000 keys) catches up on each side; the time is from the watch to its last event. Both stores
// catch an unsynced watcher up in passes of at most 1000 revisions every 100 ms (etcd's
// syncWatchersLoop, mirrored by listwatch), so both are paced to about 10k events/s: the ratio shows
// the pacing is etcd's, not that either is faster. The watcher must get every revision once, in
// order. Reports events/s of each and the ratio; run it with -benchtime 1x.
func BenchmarkStoreCatchUp(b *testing.B) {
	const revs = 20000
	keys := podKeys(1000)
	val := make([]byte, 128)
	figures := map[string]float64{}
	for _, name := range kvNames {
		settle()
		s := kvSides[name](b)
		for i := range revs {
			s.put(keys[i%len(keys)], val)
		}
		var elapsed time.Duration
		for range b.N {
			st := s.newStream()
			start := time.Now()
			st.watch([]byte(podPrefix), []byte(podEnd), 2)
			for got := 0; got < revs; {
				n, first, last, ok := st.recv()
				if !ok || first != int64(2+got) || last != first+int64(n)-1 {
					b.Fatalf("%s: after %d of %d events: %d events, revisions %d..%d (stream open: %t)", s.name, got, revs, n, first, last, ok)
				}
				got += n
			}
			elapsed += time.Since(start)
			st.close()
		}
		figures[s.name] = float64(revs) * float64(b.N) / elapsed.Seconds()
	}
	report(b, figures, "events/s")
}

// BenchmarkStoreWatcherMemory: the heap an idle watcher holds, 10000 watchers of distinct keys on one
// stream, measured after GC on each side. The keys are allocated before the first measurement, so a
// side that keeps its own copy of the key pays for it. etcd publishes under 1 KB a watcher and
// measured about 350 B (etcd.io/docs benchmarks/etcd-3-watch-memory-benchmark). Reports B/watcher of
// each side and the ratio.
func BenchmarkStoreWatcherMemory(b *testing.B) {
	const watchers = 10000
	keys := podKeys(watchers)
	figures := map[string]float64{}
	for _, name := range kvNames {
		s := kvSides[name](b)
		var total float64
		for range b.N {
			before := heapInUse()
			st := s.newStream()
			st.discard()
			for _, k := range keys {
				st.watch(k, nil, 0)
			}
			after := heapInUse()
			total += float64(after-before) / watchers
			runtime.KeepAlive(st)
			st.close()
		}
		figures[s.name] = total / float64(b.N)
	}
	runtime.KeepAlive(keys)
	report(b, figures, "B/watcher")
}
