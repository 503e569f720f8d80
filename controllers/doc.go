// Package controllers plays the parts of a cluster that are not the apiserver but that a user of
// `kubectl` or a controller under test relies on: kube-controller-manager's namespace controller
// and garbage collector, and the kubelets' confirmation of a pod's graceful deletion. They are
// clients of the served API (client-go's discovery, dynamic and metadata clients, metadata
// informers), as upstream's are; nothing here touches storage. `listwatch serve` runs them by
// default (--controllers); listwatchtest only WithControllers, as envtest runs none.
//
// # API
//
//   - Start(ctx, Config) discovers the served resources, starts the named controllers (All:
//     Namespace, GarbageCollector, Kubelet) and returns once their informers synced; Stop stops
//     them and waits for every goroutine they started. ErrInvalidConfig: no REST config, an
//     unknown name, or a controller whose resource is not served.
//
// # Invariants
//
//   - Namespace (pkg/controller/namespace): a namespace with a deletionTimestamp and the
//     kubernetes finalizer is emptied resource by resource (deletecollection, Background), then
//     finalized through its finalize subresource, after which the apiserver deletes it
//     (TestNamespaceDeletion). Content that stays (a finalizer nobody removes) keeps it
//     Terminating, its NamespaceContentRemaining and NamespaceFinalizersRemaining conditions naming
//     the resource and the finalizer with upstream's messages; when the content goes, so does the
//     namespace (TestNamespaceKeptByFinalizer). It is requeued after upstream's estimate and on
//     every change of its content.
//   - GarbageCollector (pkg/controller/garbagecollector): the dependents of an owner that is gone
//     are deleted with the propagation their own finalizers ask; a dependent with another owner
//     left only loses the reference (TestGarbageCollectorBackground). An owner deleted in the
//     foreground has its dependents deleted and stays until no dependent with blockOwnerDeletion
//     remains: one held by a finalizer holds it (TestGarbageCollectorForeground). An owner deleted
//     with Orphan goes once its dependents' references to it are removed; they stay
//     (TestGarbageCollectorOrphan). Whether an owner is gone is read from the API, with the UID
//     compared; deletes carry the UID as precondition. Events are ignored, as upstream.
//   - Kubelet (pkg/kubelet/status): a pod marked for graceful deletion (bound to a node, with a
//     grace period left) is deleted with gracePeriodSeconds=0 and its UID as precondition, as
//     its kubelet would once its containers stopped; there are none to wait for. Without it the
//     pod stays Terminating (TestKubeletConfirmsBoundPodDeletion).
//   - Stop leaves no goroutine (TestMain's goleak); a bad Config is refused before anything
//     starts (TestStartRefused).
//
// # Deviations
//
// Resources are discovered once, at Start: custom resources are those served then, each resource
// at its group's most preferred version that serves it (discovery's ServerPreferredResources, as
// upstream's namespace controller and garbage collector take them), so a CRD served at several
// versions is watched and emptied once (TestNamespaceCRDVersionsOnce). The garbage
// collector keeps no "virtual" owner nodes and does no cycle detection among foreground
// deletions; the namespace controller has no discovery failure conditions to report, as the API
// it discovers is the one served. Workload controllers (ReplicaSets, Deployments, Jobs), the
// scheduler, pod GC of pods on missing nodes and the event TTL are not played.
package controllers
