package apiserverconf

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	"k8s.io/apiserver/pkg/storage/value"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/cachepair"
)

// The watch caches under test (package cachepair builds them), wired as upstream's
// pkg/storage/cacher/cacher_test.go testSetup wires its Cacher: upstream's Cacher over upstream's
// etcd3 storage, and listwatch's cache over listwatch's etcd3 storage seen through storageadapter,
// each on a fresh listwatch store served in-process.

// cacheEnv is one subtest's watch cache.
type cacheEnv struct {
	ctx      context.Context
	store    storage.Interface
	cache    *cachepair.Cache
	client   *clientv3.Client
	recorder *storagetesting.KubernetesRecorder
}

// newCacheEnv starts a store, serves it, and builds the cache over it with setup.
func newCacheEnv(t *testing.T, build cachepair.Builder, setup cachepair.Setup) *cacheEnv {
	t.Helper()
	st := cachepair.NewStore()
	testutil.CloseAtCleanup(t, "closing the store", st.Close)
	recorder := cachepair.NewRecorder()
	cli := cachepair.Serve(t, st, recorder)
	c := build(t, cli, setup)
	ws := &watcherSet{}
	t.Cleanup(func() { ws.stopAll(t) })
	return &cacheEnv{ctx: context.Background(), store: ws.own(c.Storage), cache: c, client: cli, recorder: recorder}
}

// compactWatch is the Compaction of RunTestWatchFromZero: etcd is compacted at the revision and the
// cache relists (cachepair.Cache.Relist, in place of upstream's compactWatch).
func (e *cacheEnv) compactWatch() storagetesting.Compaction {
	return func(ctx context.Context, t *testing.T, resourceVersion string) {
		cachepair.CompactEtcd(ctx, t, e.client, mustRV(t, resourceVersion))
		e.cache.Relist(t)
	}
}

// compactStore is upstream's compactStore: etcd is compacted at the revision, and a cache that keeps
// snapshots observes it.
func (e *cacheEnv) compactStore() storagetesting.Compaction {
	return func(ctx context.Context, t *testing.T, resourceVersion string) {
		rv := mustRV(t, resourceVersion)
		cachepair.CompactEtcd(ctx, t, e.client, rv)
		e.cache.ObserveCompaction(ctx, t, rv)
	}
}

func mustRV(t *testing.T, resourceVersion string) int64 {
	t.Helper()
	rv, err := storage.APIObjectVersioner{}.ParseResourceVersion(resourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	return int64(rv)
}

// increaseRV writes a key outside the resource prefix; upstream's increaseRVFunc.
func (e *cacheEnv) increaseRV() storagetesting.IncreaseRVFunc {
	return func(ctx context.Context, t *testing.T) int64 {
		resp, err := e.client.KV.Put(ctx, "increaseRV", "ok")
		if err != nil {
			t.Fatalf("increasing the revision: %v", err)
		}
		return resp.Header.Revision
	}
}

// withCreateWrapper is the store with upstream's createWrapper: a Create returns only once the
// cache serves the created object (a Get at resourceVersion 0 returns it).
func (e *cacheEnv) withCreateWrapper() storage.Interface { return createWrapper{e.store} }

type createWrapper struct{ storage.Interface }

func (c createWrapper) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	if err := c.Interface.Create(ctx, key, obj, out, ttl); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, wait.ForeverTestTimeout, true, func(ctx context.Context) (bool, error) {
		current := cachepair.NewPod()
		err := c.Interface.Get(ctx, key, storage.GetOptions{ResourceVersion: "0"}, current)
		if storage.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return apiequality.Semantic.DeepEqual(current, out), nil
	})
}

// failingTransformer fails every TransformFromStorage while failing is set; upstream's
// testTransformer in cacher_test.go.
type failingTransformer struct {
	value.Transformer
	failing atomic.Bool
}

func (tr *failingTransformer) setFailing(on bool) { tr.failing.Store(on) }

func (tr *failingTransformer) TransformFromStorage(ctx context.Context, data []byte, dataCtx value.Context) ([]byte, bool, error) {
	if tr.failing.Load() {
		return nil, false, errSynthetic
	}
	return tr.Transformer.TransformFromStorage(ctx, data, dataCtx)
}
