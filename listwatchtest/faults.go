package listwatchtest

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
)

// watchSet tracks the open watches made through one storage.Interface, so that a test can end them
// all at once.
type watchSet struct {
	mu      sync.Mutex
	open    map[*faultWatch]struct{}
	started int // watches ever opened through the set
}

func newWatchSet() *watchSet { return &watchSet{open: map[*faultWatch]struct{}{}} }

// count returns how many watches were ever opened through the set.
func (s *watchSet) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// end ends every open watch: with an ERROR event carrying status, or, with a nil status, by closing
// its result channel, as a watch the server dropped. It returns how many it ended.
func (s *watchSet) end(status *metav1.Status) int {
	s.mu.Lock()
	ws := make([]*faultWatch, 0, len(s.open))
	for w := range s.open {
		ws = append(ws, w)
	}
	s.mu.Unlock()
	n := 0
	for _, w := range ws {
		if w.end(status) {
			n++
		}
	}
	return n
}

// faultStorage is a storage.Interface whose watches are tracked in a watchSet.
type faultStorage struct {
	storage.Interface
	set *watchSet
}

func (f faultStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := f.Interface.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	fw := &faultWatch{
		inner: w,
		out:   make(chan watch.Event),
		ends:  make(chan *metav1.Status, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	f.set.mu.Lock()
	f.set.open[fw] = struct{}{}
	f.set.started++
	f.set.mu.Unlock()
	fw.forget = func() {
		f.set.mu.Lock()
		delete(f.set.open, fw)
		f.set.mu.Unlock()
	}
	go fw.run()
	return fw, nil
}

// faultWatch passes a watch's events on until the watch ends by itself, is stopped, or is ended by
// the test. Its goroutine is owned by the watch: Stop stops it and waits for it.
type faultWatch struct {
	inner    watch.Interface
	out      chan watch.Event
	ends     chan *metav1.Status // at most one end; nil status: closed without an event
	endOnce  sync.Once
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	forget   func()
}

func (w *faultWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop stops the watch it wraps and waits for its goroutine. It is idempotent.
func (w *faultWatch) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		w.inner.Stop()
		<-w.done
		w.forget()
	})
}

// end asks the watch to end; it reports whether this was the first ask.
func (w *faultWatch) end(status *metav1.Status) bool {
	first := false
	w.endOnce.Do(func() {
		first = true
		w.ends <- status
	})
	return first
}

func (w *faultWatch) run() {
	defer close(w.done)
	defer close(w.out)
	in := w.inner.ResultChan()
	for {
		select {
		case <-w.stop:
			return
		case status := <-w.ends:
			w.finish(status)
			return
		case ev, ok := <-in:
			if !ok {
				return
			}
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			case status := <-w.ends:
				// The event not yet delivered is dropped, as by a watch that fails mid-stream.
				w.finish(status)
				return
			}
		}
	}
}

// finish delivers the ERROR event of an end with a status; the caller then closes the channel.
func (w *faultWatch) finish(status *metav1.Status) {
	if status == nil {
		return
	}
	select {
	case w.out <- watch.Event{Type: watch.Error, Object: status}:
	case <-w.stop:
	}
}
