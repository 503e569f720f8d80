package diffrun

import (
	"fmt"
	"sync"
	"time"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/proptest/kubemodel"
)

// Next reads a watch's next event, blocking until there is one. ok false says the watch ended; err
// is then the reason it is not a clean end (nil for a close or a canceled request). With ok true, err
// says the event could not be read into the model (the event is kept, and the segment fails).
type Next func() (e kubemodel.Event, ok bool, err error)

// Segment is one watch a peer serves for a pair (the first request, a re-watch or a start over) and
// the reader that records its events; a paused reader does not read, so the peer's buffers fill as
// behind a slow client. The runner owns it: Stop ends the reader and waits for it.
type Segment struct {
	// Exp is what the watch must deliver, by the peer's model.
	Exp kubemodel.Expectation
	// resume says a client re-watched from the last resourceVersion it saw.
	resume bool
	stop   func()
	done   chan struct{}

	mu      sync.Mutex
	events  []kubemodel.Event
	readErr error
	closed  bool
	paused  chan struct{} // open while paused; nil while reading
}

// NewSegment starts reading a watch through next; stop ends the watch (cancels its request), after
// which next must return ok false.
func NewSegment(exp kubemodel.Expectation, next Next, stop func()) *Segment {
	s := &Segment{Exp: exp, stop: stop, done: make(chan struct{})}
	go s.read(next)
	return s
}

func (s *Segment) read(next Next) {
	defer close(s.done)
	for {
		s.mu.Lock()
		gate := s.paused
		s.mu.Unlock()
		if gate != nil {
			<-gate
		}
		e, ok, err := next()
		s.mu.Lock()
		if err != nil && s.readErr == nil {
			s.readErr = err
		}
		if !ok {
			s.closed = true
			s.mu.Unlock()
			return
		}
		s.events = append(s.events, e)
		s.mu.Unlock()
	}
}

// Snapshot is what the segment delivered so far, whether the watch ended, and the first event it
// could not read.
func (s *Segment) Snapshot() ([]kubemodel.Event, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]kubemodel.Event(nil), s.events...), s.closed, s.readErr
}

func (s *Segment) pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused == nil {
		s.paused = make(chan struct{})
	}
}

func (s *Segment) unpause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused != nil {
		close(s.paused)
		s.paused = nil
	}
}

// Stop stops the watch and waits until the reader has read it to its end. It may be called again.
func (s *Segment) Stop() error {
	s.stop()
	s.unpause()
	select {
	case <-s.done:
		return nil
	case <-time.After(testutil.WaitTimeout):
		return fmt.Errorf("the watch stayed open %v after it was stopped", testutil.WaitTimeout)
	}
}
