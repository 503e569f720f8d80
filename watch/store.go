package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"path"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/listwatch/listwatch/storage"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	grpccodes "google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// maxLimit is the largest page the store asks etcd for when it grows a page itself.
const maxLimit = 10000

// rangeStreamRecheckInterval is how long the RangeStream RPC stays marked unsupported after an etcd
// endpoint answered Unimplemented.
const rangeStreamRecheckInterval = 10 * time.Minute

// Features mirrors the k8s.io/apiserver v0.37 feature gates the etcd3 store reads. The zero value is
// the v0.37 default; each field turns a default-on gate off.
type Features struct {
	// DisableWatchList turns WatchList off: SendInitialEvents is then ignored except in the legacy case.
	DisableWatchList bool
	// DisableConcurrentWatchObjectDecode decodes watch events one at a time.
	DisableConcurrentWatchObjectDecode bool
	// DisableEtcdRangeStream lists with paginated ranges only, never the RangeStream RPC.
	DisableEtcdRangeStream bool
	// DisableUnsafeMalformedObjectDeletion turns AllowUnsafeMalformedObjectDeletion off: corrupt values
	// are then plain errors and DeleteOptions.ExpectTransformOrDecodeError is ignored.
	DisableUnsafeMalformedObjectDeletion bool
	// DisableListFromCacheSnapshot turns ListFromCacheSnapshot off, as upstream's etcd3/compact.go
	// NewCompactor reads it: the Store does not follow compact_rev_key, so CompactRevision knows only
	// the compactions made through Compact.
	DisableListFromCacheSnapshot bool
}

// Config configures a Storage.
type Config struct {
	// Prefix is the etcd path prefix of every key. Default "/registry".
	Prefix string
	// ResourcePrefix is the key prefix of the resource, such as "/pods/". Required: it must start with "/"
	// and not be "/".
	ResourcePrefix string
	// GroupResource names the resource in errors.
	GroupResource schema.GroupResource
	// Codec decodes and encodes stored values. Default UnstructuredJSON.
	Codec storage.Codec
	// NewFunc returns the empty object a BOOKMARK carries. When Codec is nil it defaults to
	// *unstructured.Unstructured; otherwise nil is allowed, as upstream, but then a watch with
	// ProgressNotify (or one needing the initial-events-end bookmark) is refused.
	NewFunc func() runtime.Object
	// Versioner reads and writes resourceVersions. Default APIObjectVersioner.
	Versioner storage.Versioner
	// Transformer converts values at rest. Default IdentityTransformer.
	Transformer storage.Transformer
	// Clock drives lease reuse, the slow-consumer log and the RangeStream recheck. Default the real clock.
	Clock clock.Clock
	// Logger receives the warnings upstream logs with klog. Default slog.Default().
	Logger *slog.Logger
	// LeaseReuseDurationSeconds is how long a granted lease is reused for objects with a TTL. Default 60.
	LeaseReuseDurationSeconds int64
	// LeaseMaxObjectCount is how many objects share one lease. Default 1000.
	LeaseMaxObjectCount int64
	// Features are the feature gates.
	Features Features
}

// Storage is the etcd3 store of one resource, as the apiserver's etcd3 store: objects are encoded values
// under Prefix+ResourcePrefix and every method talks to etcd through the client given to New.
type Store struct {
	client         *clientv3.Client
	kc             *kubernetes.Client
	codec          storage.Codec
	versioner      storage.Versioner
	transformer    storage.Transformer
	decoder        decoder
	pathPrefix     string
	resourcePrefix string
	groupResource  schema.GroupResource
	features       Features
	watcher        *watcher
	leases         *leaseManager
	rangeStream    *rangeStreamSupport
	logger         *slog.Logger
	compaction     *compactTracker
	clock          clock.Clock

	// estimatorMu guards the size estimate, which a watch cache enables after New, and closed.
	estimatorMu sync.Mutex
	estimator   *resourceSizeEstimator
	closed      bool
}

var _ storage.Interface = (*Store)(nil)

// New returns the Store of one resource over client. The client stays the caller's: a Store never
// closes it. The Store follows compact_rev_key from a goroutine of its own until Close (unless
// Features.DisableListFromCacheSnapshot).
//
// Mirrors etcd3/store.go New.
func New(client *clientv3.Client, cfg Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("etcd client cannot be nil")
	}
	if cfg.ResourcePrefix == "" {
		return nil, errors.New("resourcePrefix cannot be empty")
	}
	if cfg.ResourcePrefix == "/" {
		return nil, errors.New("resourcePrefix cannot be /")
	}
	if !strings.HasPrefix(cfg.ResourcePrefix, "/") {
		return nil, errors.New("resourcePrefix needs to start from /")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/registry"
	}
	pathPrefix := path.Join("/", cfg.Prefix)
	if !strings.HasSuffix(pathPrefix, "/") {
		pathPrefix += "/"
	}
	if cfg.Codec == nil {
		cfg.Codec = storage.UnstructuredJSON
		if cfg.NewFunc == nil {
			cfg.NewFunc = func() runtime.Object { return &unstructured.Unstructured{} }
		}
	}
	if cfg.Versioner == nil {
		cfg.Versioner = storage.APIObjectVersioner{}
	}
	if cfg.Transformer == nil {
		cfg.Transformer = storage.IdentityTransformer{}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LeaseReuseDurationSeconds <= 0 {
		cfg.LeaseReuseDurationSeconds = 60
	}
	if cfg.LeaseMaxObjectCount <= 0 {
		cfg.LeaseMaxObjectCount = 1000
	}

	kc := &kubernetes.Client{Client: client}
	kc.Kubernetes = kc
	var tr storage.Transformer = cfg.Transformer
	dec := decoder{codec: cfg.Codec, versioner: cfg.Versioner, logger: cfg.Logger}
	if !cfg.Features.DisableUnsafeMalformedObjectDeletion {
		tr = corruptObjTransformer{tr}
		dec.markCorrupt = true
	}
	s := &Store{
		client:         client,
		kc:             kc,
		codec:          cfg.Codec,
		versioner:      cfg.Versioner,
		transformer:    tr,
		decoder:        dec,
		pathPrefix:     pathPrefix,
		resourcePrefix: cfg.ResourcePrefix,
		groupResource:  cfg.GroupResource,
		features:       cfg.Features,
		leases:         newLeaseManager(client, cfg.Clock, cfg.LeaseReuseDurationSeconds, 0.05, cfg.LeaseMaxObjectCount),
		rangeStream:    &rangeStreamSupport{clock: cfg.Clock},
		logger:         cfg.Logger,
		compaction:     newCompactTracker(client, cfg.Clock, cfg.Logger, !cfg.Features.DisableListFromCacheSnapshot),
		clock:          cfg.Clock,
	}
	objectType := "<unknown>"
	if cfg.NewFunc != nil {
		objectType = reflect.TypeOf(cfg.NewFunc()).String()
	}
	s.watcher = &watcher{
		client:              client,
		codec:               cfg.Codec,
		newFunc:             cfg.NewFunc,
		objectType:          objectType,
		groupResource:       cfg.GroupResource,
		versioner:           cfg.Versioner,
		transformer:         tr,
		getCurrentStorageRV: s.GetCurrentResourceVersion,
		features:            cfg.Features,
		rangeStream:         s.rangeStream,
		clock:               cfg.Clock,
		logger:              cfg.Logger,
		sizeEstimator:       s.sizeEstimator,
	}
	return s, nil
}

// Versioner returns the store's Versioner.
func (s *Store) Versioner() storage.Versioner { return s.versioner }

// PathPrefix returns the etcd prefix of every key, ending in "/" (default "/registry/").
func (s *Store) PathPrefix() string { return s.pathPrefix }

// EtcdKey returns the etcd key of an apiserver key, validated as every method validates it.
func (s *Store) EtcdKey(key string, recursive bool) (string, error) {
	return s.prepareKey(key, recursive)
}

// RequestWatchProgress asks etcd for a progress notification on the watch stream the store's watches
// share; every watch of that stream that is synced turns it into a BOOKMARK.
//
// Mirrors etcd3/store.go store.RequestWatchProgress.
func (s *Store) RequestWatchProgress(ctx context.Context) error {
	return s.client.RequestProgress(watchContext(ctx))
}

// Compact compacts etcd's history up to rev and records it for CompactRevision. Upstream runs this from
// its compactor; here the caller decides when.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	if _, err := s.client.Compact(ctx, rev); err != nil {
		return err
	}
	s.compaction.update(rev)
	return nil
}

// CompactRevision returns the newest compacted revision the Store knows of, or 0: those compacted
// through Compact, and those any client announced in compact_rev_key (as the apiserver's compactor
// does), seen through a watch of that key that starts a second after New. With
// Features.DisableListFromCacheSnapshot only those made through Compact, as upstream's with the gate
// off.
//
// Mirrors etcd3/store.go store.CompactRevision.
func (s *Store) CompactRevision() int64 { return s.compaction.revision() }

// Close stops the Store's watch of compact_rev_key and the size estimate's cleanup, and waits for
// them. Watches already started are not stopped. Calling Close again does nothing.
//
// Mirrors etcd3/store.go store.Close, with the compactor's Stop of the storage factory's destroy func.
func (s *Store) Close() {
	s.compaction.close()
	s.closeSizeEstimator()
}

// Get decodes the object at key into out. A missing key is a KeyNotFound storage error unless
// opts.IgnoreNotFound, which zeroes out. opts.ResourceVersion is a "not older than" bound: a revision
// newer than etcd's is TooLargeResourceVersion.
//
// Mirrors etcd3/store.go store.Get.
func (s *Store) Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	preparedKey, err := s.prepareKey(key, false)
	if err != nil {
		return err
	}
	getResp, err := s.kc.Kubernetes.Get(ctx, preparedKey, kubernetes.GetOptions{})
	if err != nil {
		return err
	}
	if err := s.validateMinimumResourceVersion(opts.ResourceVersion, uint64(getResp.Revision)); err != nil {
		return err
	}
	if getResp.KV == nil {
		if opts.IgnoreNotFound {
			return runtime.SetZeroValue(out)
		}
		return storage.NewKeyNotFoundError(preparedKey, 0)
	}
	data, _, err := s.transformer.TransformFromStorage(ctx, getResp.KV.Value, preparedKey)
	if err != nil {
		return s.corruptOr(preparedKey, storage.NewInternalError(err))
	}
	if err := s.decoder.decode(data, out, getResp.KV.ModRevision); err != nil {
		return s.corruptOr(preparedKey, err)
	}
	return nil
}

// corruptOr turns a corrupt-value failure into a CorruptObj storage error, as the corruptObjectDeleter
// wrapper does upstream while AllowUnsafeMalformedObjectDeletion is on.
func (s *Store) corruptOr(key string, err error) error {
	var coe *corruptObjectError
	if errors.As(err, &coe) {
		return storage.NewCorruptObjError(key, coe)
	}
	return err
}

// Create stores obj at key unless the key exists (KeyExists). obj must not carry a resourceVersion;
// ttl > 0 attaches a lease of that many seconds. out, if not nil, receives the stored object with its
// new resourceVersion.
//
// Mirrors etcd3/store.go store.Create.
func (s *Store) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	preparedKey, err := s.prepareKey(key, false)
	if err != nil {
		return err
	}
	if obj == nil {
		return errors.New("object to create cannot be nil")
	}
	if v, err := s.versioner.ObjectResourceVersion(obj); err == nil && v != 0 {
		return storage.ErrResourceVersionSetOnCreate
	}
	if err := s.versioner.PrepareObjectForStorage(obj); err != nil {
		return fmt.Errorf("PrepareObjectForStorage failed: %v", err)
	}
	data, err := s.codec.Encode(obj)
	if err != nil {
		return err
	}
	var lease clientv3.LeaseID
	if ttl != 0 {
		if lease, err = s.leases.GetLease(ctx, int64(ttl)); err != nil {
			return err
		}
	}
	newData, err := s.transformer.TransformToStorage(ctx, data, preparedKey)
	if err != nil {
		return storage.NewInternalError(err)
	}
	txnResp, err := s.kc.Kubernetes.OptimisticPut(ctx, preparedKey, newData, 0, kubernetes.PutOptions{LeaseID: lease})
	if err != nil {
		return err
	}
	if !txnResp.Succeeded {
		return storage.NewKeyExistsError(preparedKey, 0)
	}
	if out != nil {
		return s.decoder.decode(data, out, txnResp.Revision)
	}
	return nil
}

// objState is what a read of one key found.
type objState struct {
	obj   runtime.Object
	meta  storage.ResponseMeta
	rev   int64
	data  []byte
	stale bool
}

// writeTarget prepares the key of a single-object write and checks that out is a pointer, as
// upstream's Delete and GuaranteedUpdate do before their first read.
func (s *Store) writeTarget(key string, out runtime.Object) (string, reflect.Value, error) {
	preparedKey, err := s.prepareKey(key, false)
	if err != nil {
		return "", reflect.Value{}, err
	}
	v, err := enforcePtr(out)
	if err != nil {
		return "", reflect.Value{}, fmt.Errorf("unable to convert output object to pointer: %v", err)
	}
	return preparedKey, v, nil
}

// writeState is the state a conditional write works from: a cached object's, which may be stale, or
// the one last read from etcd (current), with the read that refreshes it.
type writeState struct {
	*objState
	current bool
	read    func() (*objState, error)
}

// startState returns the state a conditional write starts from: cached's, when given, else a read.
func (s *Store) startState(cached runtime.Object, read func() (*objState, error)) (*writeState, error) {
	ws := &writeState{read: read}
	var err error
	if cached != nil {
		ws.objState, err = s.getStateFromObject(cached)
	} else {
		ws.objState, err = read()
		ws.current = true
	}
	return ws, err
}

// reread replaces the state with a fresh read.
func (ws *writeState) reread() error {
	st, err := ws.read()
	if err != nil {
		return err
	}
	ws.objState, ws.current = st, true
	return nil
}

// refresh re-reads a state that may be stale after checkErr and reports whether the check that failed
// should be retried: not when the state was current or the object has not changed since (checkErr
// stands then).
func (ws *writeState) refresh(checkErr error) (retry bool, err error) {
	if ws.current {
		return false, checkErr
	}
	cachedRev := ws.rev
	if err := ws.reread(); err != nil {
		return false, err
	}
	if cachedRev == ws.rev {
		return false, checkErr
	}
	return true, nil
}

// Delete removes the object at key after preconditions and validateDeletion accept it, retrying on
// concurrent writes; out receives the deleted object carrying the deletion revision. A missing key is
// KeyNotFound. cachedExistingObject, if given, is tried first and re-read when stale.
//
// Mirrors etcd3/store.go store.Delete and conditionalDelete.
func (s *Store) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	preparedKey, v, err := s.writeTarget(key, out)
	if err != nil {
		return err
	}
	if validateDeletion == nil {
		validateDeletion = storage.ValidateAllObjectFunc
	}
	expectCorrupt := !s.features.DisableUnsafeMalformedObjectDeletion && opts.ExpectTransformOrDecodeError
	return s.conditionalDelete(ctx, preparedKey, out, v, preconditions, validateDeletion, cachedExistingObject, expectCorrupt)
}

func (s *Store) conditionalDelete(ctx context.Context, key string, out runtime.Object, v reflect.Value, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, expectCorrupt bool) error {
	if expectCorrupt {
		// A corrupt object is read as etcd holds it, never taken from a cache.
		cachedExistingObject = nil
	}
	orig, err := s.startState(cachedExistingObject, s.getCurrentState(ctx, key, v, false, expectCorrupt))
	if err != nil {
		return err
	}
	for {
		if err := preconditions.Check(key, orig.obj); err != nil {
			if retry, err := orig.refresh(err); !retry {
				return err
			}
			continue
		}
		if err := validateDeletion(ctx, orig.obj); err != nil {
			if retry, err := orig.refresh(err); !retry {
				return err
			}
			continue
		}
		txnResp, err := s.kc.Kubernetes.OptimisticDelete(ctx, key, orig.rev, kubernetes.DeleteOptions{GetOnFailure: true})
		if err != nil {
			return err
		}
		if !txnResp.Succeeded {
			if orig.objState, err = s.getState(ctx, txnResp.KV, key, v, false, expectCorrupt); err != nil {
				return err
			}
			orig.current = true
			continue
		}
		if !expectCorrupt {
			return s.decoder.decode(orig.data, out, txnResp.Revision)
		}
		return nil
	}
}

// GuaranteedUpdate reads the object at key, applies tryUpdate and writes the result if the object did
// not change meanwhile, retrying with the fresh object otherwise. A missing key is KeyNotFound unless
// ignoreNotFound, in which case tryUpdate sees a zero object and the write creates the key. An update
// that changes nothing is not written. destination receives the stored object.
//
// Mirrors etcd3/store.go store.GuaranteedUpdate.
func (s *Store) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	preparedKey, v, err := s.writeTarget(key, destination)
	if err != nil {
		return err
	}
	if tryUpdate == nil {
		return errors.New("update function cannot be nil")
	}
	orig, err := s.startState(cachedExistingObject, s.getCurrentState(ctx, preparedKey, v, ignoreNotFound, false))
	if err != nil {
		return err
	}
	for {
		if err := preconditions.Check(preparedKey, orig.obj); err != nil {
			if orig.current {
				return err
			}
			if err := orig.reread(); err != nil {
				return err
			}
			continue
		}

		ret, ttl, err := s.updateState(orig.objState, tryUpdate)
		if err != nil {
			if retry, err := orig.refresh(err); !retry {
				return err
			}
			continue
		}

		data, err := s.codec.Encode(ret)
		if err != nil {
			return err
		}
		if !orig.stale && bytes.Equal(data, orig.data) {
			// A no-op update is only skipped against data known to be current.
			if !orig.current {
				if err := orig.reread(); err != nil {
					return err
				}
				if !bytes.Equal(data, orig.data) {
					continue
				}
			}
			if !orig.stale {
				return s.decoder.decode(orig.data, destination, orig.rev)
			}
		}

		newData, err := s.transformer.TransformToStorage(ctx, data, preparedKey)
		if err != nil {
			return storage.NewInternalError(err)
		}
		var lease clientv3.LeaseID
		if ttl != 0 {
			if lease, err = s.leases.GetLease(ctx, int64(ttl)); err != nil {
				return err
			}
		}
		txnResp, err := s.kc.Kubernetes.OptimisticPut(ctx, preparedKey, newData, orig.rev, kubernetes.PutOptions{
			GetOnFailure: true,
			LeaseID:      lease,
		})
		if err != nil {
			return err
		}
		if !txnResp.Succeeded {
			if orig.objState, err = s.getState(ctx, txnResp.KV, preparedKey, v, ignoreNotFound, false); err != nil {
				return err
			}
			orig.current = true
			continue
		}
		return s.decoder.decode(data, destination, txnResp.Revision)
	}
}

// Update replaces the object at key with obj, which must exist. A non-empty resourceVersion on obj is a
// precondition: if the stored object has another one the update fails with ResourceVersionConflicts,
// as the registry's optimistic concurrency check does. out receives the stored object. It is a
// listwatch convenience over GuaranteedUpdate.
func (s *Store) Update(ctx context.Context, key string, obj, out runtime.Object) error {
	if obj == nil {
		return errors.New("object to update cannot be nil")
	}
	want, err := s.versioner.ObjectResourceVersion(obj)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
	}
	preparedKey, err := s.prepareKey(key, false)
	if err != nil {
		return err
	}
	return s.GuaranteedUpdate(ctx, key, out, false, nil, func(_ runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
		if want != 0 && want != res.ResourceVersion {
			return nil, nil, storage.NewResourceVersionConflictsError(preparedKey, int64(want))
		}
		return obj.DeepCopyObject(), nil, nil
	}, nil)
}

// GetCurrentResourceVersion returns etcd's current revision, read with a consistent range.
//
// Mirrors etcd3/store.go store.GetCurrentResourceVersion.
func (s *Store) GetCurrentResourceVersion(ctx context.Context) (uint64, error) {
	preparedKey, err := s.prepareKey(s.resourcePrefix, false)
	if err != nil {
		return 0, err
	}
	getResp, err := s.kc.Kubernetes.Get(ctx, preparedKey, kubernetes.GetOptions{})
	if err != nil {
		return 0, err
	}
	if getResp.Revision == 0 {
		return 0, errors.New("the current resource version must be greater than 0")
	}
	return uint64(getResp.Revision), nil
}

// Watch watches key (a prefix when opts.Recursive) and returns the events opts.Predicate selects; see
// the package documentation for the guarantees.
//
// Mirrors etcd3/store.go store.Watch.
func (s *Store) Watch(ctx context.Context, key string, opts storage.ListOptions) (apiwatch.Interface, error) {
	preparedKey, err := s.prepareKey(key, opts.Recursive)
	if err != nil {
		return nil, err
	}
	rev, err := s.versioner.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	return s.watcher.Watch(watchContext(ctx), preparedKey, int64(rev), opts)
}

// watchContext makes the etcd server end watches when it loses its leader. It is also what makes every
// watch of a store share one gRPC stream with RequestWatchProgress.
func watchContext(ctx context.Context) context.Context { return clientv3.WithRequireLeader(ctx) }

// GetList decodes the objects at key (every object under it when opts.Recursive) that opts.Predicate
// selects into listObj, a pointer to a list type with an Items slice, and sets its resourceVersion,
// continue token and remaining item count.
//
// The resourceVersion rules are the etcd3 store's: "" reads at the current revision (consistent);
// NotOlderThan (and legacy "0" or RV without a limit) reads current data and fails with
// TooLargeResourceVersion if RV is newer; Exact (and legacy RV with a limit) reads at RV, 410 Expired
// if compacted. A continue token pins the list to its revision (-1: the latest).
//
// Mirrors etcd3/store.go store.GetList.
func (s *Store) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	keyPrefix, err := s.prepareKey(key, opts.Recursive)
	if err != nil {
		return err
	}
	listPtr, err := meta.GetItemsPtr(listObj)
	if err != nil {
		return err
	}
	v, err := enforcePtr(listPtr)
	if err != nil || v.Kind() != reflect.Slice {
		return fmt.Errorf("need ptr to slice: %v", err)
	}
	limit := opts.Predicate.Limit
	paging := limit > 0
	newItemFunc := getNewItemFunc(listObj, v)

	withRev, continueKey, err := validateListOptions(keyPrefix, s.versioner, opts)
	if err != nil {
		return err
	}

	var lastKey []byte
	var hasMore bool
	var count int64
	aggregator := s.newListErrorAggregator()

	chunks := s.pagedChunks(ctx, keyPrefix, opts, withRev, limit, continueKey)
	if s.shouldStream(opts) {
		if streamed, ok := s.streamChunks(ctx, keyPrefix, withRev, limit, continueKey); ok {
			chunks = streamed
		} else {
			s.rangeStream.markUnsupported()
		}
	}

	for chunk, chunkErr := range chunks {
		if chunkErr != nil {
			return chunkErr
		}
		if chunk.revision != nil {
			if withRev == 0 {
				if err := s.validateMinimumResourceVersion(opts.ResourceVersion, uint64(*chunk.revision)); err != nil {
					return err
				}
				withRev = *chunk.revision
			} else if *chunk.revision != withRev {
				return fmt.Errorf("etcd returned revision %d for a list read at revision %d", *chunk.revision, withRev)
			}
		}
		if len(chunk.kvs) == 0 && chunk.hasMore {
			return errors.New("no results were found, but etcd indicated there were more values remaining")
		}
		count = chunk.count

		chunkLastKey, limitReached, err := s.appendChunk(ctx, chunk.kvs, opts.Predicate, newItemFunc, aggregator, v, paging)
		if err != nil {
			return err
		}
		if chunkLastKey != nil {
			lastKey = chunkLastKey
		}
		hasMore = chunk.hasMore || limitReached
		if limitReached || !chunk.hasMore {
			break
		}
		if paging && int64(v.Len()) >= opts.Predicate.Limit {
			break
		}
	}

	continueValue, remainingItemCount, err := storage.PrepareContinueToken(string(lastKey), keyPrefix, withRev, count, hasMore, opts)
	if err != nil {
		return err
	}
	if err := aggregator.aggregate(s.groupResource); err != nil {
		return err
	}
	if v.IsNil() {
		v.Set(reflect.MakeSlice(v.Type(), 0, 0))
	}
	return s.versioner.UpdateList(listObj, uint64(withRev), continueValue, remainingItemCount)
}

// validateListOptions returns the revision to read at (0: current) and the continue key.
//
// Mirrors storage/interfaces.go ValidateListOptions.
func validateListOptions(keyPrefix string, versioner storage.Versioner, opts storage.ListOptions) (withRev int64, continueKey string, err error) {
	if opts.Recursive && len(opts.Predicate.Continue) > 0 {
		continueKey, continueRV, err := storage.DecodeContinue(opts.Predicate.Continue, keyPrefix)
		if err != nil {
			return 0, "", apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
		}
		if len(opts.ResourceVersion) > 0 && opts.ResourceVersion != "0" {
			return 0, "", apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		if continueRV > 0 {
			withRev = continueRV
		}
		return withRev, continueKey, nil
	}
	if len(opts.ResourceVersion) == 0 {
		return 0, "", nil
	}
	parsedRV, err := versioner.ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return 0, "", apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
	}
	switch opts.ResourceVersionMatch {
	case metav1.ResourceVersionMatchNotOlderThan:
	case metav1.ResourceVersionMatchExact:
		withRev = int64(parsedRV)
	case "":
		if opts.Recursive && opts.Predicate.Limit > 0 && parsedRV > 0 {
			withRev = int64(parsedRV)
		}
	default:
		return 0, "", fmt.Errorf("unknown ResourceVersionMatch value: %v", opts.ResourceVersionMatch)
	}
	return withRev, "", nil
}

// listChunk is one batch of a list read: a page of a paginated range or a chunk of a RangeStream.
type listChunk struct {
	kvs      []*mvccpb.KeyValue
	revision *int64
	count    int64 // keys left in the range, this batch included
	hasMore  bool
}

// pagedChunks mirrors etcd3 store.pagedChunks: pages pinned to the first page's revision, the page size
// doubling (to maxLimit) while the predicate drops objects.
func (s *Store) pagedChunks(ctx context.Context, keyPrefix string, opts storage.ListOptions, withRev, limit int64, continueKey string) iter.Seq2[listChunk, error] {
	return func(yield func(listChunk, error) bool) {
		for {
			resp, err := s.getList(ctx, keyPrefix, opts.Recursive, kubernetes.ListOptions{Revision: withRev, Limit: limit, Continue: continueKey})
			if err != nil {
				yield(listChunk{}, s.listReadError(ctx, err, withRev, len(opts.Predicate.Continue) > 0, continueKey, keyPrefix))
				return
			}
			hasMore := int64(len(resp.Kvs)) < resp.Count
			if withRev == 0 {
				withRev = resp.Revision
			}
			if len(resp.Kvs) > 0 {
				continueKey = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
			}
			revision := withRev
			if !yield(listChunk{kvs: resp.Kvs, revision: &revision, count: resp.Count, hasMore: hasMore}, nil) {
				return
			}
			if !hasMore {
				return
			}
			if limit < maxLimit {
				limit = min(limit*2, maxLimit)
			}
		}
	}
}

// getList reads one page: a range for a recursive list, a single Get otherwise. The size estimate,
// if kept, records the values read.
//
// Mirrors etcd3/store.go store.getList.
func (s *Store) getList(ctx context.Context, keyPrefix string, recursive bool, options kubernetes.ListOptions) (kubernetes.ListResponse, error) {
	var resp kubernetes.ListResponse
	if recursive {
		var err error
		if resp, err = s.kc.Kubernetes.List(ctx, keyPrefix, options); err != nil {
			return resp, err
		}
	} else {
		getResp, err := s.kc.Kubernetes.Get(ctx, keyPrefix, kubernetes.GetOptions{Revision: options.Revision})
		if err != nil {
			return resp, err
		}
		resp.Revision = getResp.Revision
		resp.Kvs = []*mvccpb.KeyValue{}
		if getResp.KV != nil {
			resp.Kvs = []*mvccpb.KeyValue{getResp.KV}
			resp.Count = 1
		}
	}
	if e := s.sizeEstimator(); e != nil && len(resp.Kvs) > 0 {
		e.update(resp.Kvs)
	}
	return resp, nil
}

// listReadError mirrors etcd3 store.listReadError: a future revision is TooLargeResourceVersion.
func (s *Store) listReadError(ctx context.Context, err error, withRev int64, paging bool, continueKey, keyPrefix string) error {
	if errors.Is(err, rpctypes.ErrFutureRev) {
		currentRV, getErr := s.GetCurrentResourceVersion(ctx)
		if getErr != nil {
			currentRV = 0
		}
		return storage.NewTooLargeResourceVersionError(uint64(withRev), currentRV, 0)
	}
	return interpretListError(err, paging, continueKey, keyPrefix)
}

// shouldStream mirrors etcd3 shouldStream: only unfiltered or unlimited recursive lists stream.
func (s *Store) shouldStream(opts storage.ListOptions) bool {
	if !opts.Recursive {
		return false
	}
	if opts.Predicate.Limit > 0 && !opts.Predicate.Empty() {
		return false
	}
	return !s.features.DisableEtcdRangeStream && s.rangeStream.supported()
}

// streamChunks mirrors etcd3 store.streamChunks: one RangeStream, pinned to withRev when set. ok is
// false when the server does not implement the RPC.
func (s *Store) streamChunks(ctx context.Context, keyPrefix string, withRev, limit int64, continueKey string) (chunks iter.Seq2[listChunk, error], ok bool) {
	paging := continueKey != ""
	startKey := keyPrefix
	if paging {
		startKey = continueKey
	}
	streamOpts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(keyPrefix))}
	if withRev > 0 {
		streamOpts = append(streamOpts, clientv3.WithRev(withRev))
	}
	if limit > 0 {
		streamOpts = append(streamOpts, clientv3.WithLimit(limit))
	}
	stream, streamErr := s.client.KV.GetStream(ctx, startKey, streamOpts...)
	var first clientv3.RangeStreamResponse
	var firstOk bool
	if streamErr == nil {
		first, firstOk = <-stream
		if firstOk && grpcstatus.Code(first.Err()) == grpccodes.Unimplemented {
			drain(stream)
			return nil, false
		}
	} else if grpcstatus.Code(streamErr) == grpccodes.Unimplemented {
		return nil, false
	}
	return func(yield func(listChunk, error) bool) {
		// The client's receiving goroutine exits only once the channel is drained.
		defer drain(stream)
		if streamErr != nil {
			yield(listChunk{}, s.listReadError(ctx, streamErr, withRev, paging, continueKey, keyPrefix))
			return
		}
		estimator := s.sizeEstimator()
		var revision *int64
		if withRev > 0 {
			revision = &withRev
		}
		resp, ok := first, firstOk
		for ok {
			if err := resp.Err(); err != nil {
				yield(listChunk{}, s.listReadError(ctx, err, withRev, paging, continueKey, keyPrefix))
				return
			}
			rr := resp.RangeResponse
			if estimator != nil && len(rr.Kvs) > 0 {
				estimator.update(rr.Kvs)
			}
			// A pinned stream's last header holds the store's latest revision, not withRev.
			if revision == nil && rr.Header != nil {
				rev := rr.Header.Revision
				revision = &rev
			}
			next, nextOk := <-stream
			// On the last chunk More means the limit cut the range: there is a next page.
			if !yield(listChunk{kvs: rr.Kvs, revision: revision, count: rr.Count, hasMore: nextOk || rr.More}, nil) {
				return
			}
			resp, ok = next, nextOk
		}
		if revision == nil {
			yield(listChunk{}, fmt.Errorf("rangeStream for %q completed without a revision", keyPrefix))
		}
	}, true
}

// drain empties a RangeStream channel so that the client's receiving goroutine can exit. The client
// cancels the RPC with the caller's context, so a caller giving up early must cancel it.
func drain(stream clientv3.GetStreamChan) {
	if stream == nil {
		return
	}
	for range stream {
	}
}

// appendChunk mirrors etcd3 store.appendChunk: it decodes kvs and appends the matching objects to v
// until the page limit.
func (s *Store) appendChunk(ctx context.Context, kvs []*mvccpb.KeyValue, pred storage.Predicate, newItemFunc func() runtime.Object,
	agg *listErrorAggregator, v reflect.Value, paging bool) (lastKey []byte, limitReached bool, err error) {
	for i, kv := range kvs {
		if paging && int64(v.Len()) >= pred.Limit {
			return lastKey, true, nil
		}
		lastKey = kv.Key
		if err := s.processListItem(ctx, kv, pred, newItemFunc, agg, v); err != nil {
			return lastKey, false, err
		}
		// Long lists take a while to decode: let the page go early.
		kvs[i] = nil
	}
	return lastKey, false, nil
}

// processListItem mirrors etcd3 store.processListItem.
func (s *Store) processListItem(ctx context.Context, kv *mvccpb.KeyValue, pred storage.Predicate, newItemFunc func() runtime.Object, agg *listErrorAggregator, v reflect.Value) error {
	data, _, err := s.transformer.TransformFromStorage(ctx, kv.Value, string(kv.Key))
	if err != nil {
		if agg.add(string(kv.Key), storage.NewInternalError(fmt.Errorf("unable to transform key %q: %w", kv.Key, err))) {
			return agg.aggregate(s.groupResource)
		}
		return nil
	}
	select {
	case <-ctx.Done():
		return storage.NewTimeoutError(string(kv.Key), "request did not complete within requested timeout")
	default:
	}
	obj, err := s.decoder.decodeListItem(data, uint64(kv.ModRevision), newItemFunc)
	if err != nil {
		if agg.add(string(kv.Key), err) {
			return agg.aggregate(s.groupResource)
		}
		return nil
	}
	if matched, err := pred.Matches(obj); err == nil && matched {
		v.Set(reflect.Append(v, reflect.ValueOf(obj).Elem()))
	}
	return nil
}

// getNewItemFunc mirrors etcd3 getNewItemFunc: unstructured list items keep the list's apiVersion.
func getNewItemFunc(listObj runtime.Object, v reflect.Value) func() runtime.Object {
	if ul, ok := listObj.(*unstructured.UnstructuredList); ok {
		if apiVersion := ul.GetAPIVersion(); len(apiVersion) > 0 {
			return func() runtime.Object {
				return &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": apiVersion}}
			}
		}
	}
	elem := v.Type().Elem()
	return func() runtime.Object { return reflect.New(elem).Interface().(runtime.Object) }
}

// validateMinimumResourceVersion fails with TooLargeResourceVersion when a "not older than" bound is
// newer than the revision read.
//
// Mirrors etcd3/store.go store.validateMinimumResourceVersion.
func (s *Store) validateMinimumResourceVersion(minimumResourceVersion string, actualRevision uint64) error {
	if minimumResourceVersion == "" {
		return nil
	}
	minimumRV, err := s.versioner.ParseResourceVersion(minimumResourceVersion)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
	}
	if minimumRV > actualRevision {
		return storage.NewTooLargeResourceVersionError(minimumRV, actualRevision, 0)
	}
	return nil
}

// prepareKey validates key and returns its etcd key.
//
// Mirrors etcd3/store.go store.prepareKey.
func (s *Store) prepareKey(key string, recursive bool) (string, error) {
	key, err := storage.PrepareKey(s.resourcePrefix, key, recursive)
	if err != nil {
		return "", err
	}
	return s.pathPrefix + strings.TrimPrefix(key, "/"), nil
}

func (s *Store) getCurrentState(ctx context.Context, key string, v reflect.Value, ignoreNotFound, expectCorrupt bool) func() (*objState, error) {
	return func() (*objState, error) {
		getResp, err := s.kc.Kubernetes.Get(ctx, key, kubernetes.GetOptions{})
		if err != nil {
			return nil, err
		}
		return s.getState(ctx, getResp.KV, key, v, ignoreNotFound, expectCorrupt)
	}
}

// getState decodes a read value. With expectCorrupt a readable value is an InvalidObj error and an
// unreadable one a state without an object.
//
// Mirrors etcd3/store.go store.getState.
func (s *Store) getState(ctx context.Context, kv *mvccpb.KeyValue, key string, v reflect.Value, ignoreNotFound, expectCorrupt bool) (*objState, error) {
	state := &objState{}
	if u, ok := v.Addr().Interface().(runtime.Unstructured); ok {
		state.obj = u.NewEmptyInstance()
	} else {
		state.obj = reflect.New(v.Type()).Interface().(runtime.Object)
	}
	if kv == nil {
		if !ignoreNotFound {
			return nil, storage.NewKeyNotFoundError(key, 0)
		}
		if err := runtime.SetZeroValue(state.obj); err != nil {
			return nil, err
		}
		return state, nil
	}
	state.rev = kv.ModRevision
	state.meta.ResourceVersion = uint64(state.rev)
	data, stale, err := s.transformer.TransformFromStorage(ctx, kv.Value, key)
	if err != nil {
		if !expectCorrupt {
			return nil, storage.NewInternalError(err)
		}
		state.obj = nil
		state.stale = true
		return state, nil
	}
	state.data = data
	state.stale = stale
	if err := s.decoder.decode(state.data, state.obj, state.rev); err != nil {
		if !expectCorrupt {
			return nil, err
		}
		state.obj = nil
		return state, nil
	}
	if expectCorrupt {
		return nil, storage.NewInvalidObjError(key, "unsafe deletion is not allowed because the object is decodable from storage")
	}
	return state, nil
}

// getStateFromObject mirrors etcd3 store.getStateFromObject: a cached object stands for a read.
func (s *Store) getStateFromObject(obj runtime.Object) (*objState, error) {
	state := &objState{obj: obj}
	rv, err := s.versioner.ObjectResourceVersion(obj)
	if err != nil {
		return nil, fmt.Errorf("couldn't get resource version: %v", err)
	}
	state.rev = int64(rv)
	state.meta.ResourceVersion = rv
	// The stored bytes never carry a resourceVersion: clear it to encode, then put it back.
	if err := s.versioner.PrepareObjectForStorage(obj); err != nil {
		return nil, fmt.Errorf("PrepareObjectForStorage failed: %v", err)
	}
	if state.data, err = s.codec.Encode(obj); err != nil {
		return nil, err
	}
	if err := s.versioner.UpdateObject(state.obj, rv); err != nil {
		s.logger.Error("failed to update object version", "err", err)
	}
	return state, nil
}

// updateState mirrors etcd3 store.updateState.
func (s *Store) updateState(st *objState, userUpdate storage.UpdateFunc) (runtime.Object, uint64, error) {
	ret, ttlPtr, err := userUpdate(st.obj, st.meta)
	if err != nil {
		return nil, 0, err
	}
	if ret == nil {
		return nil, 0, errors.New("update function returned a nil object")
	}
	if err := s.versioner.PrepareObjectForStorage(ret); err != nil {
		return nil, 0, fmt.Errorf("PrepareObjectForStorage failed: %v", err)
	}
	var ttl uint64
	if ttlPtr != nil {
		ttl = *ttlPtr
	}
	return ret, ttl, nil
}

// enforcePtr returns the value obj points to; obj must be a non-nil pointer.
func enforcePtr(obj interface{}) (reflect.Value, error) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer {
		if v.Kind() == reflect.Invalid {
			return reflect.Value{}, errors.New("expected pointer, but got invalid kind")
		}
		return reflect.Value{}, fmt.Errorf("expected pointer, but got %v type", v.Type())
	}
	if v.IsNil() {
		return reflect.Value{}, errors.New("expected pointer, but got nil")
	}
	return v.Elem(), nil
}

// decoder decodes stored values and stamps their resourceVersion, as etcd3's defaultDecoder; with
// markCorrupt (AllowUnsafeMalformedObjectDeletion) failures are corruptObjectErrors.
type decoder struct {
	codec       storage.Codec
	versioner   storage.Versioner
	logger      *slog.Logger
	markCorrupt bool
}

func (d decoder) decode(value []byte, out runtime.Object, rev int64) error {
	if _, err := enforcePtr(out); err != nil {
		return fmt.Errorf("unable to convert output object to pointer: %v", err)
	}
	if _, err := d.codec.Decode(value, out); err != nil {
		if d.markCorrupt {
			return &corruptObjectError{err: err, errType: undecodable, revision: rev}
		}
		return err
	}
	// Failing to stamp the version does not make the object unusable.
	if err := d.versioner.UpdateObject(out, uint64(rev)); err != nil {
		d.logger.Error("failed to update object version", "err", err)
	}
	return nil
}

func (d decoder) decodeListItem(data []byte, rev uint64, newItemFunc func() runtime.Object) (runtime.Object, error) {
	obj, err := d.codec.Decode(data, newItemFunc())
	if err != nil {
		if d.markCorrupt {
			return nil, &corruptObjectError{err: err, errType: undecodable, revision: int64(rev)}
		}
		return nil, err
	}
	if err := d.versioner.UpdateObject(obj, rev); err != nil {
		d.logger.Error("failed to update object version", "err", err)
	}
	return obj, nil
}

// corruptObjTransformer marks values that fail to transform as corrupt.
//
// Mirrors etcd3/corrupt_obj_deleter.go corruptObjErrorInterpretingTransformer.
type corruptObjTransformer struct{ storage.Transformer }

func (t corruptObjTransformer) TransformFromStorage(ctx context.Context, data []byte, key string) ([]byte, bool, error) {
	out, stale, err := t.Transformer.TransformFromStorage(ctx, data, key)
	if err != nil {
		err = &corruptObjectError{err: err, errType: untransformable}
	}
	return out, stale, err
}

// rangeStreamSupport remembers that an endpoint answered RangeStream with Unimplemented, and forgets it
// after rangeStreamRecheckInterval.
//
// Mirrors storage/feature/feature_support_checker.go defaultFeatureSupportChecker (RangeStream), per store.
type rangeStreamSupport struct {
	clock         clock.PassiveClock
	mu            sync.Mutex
	unsupportedAt time.Time
}

func (r *rangeStreamSupport) supported() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unsupportedAt.IsZero() || r.clock.Since(r.unsupportedAt) >= rangeStreamRecheckInterval
}

func (r *rangeStreamSupport) markUnsupported() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unsupportedAt = r.clock.Now()
}

// listErrorAggregator collects the per-item errors of a list. Without unsafe corrupt-object deletion
// the first error aborts the list; with it, up to 100 corrupt objects are collected and reported in one
// 500 StoreReadError.
//
// Mirrors etcd3/store.go abortOnFirstError and etcd3/corrupt_obj_deleter.go corruptObjErrAggregator.
type listErrorAggregator struct {
	collectCorrupt bool
	errs           []*storage.StorageError
	abortErr       error
}

const maxCorruptObjErrsToAggregate = 100

var errTooMany = errors.New("too many errors, the list is truncated")

func (s *Store) newListErrorAggregator() *listErrorAggregator {
	return &listErrorAggregator{collectCorrupt: !s.features.DisableUnsafeMalformedObjectDeletion}
}

// add records err for key and reports whether the list must stop.
func (a *listErrorAggregator) add(key string, err error) bool {
	if a.abortErr != nil {
		return true
	}
	var coe *corruptObjectError
	if a.collectCorrupt && errors.As(err, &coe) {
		a.errs = append(a.errs, storage.NewCorruptObjError(key, coe))
		if len(a.errs) >= maxCorruptObjErrsToAggregate {
			a.abortErr = errTooMany
			return true
		}
		return false
	}
	a.abortErr = err
	return true
}

// aggregate mirrors corruptObjErrAggregator.Aggregate followed by aggregatedStorageError.NewAPIStatusError.
func (a *listErrorAggregator) aggregate(gr schema.GroupResource) error {
	if len(a.errs) == 0 {
		return a.abortErr
	}
	var causes []metav1.StatusCause
	for _, e := range a.errs {
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeUnexpectedServerResponse, Field: e.Key, Message: e.Error()})
	}
	switch {
	case errors.Is(a.abortErr, errTooMany):
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeTooMany, Message: errTooMany.Error()})
	case a.abortErr != nil:
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeUnexpectedServerResponse, Message: a.abortErr.Error()})
	}
	message := fmt.Sprintf("failed to read one or more %s from the storage: %v", gr.String(), a.errs[0])
	if len(a.errs) > 1 {
		message = fmt.Sprintf("%s (and %d more)", message, len(a.errs)-1)
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   500,
		Reason: metav1.StatusReasonStoreReadError,
		Details: &metav1.StatusDetails{
			Group:  gr.Group,
			Kind:   gr.Resource,
			Name:   "list",
			Causes: causes,
		},
		Message: message,
	}}
}
