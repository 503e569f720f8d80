package apiserverconf

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"

	"github.com/listwatch/listwatch/internal/testutil"
)

// RunWatchSemantics checks the events of a watch created after it opened with upstream's
// testCheckResultWithIgnoreFunc (pkg/storage/testing/utils.go), which gives each event 150 ms to
// arrive: a loaded machine overruns that on any backend. The check takes an event that is already
// in the result channel when it starts before its 150 ms can run out, so deliveredStore makes every
// Create wait until the event is there: the events are then checked as upstream checks them, in the
// same order and content, but no longer against the clock.

// deliveredBuffer is how many events a deliveredWatch holds unread: far more than any conformance
// function sends one watch, so the pump never waits for the reader while a Create waits for it.
const deliveredBuffer = 1024

// deliveredStore is s whose Create returns only once every watch opened through it that covers the
// created key holds an event at or past the creation's resourceVersion in its result channel (or,
// never expected, after testutil.WaitTimeout: upstream's check then judges what came).
func deliveredStore(t *testing.T, s storage.Interface) storage.Interface {
	d := &deliveringStore{Interface: s, t: t}
	t.Cleanup(d.stopAll)
	return d
}

type deliveringStore struct {
	storage.Interface
	t *testing.T

	mu      sync.Mutex
	watches []*deliveredWatch
}

func (d *deliveringStore) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	inner, err := d.Interface.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	prefix := key
	if opts.Recursive && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	w := newDeliveredWatch(inner, prefix, opts.Recursive)
	go w.pump()
	d.mu.Lock()
	d.watches = append(d.watches, w)
	d.mu.Unlock()
	return w, nil
}

func (d *deliveringStore) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	if err := d.Interface.Create(ctx, key, obj, out, ttl); err != nil {
		return err
	}
	rv, err := storage.APIObjectVersioner{}.ObjectResourceVersion(out)
	if err != nil {
		return err
	}
	d.mu.Lock()
	var waitFor []*deliveredWatch
	for _, w := range d.watches {
		if w.covers(key) {
			waitFor = append(waitFor, w)
		}
	}
	d.mu.Unlock()
	// Not a verdict: upstream's check that follows fails if an event never came.
	err = testutil.Poller{}.Poll("the creation's event in every watch", func() bool {
		for _, w := range waitFor {
			if !w.holds(rv) {
				return false
			}
		}
		return true
	})
	if err != nil {
		d.t.Logf("create %s: %v", key, err)
	}
	return nil
}

// stopAll stops every watch and waits for its pump: the function under test stops its watches, but
// one it left open must not outlive the subtest.
func (d *deliveringStore) stopAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range d.watches {
		w.Stop()
	}
}

// deliveredWatch moves the events of inner into a buffered result channel as they come, and records
// the highest resourceVersion moved.
type deliveredWatch struct {
	inner     watch.Interface
	prefix    string
	recursive bool
	moved     atomic.Uint64
	ended     atomic.Bool // the pump returned: no more events will come
	out       chan watch.Event
	halt      chan struct{}
	halted    func()        // closes halt, once
	pumped    chan struct{} // closed once the pump has returned
}

func newDeliveredWatch(inner watch.Interface, prefix string, recursive bool) *deliveredWatch {
	w := &deliveredWatch{inner: inner, prefix: prefix, recursive: recursive,
		out: make(chan watch.Event, deliveredBuffer), halt: make(chan struct{}), pumped: make(chan struct{})}
	w.halted = sync.OnceFunc(func() { close(w.halt) })
	return w
}

func (w *deliveredWatch) pump() {
	defer func() {
		w.ended.Store(true)
		close(w.out)
		close(w.pumped)
	}()
	for ev := range w.inner.ResultChan() {
		select {
		case w.out <- ev:
		case <-w.halt:
			return
		}
		if m, err := meta.Accessor(ev.Object); err == nil {
			if rv, err := (storage.APIObjectVersioner{}).ParseResourceVersion(m.GetResourceVersion()); err == nil && rv > w.moved.Load() {
				w.moved.Store(rv)
			}
		}
	}
}

// covers reports whether a write to key is in the watch's range.
func (w *deliveredWatch) covers(key string) bool {
	if w.recursive {
		return strings.HasPrefix(key, w.prefix)
	}
	return key == w.prefix
}

// holds reports whether the result channel has received everything up to rv, or will receive
// nothing more.
func (w *deliveredWatch) holds(rv uint64) bool { return w.ended.Load() || w.moved.Load() >= rv }

func (w *deliveredWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop stops inner and waits for the pump, which then closes the result channel.
func (w *deliveredWatch) Stop() {
	w.halted()
	w.inner.Stop()
	<-w.pumped
}
