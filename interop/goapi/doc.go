// Package goapi holds the acceptance tests of listwatch's Go test API (package listwatchtest) with
// the clients a controller's tests use, each test body run unchanged against the Go API and, when
// the environment variable LISTWATCH_KUBECONFIG names a kubeconfig, against that real cluster (an
// etcd and a kube-apiserver; the kubeconfig's user must be allowed to create namespaces and
// CustomResourceDefinitions). Each body works in a namespace of its own. The Go API is given
// testdata/gizmos.yaml with listwatchtest.WithCRDs; on a cluster it is installed if missing and
// left installed.
//
// The package has only tests.
//
// # What the tests keep
//
//   - A controller-runtime v0.25 manager (its cache, its client, a reconciler that creates a
//     ConfigMap owned by a Gizmo, patches the Gizmo's finalizer in and the ConfigMap's data, updates
//     the Gizmo's status through the status subresource, and on deletion deletes the ConfigMap and
//     removes the finalizer) converges on a new Gizmo, on a change of its spec and on its deletion
//     (TestControllerRuntime).
//   - client-go's typed clientset configured for protobuf only, bodies, answers and watch streams,
//     creates, gets, lists, updates (a stale one is a Conflict), patches, watches and deletes
//     ConfigMaps and Secrets; a typed informer over protobuf syncs (TestProtobufClientset).
//   - The real kubectl, given Env.Kubeconfig, creates, applies twice (the second removes a key and
//     adds one), labels, patches with each patch type, prints YAML, watches (get -w prints the
//     ADDED then the DELETED of an object made and deleted meanwhile) and deletes
//     (TestKubectl; skipped, saying so, without kubectl on PATH).
//   - No goroutine of the clients, managers or environments outlives a test (TestMain's goleak).
package goapi
