package storage

import "context"

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
