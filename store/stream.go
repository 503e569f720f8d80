package store

import (
	"context"
	"sync"
	"time"

	"github.com/listwatch/listwatch/etcdrules"
)

// WatchStream multiplexes watchers over one channel of responses, as an etcd gRPC watch stream does:
// it combines mvcc's watchStream with the parts of v3rpc's serverWatchStream that are not about gRPC
// (created and canceled answers, prev_kv, progress notifications). Responses for one watch ID arrive
// in order: its created answer first, then whole revisions in ascending order, then possibly a
// compacted answer, after which only the answer to an explicit Cancel follows.
//
// The channel has room for 128 event, progress and compaction responses, as mvcc's watch channel,
// and 16 more for created and canceled answers, as v3rpc's control channel: a create or a cancel is
// answered at once even when the stream's reader has fallen behind.
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
	ctrl           []*ctrlAnswer // control answers the channel had no room for yet, oldest first

	done chan struct{}
	once sync.Once
}

// ctrlAnswer is a created or canceled answer waiting for room in the channel. The caller of Watch
// or Cancel waits for it (v3rpc's recvLoop blocks on a full control channel the same way).
type ctrlAnswer struct {
	wr   WatchResponse
	w    *watcher      // the watcher a created answer announces, nil otherwise
	out  bool          // on the channel
	sent chan struct{} // closed when out, if somebody waits
}

// NewWatchStream opens a watch stream. A watcher whose responses the channel cannot take is retried
// later, never dropped, and never slows down writers.
func (s *Store) NewWatchStream() (*WatchStream, error) {
	now := s.opts.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	period := s.opts.ProgressNotifyInterval
	period += s.jitter(period)
	ws := &WatchStream{
		s:              s,
		ch:             make(chan WatchResponse, chanBufLen+ctrlStreamBufLen),
		watchers:       make(map[int64]*watcher),
		progressPeriod: period,
		nextProgress:   now.Add(period),
		done:           make(chan struct{}),
	}
	s.watch.streams[ws] = struct{}{}
	return ws, nil
}

// Chan returns the stream's responses. It is closed by Close.
func (ws *WatchStream) Chan() <-chan WatchResponse { return ws.ch }

// Watch creates a watcher and queues its created answer, which precedes every other response for the
// ID. The watcher is registered at once, as mvcc registers it before v3rpc answers: a watcher from
// revision 0 owes exactly what is written after the revision its created answer reports. A request
// etcd refuses is answered by a created answer with Canceled set, watch ID InvalidWatchID and the
// reason, and Watch returns that reason as its error (ErrCompacted for a negative start revision,
// ErrEmptyWatcherRange, ErrWatcherDuplicateID).
//
// Watch returns as soon as its answer is on the channel, which has room for it unless 16 control
// answers are already waiting there behind 128 other responses; then it waits for the store's
// periodic work to find room (with Options.ManualTick, for a Tick after the reader made room). If ctx
// ends or the stream closes first, it returns ctx.Err() or ErrStreamClosed and leaves neither a
// watcher nor an answer behind.
func (ws *WatchStream) Watch(ctx context.Context, req *WatchRequest) (int64, error) {
	s := ws.s
	key := req.Key
	if len(key) == 0 {
		key = []byte{0}
	}
	kr := rangeOf(key, req.RangeEnd)
	now := s.opts.Clock.Now()

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
		a := &ctrlAnswer{wr: WatchResponse{WatchID: InvalidWatchID, Created: true, Canceled: true, CancelReason: fail.Error(), Revision: rev}}
		if err := ws.answerLocked(ctx, a, nil); err != nil {
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
		prevKV:         req.PrevKV,
		progress:       req.ProgressNotify,
		creating:       true,
		quietSinceTick: true,
		groupPos:       -1,
		setPos:         -1,
	}
	for _, f := range req.Filters {
		switch f {
		case etcdrules.FilterNoPut:
			w.noPut = true
		case etcdrules.FilterNoDelete:
			w.noDelete = true
		}
	}
	ws.watchers[id] = w
	if w.progress {
		if ws.progressCount == 0 {
			// The stream's ticker has run since the stream opened (v3rpc watch.go sendLoop): the
			// first notification comes at its next tick, not at once.
			ws.nextProgress = nextTick(ws.nextProgress, ws.progressPeriod, now)
		}
		ws.progressCount++
		s.watch.progressStreams[ws] = struct{}{}
		s.wake()
	}
	s.registerLocked(w, rev)
	a := &ctrlAnswer{wr: WatchResponse{WatchID: id, Created: true, Revision: rev}, w: w}
	undo := func() {
		if ws.watchers[id] == w {
			ws.removeLocked(w)
		}
	}
	if err := ws.answerLocked(ctx, a, undo); err != nil {
		return InvalidWatchID, err
	}
	return id, nil
}

// nextTick returns the first tick of a ticker with the given period, last due at next, that is
// after now.
func nextTick(next time.Time, period time.Duration, now time.Time) time.Time {
	if now.Before(next) {
		return next
	}
	return next.Add((now.Sub(next)/period + 1) * period)
}

// answerLocked queues a control answer and returns once it is on the channel, unlocking s.mu. If
// ctx ends or the stream closes first, the answer is withdrawn, undo (if any) runs under the lock,
// and the error says why.
func (ws *WatchStream) answerLocked(ctx context.Context, a *ctrlAnswer, undo func()) error {
	s := ws.s
	ws.ctrl = append(ws.ctrl, a)
	ws.flushCtrlLocked()
	if a.out {
		s.mu.Unlock()
		return nil
	}
	a.sent = make(chan struct{})
	s.watch.ctrlPending[ws] = struct{}{}
	s.wake()
	s.mu.Unlock()

	var err error
	select {
	case <-a.sent:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-ws.done:
		err = ErrStreamClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.out {
		return nil
	}
	for i, b := range ws.ctrl {
		if b == a {
			ws.ctrl = append(ws.ctrl[:i], ws.ctrl[i+1:]...)
			break
		}
	}
	if len(ws.ctrl) == 0 {
		delete(s.watch.ctrlPending, ws)
	}
	if undo != nil {
		undo()
	}
	return err
}

// flushCtrlLocked moves waiting control answers onto the channel while it has room for them.
func (ws *WatchStream) flushCtrlLocked() {
	for len(ws.ctrl) > 0 && !ws.closed && len(ws.ch) < cap(ws.ch) {
		a := ws.ctrl[0]
		select {
		case ws.ch <- a.wr:
		default:
			return
		}
		ws.ctrl[0] = nil
		ws.ctrl = ws.ctrl[1:]
		a.out = true
		if a.w != nil {
			a.w.creating = false
		}
		if a.sent != nil {
			close(a.sent)
		}
	}
	if len(ws.ctrl) == 0 {
		ws.ctrl = nil
		delete(ws.s.watch.ctrlPending, ws)
	}
}

// offerLocked puts an event, progress or compaction response on the channel without blocking. It
// never passes a control answer still waiting, and leaves the control answers their room.
func (ws *WatchStream) offerLocked(wr WatchResponse) bool {
	if len(ws.ctrl) > 0 {
		ws.flushCtrlLocked()
		if len(ws.ctrl) > 0 {
			return false
		}
	}
	if ws.closed || len(ws.ch) >= chanBufLen {
		return false
	}
	select {
	case ws.ch <- wr:
		return true
	default:
		return false
	}
}

// Cancel removes a watcher and queues its canceled answer; nothing more is sent for the ID. An unknown
// ID (or one whose Watch call has not returned) gets ErrWatcherNotExist and no answer. Like Watch,
// Cancel returns once its answer is on the channel; if ctx ends or the stream closes first, the
// watcher is gone all the same but no answer is queued.
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
	return ws.answerLocked(ctx, &ctrlAnswer{wr: WatchResponse{WatchID: id, Canceled: true, Revision: s.currentRev}}, nil)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if ws.closed {
		return
	}
	watchers := make([]*watcher, 0, len(ws.watchers))
	for _, w := range ws.watchers {
		watchers = append(watchers, w)
	}
	s.progressIfSyncLocked(ws, watchers, InvalidWatchID)
}

// Close cancels every watcher, ends any Watch or Cancel call still waiting for its answer, and
// closes the channel. It is idempotent.
func (ws *WatchStream) Close() {
	ws.once.Do(func() {
		s := ws.s
		s.mu.Lock()
		ws.closed = true
		for _, w := range ws.watchers {
			ws.removeLocked(w)
		}
		ws.ctrl = nil
		delete(s.watch.streams, ws)
		delete(s.watch.progressStreams, ws)
		delete(s.watch.ctrlPending, ws)
		s.mu.Unlock()
		// Every send happens under s.mu and checks closed first, so none can follow.
		close(ws.done)
		close(ws.ch)
	})
}
