package cache

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/listwatch/listwatch/storage"
)

// The part of the Cacher's storage.Interface that upstream keeps on CacheDelegator
// (pkg/storage/cacher/delegator.go): which reads the cache serves (Get, GetList; Watch always comes
// from the cache) and the writes and requests passed through to the storage. Upstream's
// CacheDelegator wraps the Cacher and the storage; listwatch keeps one type, so that a *Cacher is the
// storage.Interface its callers use, with upstream's file map: the decisions here, the cache reads
// (Watch, getFromCache, listFromCache) in cacher.go.
//
// Upstream's delegator also runs a consistency checker (DetectCacheInconsistency), which compares the
// cache with etcd every few minutes and stops answering from snapshots while they differ; listwatch
// has none.

var _ storage.Interface = (*Cacher)(nil)

// Versioner returns the Versioner of the Cacher's configuration.
//
// Mirrors CacheDelegator.Versioner.
func (c *Cacher) Versioner() storage.Versioner { return c.versioner }

// Get reads key. Without a resourceVersion, or while the cache is not ready, it reads the storage;
// otherwise the cache serves it (getFromCache).
//
// Mirrors CacheDelegator.Get.
func (c *Cacher) Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	if opts.ResourceVersion == "" || !c.Ready() {
		return c.storage.Get(ctx, key, opts, out)
	}
	return c.getFromCache(ctx, key, opts, out)
}

// GetList lists key (a prefix when opts.Recursive) into listObj. Which reads the cache serves is
// upstream's with cache snapshots (ListFromCacheSnapshot): resourceVersion "0" (any staleness, limit
// ignored), NotOlderThan, "" (consistent: the cache waits up to 3 s for etcd's current revision, else
// the list falls back to the storage), and Exact lists, legacy exact lists (a resourceVersion with a
// limit) and continue tokens of a recursive list while the cache holds the snapshot of their
// revision or has not reached it yet. The rest goes to the storage: non-recursive exact lists and
// continue tokens, revisions older than every snapshot, a snapshot dropped meanwhile (410), and an
// unfiltered list with a limit while the cache is not ready (any other list is then 429). A list from
// the cache has the cache's resourceVersion, or the requested one at an exact revision. With
// Config.DisableListFromCacheSnapshot (the gate off) every exact list, legacy exact list and continue
// token goes to the storage.
//
// Mirrors CacheDelegator.GetList; the cache part is listFromCache.
func (c *Cacher) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if err := validateListOptions(c.resourcePrefix, c.versioner, opts); err != nil {
		return err
	}
	delegate, consistent, err := c.shouldDelegateList(opts)
	if err != nil {
		return err
	}
	if delegate {
		return c.storage.GetList(ctx, key, opts, listObj)
	}
	if _, err := c.versioner.ParseResourceVersion(opts.ResourceVersion); err != nil {
		return err
	}
	if !c.Ready() && shouldDelegateListOnNotReadyCache(opts) {
		return c.storage.GetList(ctx, key, opts, listObj)
	}
	err = c.listFromCache(ctx, key, opts, listObj)
	switch {
	case err == nil:
		return nil
	case apierrors.IsResourceExpired(err) && c.watchCache.snapshottingEnabled():
		// The snapshot went (evicted or compacted) after the decision: the storage knows.
		return c.storage.GetList(ctx, key, opts, listObj)
	case consistent && storage.IsTooLargeResourceVersion(err):
		return c.storage.GetList(ctx, key, opts, listObj)
	}
	return err
}

// shouldDelegateList decides between the cache and the storage, and whether the list is a consistent
// read (whose 504 falls back to the storage).
//
// Mirrors delegator/interface.go ShouldDelegateList with the Cacher as its Helper.
func (c *Cacher) shouldDelegateList(opts storage.ListOptions) (delegate, consistent bool, err error) {
	switch opts.ResourceVersionMatch {
	case metav1.ResourceVersionMatchExact:
		return c.shouldDelegateExactRV(opts.ResourceVersion, opts.Recursive)
	case metav1.ResourceVersionMatchNotOlderThan:
		return false, false, nil
	case "":
		if opts.Predicate.Continue != "" {
			return c.shouldDelegateContinue(opts.Predicate.Continue, opts.Recursive)
		}
		if opts.Predicate.Limit > 0 && opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return c.shouldDelegateExactRV(opts.ResourceVersion, opts.Recursive)
		}
		// A consistent read: the cache serves it, as etcd answers progress requests.
		return false, opts.ResourceVersion == "", nil
	default:
		return true, false, nil
	}
}

// shouldDelegateExactRV: a recursive list at an exact revision is the cache's if it keeps snapshots
// and holds the one of that revision or has not reached the revision yet (it then waits for it).
//
// Mirrors Cacher.ShouldDelegateExactRV.
func (c *Cacher) shouldDelegateExactRV(resourceVersion string, recursive bool) (bool, bool, error) {
	if !recursive || !c.watchCache.snapshottingEnabled() {
		return true, false, nil
	}
	listRV, err := c.versioner.ParseResourceVersion(resourceVersion)
	if err != nil {
		return false, false, err
	}
	return c.shouldDelegateExactRevision(listRV), false, nil
}

// shouldDelegateContinue: with snapshots, a continue token of a recursive list is an exact read at
// its revision, or a consistent read for a negative one; without, every continue token goes to the
// storage, a negative one too (and is then not counted as a consistent read).
//
// Mirrors Cacher.ShouldDelegateContinue.
func (c *Cacher) shouldDelegateContinue(token string, recursive bool) (bool, bool, error) {
	if !recursive || !c.watchCache.snapshottingEnabled() {
		return true, false, nil
	}
	_, continueRV, err := storage.DecodeContinue(token, c.resourcePrefix)
	if err != nil {
		return false, false, err
	}
	if continueRV > 0 {
		return c.shouldDelegateExactRevision(uint64(continueRV)), false, nil
	}
	return false, true, nil
}

// shouldDelegateExactRevision mirrors Cacher.shouldDelegateExactRV.
func (c *Cacher) shouldDelegateExactRevision(resourceVersion uint64) bool {
	if c.watchCache.notFresh(resourceVersion) {
		return false
	}
	return !c.watchCache.canServeExactRV(resourceVersion)
}

// shouldDelegateListOnNotReadyCache: an unfiltered paginated list is cheap enough for etcd.
func shouldDelegateListOnNotReadyCache(opts storage.ListOptions) bool {
	return opts.Predicate.Empty() && opts.Predicate.Limit > 0
}

// validateListOptions rejects what the storage would reject before choosing where to read.
//
// Mirrors storage.ValidateListOptions.
func validateListOptions(keyPrefix string, versioner storage.Versioner, opts storage.ListOptions) error {
	if opts.Recursive && opts.Predicate.Continue != "" {
		if _, _, err := storage.DecodeContinue(opts.Predicate.Continue, keyPrefix); err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
		}
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		return nil
	}
	if opts.ResourceVersion == "" {
		return nil
	}
	if _, err := versioner.ParseResourceVersion(opts.ResourceVersion); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
	}
	switch opts.ResourceVersionMatch {
	case "", metav1.ResourceVersionMatchNotOlderThan, metav1.ResourceVersionMatchExact:
		return nil
	default:
		return fmt.Errorf("unknown ResourceVersionMatch value: %v", opts.ResourceVersionMatch)
	}
}

// CompactRevision is the storage's compaction the cache has seen: its compactor reads the storage's
// CompactRevision (when the storage has one, as *watch.Store) every 15 s. 0 for none, and always 0
// without snapshots, which run no compactor.
//
// Mirrors CacheDelegator.CompactRevision.
func (c *Cacher) CompactRevision() int64 {
	if c.compactor == nil {
		return 0
	}
	return c.compactor.revision()
}

// Stats returns the storage's Stats: with the size estimate on (see Config), the storage counts the
// cache's keys.
//
// Mirrors CacheDelegator.Stats.
func (c *Cacher) Stats(ctx context.Context) (storage.Stats, error) {
	return c.storage.Stats(ctx)
}

// GetCurrentResourceVersion returns the storage's current resourceVersion.
func (c *Cacher) GetCurrentResourceVersion(ctx context.Context) (uint64, error) {
	return c.storage.GetCurrentResourceVersion(ctx)
}

// RequestWatchProgress passes a progress request to the storage.
func (c *Cacher) RequestWatchProgress(ctx context.Context) error {
	return c.storage.RequestWatchProgress(ctx)
}

// Create passes through to the storage.
func (c *Cacher) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	return c.storage.Create(ctx, key, obj, out, ttl)
}

// cachedObject is the cache's copy of key, offered to the storage as the current state of a write.
func (c *Cacher) cachedObject(key string) runtime.Object {
	if e, ok := c.watchCache.getByKey(key); ok {
		return e.Object.DeepCopyObject()
	}
	return nil
}

// GuaranteedUpdate passes through to the storage, suggesting the cached object as the current state
// (the storage re-reads it if the suggestion is stale).
//
// Mirrors CacheDelegator.GuaranteedUpdate.
func (c *Cacher) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, _ runtime.Object) error {
	return c.storage.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, c.cachedObject(key))
}

// Delete passes through to the storage, suggesting the cached object as the current state.
//
// Mirrors CacheDelegator.Delete.
func (c *Cacher) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, _ runtime.Object, opts storage.DeleteOptions) error {
	return c.storage.Delete(ctx, key, out, preconditions, validateDeletion, c.cachedObject(key), opts)
}
