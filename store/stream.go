package store

import (
	"context"
	"sync"
	"time"
)

// WatchStream multiplexes watchers over one channel of responses, as an etcd gRPC watch stream does:
// it combines mvcc's watchStream with the parts of v3rpc's serverWatchStream that are not about gRPC
// (created and canceled answers, prev_kv, progress notifications). Responses for one watch ID arrive
// in order: its created answer first, then whole revisions in ascending order, then possibly a
// compacted answer, after which only the answer to an explicit Cancel follows.
type WatchStream struct {
	s  *Store
	ch chan WatchResponse

	// guarded by s.mu
	watchers       map[int64]*watcher
	nextID         int64
	closed         bool
	progressCount  int // watchers with progress_notify
	progressPeriod time.Duration
	nextProgress   time.Time

	// answers that must not be dropped are sent outside the store lock; Close waits for them
	inflight sync.WaitGroup
	done     chan struct{}
	once     sync.Once
}

// NewWatchStream opens a watch stream. Its channel holds 128 responses; a watcher whose responses the
// channel cannot take is retried later, never dropped, and never slows down writers.
func (s *Store) NewWatchStream() (*WatchStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	period := s.opts.ProgressNotifyInterval
	period += s.jitter(period)
	ws := &WatchStream{
		s:              s,
		ch:             make(chan WatchResponse, chanBufLen),
		watchers:       make(map[int64]*watcher),
		progressPeriod: period,
		nextProgress:   s.opts.Clock.Now().Add(period),
		done:           make(chan struct{}),
	}
	s.watch.streams[ws] = struct{}{}
	return ws, nil
}

// Chan returns the stream's responses. It is closed by Close.
func (ws *WatchStream) Chan() <-chan WatchResponse { return ws.ch }

// Watch creates a watcher and queues its created answer, which precedes every other response for the
// ID. A request etcd refuses is answered by a created answer with Canceled set, watch ID
// InvalidWatchID and the reason, and Watch returns that reason as its error (ErrCompacted for a negative
// start revision, ErrEmptyWatcherRange, ErrWatcherDuplicateID). Watch blocks while the channel is full;
// it returns ctx.Err() or ErrStreamClosed, queuing nothing, if ctx ends or the stream closes first.
func (ws *WatchStream) Watch(ctx context.Context, req *WatchRequest) (int64, error) {
	s := ws.s
	key := req.Key
	if len(key) == 0 {
		key = []byte{0}
	}
	kr := rangeOf(key, req.RangeEnd)

	s.mu.Lock()
	if ws.closed {
		s.mu.Unlock()
		return InvalidWatchID, ErrStreamClosed
	}
	var fail error
	switch {
	case req.StartRevision < 0:
		fail = ErrCompacted
	case kr.isRange && kr.end != "" && kr.key >= kr.end:
		fail = ErrEmptyWatcherRange
	case req.WatchID != AutoWatchID && ws.watchers[req.WatchID] != nil:
		fail = ErrWatcherDuplicateID
	}
	rev := s.currentRev
	if fail != nil {
		answer := WatchResponse{WatchID: InvalidWatchID, Created: true, Canceled: true, CancelReason: fail.Error(), Revision: rev}
		select {
		case ws.ch <- answer:
			s.mu.Unlock()
			return InvalidWatchID, fail
		default:
		}
		ws.inflight.Add(1)
		s.mu.Unlock()
		defer ws.inflight.Done()
		err := ws.deliver(ctx, WatchResponse{WatchID: InvalidWatchID, Created: true, Canceled: true, CancelReason: fail.Error(), Revision: rev})
		if err != nil {
			return InvalidWatchID, err
		}
		return InvalidWatchID, fail
	}
	id := req.WatchID
	if id == AutoWatchID {
		for ws.watchers[ws.nextID] != nil {
			ws.nextID++
		}
		id = ws.nextID
		ws.nextID++
	}
	w := &watcher{
		ws:             ws,
		id:             id,
		kr:             kr,
		startRev:       req.StartRevision,
		prevKV:         req.PrevKv,
		progress:       req.ProgressNotify,
		creating:       true,
		quietSinceTick: true,
		groupPos:       -1,
		setPos:         -1,
	}
	for _, f := range req.Filters {
		switch f {
		case FilterNoPut:
			w.noPut = true
		case FilterNoDelete:
			w.noDelete = true
		}
	}
	ws.watchers[id] = w
	if w.progress {
		ws.progressCount++
		s.watch.progressStreams[ws] = struct{}{}
		s.wake()
	}
	// Usually the channel has room: answer and register in one critical section, as etcd registers
	// the watcher before it reads the revision for the created answer.
	select {
	case ws.ch <- WatchResponse{WatchID: id, Created: true, Revision: rev}:
		w.creating = false
		s.registerLocked(w, rev)
		s.mu.Unlock()
		return id, nil
	default:
	}
	// The channel is full: wait for room outside the lock; a watcher from revision 0 then owes
	// everything after the revision its created answer reported.
	ws.inflight.Add(1)
	s.mu.Unlock()
	defer ws.inflight.Done()

	err := ws.deliver(ctx, WatchResponse{WatchID: id, Created: true, Revision: rev})

	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || ws.closed {
		if ws.watchers[id] == w {
			ws.removeLocked(w)
		}
		if err == nil {
			err = ErrStreamClosed
		}
		return InvalidWatchID, err
	}
	w.creating = false
	s.registerLocked(w, rev)
	return id, nil
}

// deliver sends an answer that must not be lost, waiting for room in the channel.
func (ws *WatchStream) deliver(ctx context.Context, wr WatchResponse) error {
	select {
	case ws.ch <- wr:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-ws.done:
		return ErrStreamClosed
	}
}

// Cancel removes a watcher and queues its canceled answer; nothing more is sent for the ID. An unknown
// ID (or one whose Watch call has not returned) gets ErrWatcherNotExist and no answer.
func (ws *WatchStream) Cancel(ctx context.Context, id int64) error {
	s := ws.s
	s.mu.Lock()
	if ws.closed {
		s.mu.Unlock()
		return ErrStreamClosed
	}
	w := ws.watchers[id]
	if w == nil || w.creating {
		s.mu.Unlock()
		return ErrWatcherNotExist
	}
	ws.removeLocked(w)
	rev := s.currentRev
	ws.inflight.Add(1)
	s.mu.Unlock()
	defer ws.inflight.Done()
	return ws.deliver(ctx, WatchResponse{WatchID: id, Canceled: true, Revision: rev})
}

func (ws *WatchStream) removeLocked(w *watcher) {
	ws.s.cancelWatcherLocked(w)
	delete(ws.watchers, w.id)
	if w.progress {
		if ws.progressCount--; ws.progressCount == 0 {
			delete(ws.s.watch.progressStreams, ws)
		}
	}
}

// RequestProgress asks for one progress notification addressed to InvalidWatchID. It is sent only if
// every watcher of the stream is synced and the store has reached each one's start revision, and only
// if the channel has room; otherwise nothing is sent and the caller may ask again
// (watchable_store.go progressAll).
func (ws *WatchStream) RequestProgress() {
	s := ws.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	if ws.closed {
		return
	}
	watchers := make([]*watcher, 0, len(ws.watchers))
	for _, w := range ws.watchers {
		watchers = append(watchers, w)
	}
	s.progressIfSyncLocked(ws, watchers, InvalidWatchID)
}

// Close cancels every watcher and closes the channel once no answer is being sent. It is idempotent.
func (ws *WatchStream) Close() {
	ws.once.Do(func() {
		s := ws.s
		s.mu.Lock()
		ws.closed = true
		for _, w := range ws.watchers {
			ws.removeLocked(w)
		}
		delete(s.watch.streams, ws)
		delete(s.watch.progressStreams, ws)
		s.mu.Unlock()
		close(ws.done)
		ws.inflight.Wait()
		close(ws.ch)
	})
}
