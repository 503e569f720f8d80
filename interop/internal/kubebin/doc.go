// Package kubebin runs a real kube-apiserver, the binary `make kube-apiserver` builds from
// k8s.io/kubernetes v1.37.2 (interop/kube-apiserver: a module of its own), as a process over the
// etcd the caller gives: listwatch's etcd API in the tests, so that the whole apiserver, built-in
// kinds with their defaulting, validation, admission and storage included, holds listwatch's etcd
// API to etcd's behaviour, and serves as the upstream side of the built-in kinds' HTTP
// differential (interop/httpdiff TestHTTPDifferentialBuiltIn).
//
// # API
//
//   - Path() is the binary: $LISTWATCH_KUBE_APISERVER (PathVar), else DefaultPath()
//     (interop/.cache/kube-apiserver, where the make target writes it); ErrNoBinary says which
//     path was looked at and how to build one.
//   - Start(ctx, Options) runs it with Options.Args and returns once /readyz is 200; StartT does
//     the same for a test (skipping it, with Path's reason, when there is no binary) and stops it
//     at cleanup. Server.URL, Token, RESTConfig and HTTPClient reach it; Stop ends it (SIGTERM, then
//     SIGKILL after DefaultStopTimeout).
//   - Options.Overrides are --etcd-servers-overrides: a resource kept in another etcd. The
//     differential keeps the kinds it compares in a store only its requests write, as
//     kube-apiserver writes leases, RBAC and flow-control objects of its own in the background.
//
// # Flags
//
// Args are the fewest flags that start kube-apiserver on etcd alone: a serving certificate it
// makes itself (--cert-dir), a service-account signing key and issuer (required), a service IP
// range, one user (a static token in system:masters) and the AlwaysAllow authorizer (which turns
// anonymous access off: every request carries Server.Token), the ServiceAccount admission plugin off (it refuses a pod whose namespace has no
// default service account, which kube-controller-manager creates), and no endpoint reconciler (it
// would rewrite the kubernetes service's endpoints every 10 s). Every other default is
// kube-apiserver's: admission (NamespaceLifecycle, LimitRanger, DefaultTolerationSeconds, Priority,
// ResourceQuota, PodSecurity, ...), priority and fairness, the watch cache, protobuf in etcd.
//
// # Invariants, and the tests that check them
//
//   - Over listwatch's etcd API alone, kube-apiserver starts and serves the built-in kinds:
//     namespaces, configmaps, secrets, pods, services (a cluster IP allocated) and deployments are
//     created with kube-apiserver's defaulting, listed, watched through an update and a delete,
//     refused in a namespace that does not exist, and stored at kube-apiserver's keys in its
//     protobuf encoding (TestOverListwatchEtcd).
//   - An override keeps its resource in its own store and nothing else there (TestOverrides).
//   - A process that exits before it is ready fails Start with ErrNotReady and the end of its log
//     (TestStartFailsOnBadFlag); bad Options fail with ErrInvalidOptions before anything starts
//     (TestStartRefusesBadOptions); a missing binary is ErrNoBinary naming the path (TestPath).
//   - Stop waits for the process; nothing the package starts outlives it (goleak in TestMain).
//
// The tests that need the binary skip, saying where they looked and how to build it, when it is
// not there: `make kube-apiserver` first (8 min 28 s on this 2-core machine with a warm module cache, 11 s to relink).
package kubebin
