package watch

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/internal/storagebackend"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/store"
)

// kibPod returns a pod whose JSON encoding is about 1 KiB.
func kibPod(tb testing.TB, i int, app string) *unstructured.Unstructured {
	u := pod("ns", fmt.Sprintf("pod-%06d", i), map[string]string{"app": app, "tier": "backend"})
	u.SetAnnotations(map[string]string{"padding": ""})
	n := len(encoded(tb, u))
	u.SetAnnotations(map[string]string{"padding": strings.Repeat("x", 1024-n)})
	return u
}

// benchWatchChan runs a watchChan's processing goroutines without etcd: raw events go straight into
// incomingEventChan.
func benchWatchChan(pred storage.Predicate, serial bool) (*watchChan, func()) {
	w := &watcher{codec: storage.UnstructuredJSON, versioner: storage.APIObjectVersioner{}, transformer: storage.IdentityTransformer{},
		logger: testutil.DiscardLogger(), clock: clock.RealClock{}, features: Features{DisableConcurrentWatchObjectDecode: serial}}
	wc := w.createWatchChan(context.Background(), "/registry/pods/", 1, true, false, pred)
	var wg sync.WaitGroup
	wc.processEvents(&wg)
	return wc, func() {
		wc.cancel()
		wg.Wait()
	}
}

// BenchmarkWatchChanDecode measures the events per second a watch decodes, filters and delivers for
// 1 KiB objects (updates with their previous value), and the allocations per event.
func BenchmarkWatchChanDecode(b *testing.B) {
	web := storage.Predicate{Label: labels.SelectorFromSet(labels.Set{"app": "web"})}
	for _, bc := range []struct {
		name   string
		pred   storage.Predicate
		serial bool
	}{
		{"everything/concurrent", storage.Everything, false},
		{"everything/serial", storage.Everything, true},
		{"label/concurrent", web, false},
		{"label/serial", web, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			// Updates alternate between matching and not matching: a filtering watch decodes both
			// values of each and delivers it as DELETED or ADDED, Everything as MODIFIED.
			values := [2][]byte{encoded(b, kibPod(b, 0, "web")), encoded(b, kibPod(b, 0, "db"))}
			wc, stop := benchWatchChan(bc.pred, bc.serial)
			defer stop()
			b.SetBytes(int64(len(values[0])))
			b.ReportAllocs()
			var ms0, ms1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms0)
			b.ResetTimer()
			done := make(chan int)
			go func() {
				n := 0
				for range wc.resultChan {
					if n++; n == b.N {
						break
					}
				}
				done <- n
			}()
			for i := range b.N {
				wc.incomingEventChan <- &event{key: "/registry/pods/ns/pod", value: values[(i+1)%2], prevValue: values[i%2], rev: int64(i + 2)}
			}
			<-done
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N), "allocs/event")
		})
	}
}

// BenchmarkWatchEndToEnd measures events per second from the in-process store through gRPC, clientv3
// and the watch to the reader, for 1 KiB objects created before the watch and replayed from history.
func BenchmarkWatchEndToEnd(b *testing.B) {
	bk := storagebackend.StartInProcess(b, store.Options{})
	s := newStorageOn(b, bk, Config{})
	const objects = 2000
	for i := range objects {
		mustCreate(b, s, kibPod(b, i, "web"))
	}
	b.ReportAllocs()
	total := 0
	start := time.Now()
	for b.Loop() {
		w, err := s.Watch(context.Background(), "/pods/ns", storage.ListOptions{ResourceVersion: "1", Recursive: true, Predicate: storage.Everything})
		if err != nil {
			b.Fatal(err)
		}
		for range objects {
			if ev := <-w.ResultChan(); ev.Type != apiwatch.Added {
				b.Fatalf("got %s", ev.Type)
			}
		}
		total += objects
		stopAndDrain(w)
	}
	b.ReportMetric(float64(total)/time.Since(start).Seconds(), "events/s")
}
