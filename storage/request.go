package storage

import (
	"context"
	"sync"
)

// RequestScope is the namespace and name of the API request a storage call serves: the request's
// path namespace (or the namespace its field selector pins) and the object name its path or its
// metadata.name field selector names. The apiserver carries them on the request context
// (k8s.io/apiserver pkg/endpoints/request: WithNamespace, and RequestInfo.Name as requestinfo.go
// fills it), where the watch cache reads them to index a watcher by its scope.
type RequestScope struct {
	Namespace string
	Name      string
}

type requestScopeKey struct{}

// WithRequestScope returns ctx carrying scope.
func WithRequestScope(ctx context.Context, scope RequestScope) context.Context {
	return context.WithValue(ctx, requestScopeKey{}, scope)
}

// RequestScopeFrom returns the RequestScope ctx carries; the zero RequestScope (cluster-wide, no
// name) if none.
func RequestScopeFrom(ctx context.Context) RequestScope {
	s, _ := ctx.Value(requestScopeKey{}).(RequestScope)
	return s
}

type watchInitializedKey struct{}

// WithWatchInitializedSignal returns ctx carrying signal, which the watch a storage starts with ctx
// calls once it is initialized: a watch cache's once its watcher is registered and the initial events
// are sent, an etcd3 watch's once it is started. signal is called at most once however often
// WatchInitialized is called with ctx or its children. The apiserver's API Priority and Fairness
// carries such a signal in the request context (k8s.io/apiserver pkg/util/flowcontrol:
// WithInitializationSignal) to release a watch's seat once it is initialized.
//
// Mirrors util/flowcontrol/apf_context.go WithInitializationSignal.
func WithWatchInitializedSignal(ctx context.Context, signal func()) context.Context {
	return context.WithValue(ctx, watchInitializedKey{}, sync.OnceFunc(signal))
}

// WatchInitialized calls the signal ctx carries, if any and not called before.
//
// Mirrors util/flowcontrol/apf_context.go WatchInitialized.
func WatchInitialized(ctx context.Context) {
	if signal, ok := ctx.Value(watchInitializedKey{}).(func()); ok {
		signal()
	}
}
