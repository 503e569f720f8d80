package cache

import (
	"math"
	"strings"
	"sync"
	"time"
)

// retryAfterForUnreadyCache is the Retry-After, in seconds, of the 429 answered while the cache is not
// ready: it grows with the downtime, from 1 to 30 seconds.
//
// Mirrors cacher/util.go calculateRetryAfterForUnreadyCache.
func retryAfterForUnreadyCache(downtime time.Duration) int {
	result := math.Exp(0.06 * downtime.Seconds())
	return int(math.Min(30, math.Max(1, result)))
}

// hasPathPrefix reports whether s is pathPrefix or lies under it on a "/" boundary, so that a watch on
// /pods/a never sees /pods/ab.
//
// Mirrors cacher/key/key.go HasPathPrefix.
func hasPathPrefix(s, pathPrefix string) bool {
	if !strings.HasPrefix(s, pathPrefix) {
		return false
	}
	if len(s) == len(pathPrefix) || strings.HasSuffix(pathPrefix, "/") {
		return true
	}
	return s[len(pathPrefix)] == '/'
}

// goroutines is a WaitGroup that refuses new goroutines once closed, so that closing and waiting can
// race with late starters without misusing sync.WaitGroup.
type goroutines struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// start runs f in a new goroutine unless the group is closed; it reports whether f was started.
func (g *goroutines) start(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}

// closeAndWait refuses new goroutines and waits for the running ones.
func (g *goroutines) closeAndWait() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
