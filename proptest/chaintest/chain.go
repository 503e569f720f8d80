package chaintest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/cache"
	"github.com/listwatch/listwatch/chain"
	"github.com/listwatch/listwatch/httpwatch"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/store"
	"github.com/listwatch/listwatch/watch"
)

// Options configures a Chain. The zero value is the chain `listwatch serve` runs for pods: a watch
// cache between the HTTP server and the etcd3 storage, the store on the real clock.
type Options struct {
	// Uncached serves the etcd3 storage directly, without a watch cache.
	Uncached bool
	// StoreClock is the store's clock (lease expiry, catch-up of unsynced watchers). Default real.
	StoreClock store.Clock
	// StoreSyncInterval is how often the store catches up unsynced watchers. Default 10 ms, so that
	// a watch from the past starts quickly on the real clock.
	StoreSyncInterval time.Duration
	// StoreManualTick runs the store without its goroutine: the test calls Store.Tick, and each
	// call catches every unsynced watcher up by one batch.
	StoreManualTick bool
	// SocketBuffer, when positive, sets SO_SNDBUF and SO_RCVBUF of both ends of every HTTP
	// connection, so that a client that stops reading blocks the server after a few tens of KiB
	// instead of megabytes of loopback buffering.
	SocketBuffer int
	// MinRequestTimeout is the server's --min-request-timeout; default watches last 1.5 times it
	// (the jitter is fixed at 0.5). Default httpwatch.DefaultMinRequestTimeout.
	MinRequestTimeout time.Duration
}

// Chain is the whole list-watch path over one in-memory store (a chain.Chain serving pods only):
// the store, an in-process etcd client, the etcd3 storage of pods, a watch cache over it (unless
// Uncached) and the HTTP API, served on a loopback port.
type Chain struct {
	Store   *store.Store
	Client  *clientv3.Client
	Storage *watch.Store
	// Cacher is nil for an uncached chain.
	Cacher *cache.Cacher
	// CacheClock drives the Cacher; HTTPClock drives watch timeouts and object timestamps. They are
	// separate so that watch timeouts happen exactly when a test steps HTTPClock.
	CacheClock *testingclock.FakeClock
	HTTPClock  *testingclock.FakeClock
	API        *httpwatch.Server
	Resource   httpwatch.Resource
	URL        string

	chain     *chain.Chain
	transport *http.Transport
	http      *http.Client
	reflector *reflectorGate
	served    *countingStorage
	closeOnce sync.Once
	closeErr  error
}

// Pods is the resource a Chain serves: core/v1 pods with the watch cache indexing watchers by
// spec.nodeName, as the apiserver's pod registry does. It keeps the pods' names, field labels and
// Go type but not their registry strategy (httpwatch.Pods: the status subresource, the status reset
// on create, graceful deletion), so that each HTTP write is one store write of the object as sent,
// which the model expects.
func Pods() httpwatch.Resource {
	p := httpwatch.Pods()
	return httpwatch.Resource{
		Version: p.Version, Resource: p.Resource, Kind: p.Kind, ShortNames: p.ShortNames, Namespaced: true,
		BuiltIn: true, AllowUnconditionalUpdate: true, ReturnDeletedObject: true,
		SelectableFields: p.SelectableFields, TriggerField: p.TriggerField,
	}
}

// New starts a chain; Close stops it and waits for every goroutine it started.
func New(opts Options) (*Chain, error) {
	if opts.StoreSyncInterval == 0 {
		opts.StoreSyncInterval = 10 * time.Millisecond
	}
	c := &Chain{Resource: Pods()}
	// The cache clock starts an hour behind the real one: the Cacher compares it with the real
	// deadlines of the watch contexts, which must stay far ahead for bookmarks to be scheduled.
	c.CacheClock = testingclock.NewFakeClock(time.Now().Add(-time.Hour))
	c.HTTPClock = testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	cfg := chain.Config{
		StoreOptions:      store.Options{Clock: opts.StoreClock, SyncInterval: opts.StoreSyncInterval, ManualTick: opts.StoreManualTick},
		Resources:         []httpwatch.Resource{c.Resource},
		DisableWatchCache: opts.Uncached,
		CacheClock:        c.CacheClock,
		API: httpwatch.Config{
			MinRequestTimeout: opts.MinRequestTimeout,
			Clock:             c.HTTPClock,
			Jitter:            func() float64 { return 0.5 },
		},
		Logger: testutil.DiscardLogger(),
		WrapServed: func(_ httpwatch.Resource, s storage.Interface) storage.Interface {
			c.served = &countingStorage{Interface: s}
			return c.served
		},
	}
	if !opts.Uncached {
		cfg.WrapStorage = func(_ httpwatch.Resource, s *watch.Store) storage.Interface {
			c.reflector = newReflectorGate(s)
			return c.reflector
		}
	}
	if opts.SocketBuffer > 0 {
		lc := net.ListenConfig{Control: socketBuffers(opts.SocketBuffer)}
		lis, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		cfg.Listener = lis
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	var err error
	if c.chain, err = chain.New(ctx, cfg); err != nil {
		// The gate's proxies end with the Cacher's watches, which chain.New stopped.
		if c.reflector != nil {
			c.reflector.wait()
		}
		return nil, err
	}
	name := c.Resource.GroupResource().String()
	c.Store, c.Client, c.API, c.URL = c.chain.Store(), c.chain.Client(), c.chain.API(), c.chain.URL()
	c.Storage, c.Cacher = c.chain.Storage(name), c.chain.Cacher(name)
	dialer := &net.Dialer{Timeout: testutil.WaitTimeout}
	if opts.SocketBuffer > 0 {
		dialer.Control = socketBuffers(opts.SocketBuffer)
	}
	c.transport = &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 64, ForceAttemptHTTP2: false}
	c.http = &http.Client{Transport: c.transport}
	return c, nil
}

// socketBuffers sets both kernel buffers of a socket before it connects or listens (accepted
// sockets inherit the listener's).
func socketBuffers(size int) func(network, address string, rc syscall.RawConn) error {
	return func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, size); serr != nil {
				return
			}
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, size)
		})
		return errors.Join(err, serr)
	}
}

// HTTPClient is the client the helpers use; its connections are closed by Close.
func (c *Chain) HTTPClient() *http.Client { return c.http }

// Addr is the host:port the HTTP API listens on.
func (c *Chain) Addr() string { return strings.TrimPrefix(c.URL, "http://") }

// OpenWatches is how many storage watches the HTTP handlers hold open: a handler opens one per
// watch request and stops it when it returns.
func (c *Chain) OpenWatches() int { return c.served.open() }

// WatchesOpened is how many storage watches the HTTP handlers opened since the chain started.
func (c *Chain) WatchesOpened() int { return c.served.opened() }

// Shutdown ends the server as `listwatch serve` does (chain.Chain.Shutdown): every watch is told to
// end, then the HTTP server stops accepting and waits for its requests, then no handler may still
// run. It returns how long that took.
func (c *Chain) Shutdown(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	err := c.chain.Shutdown(ctx)
	return time.Since(start), err
}

// Close stops everything in the order `listwatch serve` does and waits for it: watches, HTTP
// server, handlers, cache, etcd client and server, store. It is idempotent.
func (c *Chain) Close() error {
	c.closeOnce.Do(func() {
		c.transport.CloseIdleConnections()
		// A reflector held at the gate would keep the Cacher from stopping.
		if c.reflector != nil {
			c.reflector.release()
		}
		c.closeErr = c.chain.Close()
		if c.reflector != nil {
			c.reflector.wait()
		}
	})
	return c.closeErr
}

// countingStorage counts the storage watches the HTTP handlers hold.
type countingStorage struct {
	storage.Interface
	mu          sync.Mutex
	openCount   int
	openedCount int
}

func (s *countingStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (apiwatch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.openCount++
	s.openedCount++
	s.mu.Unlock()
	return &countedWatch{Interface: w, s: s}, nil
}

func (s *countingStorage) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.openCount
}

func (s *countingStorage) opened() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.openedCount
}

type countedWatch struct {
	apiwatch.Interface
	s    *countingStorage
	once sync.Once
}

func (w *countedWatch) Stop() {
	w.once.Do(func() {
		w.s.mu.Lock()
		w.s.openCount--
		w.s.mu.Unlock()
	})
	w.Interface.Stop()
}

// reflectorGate sits between the Cacher and the etcd3 storage. Only the Cacher's reflector watches
// through it; a test can end the reflector's watch (the reflector re-watches from its last
// resourceVersion) and hold the re-watch until a compaction has passed that resourceVersion, which
// is how a real apiserver's reflector comes to relist after falling behind.
type reflectorGate struct {
	*watch.Store

	mu       sync.Mutex
	cond     *sync.Cond
	held     bool
	waiting  int
	current  *proxyWatch
	watches  int // started by the reflector
	proxies  sync.WaitGroup
	released bool
	// breaks counts breakWatch calls: a watch that passed the gate before a break but was not yet
	// current when it came is ended as soon as it is made, so that no break misses it.
	breaks int
}

func newReflectorGate(s *watch.Store) *reflectorGate {
	g := &reflectorGate{Store: s}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *reflectorGate) Watch(ctx context.Context, key string, opts storage.ListOptions) (apiwatch.Interface, error) {
	g.mu.Lock()
	g.waiting++
	g.cond.Broadcast()
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.cond.Broadcast()
	})
	for g.held && !g.released && ctx.Err() == nil {
		g.cond.Wait()
	}
	g.waiting--
	breaks := g.breaks
	g.mu.Unlock()
	stop()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w, err := g.Store.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	p := newProxyWatch(w, &g.proxies)
	g.mu.Lock()
	g.watches++
	broken := g.breaks != breaks
	if !broken {
		g.current = p
	}
	g.cond.Broadcast()
	g.mu.Unlock()
	if broken {
		p.Stop()
	}
	return p, nil
}

// watching reports whether the reflector has a watch that breakWatch did not end and that the
// storage did not end either (a watch that failed with 410 is not one the reflector keeps).
func (g *reflectorGate) watching() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.current != nil && !g.current.ended()
}

// forwarded is how many events the reflector's current watch passed on.
func (g *reflectorGate) forwarded() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.current == nil {
		return 0
	}
	return g.current.count()
}

// describe tells the state of the reflector's watches, for failure messages.
func (g *reflectorGate) describe() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := fmt.Sprintf("%d reflector watches, %d breaks, held %t, %d waiting", g.watches, g.breaks, g.held, g.waiting)
	if p := g.current; p != nil {
		s += fmt.Sprintf("; the current one passed on %d events, the last %q, and ended: %t", p.count(), p.lastType(), p.ended())
	}
	return s
}

// hold makes the next reflector watch wait until release.
func (g *reflectorGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = true
}

// breakWatch ends the reflector's current watch cleanly, as a closed connection does.
func (g *reflectorGate) breakWatch() {
	g.mu.Lock()
	p := g.current
	g.current = nil
	g.breaks++
	g.mu.Unlock()
	if p != nil {
		p.Stop()
	}
}

// blocked reports whether the reflector waits in a held Watch call.
func (g *reflectorGate) blocked() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held && g.waiting > 0
}

func (g *reflectorGate) unhold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = false
	g.cond.Broadcast()
}

// release lets every held and later call through, for good.
func (g *reflectorGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.released = true
	g.cond.Broadcast()
}

// wait waits for the goroutines of every proxy; call it once the Cacher has stopped.
func (g *reflectorGate) wait() { g.proxies.Wait() }

// proxyWatch forwards a storage watch; Stop ends it as a broken connection would, closing the
// result channel without an ERROR.
type proxyWatch struct {
	inner  apiwatch.Interface
	out    chan apiwatch.Event
	stop   chan struct{}
	once   sync.Once
	closed chan struct{}
	events atomic.Int64
	last   atomic.Value // apiwatch.EventType of the last event passed on
}

func newProxyWatch(inner apiwatch.Interface, wg *sync.WaitGroup) *proxyWatch {
	p := &proxyWatch{inner: inner, out: make(chan apiwatch.Event), stop: make(chan struct{}), closed: make(chan struct{})}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(p.closed)
		defer close(p.out)
		defer func() {
			inner.Stop()
			for range inner.ResultChan() {
			}
		}()
		for {
			select {
			case ev, ok := <-inner.ResultChan():
				if !ok {
					return
				}
				select {
				case p.out <- ev:
					p.events.Add(1)
					p.last.Store(ev.Type)
				case <-p.stop:
					return
				}
			case <-p.stop:
				return
			}
		}
	}()
	return p
}

func (p *proxyWatch) ResultChan() <-chan apiwatch.Event { return p.out }

// ended reports whether the proxy closed its result channel.
func (p *proxyWatch) ended() bool {
	select {
	case <-p.closed:
		return true
	default:
		return false
	}
}

// lastType is the type of the last event the proxy passed on ("" if none).
func (p *proxyWatch) lastType() apiwatch.EventType {
	t, _ := p.last.Load().(apiwatch.EventType)
	return t
}

// count is how many events the proxy passed on.
func (p *proxyWatch) count() int { return int(p.events.Load()) }

func (p *proxyWatch) Stop() { p.once.Do(func() { close(p.stop) }) }

// ForceRelist makes the Cacher relist the way a lagging reflector does: it ends the reflector's
// watch, holds the re-watch while write (which must move the store's revision by two or more) and a
// compaction at the resulting revision land, then lets the re-watch fail with the storage's 410 and
// waits for the cache to be ready again. It returns the revision the cache relisted at. It moves
// the Cacher's clock: the reflector watch must be older than a second (a shorter one that saw
// nothing relists without a 410) and the relist comes a second after the round ends.
func (c *Chain) ForceRelist(ctx context.Context, write func() error) (int64, error) {
	if c.Cacher == nil {
		return 0, errors.New("ForceRelist: the chain has no watch cache")
	}
	g := c.reflector
	// The reflector must be watching (not between its list and its watch) when its clock moves.
	if err := testutil.Poll("the reflector to watch", g.watching, nil); err != nil {
		return 0, fmt.Errorf("%w (%s; cache ready: %t)", err, g.describe(), c.Cacher.Ready())
	}
	g.hold()
	defer g.unhold()
	c.CacheClock.Step(1500 * time.Millisecond)
	g.breakWatch()
	if err := testutil.Poll("the reflector to re-watch", g.blocked, nil); err != nil {
		return 0, err
	}
	before := c.Store.Rev()
	if err := write(); err != nil {
		return 0, err
	}
	rev := c.Store.Rev()
	if rev < before+2 {
		// The reflector may have seen the revision before the writes, and a watch from the
		// compacted revision itself is still served.
		return 0, fmt.Errorf("ForceRelist: the writes moved the revision from %d to %d, less than two", before, rev)
	}
	if err := c.Storage.Compact(ctx, rev); err != nil {
		return 0, fmt.Errorf("compacting at %d: %w", rev, err)
	}
	g.unhold()
	if err := testutil.Poll("the cache to notice the compaction", func() bool { return !c.Cacher.Ready() }, nil); err != nil {
		return 0, err
	}
	if err := testutil.Poll("the cache to relist", c.Cacher.Ready, func() { c.CacheClock.Step(50 * time.Millisecond) }); err != nil {
		return 0, err
	}
	return rev, testutil.Poll("the reflector to watch after its relist", g.watching, nil)
}

// ReflectorWatches is how many watches the Cacher's reflector has started.
func (c *Chain) ReflectorWatches() int {
	if c.reflector == nil {
		return 0
	}
	c.reflector.mu.Lock()
	defer c.reflector.mu.Unlock()
	return c.reflector.watches
}

// BreakReflectorWatch ends the reflector's watch cleanly; it re-watches from its last
// resourceVersion at once. HoldReflector and UnholdReflector hold that re-watch.
func (c *Chain) BreakReflectorWatch() { c.reflector.breakWatch() }

// HoldReflector makes the reflector's next Watch call wait for UnholdReflector.
func (c *Chain) HoldReflector() { c.reflector.hold() }

// UnholdReflector lets a held reflector Watch call through.
func (c *Chain) UnholdReflector() { c.reflector.unhold() }

// ReflectorEvents is how many events the reflector's current watch passed on to the Cacher.
func (c *Chain) ReflectorEvents() int { return c.reflector.forwarded() }

// ReflectorWatching reports whether the reflector has a watch that BreakReflectorWatch did not end.
func (c *Chain) ReflectorWatching() bool { return c.reflector.watching() }

// DescribeReflector tells the state of the reflector's watches, for failure messages.
func (c *Chain) DescribeReflector() string { return c.reflector.describe() }

// ReflectorBlocked reports whether the reflector waits in a held Watch call.
func (c *Chain) ReflectorBlocked() bool { return c.reflector.blocked() }
