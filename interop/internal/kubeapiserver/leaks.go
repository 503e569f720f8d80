package kubeapiserver

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
)

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

// VerifyTestMain is the TestMain of a package whose tests run upstream's server or Cacher: their
// klog lines (start-up, relists, watcher terminations, shutdown; klog is process-wide) are
// discarded, as the tests say what failed, and the package's tests must leave no goroutine behind
// but those GoleakOptions and extra name.
func VerifyTestMain(m *testing.M, extra ...goleak.Option) {
	klog.SetLogger(logr.Discard())
	goleak.VerifyTestMain(m, append(GoleakOptions(), extra...)...)
}
