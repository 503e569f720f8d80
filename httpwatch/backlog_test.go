package httpwatch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
)

// backlogWatcher is a watch with events queued before its result channel, as the watch cache's
// watchers have: Backlog reports them and, standing in for the watcher's goroutine that runs while
// the handler yields, moves those that pass its filter into the result channel.
type backlogWatcher struct {
	*watch.FakeWatcher
	mu       sync.Mutex
	queued   []watch.Event
	filtered bool // the queued events are filtered out: they never reach the result channel
	asked    int
}

func (b *backlogWatcher) queue(ev watch.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queued = append(b.queued, ev)
}

func (b *backlogWatcher) Backlog() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked++
	n := len(b.queued)
	if !b.filtered {
		for _, ev := range b.queued {
			b.FakeWatcher.Action(ev.Type, ev.Object)
		}
	}
	b.queued = nil
	return n
}

type backlogStorage struct {
	storage.Interface
	w watch.Interface
}

func (s *backlogStorage) Watch(context.Context, string, watchListOptions) (watch.Interface, error) {
	return s.w, nil
}

// serveBacklogged runs one watch request over w; the returned function ends it and waits.
func serveBacklogged(t *testing.T, w watch.Interface, rw http.ResponseWriter) func() {
	t.Helper()
	api, err := New(Config{Resources: []ServedResource{{Resource: ConfigMaps(), Storage: &backlogStorage{w: w}}}, Logger: testutil.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		api.ServeHTTP(rw, httptest.NewRequest("GET", cmPath+"?watch=true&resourceVersion=5", nil).WithContext(ctx))
	}()
	return func() {
		cancel()
		<-done
	}
}

// TestWatchWritesBackloggedEventsTogether: an event the watch has queued but not yet put in its
// result channel is written with the one before it, in one flush, rather than after a flush of its
// own. Failure mode: queued events that turn out to be filtered out do not hold the flush back
// (TestWatchFlushesWhenBacklogIsFiltered).
func TestWatchWritesBackloggedEventsTogether(t *testing.T) {
	bw := &backlogWatcher{FakeWatcher: watch.NewFakeWithChanSize(10, false)}
	bw.Add(named("a"))
	bw.queue(watch.Event{Type: watch.Added, Object: named("b")})
	rec := &recordingWriter{header: http.Header{}}
	stop := serveBacklogged(t, bw, rec)
	// Both events written, then one flush.
	expectThenLoneFlush(t, rec, "header 200; flush; write ADDED a; write ADDED b; flush", bw.Add, "c", stop)
}

// TestWatchFlushesWhenBacklogIsFiltered: when the queued events never reach the result channel, the
// handler flushes what it wrote, as without a backlog.
func TestWatchFlushesWhenBacklogIsFiltered(t *testing.T) {
	bw := &backlogWatcher{FakeWatcher: watch.NewFakeWithChanSize(10, false), filtered: true}
	bw.Add(named("a"))
	bw.queue(watch.Event{Type: watch.Added, Object: named("filtered")})
	rec := &recordingWriter{header: http.Header{}}
	stop := serveBacklogged(t, bw, rec)
	want := "header 200; flush; write ADDED a; flush"
	testutil.WaitFor(t, "the event flushed alone", func() bool { return rec.log() == want })
	stop()
	bw.mu.Lock()
	asked := bw.asked
	bw.mu.Unlock()
	if got := rec.log(); got != want || asked == 0 {
		t.Errorf("writes and flushes %q (backlog asked %d times), want %q after asking", got, asked, want)
	}
}
