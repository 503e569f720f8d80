package storageadapter

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/request"
	k8sstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/value"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"

	"github.com/listwatch/listwatch/storage"
)

// ErrNotSupported is returned by the methods of k8s.io/apiserver's storage.Interface that
// listwatch's storage.Interface leaves out (EnableResourceSizeEstimation) and by the conversions of
// options listwatch has no counterpart for.
var ErrNotSupported = errors.New("not part of listwatch's storage.Interface")

// Options complete what listwatch's storage.Interface leaves out.
type Options struct {
	// CompactRevision answers CompactRevision. Default: the adapted storage's own CompactRevision
	// method when it has one (*watch.Store does), else 0. A watch cache answers with its storage's,
	// as upstream's CacheDelegator.CompactRevision does.
	CompactRevision func() int64
}

// Storage is a listwatch storage.Interface seen as k8s.io/apiserver's storage.Interface.
type Storage struct {
	s               storage.Interface
	compactRevision func() int64
}

var _ k8sstorage.Interface = (*Storage)(nil)

// New returns s as k8s.io/apiserver's storage.Interface.
func New(s storage.Interface, opts Options) *Storage {
	a := &Storage{s: s, compactRevision: opts.CompactRevision}
	if a.compactRevision == nil {
		if c, ok := s.(interface{ CompactRevision() int64 }); ok {
			a.compactRevision = c.CompactRevision
		} else {
			a.compactRevision = func() int64 { return 0 }
		}
	}
	return a
}

// Unwrap returns the adapted storage.
func (a *Storage) Unwrap() storage.Interface { return a.s }

// Versioner returns the adapted storage's Versioner, its errors converted.
func (a *Storage) Versioner() k8sstorage.Versioner { return versioner{a.s.Versioner()} }

// Create implements storage.Interface.
func (a *Storage) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	return ToUpstreamError(a.s.Create(ctx, key, obj, out, ttl))
}

// Delete implements storage.Interface.
func (a *Storage) Delete(ctx context.Context, key string, out runtime.Object, preconditions *k8sstorage.Preconditions,
	validateDeletion k8sstorage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts k8sstorage.DeleteOptions) error {
	return ToUpstreamError(a.s.Delete(ctx, key, out, Preconditions(preconditions), validateFunc(validateDeletion),
		cachedExistingObject, storage.DeleteOptions{ExpectTransformOrDecodeError: opts.ExpectTransformOrDecodeError}))
}

// Watch implements storage.Interface. The events are the adapted storage's, unchanged: a
// CachingObject of listwatch's cache is a runtime.CacheableObject as upstream's cachingObject is,
// and upstream's tests unwrap both alike. The request's scope, which upstream's Cacher.Watch reads
// from the apiserver's request context, reaches listwatch as its RequestScope (RequestScopeOf), and
// API Priority and Fairness's initialization signal as listwatch's (WatchInitializedSignalOf).
func (a *Storage) Watch(ctx context.Context, key string, opts k8sstorage.ListOptions) (watch.Interface, error) {
	lo, err := ListOptions(opts)
	if err != nil {
		return nil, err
	}
	w, err := a.s.Watch(WatchInitializedSignalOf(RequestScopeOf(ctx)), key, lo)
	return w, ToUpstreamError(err)
}

// WatchInitializedSignalOf returns ctx carrying, as listwatch's watch-initialized signal, the
// initialization signal of API Priority and Fairness that k8s.io/apiserver's request context may
// hold (utilflowcontrol.WithInitializationSignal): where upstream's Cacher calls
// utilflowcontrol.WatchInitialized, listwatch's cache calls storage.WatchInitialized. A listwatch
// signal ctx already carries is called too.
func WatchInitializedSignalOf(ctx context.Context) context.Context {
	return storage.WithWatchInitializedSignal(ctx, func() {
		utilflowcontrol.WatchInitialized(ctx)
		storage.WatchInitialized(ctx)
	})
}

// Get implements storage.Interface.
func (a *Storage) Get(ctx context.Context, key string, opts k8sstorage.GetOptions, objPtr runtime.Object) error {
	return ToUpstreamError(a.s.Get(ctx, key, storage.GetOptions{IgnoreNotFound: opts.IgnoreNotFound, ResourceVersion: opts.ResourceVersion}, objPtr))
}

// GetList implements storage.Interface.
func (a *Storage) GetList(ctx context.Context, key string, opts k8sstorage.ListOptions, listObj runtime.Object) error {
	lo, err := ListOptions(opts)
	if err != nil {
		return err
	}
	return ToUpstreamError(a.s.GetList(ctx, key, lo, listObj))
}

// GuaranteedUpdate implements storage.Interface.
func (a *Storage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *k8sstorage.Preconditions, tryUpdate k8sstorage.UpdateFunc, cachedExistingObject runtime.Object) error {
	update := func(input runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
		out, ttl, err := tryUpdate(input, k8sstorage.ResponseMeta{TTL: res.TTL, ResourceVersion: res.ResourceVersion})
		return out, ttl, ToListwatchError(err)
	}
	return ToUpstreamError(a.s.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, Preconditions(preconditions), update, cachedExistingObject))
}

// Stats implements storage.Interface.
func (a *Storage) Stats(ctx context.Context) (k8sstorage.Stats, error) {
	st, err := a.s.Stats(ctx)
	if err != nil {
		return k8sstorage.Stats{}, ToUpstreamError(err)
	}
	return k8sstorage.Stats{ObjectCount: st.ObjectCount, EstimatedAverageObjectSizeBytes: st.EstimatedAverageObjectSizeBytes}, nil
}

// ReadinessCheck implements storage.Interface: a storage with a Ready method (a watch cache) is
// ready when it says so and is otherwise upstream's ErrStorageNotReady, as upstream's
// CacheDelegator.ReadinessCheck; any other storage is always ready, as upstream's etcd3 store.
func (a *Storage) ReadinessCheck() error {
	if r, ok := a.s.(interface{ Ready() bool }); ok && !r.Ready() {
		return k8sstorage.ErrStorageNotReady
	}
	return nil
}

// RequestWatchProgress implements storage.Interface.
func (a *Storage) RequestWatchProgress(ctx context.Context) error {
	return ToUpstreamError(a.s.RequestWatchProgress(ctx))
}

// GetCurrentResourceVersion implements storage.Interface.
func (a *Storage) GetCurrentResourceVersion(ctx context.Context) (uint64, error) {
	rv, err := a.s.GetCurrentResourceVersion(ctx)
	return rv, ToUpstreamError(err)
}

// EnableResourceSizeEstimation implements storage.Interface with the adapted storage's
// EnableResourceSizeEstimation when it has one (*watch.Store does; a watch cache enables its
// storage's itself), else ErrNotSupported.
func (a *Storage) EnableResourceSizeEstimation(keys k8sstorage.KeysFunc) error {
	e, ok := a.s.(interface {
		EnableResourceSizeEstimation(storage.KeysFunc) error
	})
	if !ok {
		return fmt.Errorf("EnableResourceSizeEstimation: %w", ErrNotSupported)
	}
	var lk storage.KeysFunc
	if keys != nil {
		lk = storage.KeysFunc(keys)
	}
	return e.EnableResourceSizeEstimation(lk)
}

// CompactRevision implements storage.Interface with Options.CompactRevision.
func (a *Storage) CompactRevision() int64 { return a.compactRevision() }

// ListOptions converts upstream's list and watch options. What listwatch has no counterpart for is
// refused rather than dropped: a shard selector that selects (ShardedListAndWatch, alpha and off). The
// predicate's IndexLabels and IndexFields only pick an index of upstream's cache and select
// nothing, and RecordTimestamps only annotates the events of upstream's etcd3 watch for its cache,
// so both are dropped.
func ListOptions(opts k8sstorage.ListOptions) (storage.ListOptions, error) {
	p, err := Predicate(opts.Predicate)
	if err != nil {
		return storage.ListOptions{}, err
	}
	return storage.ListOptions{
		ResourceVersion:      opts.ResourceVersion,
		ResourceVersionMatch: opts.ResourceVersionMatch,
		Predicate:            p,
		Recursive:            opts.Recursive,
		ProgressNotify:       opts.ProgressNotify,
		SendInitialEvents:    opts.SendInitialEvents,
	}, nil
}

// Predicate converts upstream's selection predicate; see ListOptions for what it refuses.
func Predicate(p k8sstorage.SelectionPredicate) (storage.Predicate, error) {
	if p.ShardSelector != nil && !p.ShardSelector.Empty() {
		return storage.Predicate{}, fmt.Errorf("shard selector %v: %w", p.ShardSelector, ErrNotSupported)
	}
	var attrs storage.AttrFunc
	if p.GetAttrs != nil {
		attrs = storage.AttrFunc(p.GetAttrs)
	}
	return storage.Predicate{
		Label:               p.Label,
		Field:               p.Field,
		GetAttrs:            attrs,
		Limit:               p.Limit,
		Continue:            p.Continue,
		AllowWatchBookmarks: p.AllowWatchBookmarks,
	}, nil
}

// Preconditions converts upstream's preconditions; nil stays nil.
func Preconditions(p *k8sstorage.Preconditions) *storage.Preconditions {
	if p == nil {
		return nil
	}
	return &storage.Preconditions{UID: p.UID, ResourceVersion: p.ResourceVersion}
}

func validateFunc(f k8sstorage.ValidateObjectFunc) storage.ValidateObjectFunc {
	if f == nil {
		return nil
	}
	return func(ctx context.Context, obj runtime.Object) error { return ToListwatchError(f(ctx, obj)) }
}

// versioner is a listwatch Versioner with upstream's errors.
type versioner struct{ v storage.Versioner }

func (v versioner) UpdateObject(obj runtime.Object, resourceVersion uint64) error {
	return ToUpstreamError(v.v.UpdateObject(obj, resourceVersion))
}

func (v versioner) UpdateList(obj runtime.Object, resourceVersion uint64, continueValue string, remainingItemCount *int64) error {
	return ToUpstreamError(v.v.UpdateList(obj, resourceVersion, continueValue, remainingItemCount))
}

func (v versioner) PrepareObjectForStorage(obj runtime.Object) error {
	return ToUpstreamError(v.v.PrepareObjectForStorage(obj))
}

func (v versioner) ObjectResourceVersion(obj runtime.Object) (uint64, error) {
	rv, err := v.v.ObjectResourceVersion(obj)
	return rv, ToUpstreamError(err)
}

func (v versioner) ParseResourceVersion(resourceVersion string) (uint64, error) {
	rv, err := v.v.ParseResourceVersion(resourceVersion)
	return rv, ToUpstreamError(err)
}

// Transformer returns t, an encryption-at-rest transformer of k8s.io/apiserver, as listwatch's
// storage.Transformer: the storage key is the authenticated data, as upstream's etcd3 store gives it
// (value.DefaultContext of the key).
func Transformer(t value.Transformer) storage.Transformer { return transformer{t} }

type transformer struct{ t value.Transformer }

func (t transformer) TransformFromStorage(ctx context.Context, data []byte, key string) ([]byte, bool, error) {
	return t.t.TransformFromStorage(ctx, data, value.DefaultContext(key))
}

func (t transformer) TransformToStorage(ctx context.Context, data []byte, key string) ([]byte, error) {
	return t.t.TransformToStorage(ctx, data, value.DefaultContext(key))
}

// RequestScopeOf returns ctx carrying, as listwatch's storage.RequestScope, the namespace and name
// that k8s.io/apiserver's request context holds (request.WithNamespace, RequestInfo.Name): where
// upstream's Cacher.Watch reads a watcher's scope, listwatch's cache reads storage.RequestScopeFrom.
// A context without either is returned unchanged, so a scope set with storage.WithRequestScope stays.
//
// Mirrors pkg/storage/cacher/cacher.go Cacher.Watch (the scope's request half).
func RequestScopeOf(ctx context.Context) context.Context {
	var scope storage.RequestScope
	if ns, ok := request.NamespaceFrom(ctx); ok {
		scope.Namespace = ns
	}
	if info, ok := request.RequestInfoFrom(ctx); ok && info != nil {
		scope.Name = info.Name
	}
	if scope == (storage.RequestScope{}) {
		return ctx
	}
	return storage.WithRequestScope(ctx, scope)
}
