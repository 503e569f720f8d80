package storage

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// Interface is the storage of one resource: what the HTTP handlers and the watch cache consume, and
// what the etcd3 storage (*watch.Store) and the watch cache (*cache.Cacher) both provide. Keys are
// apiserver keys such as "/pods/<namespace>/<name>" under the implementation's resource prefix; a key
// that PrepareKey rejects fails every method with an error matching ErrEmptyKey or ErrInvalidKey.
// Objects carry their resourceVersion (the etcd mod revision) as set by Versioner. Failures on one key
// are *StorageError values matched with the Is* functions or errors.Is on the sentinels; API-level
// failures (410, 429, 504) are apimachinery StatusErrors.
//
// Mirrors storage/interfaces.go Interface, without the methods no listwatch consumer calls:
// ReadinessCheck, EnableResourceSizeEstimation and CompactRevision (the etcd3 storage keeps the last
// two: a watch cache enables the size estimate of its storage, and the compactor reads the other). The contracts below are checked, for both implementations, by the cases of
// package storagetest, named after the pkg/storage/testing function each ports.
type Interface interface {
	// Versioner returns the Versioner that reads and writes the resourceVersion of the objects and
	// lists this storage returns.
	Versioner() Versioner

	// Create stores obj at key unless the key exists (a KeyExists error). obj must not carry a
	// resourceVersion (ErrResourceVersionSetOnCreate). A ttl above 0 gives the object a lease of that
	// many seconds, after which it is deleted. When out is not nil it is set to the stored object,
	// with the resourceVersion of the write.
	//
	// Checked by the storagetest cases CreateWithTTL, WriteErrors and KeySchema.
	Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error

	// Delete removes the object at key and sets out to its last state, carrying the resourceVersion
	// of the deletion. A missing key is a KeyNotFound error; failed preconditions an InvalidObj error;
	// an error of validateDeletion (called with the current object) is returned as it is.
	// cachedExistingObject, when not nil, is a suggestion of the current state that saves a read; a
	// stale suggestion is detected and the object re-read. opts.ExpectTransformOrDecodeError deletes
	// only an object that can no longer be read.
	//
	// Checked by the storagetest cases WriteErrors, DeleteTriggerWatch, WatchWithUnsafeDelete and
	// KeySchema.
	Delete(ctx context.Context, key string, out runtime.Object, preconditions *Preconditions,
		validateDeletion ValidateObjectFunc, cachedExistingObject runtime.Object, opts DeleteOptions) error

	// Watch watches key (a prefix when opts.Recursive, which then gets a trailing "/") and delivers the
	// objects opts.Predicate selects. Key and resourceVersion errors are returned by Watch itself, as
	// is a not-ready watch cache (429); every later failure is one ERROR event, after which the
	// result channel closes.
	//
	// The resourceVersion rules: RV "N" delivers every change after N, exclusively, in revision order;
	// RV "0" and RV "" without SendInitialEvents (the legacy watch) first deliver the current state as
	// ADDED events; SendInitialEvents true does so from RV "" (a consistent read) or "0", and with
	// AllowWatchBookmarks ends the initial events with a BOOKMARK annotated
	// k8s.io/initial-events-end at the global revision of the snapshot; SendInitialEvents false
	// with RV "" or "0" starts at the current revision. An RV that is too old is an ERROR 410 Expired.
	//
	// Filtering follows the previous state: an object entering the selection is ADDED, staying in it
	// MODIFIED, leaving it DELETED (of the previous object). A DELETED object carries the deletion's
	// resourceVersion. BOOKMARK events carry an empty object with only the resourceVersion. Stop only
	// cancels; events buffered before it may still be read, and nothing is sent after the close.
	//
	// Checked by the storagetest cases Watch, WatchFromZero, WatchFromNonZero, DeleteTriggerWatch,
	// DelayedWatchDelivery, WatcherTimeout, DeleteEventObjectHaveLatestRV, ClusterScopedWatch,
	// NamespaceScopedWatch, WatchDispatchBookmarkEvents, WatchSemantics, InitialEventsExtended,
	// WatchListMatchSingle, WatchArgumentErrors, WatchContextCancel and WatchCompacted.
	Watch(ctx context.Context, key string, opts ListOptions) (watch.Interface, error)

	// Get sets objPtr to the object at key. A missing key is a KeyNotFound error, or with
	// opts.IgnoreNotFound a zeroed objPtr. opts.ResourceVersion "" reads the latest state; any other
	// value is "not older than": the state may be that of any revision at or after it, and an RV
	// newer than the storage can reach is a 504 Timeout with cause ResourceVersionTooLarge.
	//
	// Checked by the storagetest cases Get, HugeResourceVersion and KeySchema.
	Get(ctx context.Context, key string, opts GetOptions, objPtr runtime.Object) error

	// GetList sets listObj (a list type) to the objects at key, a prefix when opts.Recursive, that
	// opts.Predicate selects, in key order. The list's resourceVersion follows
	// opts.ResourceVersionMatch: "" with RV "" is a consistent read at the current revision; RV "0"
	// any state; NotOlderThan a state at or after the RV; Exact the state at the RV (410 once
	// compacted). Predicate.Limit pages the list: the continue token resumes at the same revision, and
	// an unfiltered page reports the remaining item count (a watch cache ignores the limit of an RV
	// "0" list, as upstream's). A continue token cannot be combined with an RV other than "0" (400); a
	// token whose revision was compacted is a 410 carrying a token that continues at the latest
	// revision.
	//
	// Checked by the storagetest cases ConsistentList, ListPaging, ExactAtCompactedRV,
	// HugeResourceVersion, InconsistentContinue and KeySchema.
	GetList(ctx context.Context, key string, opts ListOptions, listObj runtime.Object) error

	// GuaranteedUpdate reads the object at key, calls tryUpdate with it and writes the result if the
	// object is unchanged since the read, else reads again and retries. A missing key is a KeyNotFound
	// error unless ignoreNotFound, which calls tryUpdate with a zero object (a create). Failed
	// preconditions are an InvalidObj error; an error of tryUpdate ends the update with that error.
	// A result with the same bytes as the stored object writes nothing, and destination gets the
	// stored object. cachedExistingObject is a suggestion of the current state, as for Delete.
	//
	// Checked by the storagetest cases WriteErrors and KeySchema; every case that writes uses it.
	GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
		preconditions *Preconditions, tryUpdate UpdateFunc, cachedExistingObject runtime.Object) error

	// Stats returns how many objects the storage holds under its resource prefix and, when it keeps
	// an estimate, their average stored size (see Stats). A watch cache answers with its storage's
	// Stats. A failure to read the storage (a canceled context included) is returned as it is.
	//
	// Checked by the storagetest case Stats.
	Stats(ctx context.Context) (Stats, error)

	// GetCurrentResourceVersion returns the current revision of the storage (etcd's), which a
	// consistent read must reach. Checked by the storagetest cases WatchSemantics (RV=useCurrentRV)
	// and ConsistentList.
	GetCurrentResourceVersion(ctx context.Context) (uint64, error)

	// RequestWatchProgress asks etcd to report the progress of the watches of the storage's client:
	// each gets a progress notification at the current revision once it has caught up. An etcd3 watch
	// with ListOptions.ProgressNotify turns it into a BOOKMARK; the watch cache uses it to learn that
	// it is fresh. etcd answers only while every watch of the stream has caught up, so callers repeat
	// the request until the answer they wait for comes.
	//
	// Checked by the storagetest cases ProgressNotify and ProgressBroadcast (etcd3); every case's
	// W.Sync relies on it.
	RequestWatchProgress(ctx context.Context) error
}
