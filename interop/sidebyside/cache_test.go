package sidebyside

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/kubernetes"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/watch"
	apistorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/cacher"
	upstreametcd3 "k8s.io/apiserver/pkg/storage/etcd3"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/chain"
	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/internal/testutil"
	lwstorage "github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/store"
)

// The cache workload: 1000 pods in one namespace, spread over cacheNodes nodes, each about 1 KiB of
// JSON, stored at kube-apiserver's keys.
const (
	cachePods   = 1000
	cacheNodes  = 10
	cacheWarmUp = 8192
	// cacheWindow is how many events may be on their way to the watchers at once: fewer than a
	// watcher's input holds on either side (100, or 10 for a watcher indexed by node, which gets one
	// event in cacheNodes), so that no watcher is ever full and neither side closes one.
	cacheWindow = 64
)

// cacheFilter is what a benchmark's watchers select: every pod, every pod through label and field
// selectors that match them all, or the pods of one node through the spec.nodeName trigger index.
type cacheFilter string

const (
	filterNone     cacheFilter = "none"
	filterSelector cacheFilter = "selector"
	filterIndexed  cacheFilter = "indexed"
)

// wants reports whether a watcher of node (for filterIndexed) gets event i.
func (f cacheFilter) wants(i, node int) bool {
	return f != filterIndexed || i%cacheNodes == node
}

// cacheSide is a watch cache over the etcd3 storage over etcdgrpc over its own listwatch store:
// listwatch's cache.Cacher (as chain.New assembles it) or upstream's cacher.Cacher over upstream's
// etcd3 storage. Both are configured alike: the pods' GetAttrs (httpwatch.Pods().GetAttrs, which
// both call on every event), a spec.nodeName trigger index, the default history window.
type cacheSide struct {
	name  string
	store *store.Store
	// watch opens a watch of the pods from rv; node is the node of an indexed watcher.
	watch func(ctx context.Context, rv uint64, f cacheFilter, node int) (watch.Interface, error)
	// fresh waits until the cache has applied rv.
	fresh func(ctx context.Context, rv uint64) error
	stop  func()
	// goroutinesBefore is how many goroutines the process had before the side started.
	goroutinesBefore int
}

// stopAndQuiesce stops the side and waits until the goroutines it leaves behind have ended: upstream's
// watch cache starts one per read that waits for freshness, which holds the cache for up to 3 s
// (kubeapiserver.GoleakOptions); a memory figure taken meanwhile would count the other side's cache.
func (s *cacheSide) stopAndQuiesce(b *testing.B) {
	s.stop()
	deadline := time.Now().Add(testutil.WaitTimeout)
	for runtime.NumGoroutine() > s.goroutinesBefore {
		if time.Now().After(deadline) {
			b.Fatalf("%s: %d goroutines %v after stopping, %d before starting", s.name, runtime.NumGoroutine(), testutil.WaitTimeout, s.goroutinesBefore)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var podsResource = func() httpwatch.Resource {
	r := httpwatch.Pods()
	r.TriggerField = "spec.nodeName"
	return r
}()

func nodeNameOf(obj k8sruntime.Object) string {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return ""
	}
	n, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName")
	return n
}

func selectors(f cacheFilter, node int) (labels.Selector, fields.Selector) {
	switch f {
	case filterSelector:
		return labels.SelectorFromSet(labels.Set{"app": "bench"}).Add(mustRequirement("tier", "!=", "db")),
			fields.OneTermNotEqualSelector("status.phase", "Failed")
	case filterIndexed:
		return labels.Everything(), fields.OneTermEqualSelector("spec.nodeName", nodeName(node))
	}
	return labels.Everything(), fields.Everything()
}

func mustRequirement(key, op, value string) labels.Requirement {
	sel, err := labels.Parse(key + op + value)
	if err != nil {
		panic(err)
	}
	reqs, _ := sel.Requirements()
	return reqs[0]
}

func nodeName(i int) string { return "node-" + strconv.Itoa(i) }

func newListwatchCache(b *testing.B) *cacheSide {
	before := runtime.NumGoroutine()
	st := store.New(store.Options{})
	c, err := chain.New(context.Background(), chain.Config{Store: st, Resources: []httpwatch.Resource{podsResource}, Logger: testutil.DiscardLogger()})
	if err != nil {
		st.Close()
		b.Fatal(err)
	}
	cc := c.Cacher("pods")
	return &cacheSide{
		goroutinesBefore: before,
		name:             "listwatch",
		store:            st,
		watch: func(ctx context.Context, rv uint64, f cacheFilter, node int) (watch.Interface, error) {
			l, fs := selectors(f, node)
			return cc.Watch(ctx, "/pods/", lwstorage.ListOptions{
				ResourceVersion: strconv.FormatUint(rv, 10), Recursive: true,
				// IndexFields as httpwatch's predicate (and upstream's, below) names the trigger field, as the
				// pod registry's MatchPod does: without it the cache does not index the watcher by node, and
				// every watcher is offered every event to filter.
				Predicate: lwstorage.Predicate{Label: l, Field: fs, GetAttrs: podsResource.GetAttrs, IndexFields: []string{podsResource.TriggerField}},
			})
		},
		fresh: func(ctx context.Context, rv uint64) error {
			return cc.GetList(ctx, "/pods/", lwstorage.ListOptions{
				ResourceVersion: strconv.FormatUint(rv, 10), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
				Recursive: true, Predicate: lwstorage.Everything,
			}, &unstructured.UnstructuredList{})
		},
		stop: func() {
			c.Close()
			st.Close()
		},
	}
}

func newUpstreamCache(b *testing.B) *cacheSide {
	before := runtime.NumGoroutine()
	st := store.New(store.Options{})
	cli, stopClient, err := etcdgrpc.NewClient(st, etcdgrpc.Options{}.WithDefaults())
	if err != nil {
		st.Close()
		b.Fatal(err)
	}
	kc := &kubernetes.Client{Client: cli}
	kc.Kubernetes = kc
	compactor := upstreametcd3.NewCompactor(cli, 0, clock.RealClock{}, nil)
	codec := unstructured.UnstructuredJSONScheme
	versioner := apistorage.APIObjectVersioner{}
	gr := schema.GroupResource{Resource: "pods"}
	newPod := func() k8sruntime.Object { return podsResource.NewObject() }
	newPodList := func() k8sruntime.Object {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion("v1")
		l.SetKind("PodList")
		return l
	}
	s, err := upstreametcd3.New(kc, compactor, codec, newPod, newPodList, "/registry", "/pods", gr,
		identity.NewEncryptCheckTransformer(), upstreametcd3.NewDefaultLeaseManagerConfig(),
		upstreametcd3.NewDefaultDecoder(codec, versioner), versioner)
	if err != nil {
		compactor.Stop()
		stopClient()
		st.Close()
		b.Fatal(err)
	}
	c, err := cacher.NewCacherFromConfig(cacher.Config{
		Storage:             s,
		Versioner:           versioner,
		GroupResource:       gr,
		EventsHistoryWindow: cacher.DefaultEventFreshDuration,
		ResourcePrefix:      "/pods",
		KeyFunc:             func(obj k8sruntime.Object) (string, error) { return apistorage.NamespaceKeyFunc("/pods/", obj) },
		GetAttrsFunc:        podsResource.GetAttrs,
		IndexerFuncs:        apistorage.IndexerFuncs{"spec.nodeName": nodeNameOf},
		NewFunc:             newPod,
		NewListFunc:         newPodList,
		Codec:               codec,
		Clock:               clock.RealClock{},
	})
	if err != nil {
		s.Close()
		compactor.Stop()
		stopClient()
		st.Close()
		b.Fatal(err)
	}
	return &cacheSide{
		goroutinesBefore: before,
		name:             "upstream",
		store:            st,
		watch: func(ctx context.Context, rv uint64, f cacheFilter, node int) (watch.Interface, error) {
			l, fs := selectors(f, node)
			return c.Watch(ctx, "/pods", apistorage.ListOptions{
				ResourceVersion: strconv.FormatUint(rv, 10), Recursive: true,
				Predicate: apistorage.SelectionPredicate{Label: l, Field: fs, GetAttrs: podsResource.GetAttrs, IndexFields: []string{"spec.nodeName"}},
			})
		},
		fresh: func(ctx context.Context, rv uint64) error {
			if err := c.Wait(ctx); err != nil {
				return err
			}
			return c.GetList(ctx, "/pods", apistorage.ListOptions{
				ResourceVersion: strconv.FormatUint(rv, 10), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
				Recursive: true, Predicate: apistorage.Everything,
			}, &unstructured.UnstructuredList{})
		},
		stop: func() {
			c.Stop()
			s.Close()
			compactor.Stop()
			stopClient()
			st.Close()
		},
	}
}

var (
	cacheSides = map[string]func(*testing.B) *cacheSide{"listwatch": newListwatchCache, "upstream": newUpstreamCache}
)

// cacheNames are the sides the cache benchmarks run: both, or those SIDEBYSIDE_CACHE_SIDES names
// (comma-separated), to profile one alone.
func cacheNames(b *testing.B) []string { return sidesFrom(b, "SIDEBYSIDE_CACHE_SIDES") }

// podValue is the stored JSON of pod i (of cachePods) at write seq: about 1 KiB.
func podValue(i, seq int) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p-%d","namespace":"ns","labels":{"app":"bench","tier":"web"},"annotations":{"seq":"%d","pad":"%s"}},"spec":{"nodeName":"%s"},"status":{"phase":"Running"}}`,
		i, seq, strings.Repeat("x", 800), nodeName(i%cacheNodes))
}

func podKey(i int) []byte { return fmt.Appendf(nil, "/registry/pods/ns/p-%d", i) }

// warmUp writes cacheWarmUp events (the pods, then updates of them) and waits until the cache has
// them: within the history window they grow its capacity to 8192, which sizes new watchers' inputs at
// 100 events on both sides, as on a busy resource. It returns the revision of the last write.
func (s *cacheSide) warmUp(b *testing.B) uint64 {
	rev := warmUpWrites(b, s.store)
	s.waitFresh(b, rev)
	return rev
}

// warmUpWrites makes warmUp's writes and returns the revision of the last.
func warmUpWrites(b *testing.B, st *store.Store) uint64 {
	var rev int64
	for i := range cacheWarmUp {
		r, err := st.Put(&store.PutRequest{Key: podKey(i % cachePods), Value: podValue(i%cachePods, i)})
		if err != nil {
			b.Fatal(err)
		}
		rev = r.Header.Revision
	}
	return uint64(rev)
}

func (s *cacheSide) waitFresh(b *testing.B, rv uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		err := s.fresh(ctx, rv)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			b.Fatalf("%s: the cache never reached %d: %v", s.name, rv, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkCacheDispatch: b.N updates written to the store, each delivered through gRPC, the etcd3
// storage and the watch cache to every watcher that selects it (all N, or for watchers indexed by
// node the N/10 of its node), each of which encodes every event with a JSON serializer (as the HTTP
// layer does: once per event for all watchers, through the cache's caching object) and checks that it
// gets exactly its events in order; the benchmark fails otherwise. The writer keeps at most
// cacheWindow events on their way. Reports deliveries/s of each side, the ratio, and each side's
// ns/delivery (wall) and cpu-ns/delivery (the process's CPU time).
//
//	go test -run '^$' -bench 'CacheDispatch/watchers=1000/' -benchtime 2000x ./sidebyside/
func BenchmarkCacheDispatch(b *testing.B) {
	names := cacheNames(b)
	envs := map[string]*cacheSide{}
	rvs := map[string]uint64{}
	for _, name := range names {
		s := cacheSides[name](b)
		defer s.stop()
		envs[s.name] = s
		rvs[s.name] = s.warmUp(b)
	}
	for _, n := range []int{100, 1000, 10000} {
		for _, f := range []cacheFilter{filterNone, filterSelector, filterIndexed} {
			b.Run(fmt.Sprintf("watchers=%d/filter=%s", n, f), func(b *testing.B) {
				cpu := lowest{}
				figures := best(names, true, func(name string) float64 {
					var perSec, cpuPerDelivery float64
					perSec, cpuPerDelivery, rvs[name] = dispatch(b, envs[name], rvs[name], n, f)
					cpu.add(name, cpuPerDelivery)
					return perSec
				})
				for _, name := range names {
					b.ReportMetric(1e9/figures[name], name+"-ns/delivery")
					b.ReportMetric(cpu[name], name+"-cpu-ns/delivery")
				}
				reportVs(b, figures, "upstream", "deliveries/s")
			})
		}
	}
}

// dispatch runs the dispatch workload on one side from rv and returns deliveries per second, the
// process's CPU time per delivery in ns, and the revision of its last write.
func dispatch(b *testing.B, s *cacheSide, rv uint64, watchers int, f cacheFilter) (float64, float64, uint64) {
	total := b.N
	want := make([]int32, total)
	deliveries := 0
	for i := range want {
		for w := range watchers {
			if f.wants(i, w%cacheNodes) {
				want[i]++
			}
		}
		deliveries += int(want[i])
	}
	p := newEventPacer(want)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	encoder := json.NewSerializerWithOptions(json.DefaultMetaFactory, nil, nil, json.SerializerOptions{})
	var readers sync.WaitGroup
	var ws []watch.Interface
	for w := range watchers {
		node := w % cacheNodes
		wi, err := s.watch(ctx, rv, f, node)
		if err != nil {
			b.Fatalf("%s: watch %d: %v", s.name, w, err)
		}
		ws = append(ws, wi)
		readers.Go(func() {
			ch := wi.ResultChan()
			defer func() {
				for range ch {
				}
			}()
			next := 0
			for !f.wants(next, node) {
				next++
			}
			for next < total {
				ev, ok := <-ch
				if !ok {
					p.fail(fmt.Sprintf("%s: watcher %d closed before event %d of %d", s.name, w, next, total))
					return
				}
				if ev.Type != watch.Modified {
					p.fail(fmt.Sprintf("%s: watcher %d: a %s event, want MODIFIED", s.name, w, ev.Type))
					return
				}
				if err := encoder.Encode(ev.Object, io.Discard); err != nil {
					p.fail(fmt.Sprintf("%s: encoding: %v", s.name, err))
					return
				}
				m, err := meta.Accessor(ev.Object)
				if err != nil {
					p.fail(fmt.Sprintf("%s: %v", s.name, err))
					return
				}
				got, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
				if err != nil || got != rv+1+uint64(next) {
					p.fail(fmt.Sprintf("%s: watcher %d: resourceVersion %q, want event %d at %d", s.name, w, m.GetResourceVersion(), next, rv+1+uint64(next)))
					return
				}
				p.ack(next)
				for next++; next < total && !f.wants(next, node); next++ {
				}
			}
		})
	}
	start, cpu0 := time.Now(), processCPU()
	var last uint64
	for i := range total {
		if i >= cacheWindow && !p.wait(i-cacheWindow) {
			break
		}
		r, err := s.store.Put(&store.PutRequest{Key: podKey(i % cachePods), Value: podValue(i%cachePods, cacheWarmUp+i)})
		if err != nil {
			b.Fatal(err)
		}
		last = uint64(r.Header.Revision)
	}
	if !p.waitTimeout(total-1, 5*time.Minute) {
		p.fail(fmt.Sprintf("%s: not every event delivered within 5m", s.name))
	}
	elapsed, cpu := time.Since(start), processCPU()-cpu0
	for _, w := range ws {
		w.Stop()
	}
	readers.Wait()
	if msg := p.failure(); msg != "" {
		if s.name == "upstream" {
			msg += "\nupstream's last log lines about watchers and errors:\n" + upstreamLog.last(5)
		}
		b.Fatal(msg)
	}
	return float64(deliveries) / elapsed.Seconds(), float64(cpu.Nanoseconds()) / float64(deliveries), last
}

// eventPacer keeps a producer at most a window of events ahead of its consumers, when each event has
// its own number of deliveries to wait for: an event is complete once all of them are acknowledged,
// and the producer waits for a prefix of complete events.
type eventPacer struct {
	*pacer
	want     []int32
	got      []atomic.Int32
	mu       sync.Mutex
	done     []bool
	frontier int
}

func newEventPacer(want []int32) *eventPacer {
	p := &eventPacer{pacer: newPacer(1, len(want)), want: want, got: make([]atomic.Int32, len(want)), done: make([]bool, len(want))}
	for i, w := range want {
		if w == 0 {
			p.complete(i)
		}
	}
	return p
}

func (p *eventPacer) ack(i int) {
	if p.got[i].Add(1) == p.want[i] {
		p.complete(i)
	}
}

func (p *eventPacer) complete(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done[i] = true
	before := p.frontier
	for p.frontier < len(p.done) && p.done[p.frontier] {
		p.frontier++
	}
	if p.frontier > before {
		p.pacer.ack(p.frontier - 1)
	}
}

// BenchmarkCacheWatcherMemory: the memory an idle watcher of a warm cache holds (its inputs are
// sized at 100 events on both sides): 10000 watchers of every pod, measured after GC as heap plus
// goroutine stacks, since each side runs a goroutine per watcher. Reports B/watcher of each side and
// the ratio.
func BenchmarkCacheWatcherMemory(b *testing.B) {
	const watchers = 10000
	figures := map[string]float64{}
	for _, name := range cacheNames(b) {
		s := cacheSides[name](b)
		rv := s.warmUp(b)
		var heap, stack float64
		for range b.N {
			ctx, cancel := context.WithCancel(context.Background())
			before := memStats()
			ws := make([]watch.Interface, 0, watchers)
			for range watchers {
				w, err := s.watch(ctx, rv, filterNone, 0)
				if err != nil {
					b.Fatal(err)
				}
				ws = append(ws, w)
			}
			after := memStats()
			heap += float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / watchers
			stack += float64(int64(after.StackInuse)-int64(before.StackInuse)) / watchers
			for _, w := range ws {
				w.Stop()
				for range w.ResultChan() {
				}
			}
			cancel()
		}
		figures[name] = (heap + stack) / float64(b.N)
		b.ReportMetric(heap/float64(b.N), name+"-heap-B/watcher")
		b.ReportMetric(stack/float64(b.N), name+"-stack-B/watcher")
		s.stopAndQuiesce(b)
	}
	reportVs(b, figures, "upstream", "B/watcher")
}

// BenchmarkCachedEventMemory: the memory a cached event holds, object included: 10000 new pods (about
// 1 KiB of JSON each) written to the store of a warm cache, measured after GC once the cache has them
// all, less what the same writes add to a store without a cache. Reports B/event of each side and the ratio.
func BenchmarkCachedEventMemory(b *testing.B) {
	const events = 10000
	write := func(st *store.Store) uint64 {
		var rev int64
		for i := range events {
			r, err := st.Put(&store.PutRequest{Key: podKey(cachePods + i), Value: podValue(cachePods+i, i)})
			if err != nil {
				b.Fatal(err)
			}
			rev = r.Header.Revision
		}
		return uint64(rev)
	}
	storeOnly := func() int64 {
		st := store.New(store.Options{})
		defer st.Close()
		warmUpWrites(b, st)
		before := memInUse()
		write(st)
		after := memInUse()
		runtime.KeepAlive(st)
		return after - before
	}
	figures := map[string]float64{}
	for _, name := range cacheNames(b) {
		var total float64
		for range b.N {
			base := storeOnly()
			s := cacheSides[name](b)
			s.warmUp(b)
			before := memInUse()
			s.waitFresh(b, write(s.store))
			after := memInUse()
			total += float64(after-before-base) / events
			s.stopAndQuiesce(b)
		}
		figures[name] = total / float64(b.N)
	}
	reportVs(b, figures, "upstream", "B/event")
}
