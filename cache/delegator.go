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
// upstream's: resourceVersion "0" (any staleness, limit ignored), NotOlderThan, and "" (consistent:
// the cache waits up to 3 s for etcd's current revision, else the list falls back to the storage).
// Exact, legacy exact (a resourceVersion with a limit) and continue tokens go to the storage, as does
// an unfiltered paginated list while the cache is not ready. A list served from the cache has the
// cache's resourceVersion, and its continue token lets the next page be read from the storage at it.
//
// Mirrors CacheDelegator.GetList; the cache part is listFromCache.
func (c *Cacher) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if err := validateListOptions(c.resourcePrefix, c.versioner, opts); err != nil {
		return err
	}
	delegate, consistent := shouldDelegateList(opts)
	if delegate {
		return c.storage.GetList(ctx, key, opts, listObj)
	}
	if _, err := c.versioner.ParseResourceVersion(opts.ResourceVersion); err != nil {
		return err
	}
	if !c.Ready() && shouldDelegateListOnNotReadyCache(opts) {
		return c.storage.GetList(ctx, key, opts, listObj)
	}
	err := c.listFromCache(ctx, key, opts, listObj)
	if err != nil && consistent && storage.IsTooLargeResourceVersion(err) {
		return c.storage.GetList(ctx, key, opts, listObj)
	}
	return err
}

// shouldDelegateList decides between the cache and the storage (without cache snapshots), and whether
// the list is a consistent read.
//
// Mirrors delegator/interface.go ShouldDelegateList with snapshots unavailable.
func shouldDelegateList(opts storage.ListOptions) (delegate, consistent bool) {
	switch opts.ResourceVersionMatch {
	case metav1.ResourceVersionMatchExact:
		return true, false
	case metav1.ResourceVersionMatchNotOlderThan:
		return false, false
	case "":
		if opts.Predicate.Continue != "" {
			return true, false
		}
		if opts.Predicate.Limit > 0 && opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return true, false
		}
		if opts.ResourceVersion == "" {
			return false, true
		}
		return false, false
	default:
		return true, false
	}
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
