package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"

	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
)

// benchStorage is a storage.Interface without etcd: the list is empty at revision 1 and the reflector's watch
// delivers what the benchmark feeds it.
type benchStorage struct {
	feed chan watch.Event
}

var errBenchUnsupported = errors.New("not supported by the benchmark storage")

func (s *benchStorage) Watch(context.Context, string, storage.ListOptions) (watch.Interface, error) {
	return &benchWatch{feed: s.feed}, nil
}

func (s *benchStorage) GetList(_ context.Context, _ string, _ storage.ListOptions, listObj k8sruntime.Object) error {
	return storage.APIObjectVersioner{}.UpdateList(listObj, 1, "", nil)
}

func (s *benchStorage) Get(context.Context, string, storage.GetOptions, k8sruntime.Object) error {
	return errBenchUnsupported
}
func (s *benchStorage) Versioner() storage.Versioner                              { return storage.APIObjectVersioner{} }
func (s *benchStorage) GetCurrentResourceVersion(context.Context) (uint64, error) { return 1, nil }
func (s *benchStorage) RequestWatchProgress(context.Context) error                { return nil }
func (s *benchStorage) Stats(context.Context) (storage.Stats, error)              { return storage.Stats{}, nil }
func (s *benchStorage) Create(context.Context, string, k8sruntime.Object, k8sruntime.Object, uint64) error {
	return errBenchUnsupported
}
func (s *benchStorage) GuaranteedUpdate(context.Context, string, k8sruntime.Object, bool, *storage.Preconditions, storage.UpdateFunc, k8sruntime.Object) error {
	return errBenchUnsupported
}
func (s *benchStorage) Delete(context.Context, string, k8sruntime.Object, *storage.Preconditions, storage.ValidateObjectFunc, k8sruntime.Object, storage.DeleteOptions) error {
	return errBenchUnsupported
}

// benchWatch hands the feed to the reflector; the feed is never closed, the reflector's context ends
// the watch.
type benchWatch struct {
	feed chan watch.Event
}

func (w *benchWatch) ResultChan() <-chan watch.Event { return w.feed }
func (w *benchWatch) Stop()                          {}

// benchObject is a pod of about size bytes of JSON.
func benchObject(size int) *unstructured.Unstructured {
	u := storagetest.Pod("ns", "p", storagetest.Labels("app=bench", "tier=web"))
	pad := size - 200
	if pad < 0 {
		pad = 0
	}
	u.SetAnnotations(map[string]string{"pad": strings.Repeat("x", pad)})
	return u
}

// BenchmarkDispatch measures event deliveries per second from the reflector's watch through the watch
// cache and the dispatcher to N watchers whose clients encode every event (as an HTTP layer would,
// through CacheEncode) and read on. The producer keeps fewer events in flight than a watcher's input
// holds, so no watcher is ever closed for slowness; a run that closes one fails.
func BenchmarkDispatch(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		for _, sel := range []bool{false, true} {
			b.Run(fmt.Sprintf("watchers=%d/selector=%t/size=1KiB", n, sel), func(b *testing.B) { benchDispatch(b, n, sel, 1024) })
		}
	}
	// The cost of one more watcher must not depend on the object size: objects are encoded once.
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("watchers=%d/selector=false/size=16KiB", n), func(b *testing.B) { benchDispatch(b, n, false, 16*1024) })
	}
}

func benchDispatch(b *testing.B, n int, selector bool, size int) {
	feed := make(chan watch.Event, 100)
	c, err := New(Config{Storage: &benchStorage{feed: feed}, ResourcePrefix: "/pods/", Logger: testutil.DiscardLogger(), Clock: clock.RealClock{}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	if err := c.Wait(context.Background()); err != nil {
		b.Fatal(err)
	}
	template := benchObject(size)
	// Warm the cache up as a busy resource is: 8192 events within the history window grow the history
	// to 8192 events, which sizes new watchers' channels to 100 (capacity / 75 s, capped at 100).
	const warmup = 8192
	for i := range warmup {
		obj := template.DeepCopy()
		obj.SetName("p" + strconv.Itoa(i%1000))
		obj.SetResourceVersion(strconv.Itoa(i + 2))
		feed <- watch.Event{Type: watch.Modified, Object: obj}
	}
	startRV := uint64(warmup + 1)
	deadline := time.Now().Add(time.Minute)
	for c.watchCache.suggestedWatchChannelSize(false, false) < 100 || c.lastProcessedRV.Load() < startRV {
		if time.Now().After(deadline) {
			b.Fatalf("after the warm-up: watch channel size %d (want 100), last processed RV %d (want %d)",
				c.watchCache.suggestedWatchChannelSize(false, false), c.lastProcessedRV.Load(), startRV)
		}
		time.Sleep(time.Millisecond)
	}
	p := storage.Everything
	if selector {
		p = storagetest.PodPredicate("app=bench,tier!=db", "status.phase!=Failed")
	}
	// Fewer events in flight than a watcher's input holds: no watcher is ever full.
	const window = 64
	acks := make([]atomic.Int32, b.N)
	var completed atomic.Int64
	completed.Store(-1)
	notify := make(chan struct{}, 1)
	var delivered atomic.Int64
	var closedEarly atomic.Int64
	encoder := json.NewSerializerWithOptions(json.DefaultMetaFactory, nil, nil, json.SerializerOptions{})
	var wg sync.WaitGroup
	var watchers []watch.Interface
	for range n {
		w, err := c.Watch(context.Background(), "/pods/", storage.ListOptions{ResourceVersion: strconv.FormatUint(startRV, 10), Predicate: p, Recursive: true})
		if err != nil {
			b.Fatal(err)
		}
		watchers = append(watchers, w)
		wg.Go(func() {
			got := 0
			for ev := range w.ResultChan() {
				co, ok := ev.Object.(*CachingObject)
				if !ok {
					b.Errorf("event object %T", ev.Object)
					continue
				}
				if err := co.CacheEncode(encoder.Identifier(), encoder.Encode, io.Discard); err != nil {
					b.Error(err)
				}
				// Every watcher gets every event, in order: the k-th one received is event k.
				idx := got
				if acks[idx].Add(1) == int32(n) {
					completed.Store(int64(idx))
					select {
					case notify <- struct{}{}:
					default:
					}
				}
				got++
			}
			delivered.Add(int64(got))
			if got < b.N {
				closedEarly.Add(1)
			}
		})
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		for completed.Load() < int64(i-window) {
			<-notify
		}
		obj := template.DeepCopy()
		obj.SetName("p" + strconv.Itoa(i%1000))
		obj.SetResourceVersion(strconv.FormatUint(startRV+1+uint64(i), 10))
		feed <- watch.Event{Type: watch.Modified, Object: obj}
	}
	for completed.Load() < int64(b.N-1) {
		<-notify
	}
	elapsed := time.Since(start)
	b.StopTimer()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	for _, w := range watchers {
		w.Stop()
	}
	wg.Wait()
	if closedEarly.Load() > 0 {
		b.Fatalf("%d watchers were closed before receiving every event", closedEarly.Load())
	}
	allocs := float64(after.Mallocs-before.Mallocs) / float64(b.N)
	b.ReportMetric(float64(delivered.Load())/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(delivered.Load()), "ns/delivery")
	b.ReportMetric(allocs, "allocs/event")
	b.ReportMetric(allocs/float64(n), "allocs/delivery")
}

// BenchmarkCachedEventMemory measures the heap a cached event holds beyond its object: the history
// entry, the store element and the attribute sets, for 1 KiB objects with distinct keys.
func BenchmarkCachedEventMemory(b *testing.B) {
	const events = 10000
	template := benchObject(1024)
	objects := func() []*unstructured.Unstructured {
		objs := make([]*unstructured.Unstructured, events)
		for i := range objs {
			o := template.DeepCopy()
			o.SetName("p" + strconv.Itoa(i))
			o.SetResourceVersion(strconv.Itoa(i + 2))
			objs[i] = o
		}
		return objs
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var perEvent, perObject float64
	for range b.N {
		base := heap()
		objs := objects()
		withObjects := heap()
		wc := newWatchCache(func(o k8sruntime.Object) (string, error) { return storage.NamespaceKeyFunc("/pods/", o) }, storagetest.PodAttrs,
			storage.APIObjectVersioner{}, clock.RealClock{}, DefaultEventFreshDuration, nil, nil, nil, nil, true)
		if err := wc.Replace(nil, "1"); err != nil {
			b.Fatal(err)
		}
		for _, o := range objs {
			if err := wc.Add(o); err != nil {
				b.Fatal(err)
			}
		}
		objs = nil
		cached := heap()
		if wc.history.len() != events || wc.store.len() != events {
			b.Fatalf("history %d, store %d", wc.history.len(), wc.store.len())
		}
		perObject = float64(withObjects-base) / events
		perEvent = (float64(cached) - float64(withObjects)) / events
		runtime.KeepAlive(wc)
	}
	b.ReportMetric(perEvent, "B/cached-event")
	b.ReportMetric(perObject, "B/object")
}
