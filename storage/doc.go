// Package storage is the vocabulary the storage layers of listwatch share, as k8s.io/apiserver v0.37
// pkg/storage is for pkg/storage/etcd3 and pkg/storage/cacher: the storage Interface, its options,
// predicates, errors, codecs, versioner, keys and continue tokens. It holds no storage of its own:
// package etcd3 implements Interface over etcd, package cache over etcd3 with a watch cache, and
// package httpwatch consumes it; package storagetest holds the conformance cases every
// implementation plays.
//
// # API
//
//   - Interface (interfaces.go, mirroring pkg/storage/interfaces.go) is the storage of one
//     resource; each method's contract is in its documentation. *watch.Store and *cache.Cacher
//     implement it (compile-time assertions in their packages).
//   - ListOptions, GetOptions, DeleteOptions mirror storage.ListOptions/GetOptions/DeleteOptions.
//     ListOptions.ResourceVersion stays a string: "" (consistent or legacy) and "0" (any state) parse
//     to the same number but mean different things.
//   - Predicate mirrors storage.SelectionPredicate (Label, Field, GetAttrs, Limit, Continue,
//     AllowWatchBookmarks, IndexFields; Matches, Empty, MatchesSingle). Everything selects everything.
//   - RequestScope, WithRequestScope and RequestScopeFrom carry the namespace and name of the API
//     request on the context, as the apiserver's request.WithNamespace and RequestInfo do; the watch
//     cache indexes a watcher by them (TestRequestScope).
//   - WithWatchInitializedSignal and WatchInitialized carry a watch's initialization signal on the
//     context, as API Priority and Fairness's WithInitializationSignal and WatchInitialized do
//     (k8s.io/apiserver pkg/util/flowcontrol): the watch cache signals once its watcher is registered
//     and its initial events sent, the etcd3 storage once its watch is started.
//   - Stats and KeysFunc mirror storage.Stats and storage.KeysFunc: what Interface.Stats reports, and
//     the keys a size estimate keeps sizes for.
//   - Codec decodes and encodes stored values; UnstructuredJSON (the default) is JSON to and from
//     *unstructured.Unstructured, RuntimeCodec plugs in a scheme's codec. Transformer mirrors
//     value.Transformer (encryption at rest); IdentityTransformer is the default.
//   - Versioner and APIObjectVersioner mirror storage.Versioner and storage.APIObjectVersioner.
//   - StorageError (codes ErrCode*) and its sentinels (ErrKeyNotFound, ErrKeyExists,
//     ErrResourceVersionConflicts, ErrInvalidObj...) mirror storage.StorageError; InvalidError and
//     InternalError mirror theirs; InterpretXxxError turn them into API errors as pkg/storage/errors
//     does; NewTooLargeResourceVersionError is the 504 of a resourceVersion the storage cannot reach.
//   - Preconditions, ResponseMeta, UpdateFunc (SimpleUpdate) and ValidateObjectFunc
//     (ValidateAllObjectFunc) are GuaranteedUpdate's and Delete's arguments.
//   - PrepareKey, NamespaceKeyFunc and NoNamespaceKeyFunc build and check keys; EncodeContinue,
//     DecodeContinue and PrepareContinueToken are the continue tokens; AnnotateInitialEventsEndBookmark
//     marks the end of a watch's initial events. Both storages use them, so both agree.
//
// # Invariants
//
//   - A resourceVersion is the etcd mod revision in decimal: ParseResourceVersion maps "" and "0" to
//     0 and anything that is not an unsigned integer to an InvalidError on field resourceVersion
//     (422 through InterpretWatchError); UpdateObject with 0 clears it; a list always has one
//     (UpdateList refuses 0). Checked by TestVersioner.
//   - PrepareKey rejects "" and "/" (ErrEmptyKey), "." and ".." segments and keys outside the
//     resource prefix (ErrInvalidKey), and makes a recursive key end in "/" so that /pods/a never
//     covers /pods/ab; the key functions refuse a name that is not a path segment. Checked by
//     TestPrepareKey, and through both storages by the storagetest case KeySchema.
//   - A continue token is the apiserver's (base64url JSON without padding, version meta.k8s.io/v1);
//     its start key is cleaned and can never leave the prefix it is decoded under; a bad token fails
//     with a sentinel (ErrGenericInvalidKey, ErrInvalidStartRV...). Checked by TestContinueTokens.
//   - A nil selector selects everything, a nil GetAttrs means DefaultNamespaceScopedAttr, and a
//     GetAttrs error is returned with no match. Checked by TestPredicate.
//   - Every *StorageError matches the sentinel of its code with errors.Is, also when wrapped, and
//     each InterpretXxxError gives the API error upstream's gives. Checked by TestStorageErrors.
//   - Preconditions fail with an InvalidObj error naming the first mismatch. Checked by
//     TestPreconditions.
//   - A watch's initialization signal is called at most once, by WatchInitialized on the context it
//     was set on or on a child; a context without one is a no-op. Checked by
//     TestWatchInitializedSignal.
//   - Interface.Stats counts the objects under the resource prefix, with the average stored size
//     when the storage keeps an estimate; both storages agree with etcd's values after every write.
//     Checked by the storagetest case Stats.
//   - UnstructuredJSON round-trips objects, decodes a list as *unstructured.UnstructuredList and
//     refuses data without apiVersion and kind. Checked by TestCodecs.
package storage
