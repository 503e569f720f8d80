package cachepair

import (
	"context"
	"errors"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8sstorage "k8s.io/apiserver/pkg/storage"

	"github.com/listwatch/listwatch/storage"
)

// ErrInjectedList is the error of an injected list failure.
var ErrInjectedList = errors.New("injected list error")

// Faults are what a cache's storage is made to do wrong: fail the first lists (upstream's
// StorageInjectingListErrors) and break the watches it has handed out. They also count the
// requests that (re)fill a cache: a list from the start, or a watch with initial events.
type Faults struct {
	mu         sync.Mutex
	listErrors int
	initial    int
	watches    []*breakableWatch
}

// ListErrorsLeft is how many lists are still to fail.
func (f *Faults) ListErrorsLeft() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.listErrors
}

// InitialRequests counts the lists from the start and the watches with initial events so far.
func (f *Faults) InitialRequests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.initial
}

// beforeList returns the injected error, if one is left, and counts a list from the start.
func (f *Faults) beforeList(continueToken string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErrors > 0 {
		f.listErrors--
		return ErrInjectedList
	}
	if continueToken == "" {
		f.initial++
	}
	return nil
}

// watched wraps a watch the storage handed out so that BreakWatches can break it.
func (f *Faults) watched(w watch.Interface, sendInitialEvents *bool) watch.Interface {
	bw := newBreakableWatch(w)
	f.mu.Lock()
	defer f.mu.Unlock()
	if sendInitialEvents != nil && *sendInitialEvents {
		f.initial++
	}
	f.watches = append(f.watches, bw)
	return bw
}

// BreakWatches ends every watch the storage handed out with an ERROR 410 Expired, as etcd ends a
// watch whose start was compacted.
func (f *Faults) BreakWatches() {
	f.mu.Lock()
	ws := f.watches
	f.watches = nil
	f.mu.Unlock()
	for _, w := range ws {
		w.breakWith(apierrors.NewResourceExpired("injected: the watch's resourceVersion was compacted"))
	}
}

type upstreamFaultStorage struct {
	k8sstorage.Interface
	f *Faults
}

func (s upstreamFaultStorage) GetList(ctx context.Context, key string, opts k8sstorage.ListOptions, listObj runtime.Object) error {
	if err := s.f.beforeList(opts.Predicate.Continue); err != nil {
		return err
	}
	return s.Interface.GetList(ctx, key, opts, listObj)
}

func (s upstreamFaultStorage) Watch(ctx context.Context, key string, opts k8sstorage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return s.f.watched(w, opts.SendInitialEvents), nil
}

type listwatchFaultStorage struct {
	storage.Interface
	compactRevision func() int64
	f               *Faults
}

// CompactRevision is the etcd3 storage's: through it listwatch's cache keeps a snapshot compactor,
// as upstream's Cacher does over its storage with ListFromCacheSnapshot (cacher.go
// NewCacherFromConfig), so that both caches observe compactions alike.
func (s listwatchFaultStorage) CompactRevision() int64 { return s.compactRevision() }

func (s listwatchFaultStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if err := s.f.beforeList(opts.Predicate.Continue); err != nil {
		return err
	}
	return s.Interface.GetList(ctx, key, opts, listObj)
}

func (s listwatchFaultStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return s.f.watched(w, opts.SendInitialEvents), nil
}

// breakableWatch forwards a watch's events until it is stopped, or broken: then it sends one ERROR
// event and closes. Either way it stops the watch under it and reads it until it closes, so none of
// that watch's goroutines is left.
type breakableWatch struct {
	inner    watch.Interface
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
	brk      chan *apierrors.StatusError
	brkOnce  sync.Once
}

func newBreakableWatch(inner watch.Interface) *breakableWatch {
	w := &breakableWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{}), brk: make(chan *apierrors.StatusError, 1)}
	go w.run()
	return w
}

func (w *breakableWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *breakableWatch) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

func (w *breakableWatch) breakWith(err *apierrors.StatusError) {
	w.brkOnce.Do(func() { w.brk <- err })
}

func (w *breakableWatch) run() {
	defer close(w.out)
	in := w.inner.ResultChan()
	defer func() {
		w.inner.Stop()
		for range in {
		}
	}()
	for {
		select {
		case ev, ok := <-in:
			if !ok {
				return
			}
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			case err := <-w.brk:
				w.fail(err)
				return
			}
		case <-w.stop:
			return
		case err := <-w.brk:
			w.fail(err)
			return
		}
	}
}

func (w *breakableWatch) fail(err *apierrors.StatusError) {
	status := err.ErrStatus
	select {
	case w.out <- watch.Event{Type: watch.Error, Object: &status}:
	case <-w.stop:
	}
}
