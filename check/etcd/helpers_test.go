package etcd

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/listwatch/listwatch/store"
)

// storeBackend lets a Recorder drive a store directly, one watch stream per watch.
type storeBackend struct {
	st *store.Store

	mu      sync.Mutex
	streams map[*store.WatchStream]bool
}

func newStoreRecorder(st *store.Store) *Recorder {
	return newRecorder(&storeBackend{st: st, streams: map[*store.WatchStream]bool{}}, nil)
}

func (b *storeBackend) do(_ context.Context, req *Request) (*Response, error) {
	return applyToStore(b.st, req)
}

func (b *storeBackend) watch(ctx context.Context, req *WatchRequest, recv func(WatchResponse)) error {
	ws, err := b.st.NewWatchStream()
	if err != nil {
		return err
	}
	defer ws.Close()
	b.mu.Lock()
	b.streams[ws] = true
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.streams, ws)
		b.mu.Unlock()
	}()
	if _, err := ws.Watch(ctx, toStoreWatchRequest(req)); errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrStreamClosed) {
		return err
	}
	for {
		select {
		case wr, ok := <-ws.Chan():
			if !ok {
				return nil
			}
			recv(fromStoreWatchResponse(&wr, 0))
			if wr.Canceled {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *storeBackend) requestProgress(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ws := range b.streams {
		ws.RequestProgress()
	}
	return nil
}

func mustCheck(t testing.TB, h *History) *Result {
	t.Helper()
	res, err := Check(h, Options{Timeout: time.Minute})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return res
}

func put(k, v string) Request { return Request{Put: &PutRequest{Key: Bytes(k), Value: Bytes(v)}} }
func get(k string) Request    { return Request{Range: &RangeRequest{Key: Bytes(k)}} }
func del(k string) Request    { return Request{DeleteRange: &DeleteRangeRequest{Key: Bytes(k)}} }
func prefix(k string) Request {
	return Request{Range: &RangeRequest{Key: Bytes(k), RangeEnd: PrefixEnd(Bytes(k))}}
}
