package cachepair

import (
	"context"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/apis/example"
	examplev1 "k8s.io/apiserver/pkg/apis/example/v1"
	"k8s.io/apiserver/pkg/features"
	k8sstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/cacher"
	k8setcd3 "k8s.io/apiserver/pkg/storage/etcd3"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/etcdtest"
	"github.com/listwatch/listwatch/interop/internal/storageadapter"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/store"
	"github.com/listwatch/listwatch/watch"
)

// The resource both caches serve, as upstream's cacher tests configure it
// (pkg/storage/cacher/cacher_test.go testSetup, cacher_testing_utils_test.go).
const (
	// EtcdPrefix is the etcd path prefix of the storages (upstream's etcd3testing.PathPrefix()).
	EtcdPrefix = "/registry"
	// ResourcePrefix is the key prefix of the pods.
	ResourcePrefix = "/pods/"
)

// GroupResource names the resource.
var GroupResource = schema.GroupResource{Resource: "pods"}

var (
	// Scheme holds the example API group (internal and v1) and metav1.
	Scheme = runtime.NewScheme()
	// Codecs is Scheme's codec factory.
	Codecs = serializer.NewCodecFactory(Scheme)
	// Codec is the protobuf codec of example/v1 that upstream's cacher tests store pods with
	// (examplev1ProtoCodec).
	Codec runtime.Codec
)

func init() {
	metav1.AddToGroupVersion(Scheme, metav1.SchemeGroupVersion)
	utilruntime.Must(example.AddToScheme(Scheme))
	utilruntime.Must(examplev1.AddToScheme(Scheme))
	pb := protobuf.NewSerializer(Scheme, Scheme)
	Codec = Codecs.CodecForVersions(pb, pb, schema.GroupVersions{examplev1.SchemeGroupVersion}, nil)
}

// NewPod and NewPodList are the storages' and caches' NewFunc and NewListFunc.
func NewPod() runtime.Object     { return &example.Pod{} }
func NewPodList() runtime.Object { return &example.PodList{} }

// PodAttrs are a pod's labels and fields for selection: its name, namespace, node name, restart
// policy and phase, what upstream's cacher tests select on (cacher_test.go GetPodAttrs).
func PodAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	pod, ok := obj.(*example.Pod)
	if !ok {
		return nil, nil, fmt.Errorf("not a pod: %T", obj)
	}
	return labels.Set(pod.Labels), fields.Set{
		"metadata.name":      pod.Name,
		"metadata.namespace": pod.Namespace,
		"spec.nodeName":      pod.Spec.NodeName,
		"spec.restartPolicy": string(pod.Spec.RestartPolicy),
		"status.phase":       string(pod.Status.Phase),
	}, nil
}

// PodNodeName is the spec.nodeName trigger of pods (upstream's withNodeNameAndNamespaceIndex, which
// mirrors pkg/registry/core/pod/strategy.go).
func PodNodeName(obj runtime.Object) string {
	if pod, ok := obj.(*example.Pod); ok {
		return pod.Spec.NodeName
	}
	return ""
}

// Setup is what a test changes in the wiring (upstream's setupOptions).
type Setup struct {
	// ClusterScoped keys objects without their namespace (withClusterScopedKeyFunc).
	ClusterScoped bool
	// NodeNameTrigger configures the spec.nodeName trigger (withNodeNameAndNamespaceIndex).
	NodeNameTrigger bool
	// Codec stores the pods. Default Codec.
	Codec runtime.Codec
	// Transformer transforms the stored values. Default identity.NewEncryptCheckTransformer().
	Transformer value.Transformer
	// Clock drives the cache. Default a new PollClock.
	Clock *PollClock
}

func (s Setup) withDefaults() Setup {
	if s.Codec == nil {
		s.Codec = Codec
	}
	if s.Transformer == nil {
		s.Transformer = identity.NewEncryptCheckTransformer()
	}
	if s.Clock == nil {
		s.Clock = NewPollClock()
	}
	return s
}

func (s Setup) keyFunc(obj runtime.Object) (string, error) {
	if s.ClusterScoped {
		return storage.NoNamespaceKeyFunc(ResourcePrefix, obj)
	}
	return storage.NamespaceKeyFunc(ResourcePrefix, obj)
}

// Cache is a ready watch cache over the etcd3 storage of the pods, seen as k8s.io/apiserver's
// storage.Interface, and what a test needs to drive it.
type Cache struct {
	// Name is "upstream" or "listwatch".
	Name string
	// Storage is the cache: upstream's CacheDelegator, or listwatch's Cacher through storageadapter.
	Storage k8sstorage.Interface
	// Ready is the cache's readiness (Cacher.Ready).
	Ready func() bool
	// StorageCompactRevision is the compacted revision the cache's etcd3 storage has observed.
	StorageCompactRevision func() int64
	// Faults fail the lists and break the watches the cache's reflector makes.
	Faults *Faults
	// Clock is the cache's clock.
	Clock *PollClock
}

// Builder builds one kind of cache over a client; the cache and its storage are stopped at the
// test's cleanup.
type Builder func(tb testing.TB, cli *clientv3.Client, s Setup) *Cache

// Builders are both caches, upstream's first.
var Builders = []struct {
	Name  string
	Build Builder
}{
	{"upstream", Upstream},
	{"listwatch", Listwatch},
}

// upstreamListErrors is how many of the cache's first lists fail, as upstream's testSetup decides:
// one, to exercise the relist, unless its reflector fills the cache with a watch-list stream
// (client-go's WatchListClient, on by default since client-go 1.35) and so never lists.
func upstreamListErrors() int {
	if clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		return 0
	}
	return 1
}

// listwatchListErrors: listwatch's reflector always lists, so its first list fails.
const listwatchListErrors = 1

// Upstream is k8s.io/apiserver's Cacher (NewCacherFromConfig) behind its CacheDelegator, over
// k8s.io/apiserver's etcd3 storage on cli, wired as upstream's testSetupWithEtcdServer wires it.
func Upstream(tb testing.TB, cli *clientv3.Client, s Setup) *Cache {
	tb.Helper()
	s = s.withDefaults()
	kc := &kubernetes.Client{Client: cli}
	kc.Kubernetes = kc
	FreshFeatureChecker(tb)
	versioner := k8sstorage.APIObjectVersioner{}
	compactor := k8setcd3.NewCompactor(cli, 0, clock.RealClock{}, nil)
	tb.Cleanup(compactor.Stop)
	st, err := k8setcd3.New(kc, compactor, s.Codec, NewPod, NewPodList, EtcdPrefix, ResourcePrefix, GroupResource,
		s.Transformer, k8setcd3.NewDefaultLeaseManagerConfig(), k8setcd3.NewDefaultDecoder(s.Codec, versioner), versioner)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(st.Close)
	f := &Faults{listErrors: upstreamListErrors()}
	wrapped := upstreamFaultStorage{Interface: st, f: f}
	cfg := cacher.Config{
		Storage:             wrapped,
		Versioner:           versioner,
		GroupResource:       GroupResource,
		EventsHistoryWindow: cacher.DefaultEventFreshDuration,
		ResourcePrefix:      ResourcePrefix,
		KeyFunc:             s.keyFunc,
		GetAttrsFunc:        PodAttrs,
		NewFunc:             NewPod,
		NewListFunc:         NewPodList,
		Codec:               s.Codec,
		Clock:               s.Clock,
	}
	if s.NodeNameTrigger {
		cfg.IndexerFuncs = k8sstorage.IndexerFuncs{"spec.nodeName": PodNodeName}
	}
	c, err := cacher.NewCacherFromConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	d := cacher.NewCacheDelegator(c, wrapped)
	tb.Cleanup(func() {
		d.Stop()
		c.Stop()
	})
	waitReady(tb, f, c.Wait)
	// The CacheDelegator serves consistent lists from the cache only once etcd3.New's check has found
	// RequestWatchProgress supported; before that it sends them to etcd.
	testutil.WaitFor(tb, "RequestWatchProgress to be found supported", func() bool {
		return etcdfeature.DefaultFeatureSupportChecker.Supports(k8sstorage.RequestWatchProgress)
	})
	return &Cache{Name: "upstream", Storage: d, Ready: c.Ready, StorageCompactRevision: st.CompactRevision, Faults: f, Clock: s.Clock}
}

// FreshFeatureChecker gives upstream's storages a new process-wide etcd feature checker for the test,
// and puts the old one back at its cleanup.
// The checker starts one check per endpoint name and never starts another, and that check gives up
// when the client that asked for it closes: a check cut short by an earlier test's cleanup (the
// Status call still queued on a loaded machine) leaves RequestWatchProgress unsupported for the
// rest of the process, and every consistent list of every later upstream cache goes to etcd. Tests
// that build an upstream cache do not run in parallel (they set feature gates).
func FreshFeatureChecker(tb testing.TB) {
	orig := etcdfeature.DefaultFeatureSupportChecker
	etcdfeature.DefaultFeatureSupportChecker = etcdfeature.NewDefaultFeatureSupportChecker()
	tb.Cleanup(func() { etcdfeature.DefaultFeatureSupportChecker = orig })
}

// listFromCacheSnapshot is the ListFromCacheSnapshot gate's current value, which upstream's Cacher,
// CacheDelegator and etcd3 compactor read (utilfeature.DefaultFeatureGate): listwatch's cache and
// storage are built with it, as upstream's are.
func listFromCacheSnapshot() bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.ListFromCacheSnapshot)
}

// Storage is listwatch's etcd3 storage of the pods on cli, configured as Listwatch configures the
// one under its cache, through storageadapter: what a test writes with before any cache exists.
func Storage(tb testing.TB, cli *clientv3.Client, s Setup) k8sstorage.Interface {
	tb.Helper()
	return storageadapter.New(listwatchStorage(tb, cli, s.withDefaults()), storageadapter.Options{})
}

func listwatchStorage(tb testing.TB, cli *clientv3.Client, s Setup) *watch.Store {
	tb.Helper()
	st, err := watch.New(cli, watch.Config{
		Prefix:         EtcdPrefix,
		ResourcePrefix: ResourcePrefix,
		GroupResource:  GroupResource,
		Codec:          storage.RuntimeCodec(s.Codec),
		NewFunc:        NewPod,
		Transformer:    storageadapter.Transformer(s.Transformer),
		Logger:         testutil.DiscardLogger(),
		// As upstream's NewCompactor, which follows compact_rev_key only with the gate on.
		Features: watch.Features{DisableListFromCacheSnapshot: !listFromCacheSnapshot()},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(st.Close)
	return st
}

// Listwatch is listwatch's cache.Cacher over listwatch's etcd3 storage on cli, configured as
// Upstream configures upstream's, through storageadapter.
func Listwatch(tb testing.TB, cli *clientv3.Client, s Setup) *Cache {
	tb.Helper()
	s = s.withDefaults()
	st := listwatchStorage(tb, cli, s)
	f := &Faults{listErrors: listwatchListErrors}
	cfg := cache.Config{
		Storage:        listwatchFaultStorage{Interface: st, compactRevision: st.CompactRevision, enableSizeEstimation: st.EnableResourceSizeEstimation, f: f},
		ResourcePrefix: ResourcePrefix,
		GroupResource:  GroupResource,
		KeyFunc:        s.keyFunc,
		GetAttrsFunc:   PodAttrs,
		NewFunc:        NewPod,
		NewListFunc:    NewPodList,
		Clock:          s.Clock,
		Logger:         testutil.DiscardLogger(),
		// As upstream's NewCacherFromConfig reads the gate when the cache is built.
		DisableListFromCacheSnapshot:     !listFromCacheSnapshot(),
		DisableSizeBasedListCostEstimate: !utilfeature.DefaultFeatureGate.Enabled(features.SizeBasedListCostEstimate),
	}
	if s.NodeNameTrigger {
		cfg.IndexerFuncs = map[string]cache.IndexerFunc{"spec.nodeName": PodNodeName}
	}
	c, err := cache.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Stop)
	waitReady(tb, f, c.Wait)
	return &Cache{
		Name:                   "listwatch",
		Storage:                storageadapter.New(c, storageadapter.Options{CompactRevision: st.CompactRevision}),
		Ready:                  c.Ready,
		StorageCompactRevision: st.CompactRevision,
		Faults:                 f,
		Clock:                  s.Clock,
	}
}

// waitReady waits, as upstream's testSetupWithEtcdServer does, until the injected list errors are
// consumed, then until the cache is ready.
func waitReady(tb testing.TB, f *Faults, wait func(context.Context) error) {
	tb.Helper()
	testutil.WaitFor(tb, "the injected list errors to be consumed", func() bool { return f.ListErrorsLeft() == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	if err := wait(ctx); err != nil {
		tb.Fatalf("the cache never became ready: %v", err)
	}
}

// Relist makes the cache lose its storage watch with a 410 Expired, as a compaction past what the
// cache has seen does when its watch is re-established, and waits until the cache has filled itself
// anew and is ready. Its history then starts at the new list: every watch from an earlier
// resourceVersion is too old. It stands in for upstream's compactWatch
// (cacher_testing_utils_test.go), which trims the history of its Cacher from the inside.
func (c *Cache) Relist(tb testing.TB) {
	tb.Helper()
	before := c.Faults.InitialRequests()
	c.Faults.BreakWatches()
	testutil.WaitFor(tb, c.Name+" cache to relist", func() bool { return c.Faults.InitialRequests() > before })
	testutil.WaitFor(tb, c.Name+" cache to be ready again", c.Ready)
}

// ObserveCompaction makes a cache that keeps snapshots (its compactor polls the storage's compacted
// revision: upstream's with ListFromCacheSnapshot) see the compaction at rev: once the storage has
// observed it, the compactor's poll is fired and waited for, as upstream's compactStore calls
// compactIfNeeded. A cache without such a poll has nothing to observe.
func (c *Cache) ObserveCompaction(ctx context.Context, tb testing.TB, rev int64) {
	tb.Helper()
	if !c.Clock.HasPollers() {
		return
	}
	testutil.WaitFor(tb, fmt.Sprintf("%s storage to observe compaction at %d", c.Name, rev), func() bool {
		return c.StorageCompactRevision() >= rev
	})
	if err := c.Clock.FirePollers(ctx); err != nil {
		tb.Fatal(err)
	}
}

// CompactEtcd compacts etcd at rev through upstream's watch.Compact, as upstream's compactStore
// does, and returns etcd's revision after it (the compaction writes compact_rev_key). watch.Compact
// writes compact_rev_key only at the version it is told (the compactor's guard against concurrent
// compactors); when another compaction moved it, CompactEtcd retries at the version found, as the
// apiserver's compactor does on its next round.
func CompactEtcd(ctx context.Context, tb testing.TB, cli *clientv3.Client, rev int64) int64 {
	tb.Helper()
	version := int64(0)
	for range 3 {
		cur, after, compacted, err := k8setcd3.Compact(ctx, cli, version, rev)
		if err != nil {
			tb.Fatalf("compacting at %d: %v", rev, err)
		}
		if version == cur-1 && compacted == rev {
			return after
		}
		version = cur
	}
	tb.Fatalf("compacting at %d: compact_rev_key keeps moving", rev)
	return 0
}

// NewStore is a fresh listwatch store with the lease floor and member ID of the embedded etcd.
func NewStore() *store.Store {
	opts := etcdgrpc.Options{}.WithDefaults()
	return store.New(store.Options{MinLeaseTTL: etcdtest.MinLeaseTTL, MemberID: opts.MemberID})
}

// Serve serves st in-process to a new client, both stopped at the test's cleanup (the store is the
// caller's). With a recorder, the client records every list it sends in it (ListRecorder).
func Serve(tb testing.TB, st *store.Store, recorder *storagetesting.KubernetesRecorder) *clientv3.Client {
	tb.Helper()
	var configure []func(*clientv3.Config)
	if recorder != nil {
		rec := ListRecorder{recorder}
		configure = append(configure, func(cfg *clientv3.Config) {
			cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(rec.Unary), grpc.WithChainStreamInterceptor(rec.Stream))
		})
	}
	cli, stop, err := etcdgrpc.NewClient(st, etcdgrpc.Options{}.WithDefaults(), configure...)
	if err != nil {
		tb.Fatal(err)
	}
	testutil.CloseAtCleanup(tb, "stopping the in-process etcd API", stop)
	return cli
}
