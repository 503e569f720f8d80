package apiserverconf

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/apimachinery/pkg/api/apitesting"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/apis/example"
	examplev1 "k8s.io/apiserver/pkg/apis/example/v1"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/etcd3"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	"k8s.io/apiserver/pkg/storage/value"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/cachepair"
	"github.com/listwatch/listwatch/interop/internal/etcdtest"
)

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
)

func init() {
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	utilruntime.Must(example.AddToScheme(scheme))
	utilruntime.Must(examplev1.AddToScheme(scheme))
}

// Storage configuration, as upstream's etcd3 tests configure it (pkg/storage/etcd3/store_test.go
// withDefaults and newTestLeaseManagerConfig).
const (
	valuePrefix    = "test!" // the prefix transformer's marker in front of every stored value
	resourcePrefix = "/pods/"
	// leaseReuseSeconds is upstream's 1 s lease reuse: TTL tests must not wait for a lease
	// granted by an earlier write.
	leaseReuseSeconds = 1
	// maxListLimit is the page size bound of the etcd3 storage (pkg/storage/etcd3/store.go
	// maxLimit); the call-count validation needs it to predict how a list pages.
	maxListLimit = 10000
)

// progressNotifyInterval is what upstream's watch tests give the server for the functions that
// wait for progress notifications (etcd's --watch-progress-notify-interval).
const progressNotifyInterval = time.Second

var groupResource = schema.GroupResource{Resource: "pods"}

// backend starts a fresh server for one subtest and returns a client connected to it; both are
// stopped at the subtest's cleanup.
type backend struct {
	name  string
	start func(t *testing.T, progressNotify time.Duration) *clientv3.Client
}

var backends = []backend{
	{name: "etcd", start: startEtcd},
	{name: "listwatch", start: startListwatch},
}

func startEtcd(t *testing.T, progressNotify time.Duration) *clientv3.Client {
	t.Helper()
	cli, stop, err := etcdtest.Start(t.TempDir(), func(cfg *embed.Config) {
		if progressNotify > 0 {
			cfg.WatchProgressNotifyInterval = progressNotify
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CloseAtCleanup(t, "stopping etcd", stop)
	return cli
}

// startListwatch serves a fresh store in-process with the lease TTL floor and member ID the
// embedded etcd has.
func startListwatch(t *testing.T, progressNotify time.Duration) *clientv3.Client {
	t.Helper()
	return etcdtest.Listwatch(t, progressNotify, injectFault)
}

// setupOptions change what newEnv builds.
type setupOptions struct {
	progressNotify time.Duration
	codec          runtime.Codec
}

type setupOption func(*setupOptions)

// withProgressNotify sets the server's progress-notify interval.
func withProgressNotify(d time.Duration) setupOption {
	return func(o *setupOptions) { o.progressNotify = d }
}

// withCodec replaces the storage's codec.
func withCodec(c runtime.Codec) setupOption {
	return func(o *setupOptions) { o.codec = c }
}

// env is one subtest's storage on one backend.
type env struct {
	ctx context.Context
	be  backend
	// raw is the etcd3 storage itself; store is raw with its watchers owned by the subtest.
	raw interface {
		storage.Interface
		EnableResourceSizeEstimation(storage.KeysFunc) error
	}
	store       storage.Interface
	watchers    *watcherSet
	client      *kubernetes.Client
	kv          *storagetesting.KVRecorder
	lists       *storagetesting.KubernetesRecorder
	codec       runtime.Codec
	prefix      *storagetesting.PrefixTransformer
	transformer *switchableTransformer
}

// newEnv starts a server on b and the etcd3 storage over it, wired as upstream's testSetup wires it.
func newEnv(t *testing.T, b backend, opts ...setupOption) *env {
	t.Helper()
	o := setupOptions{codec: apitesting.TestCodec(codecs, examplev1.SchemeGroupVersion)}
	for _, f := range opts {
		f(&o)
	}

	// The checker is process-wide and remembers, per endpoint name and for ten minutes, what a
	// server supports; every subtest starts with a fresh one. The watcher set below guarantees
	// that no storage goroutine of the previous subtest still reads the variable.
	cachepair.FreshFeatureChecker(t)

	cli := b.start(t, o.progressNotify)
	kc := &kubernetes.Client{Client: cli}
	kc.Kubernetes = kc
	lists := storagetesting.NewKubernetesRecorder(kc.Kubernetes)
	kv := storagetesting.NewKVRecorder(kc.KV, lists)
	kc.KV = kv
	kc.Kubernetes = lists

	versioner := storage.APIObjectVersioner{}
	compactor := etcd3.NewCompactor(cli, 0, clock.RealClock{}, nil)
	t.Cleanup(compactor.Stop)

	prefix := storagetesting.NewPrefixTransformer([]byte(valuePrefix), false)
	tr := newSwitchableTransformer(prefix)
	leases := etcd3.NewDefaultLeaseManagerConfig()
	leases.ReuseDurationSeconds = leaseReuseSeconds
	raw, err := etcd3.New(kc, compactor, o.codec, newPod, newPodList, "", resourcePrefix, groupResource,
		tr, leases, etcd3.NewDefaultDecoder(o.codec, versioner), versioner)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	ws := &watcherSet{}
	t.Cleanup(func() { ws.stopAll(t) })

	e := &env{
		ctx:         t.Context(),
		be:          b,
		raw:         raw,
		store:       ws.own(raw),
		watchers:    ws,
		client:      kc,
		kv:          kv,
		lists:       lists,
		codec:       o.codec,
		prefix:      prefix,
		transformer: tr,
	}
	return e
}

func newPod() runtime.Object     { return &example.Pod{} }
func newPodList() runtime.Object { return &example.PodList{} }

// keyValidation checks what upstream's checkStorageInvariants checks: the stored value carries
// the transformer's prefix and decodes to an object without resourceVersion or selfLink.
func (e *env) keyValidation() storagetesting.KeyValidation {
	return func(ctx context.Context, t *testing.T, key string) {
		resp, err := e.client.KV.Get(ctx, key)
		if err != nil {
			t.Fatalf("reading %s: %v", key, err)
		}
		if len(resp.Kvs) == 0 {
			t.Fatalf("key %s is not stored", key)
		}
		data := resp.Kvs[0].Value
		if len(data) < len(valuePrefix) || string(data[:len(valuePrefix)]) != valuePrefix {
			t.Fatalf("stored value of %s lacks the transformer prefix %q: %q", key, valuePrefix, data)
		}
		obj, err := runtime.Decode(e.codec, data[len(valuePrefix):])
		if err != nil {
			t.Fatalf("decoding stored %s: %v\n%s", key, err, data)
		}
		pod := obj.(*example.Pod)
		if pod.ResourceVersion != "" {
			t.Errorf("stored %s has resourceVersion %q, want none", key, pod.ResourceVersion)
		}
		if pod.SelfLink != "" {
			t.Errorf("stored %s has selfLink %q, want none", key, pod.SelfLink)
		}
	}
}

// callsValidation checks what upstream's checkStorageCallsInvariants checks: how many values the
// storage transformed, and how many reads it sent, when a list pages with doubling limits.
func (e *env) callsValidation() storagetesting.CallsValidation {
	return func(t *testing.T, pageSize, estimatedProcessedObjects uint64) {
		if reads := e.prefix.GetReadsAndReset(); reads != estimatedProcessedObjects {
			t.Errorf("values transformed: %d, want %d", reads, estimatedProcessedObjects)
		}
		wantCalls := uint64(1)
		if pageSize != 0 {
			limit := pageSize
			for sum := uint64(1); sum < estimatedProcessedObjects; {
				limit = min(limit*2, maxListLimit)
				sum += limit
				wantCalls++
			}
		}
		if calls := e.kv.GetReadsAndReset() + e.kv.GetStreamReadsAndReset(); calls != wantCalls {
			t.Fatalf("reads sent: %d, want %d", calls, wantCalls)
		}
	}
}

// increaseRV writes a key outside the resource prefix; upstream's increaseRVFunc.
func (e *env) increaseRV() storagetesting.IncreaseRVFunc {
	return func(ctx context.Context, t *testing.T) int64 {
		resp, err := e.client.KV.Put(ctx, "increaseRV", "ok")
		if err != nil {
			t.Fatalf("increasing the revision: %v", err)
		}
		return resp.Header.Revision
	}
}

// compaction compacts through etcd3.Compact as upstream's compactStorage does, including its one
// retry, then waits until the compactor has seen the compaction when ListFromCacheSnapshot lets it
// watch for them.
func (e *env) compaction() storagetesting.Compaction {
	return func(ctx context.Context, t *testing.T, resourceVersion string) {
		rv, err := storage.APIObjectVersioner{}.ParseResourceVersion(resourceVersion)
		if err != nil {
			t.Fatal(err)
		}
		version, _, _, err := etcd3.Compact(ctx, e.client.Client, 0, int64(rv))
		if err != nil {
			_, _, _, err = etcd3.Compact(ctx, e.client.Client, version, int64(rv))
		}
		if err != nil {
			t.Fatal(err)
		}
		if !utilfeature.DefaultFeatureGate.Enabled(features.ListFromCacheSnapshot) {
			return
		}
		testutil.WaitFor(t, fmt.Sprintf("the compactor to observe compaction at %d", rv), func() bool {
			return e.raw.CompactRevision() == int64(rv)
		})
	}
}

// keys lists the stored keys of the resource, keys only, as the storage's own getKeys does; it is
// the KeysFunc the size estimator is enabled with.
func (e *env) keys(ctx context.Context) ([]string, error) {
	resp, err := e.client.KV.Get(ctx, resourcePrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys, nil
}

// withPrefixTransformer is the store with the transformer hook upstream's storeWithPrefixTransformer gives.
func (e *env) withPrefixTransformer() storagetesting.InterfaceWithPrefixTransformer {
	return prefixTransformerStore{Interface: e.store, tr: e.transformer}
}

// withTransformerOverride is s with the transformer hook upstream's storeWithTransformerOverride gives.
func (e *env) withTransformerOverride(s storage.Interface) storagetesting.InterfaceWithTransformerOverride {
	return transformerOverrideStore{Interface: s, tr: e.transformer}
}

// unsafeDeletionStore is the storage wrapped as the apiserver wraps it when
// AllowUnsafeMalformedObjectDeletion is on, its watchers owned by the subtest.
func (e *env) unsafeDeletionStore() storage.Interface {
	return e.watchers.own(etcd3.NewStoreWithUnsafeCorruptObjectDeletion(e.raw, groupResource))
}

// switchableTransformer is the transformer handed to etcd3.New, and so shared by the storage and
// its watcher. It delegates to the current transformer, which the override methods swap: upstream's
// tests assign the store's unexported transformer fields instead.
type switchableTransformer struct {
	base    *storagetesting.PrefixTransformer
	current atomic.Pointer[transformerBox]
}

type transformerBox struct{ value.Transformer }

func newSwitchableTransformer(base *storagetesting.PrefixTransformer) *switchableTransformer {
	s := &switchableTransformer{base: base}
	s.current.Store(&transformerBox{base})
	return s
}

func (s *switchableTransformer) TransformFromStorage(ctx context.Context, data []byte, dataCtx value.Context) ([]byte, bool, error) {
	return s.current.Load().TransformFromStorage(ctx, data, dataCtx)
}

func (s *switchableTransformer) TransformToStorage(ctx context.Context, data []byte, dataCtx value.Context) ([]byte, error) {
	return s.current.Load().TransformToStorage(ctx, data, dataCtx)
}

// swap makes next current and returns the function that restores what was current before.
func (s *switchableTransformer) swap(next value.Transformer) func() {
	prev := s.current.Swap(&transformerBox{next})
	return func() { s.current.Store(prev) }
}

// updatePrefix hands the modifier a copy of the base prefix transformer, as upstream does, so that
// the modifier may change its fields without touching the base.
func (s *switchableTransformer) updatePrefix(modifier storagetesting.PrefixTransformerModifier) func() {
	copied := *s.base
	return s.swap(modifier(&copied))
}

func (s *switchableTransformer) update(modifier storagetesting.TransformerModifier) func() {
	return s.swap(modifier(s.current.Load().Transformer))
}

// setFailingReads makes every TransformFromStorage fail (on) or restores the transformer (off);
// upstream's testTransformer.setFailing.
func (s *switchableTransformer) setFailingReads() func(bool) {
	var mu sync.Mutex
	var restore func()
	return func(on bool) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case on && restore == nil:
			restore = s.update(func(orig value.Transformer) value.Transformer { return failingReads{orig} })
		case !on && restore != nil:
			restore()
			restore = nil
		}
	}
}

// errSynthetic is the failure the failing transformer and codec inject.
var errSynthetic = errors.New("synthetic error")

type failingReads struct{ value.Transformer }

func (failingReads) TransformFromStorage(context.Context, []byte, value.Context) ([]byte, bool, error) {
	return nil, false, errSynthetic
}

// failingCodec fails Decode while failing is set; upstream's testCodec.
type failingCodec struct {
	runtime.Codec
	failing atomic.Bool
}

func newFailingCodec() *failingCodec {
	return &failingCodec{Codec: apitesting.TestCodec(codecs, examplev1.SchemeGroupVersion)}
}

func (c *failingCodec) setFailing(on bool) { c.failing.Store(on) }

func (c *failingCodec) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if c.failing.Load() {
		return nil, nil, errSynthetic
	}
	return c.Codec.Decode(data, defaults, into)
}

type prefixTransformerStore struct {
	storage.Interface
	tr *switchableTransformer
}

func (s prefixTransformerStore) UpdatePrefixTransformer(modifier storagetesting.PrefixTransformerModifier) func() {
	return s.tr.updatePrefix(modifier)
}

type transformerOverrideStore struct {
	storage.Interface
	tr *switchableTransformer
}

func (s transformerOverrideStore) UpdateTransformer(modifier storagetesting.TransformerModifier) func() {
	return s.tr.update(modifier)
}

// corruptObjectError returns the error the storage's corrupt-object handling wraps transform
// failures in (an unexported type of package etcd3), obtained from the exported wrapper that
// produces it. Upstream's tests build the value directly.
func corruptObjectError(t *testing.T) error {
	t.Helper()
	tr := etcd3.WithCorruptObjErrorHandlingTransformer(failingBits{})
	_, _, err := tr.TransformFromStorage(context.Background(), nil, value.DefaultContext{})
	if got := fmt.Sprintf("%T", err); got != "*etcd3.corruptObjectError" {
		t.Fatalf("corrupt-object error is a %s (%v), want *etcd3.corruptObjectError", got, err)
	}
	return err
}

type failingBits struct{ value.Transformer }

func (failingBits) TransformFromStorage(context.Context, []byte, value.Context) ([]byte, bool, error) {
	return nil, false, errors.New("bits flipped")
}

// watcherSet owns the watchers a storage hands out during one subtest.
type watcherSet struct {
	mu       sync.Mutex
	watchers []watch.Interface
}

// own returns s with every watcher it starts recorded in the set.
func (ws *watcherSet) own(s storage.Interface) storage.Interface {
	return watchOwningStore{Interface: s, ws: ws}
}

// stopAll stops every watcher and waits until each result channel is closed: the etcd3 watcher
// closes it only after its goroutines have returned.
func (ws *watcherSet) stopAll(t *testing.T) {
	ws.mu.Lock()
	watchers := ws.watchers
	ws.watchers = nil
	ws.mu.Unlock()
	deadline := time.After(testutil.WaitTimeout)
	for i, w := range watchers {
		w.Stop()
		for open := true; open; {
			select {
			case _, open = <-w.ResultChan():
			case <-deadline:
				t.Errorf("watcher %d of %d: result channel still open %v after Stop", i+1, len(watchers), testutil.WaitTimeout)
				return
			}
		}
	}
}

type watchOwningStore struct {
	storage.Interface
	ws *watcherSet
}

func (s watchOwningStore) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
	if err == nil {
		s.ws.mu.Lock()
		s.ws.watchers = append(s.ws.watchers, w)
		s.ws.mu.Unlock()
	}
	return w, err
}
