package kubeapiserver

import "go.uber.org/goleak"

// GoleakOptions are the goleak options a TestMain of a package that starts servers needs: each
// ignores one upstream goroutine that no caller can stop but that ends by itself shortly after the
// request that started it. Nothing the server starts for its own life outlives Stop.
//
//   - k8s.io/apiserver/pkg/storage/cacher.(*watchCache).waitUntilFreshLocked.func2: every read from
//     the watch cache that waits for a resourceVersion (a consistent list, a list or get at an exact
//     or minimum resourceVersion above 0) starts it to wake the waiters after the cache's 3 s
//     blockTimeout (watch_cache.go waitUntilFreshLocked); it waits on the timer whether or not the
//     read is long done, so it outlives the read, and the server's Stop, by up to 3 s.
func GoleakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("k8s.io/apiserver/pkg/storage/cacher.(*watchCache).waitUntilFreshLocked.func2"),
	}
}
