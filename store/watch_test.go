package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/etcdrules"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

type stream struct {
	t  *testing.T
	e  *env
	ws *store.WatchStream
}

func openStream(t *testing.T, e *env) *stream {
	t.Helper()
	ws, err := e.s.NewWatchStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ws.Close)
	return &stream{t: t, e: e, ws: ws}
}

// watch creates a watcher and consumes its created answer.
func (s *stream) watch(req *store.WatchRequest) int64 {
	s.t.Helper()
	id, err := s.ws.Watch(context.Background(), req)
	if err != nil {
		s.t.Fatalf("watch %+v: %v", req, err)
	}
	r := s.next()
	if !r.Created || r.WatchID != id || r.Canceled {
		s.t.Fatalf("expected created answer for %d, got %+v", id, r)
	}
	return id
}

// next returns the next response; the store runs no goroutine, so a missing response fails at once.
func (s *stream) next() store.WatchResponse {
	s.t.Helper()
	select {
	case r, ok := <-s.ws.Chan():
		if !ok {
			s.t.Fatal("stream channel closed")
		}
		return r
	default:
		s.t.Fatal("no response queued")
		return store.WatchResponse{}
	}
}

func (s *stream) none() {
	s.t.Helper()
	select {
	case r := <-s.ws.Chan():
		s.t.Fatalf("unexpected response %s", describe(r))
	default:
	}
}

func describe(r store.WatchResponse) string {
	s := fmt.Sprintf("{id %d rev %d compact %d created %v canceled %v %q", r.WatchID, r.Revision, r.CompactRevision, r.Created, r.Canceled, r.CancelReason)
	for _, ev := range r.Events {
		s += fmt.Sprintf(" %s %s@%d", ev.Type, ev.Kv.Key, ev.Kv.ModRevision)
	}
	return s + "}"
}

// evsOf renders a response's events as "TYPE key=value@rev[/prev]" for comparison.
func evsOf(r store.WatchResponse) []string {
	var out []string
	for _, ev := range r.Events {
		s := fmt.Sprintf("%s %s=%s@%d", ev.Type, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision)
		if ev.PrevKV != nil {
			s += fmt.Sprintf("/%s@%d", ev.PrevKV.Value, ev.PrevKV.ModRevision)
		}
		out = append(out, s)
	}
	return out
}

func TestWatchFromZeroSeesOnlyLaterWrites(t *testing.T) {
	e := newEnv(t, store.Options{})
	e.put("a", "old")
	s := openStream(t, e)
	id, err := s.ws.Watch(context.Background(), &store.WatchRequest{Key: []byte("a")})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.WatchResponse{WatchID: id, Created: true, Revision: 2}, s.next()); diff != "" {
		t.Fatalf("created answer (-want +got):\n%s", diff)
	}
	e.put("a", "new")
	e.put("b", "other")
	r := s.next()
	if diff := cmp.Diff([]string{"PUT a=new@3"}, evsOf(r)); diff != "" || r.Revision != 3 || r.WatchID != id {
		t.Fatalf("event response %s (-want +got):\n%s", describe(r), diff)
	}
	s.none()
}

func TestWatchCreateFailures(t *testing.T) {
	e := newEnv(t, store.Options{})
	s := openStream(t, e)
	cases := []struct {
		req  store.WatchRequest
		want error
	}{
		{store.WatchRequest{Key: []byte("b"), RangeEnd: []byte("a")}, store.ErrEmptyWatcherRange},
		{store.WatchRequest{Key: []byte("a"), RangeEnd: []byte("a")}, store.ErrEmptyWatcherRange},
		{store.WatchRequest{Key: []byte("a"), StartRevision: -1}, store.ErrCompacted},
	}
	for _, c := range cases {
		id, err := s.ws.Watch(context.Background(), &c.req)
		if !errors.Is(err, c.want) || id != store.InvalidWatchID {
			t.Errorf("watch %+v = %d, %v; want -1, %v", c.req, id, err, c.want)
		}
		want := store.WatchResponse{WatchID: -1, Created: true, Canceled: true, CancelReason: c.want.Error(), Revision: 1}
		if diff := cmp.Diff(want, s.next()); diff != "" {
			t.Errorf("failed create answer (-want +got):\n%s", diff)
		}
	}
	s.watch(&store.WatchRequest{Key: []byte("a"), WatchID: 5})
	if _, err := s.ws.Watch(context.Background(), &store.WatchRequest{Key: []byte("a"), WatchID: 5}); !errors.Is(err, store.ErrWatcherDuplicateID) {
		t.Fatalf("duplicate ID: %v", err)
	}
	if r := s.next(); r.CancelReason != "mvcc: duplicate watch ID provided on the WatchStream" || r.WatchID != -1 {
		t.Fatalf("duplicate ID answer: %+v", r)
	}
}

func TestAutoWatchIDsSkipUsedOnes(t *testing.T) {
	e := newEnv(t, store.Options{})
	s := openStream(t, e)
	s.watch(&store.WatchRequest{Key: []byte("a"), WatchID: 1})
	var got []int64
	for range 3 {
		got = append(got, s.watch(&store.WatchRequest{Key: []byte("a")}))
	}
	if diff := cmp.Diff([]int64{0, 2, 3}, got); diff != "" {
		t.Fatalf("auto IDs (-want +got):\n%s", diff)
	}
}

func TestEmptyKeyWatchesNulAndFromKey(t *testing.T) {
	e := newEnv(t, store.Options{})
	s := openStream(t, e)
	all := s.watch(&store.WatchRequest{RangeEnd: []byte{0}})
	e.put("x", "1")
	if r := s.next(); r.WatchID != all || len(r.Events) != 1 {
		t.Fatalf("watch of everything: %s", describe(r))
	}
}

func TestWatchCatchUpBatchesWholeRevisions(t *testing.T) {
	e := newEnv(t, store.Options{})
	// 1500 single-key revisions, then one txn of three keys
	for i := range 1500 {
		e.put(fmt.Sprintf("k%04d", i), "v")
	}
	txn := &store.TxnRequest{Success: []store.RequestOp{
		{Put: &store.PutRequest{Key: []byte("t1")}},
		{Put: &store.PutRequest{Key: []byte("t2")}},
		{Put: &store.PutRequest{Key: []byte("t3")}},
	}}
	if _, err := e.s.Txn(txn); err != nil {
		t.Fatal(err)
	}
	cur := e.s.Rev() // 1502
	s := openStream(t, e)
	id := s.watch(&store.WatchRequest{Key: []byte{0}, RangeEnd: []byte{0}, StartRevision: 1})
	s.none() // unsynced watchers wait for the sync pass
	e.step(store.DefaultSyncInterval)
	r := s.next()
	if len(r.Events) != 1000 || r.Events[0].Kv.ModRevision != 2 || r.Events[999].Kv.ModRevision != 1001 || r.Revision != cur {
		t.Fatalf("first catch-up batch: %d events, first %d, last %d, header %d",
			len(r.Events), r.Events[0].Kv.ModRevision, r.Events[len(r.Events)-1].Kv.ModRevision, r.Revision)
	}
	s.none() // one batch per pass: a single watcher stays unsynced until the next pass
	e.step(store.DefaultSyncInterval)
	r = s.next()
	last := r.Events[len(r.Events)-1]
	if r.WatchID != id || len(r.Events) != 503 || last.Kv.ModRevision != cur || string(last.Kv.Key) != "t3" {
		t.Fatalf("second catch-up batch: %d events ending %s@%d", len(r.Events), last.Kv.Key, last.Kv.ModRevision)
	}
	e.put("live", "1")
	if r := s.next(); len(r.Events) != 1 || r.Revision != cur+1 {
		t.Fatalf("after catch-up the watcher is synced: %s", describe(r))
	}
}

func TestWatchFutureStartRevision(t *testing.T) {
	e := newEnv(t, store.Options{})
	s := openStream(t, e)
	s.watch(&store.WatchRequest{Key: []byte("a"), StartRevision: 4, ProgressNotify: true})
	e.put("a", "2")
	e.put("a", "3")
	s.none()
	s.ws.RequestProgress()
	s.none() // current 3 < start 4: no progress yet
	e.put("a", "4")
	if r := s.next(); diffStrings(evsOf(r), "PUT a=4@4") != "" {
		t.Fatalf("future watcher: %s", describe(r))
	}
	s.ws.RequestProgress()
	if r := s.next(); !r.IsProgressNotify() || r.WatchID != -1 || r.Revision != 4 {
		t.Fatalf("progress: %s", describe(r))
	}
}

func diffStrings(got []string, want ...string) string { return cmp.Diff(want, got) }

func TestWatchFiltersAndPrevKV(t *testing.T) {
	e := newEnv(t, store.Options{})
	e.put("a", "1") // 2
	s := openStream(t, e)
	noPut := s.watch(&store.WatchRequest{Key: []byte("a"), Filters: []etcdrules.WatchFilter{etcdrules.FilterNoPut}, PrevKV: true})
	noDel := s.watch(&store.WatchRequest{Key: []byte("a"), Filters: []etcdrules.WatchFilter{etcdrules.FilterNoDelete}, PrevKV: true})
	e.put("a", "2") // 3
	r := s.next()
	if r.WatchID != noDel || diffStrings(evsOf(r), "PUT a=2@3/1@2") != "" {
		t.Fatalf("put with prev kv for the NODELETE watcher: %s", describe(r))
	}
	s.none()       // the NOPUT watcher's response would be empty: nothing is sent
	e.del("a", "") // 4
	r = s.next()
	if r.WatchID != noPut || diffStrings(evsOf(r), "DELETE a=@4/2@3") != "" {
		t.Fatalf("delete with prev kv: %s", describe(r))
	}
	if k := r.Events[0].Kv; k.CreateRevision != 0 || k.Version != 0 || k.Lease != 0 {
		t.Fatalf("a DELETE event's Kv carries only key and mod revision: %+v", k)
	}
	e.put("a", "3") // 5: a creating put has no prev kv
	r = s.next()
	if diffStrings(evsOf(r), "PUT a=3@5") != "" {
		t.Fatalf("creating put: %s", describe(r))
	}
}

func TestPrevKVMissingOnceCompacted(t *testing.T) {
	e := newEnv(t, store.Options{})
	e.put("a", "1") // 2
	e.put("a", "2") // 3
	e.put("a", "3") // 4
	if _, err := e.s.Compact(3); err != nil {
		t.Fatal(err)
	}
	s := openStream(t, e)
	s.watch(&store.WatchRequest{Key: []byte("a"), StartRevision: 3, PrevKV: true})
	e.step(store.DefaultSyncInterval)
	// the event at 3 needs revision 2, which is compacted: prev kv is silently omitted
	if r := s.next(); diffStrings(evsOf(r), "PUT a=2@3", "PUT a=3@4/2@3") != "" {
		t.Fatalf("catch-up with prev kv: %s", describe(r))
	}
}

func TestCompactedWatcherIsCanceled(t *testing.T) {
	e := newEnv(t, store.Options{})
	for i := range 5 {
		e.put("a", fmt.Sprint(i)) // 2..6
	}
	s := openStream(t, e)
	id := s.watch(&store.WatchRequest{Key: []byte("a"), StartRevision: 2})
	if _, err := e.s.Compact(4); err != nil {
		t.Fatal(err)
	}
	e.step(store.DefaultSyncInterval)
	want := store.WatchResponse{WatchID: id, CompactRevision: 4, Canceled: true}
	if diff := cmp.Diff(want, s.next()); diff != "" {
		t.Fatalf("compaction answer (-want +got):\n%s", diff)
	}
	e.put("a", "x")
	e.step(store.DefaultSyncInterval)
	s.none()
	// a watch from the compact revision itself is fine
	s.watch(&store.WatchRequest{Key: []byte("a"), StartRevision: 4})
	e.step(store.DefaultSyncInterval)
	if r := s.next(); len(r.Events) != 4 || r.Events[0].Kv.ModRevision != 4 {
		t.Fatalf("watch from the compact revision: %s", describe(r))
	}
	// the compacted ID stays reserved until canceled
	if err := s.ws.Cancel(context.Background(), id); err != nil {
		t.Fatalf("cancel compacted watcher: %v", err)
	}
	if r := s.next(); !r.Canceled || r.WatchID != id {
		t.Fatalf("cancel answer: %s", describe(r))
	}
}

func TestSyncedWatcherSurvivesCompaction(t *testing.T) {
	e := newEnv(t, store.Options{})
	s := openStream(t, e)
	id := s.watch(&store.WatchRequest{Key: []byte("a")})
	e.put("a", "1")
	e.put("a", "2")
	s.next()
	s.next()
	if _, err := e.s.Compact(3); err != nil {
		t.Fatal(err)
	}
	e.step(store.DefaultSyncInterval)
	e.put("a", "3")
	if r := s.next(); r.WatchID != id || len(r.Events) != 1 || r.Canceled {
		t.Fatalf("synced watcher after compaction: %s", describe(r))
	}
}

func TestSlowStreamNeitherDropsNorBlocks(t *testing.T) {
	e := newEnv(t, store.Options{})
	s := openStream(t, e)
	id := s.watch(&store.WatchRequest{Key: []byte("k"), RangeEnd: []byte("l")})
	const n = 1000 // far more responses than the channel holds; every put returns
	for i := range n {
		e.put(fmt.Sprintf("k%03d", i), "v")
	}
	var got []int64
	for guard := 0; len(got) < n && guard < 10000; guard++ {
		select {
		case r := <-s.ws.Chan():
			if r.WatchID != id {
				t.Fatalf("unexpected %s", describe(r))
			}
			for _, ev := range r.Events {
				got = append(got, ev.Kv.ModRevision)
			}
		default:
			e.step(store.DefaultVictimRetryInterval)
			e.step(store.DefaultSyncInterval)
		}
	}
	for i, rev := range got {
		if rev != int64(i)+2 {
			t.Fatalf("event %d has revision %d: events lost, duplicated or reordered", i, rev)
		}
	}
	if len(got) != n {
		t.Fatalf("got %d events, want %d", len(got), n)
	}
	e.put("k999", "v")
	if r := s.next(); len(r.Events) != 1 || r.Events[0].Kv.ModRevision != n+2 {
		t.Fatalf("after draining, live again: %s", describe(r))
	}
}

func TestTxnIsOneResponse(t *testing.T) {
	e := newEnv(t, store.Options{})
	e.put("a", "0")
	s := openStream(t, e)
	s.watch(&store.WatchRequest{Key: []byte("a"), RangeEnd: []byte("z"), PrevKV: true})
	only := s.watch(&store.WatchRequest{Key: []byte("b")})
	_, err := e.s.Txn(&store.TxnRequest{Success: []store.RequestOp{
		{Put: &store.PutRequest{Key: []byte("b"), Value: []byte("1")}},
		{DeleteRange: &store.DeleteRangeRequest{Key: []byte("a")}},
		{Put: &store.PutRequest{Key: []byte("c"), Value: []byte("1")}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64][]string{}
	for range 2 {
		r := s.next()
		got[r.WatchID] = evsOf(r)
	}
	want := map[int64][]string{
		0:    {"PUT b=1@3", "DELETE a=@3/0@2", "PUT c=1@3"},
		only: {"PUT b=1@3"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("txn responses (-want +got):\n%s", diff)
	}
}

func TestLeaseRevokeIsOneResponseInKeyOrder(t *testing.T) {
	e := newEnv(t, store.Options{})
	l, _ := e.s.LeaseGrant(0, 60)
	for _, k := range []string{"c", "a", "b"} {
		if _, err := e.s.Put(&store.PutRequest{Key: []byte(k), Lease: l.ID}); err != nil {
			t.Fatal(err)
		}
	}
	s := openStream(t, e)
	s.watch(&store.WatchRequest{Key: []byte{0}, RangeEnd: []byte{0}})
	if _, err := e.s.LeaseRevoke(l.ID); err != nil {
		t.Fatal(err)
	}
	if r := s.next(); diffStrings(evsOf(r), "DELETE a=@5", "DELETE b=@5", "DELETE c=@5") != "" {
		t.Fatalf("revoke: %s", describe(r))
	}
}

func TestCancelAndClose(t *testing.T) {
	e := newEnv(t, store.Options{})
	s := openStream(t, e)
	id := s.watch(&store.WatchRequest{Key: []byte("a")})
	e.put("a", "1")
	if err := s.ws.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	s.next() // the event queued before the cancel
	if diff := cmp.Diff(store.WatchResponse{WatchID: id, Canceled: true, Revision: 2}, s.next()); diff != "" {
		t.Fatalf("cancel answer (-want +got):\n%s", diff)
	}
	e.put("a", "2")
	s.none()
	if err := s.ws.Cancel(context.Background(), id); !errors.Is(err, store.ErrWatcherNotExist) {
		t.Fatalf("second cancel: %v", err)
	}
	s.none() // an unknown ID gets no answer
	s.ws.Close()
	if _, ok := <-s.ws.Chan(); ok {
		t.Fatal("channel open after Close")
	}
	if _, err := s.ws.Watch(context.Background(), &store.WatchRequest{Key: []byte("a")}); !errors.Is(err, store.ErrStreamClosed) {
		t.Fatalf("watch on closed stream: %v", err)
	}
	s.ws.Close()
}

// TestWatchWaitsOnlyWhenControlRoomIsFull: a create waits only when 16 control answers already wait
// behind 128 other responses (v3rpc's recvLoop blocks on its full control channel the same way); a
// create whose context ends meanwhile leaves nothing behind, and a waiting one goes out once the
// reader made room and the store's periodic work ran.
func TestWatchWaitsOnlyWhenControlRoomIsFull(t *testing.T) {
	e := newEnv(t, store.Options{})
	s := openStream(t, e)
	s.watch(&store.WatchRequest{Key: []byte("a")})
	s.fillChannel("a", 200) // 128 responses queued, the rest kept for the victim retry
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 16 {
		if _, err := s.ws.Watch(ctx, &store.WatchRequest{Key: []byte("b")}); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	if _, err := s.ws.Watch(ctx, &store.WatchRequest{Key: []byte("c"), WatchID: 100}); !errors.Is(err, context.Canceled) {
		t.Fatalf("create with a dead context once the control room is full: %v", err)
	}
	// The abandoned create left no watcher behind: its ID is free again.
	done := make(chan error, 1)
	go func() {
		_, err := s.ws.Watch(context.Background(), &store.WatchRequest{Key: []byte("c"), WatchID: 100})
		done <- err
	}()
	s.next() // room for one more answer
	e.step(store.DefaultVictimRetryInterval)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("create once there is room: %v", err)
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("a waiting create did not go out once there was room")
	}
	for i := range 127 {
		if r := s.next(); len(r.Events) != 1 {
			t.Fatalf("response %d: %s", i, describe(r))
		}
	}
	for i := range 16 {
		if r := s.next(); !r.Created || r.WatchID != int64(i)+1 {
			t.Fatalf("created answer %d: %s", i, describe(r))
		}
	}
	if r := s.next(); !r.Created || r.WatchID != 100 {
		t.Fatalf("created answer of the waiting create: %s", describe(r))
	}
}

func TestProgressNotifyPeriodic(t *testing.T) {
	const interval = time.Second
	e := newEnv(t, store.Options{ProgressNotifyInterval: interval})
	s := openStream(t, e)
	id := s.watch(&store.WatchRequest{Key: []byte("a"), ProgressNotify: true})
	other := s.watch(&store.WatchRequest{Key: []byte("b")})
	_ = other
	e.step(interval + interval/10) // past the jittered tick
	r := s.next()
	if diff := cmp.Diff(store.WatchResponse{WatchID: id, Revision: 1}, r); diff != "" {
		t.Fatalf("periodic progress (-want +got):\n%s", diff)
	}
	s.none() // only the progress_notify watcher gets one
	e.put("a", "1")
	s.next()
	e.step(interval + interval/10)
	s.none() // events since the last tick: the tick is skipped
	e.step(interval + interval/10)
	if r := s.next(); r.WatchID != id || !r.IsProgressNotify() || r.Revision != 2 {
		t.Fatalf("progress after a quiet interval: %s", describe(r))
	}
}

func TestRequestProgressOnlyWhenAllSynced(t *testing.T) {
	e := newEnv(t, store.Options{})
	e.put("a", "1")
	e.put("a", "2")
	s := openStream(t, e)
	s.watch(&store.WatchRequest{Key: []byte("a")})
	s.watch(&store.WatchRequest{Key: []byte("a"), StartRevision: 2}) // unsynced
	s.ws.RequestProgress()
	s.none()
	e.step(store.DefaultSyncInterval)
	s.next() // catch-up
	s.ws.RequestProgress()
	want := store.WatchResponse{WatchID: store.InvalidWatchID, Revision: 3}
	if diff := cmp.Diff(want, s.next()); diff != "" {
		t.Fatalf("progress (-want +got):\n%s", diff)
	}
	empty := openStream(t, e)
	empty.ws.RequestProgress()
	empty.none() // a stream without watchers is not answered
}

func TestStoreCloseClosesStreams(t *testing.T) {
	e := newEnv(t, store.Options{})
	s := openStream(t, e)
	s.watch(&store.WatchRequest{Key: []byte("a")})
	e.s.Close()
	if _, ok := <-s.ws.Chan(); ok {
		t.Fatal("stream open after store Close")
	}
}

func TestDriverGoroutineCatchesUp(t *testing.T) {
	st := store.New(store.Options{SyncInterval: time.Millisecond})
	defer st.Close()
	for i := range 10 {
		if _, err := st.Put(&store.PutRequest{Key: []byte("a"), Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := st.NewWatchStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Watch(context.Background(), &store.WatchRequest{Key: []byte("a"), StartRevision: 2}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	seen := 0
	for seen < 10 {
		select {
		case r := <-ws.Chan():
			seen += len(r.Events)
		case <-deadline:
			t.Fatalf("the store's goroutine did not catch the watcher up: %d of 10 events", seen)
		}
	}
}

func TestCatchUpNeverSplitsARevision(t *testing.T) {
	e := newEnv(t, store.Options{})
	for i := range 999 {
		e.put(fmt.Sprintf("k%04d", i), "v") // revisions 2..1000
	}
	// revision 1001, the 1000th revision of history, is a txn of three changes
	if _, err := e.s.Txn(&store.TxnRequest{Success: []store.RequestOp{put("t1", ""), put("t2", ""), put("t3", "")}}); err != nil {
		t.Fatal(err)
	}
	e.put("after", "v") // 1002
	s := openStream(t, e)
	s.watch(&store.WatchRequest{Key: []byte{0}, RangeEnd: []byte{0}, StartRevision: 2})
	e.step(store.DefaultSyncInterval)
	r := s.next()
	last := r.Events[len(r.Events)-1]
	if len(r.Events) != 1002 || last.Kv.ModRevision != 1001 || string(last.Kv.Key) != "t3" {
		t.Fatalf("first batch must end with the whole txn at 1001: %d events, last %s@%d", len(r.Events), last.Kv.Key, last.Kv.ModRevision)
	}
	e.step(store.DefaultSyncInterval)
	if r := s.next(); diffStrings(evsOf(r), "PUT after=v@1002") != "" {
		t.Fatalf("second batch: %s", describe(r))
	}
}

// fillChannel writes to a key the stream's synced watcher on it watches until the stream's channel
// holds 128 event responses; later writes make the watcher a victim.
func (s *stream) fillChannel(key string, n int) {
	s.t.Helper()
	for i := range n {
		s.e.put(key, fmt.Sprint(i))
	}
}

// TestWatchFromZeroOnFullStreamIsSynced: etcd registers a watcher before it answers the create
// (mvcc watchable_store.go watch) and queues the answer on v3rpc's control channel, so a watch from
// revision 0 is synced at once even while its stream's channel is full: it owes what is written
// after the create and nothing before, and no compaction can cancel it.
func TestWatchFromZeroOnFullStreamIsSynced(t *testing.T) {
	e := newEnv(t, store.Options{})
	s := openStream(t, e)
	s.watch(&store.WatchRequest{Key: []byte("x")})
	s.fillChannel("x", 128) // revisions 2..129: the channel is full
	// The create must not wait for the channel: a dead context does not matter.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	id, err := s.ws.Watch(ctx, &store.WatchRequest{Key: []byte("k")})
	if err != nil {
		t.Fatalf("watch from 0 on a full stream: %v; want it registered at once", err)
	}
	for i := range 5 {
		e.put("y", fmt.Sprint(i)) // 130..134
	}
	if _, err := e.s.Compact(134); err != nil {
		t.Fatal(err)
	}
	for range 128 {
		if r := s.next(); len(r.Events) != 1 || string(r.Events[0].Kv.Key) != "x" {
			t.Fatalf("queued before the create: %s", describe(r))
		}
	}
	if diff := cmp.Diff(store.WatchResponse{WatchID: id, Created: true, Revision: 129}, s.next()); diff != "" {
		t.Fatalf("created answer (-want +got):\n%s", diff)
	}
	e.step(store.DefaultSyncInterval)
	e.put("k", "v") // 135
	r := s.next()
	if r.WatchID != id || r.Canceled || diffStrings(evsOf(r), "PUT k=v@135") != "" {
		t.Fatalf("watch from 0 after a compaction: %s, want the put", describe(r))
	}
	s.none()
}

// TestControlAnswersNotQueuedBehindFullChannel: v3rpc sends created and canceled answers through a
// control channel of their own (watch.go ctrlStream), so neither a create nor a cancel waits for a
// slow stream's event responses; the answers follow the events already queued.
func TestControlAnswersNotQueuedBehindFullChannel(t *testing.T) {
	e := newEnv(t, store.Options{})
	s := openStream(t, e)
	a := s.watch(&store.WatchRequest{Key: []byte("a")})
	s.fillChannel("a", 200) // 128 responses queued, the rest kept for the victim retry
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b, err := s.ws.Watch(ctx, &store.WatchRequest{Key: []byte("b")})
	if err != nil {
		t.Fatalf("create on a stream whose channel is full: %v", err)
	}
	if err := s.ws.Cancel(ctx, a); err != nil {
		t.Fatalf("cancel on a stream whose channel is full: %v", err)
	}
	for i := range 128 {
		if r := s.next(); r.WatchID != a || len(r.Events) != 1 || r.Events[0].Kv.ModRevision != int64(i)+2 {
			t.Fatalf("response %d: %s", i, describe(r))
		}
	}
	if r := s.next(); !r.Created || r.WatchID != b {
		t.Fatalf("want the created answer of %d: %s", b, describe(r))
	}
	if r := s.next(); !r.Canceled || r.WatchID != a || r.CompactRevision != 0 {
		t.Fatalf("want the canceled answer of %d: %s", a, describe(r))
	}
	e.step(store.DefaultVictimRetryInterval)
	s.none() // the canceled watcher's pending events are dropped
	e.put("b", "1")
	if r := s.next(); r.WatchID != b || diffStrings(evsOf(r), "PUT b=1@202") != "" {
		t.Fatalf("events of the watcher created on the full stream: %s", describe(r))
	}
}

// TestUnsyncedWatchersServedFairly: etcd takes at most 512 unsynced watchers a pass, in the random
// order of its map (watcher_group.go choose), so watchers whose compaction answer a full stream
// cannot take do not hold back the others. Here 512 such watchers come first, and the one other
// unsynced watcher must still be caught up.
func TestUnsyncedWatchersServedFairly(t *testing.T) {
	e := newEnv(t, store.Options{})
	for i := range 5 {
		e.put("k", fmt.Sprint(i)) // 2..6
	}
	full := openStream(t, e)
	full.watch(&store.WatchRequest{Key: []byte("x")})
	for range 512 {
		full.watch(&store.WatchRequest{Key: []byte("k"), StartRevision: 2})
	}
	if _, err := e.s.Compact(4); err != nil {
		t.Fatal(err)
	}
	full.fillChannel("x", 128) // 7..134: no room for the 512 compaction answers
	other := openStream(t, e)
	id := other.watch(&store.WatchRequest{Key: []byte("k"), StartRevision: 4})
	for range 4 {
		e.step(store.DefaultSyncInterval)
	}
	r := other.next()
	if r.WatchID != id || diffStrings(evsOf(r), "PUT k=2@4", "PUT k=3@5", "PUT k=4@6") != "" {
		t.Fatalf("the watcher behind 512 stuck ones: %s", describe(r))
	}
}

// TestProgressTickerKeepsStreamPhase: v3rpc runs one progress ticker per stream from the stream's
// start (watch.go sendLoop), so a progress_notify watcher created on a stream that had none for a
// while hears its first notification at the stream's next tick, not at once.
func TestProgressTickerKeepsStreamPhase(t *testing.T) {
	const interval = time.Second
	e := newEnv(t, store.Options{ProgressNotifyInterval: interval})
	s := openStream(t, e)
	s.watch(&store.WatchRequest{Key: []byte("a")})
	// The stream's period is the interval plus under 10% jitter: five ticks are due by 5.5 s and the
	// sixth is between 6 and 6.6 s.
	e.step(5*interval + interval/2)
	id := s.watch(&store.WatchRequest{Key: []byte("b"), ProgressNotify: true})
	e.step(0)
	s.none()
	e.step(interval + interval/10) // 6.6 s
	if r := s.next(); r.WatchID != id || !r.IsProgressNotify() {
		t.Fatalf("progress at the stream's next tick: %s", describe(r))
	}
	s.none()
}

// hookClock is a fake clock that calls onNow whenever the store reads the time.
type hookClock struct {
	*clocktesting.FakeClock
	onNow func()
}

func (c *hookClock) Now() time.Time {
	if f := c.onNow; f != nil {
		f()
	}
	return c.FakeClock.Now()
}

// TestTickReleasesLockBetweenPasses: etcd's syncWatchersLoop takes the store's lock for one pass
// of at most 512 watchers at a time (watchable_store.go syncWatchersLoop, syncWatchers), so a
// write waits for at most one pass. Catching up 1100 watchers takes three passes; a write made
// whenever the store reads its clock (which it does between passes) must not wait for the whole
// catch-up, so the passes' answers carry three different header revisions.
func TestTickReleasesLockBetweenPasses(t *testing.T) {
	hc := &hookClock{FakeClock: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))}
	st := store.New(store.Options{Clock: hc, ManualTick: true})
	defer st.Close()
	e := &env{t: t, s: st, clock: hc.FakeClock}
	e.put("k", "v") // 2
	var streams []*stream
	for range 11 {
		s := openStream(t, e)
		for range 100 {
			s.watch(&store.WatchRequest{Key: []byte("k"), StartRevision: 2})
		}
		streams = append(streams, s)
	}
	hc.onNow = func() {
		done := make(chan error, 1)
		go func() {
			_, err := st.Put(&store.PutRequest{Key: []byte("other")})
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("put while catching up: %v", err)
			}
		case <-time.After(testutil.WaitTimeout):
			t.Errorf("a put waited %v while the store caught watchers up", testutil.WaitTimeout)
			<-done
		}
	}
	hc.Step(store.DefaultSyncInterval)
	st.Tick()
	hc.onNow = nil
	headers := map[int64]int{}
	for _, s := range streams {
		for range 100 {
			r := s.next()
			if diffStrings(evsOf(r), "PUT k=v@2") != "" {
				t.Fatalf("catch-up answer %s", describe(r))
			}
			headers[r.Revision]++
		}
	}
	if len(headers) != 3 {
		t.Fatalf("catch-up answers by header revision: %v; want three passes, each after a write", headers)
	}
}

// TestPeriodicWorkReleasesLockBetweenSteps: besides the catch-up passes
// (TestTickReleasesLockBetweenPasses), etcd retries victims one batch at a time under its lock
// (watchable_store.go moveVictims), revokes each expired lease with a request of its own (lessor.go
// revokeExpiredLeases hands them to the server, which proposes one revocation each) and runs one
// progress ticker per stream (v3rpc watch.go sendLoop). So a write made after each step of the
// store's periodic work must land between any two batches, revocations or progress ticks.
func TestPeriodicWorkReleasesLockBetweenSteps(t *testing.T) {
	afterEachStep := func(e *env) {
		store.SetAfterStep(e.s, func() { e.put("marker", "") })
	}
	t.Run("victim batches", func(t *testing.T) {
		e := newEnv(t, store.Options{})
		s := openStream(t, e)
		s.watch(&store.WatchRequest{Key: []byte("marker")})
		s.watch(&store.WatchRequest{Key: []byte("f")})
		for _, k := range []string{"x1", "x2", "x3"} {
			s.watch(&store.WatchRequest{Key: []byte(k)})
		}
		s.fillChannel("f", 128)
		for _, k := range []string{"x1", "x2", "x3"} {
			e.put(k, "") // refused by the full channel: three batches of victims
		}
		for range 128 {
			s.next()
		}
		afterEachStep(e)
		e.step(store.DefaultVictimRetryInterval)
		var keys []string
		for {
			select {
			case r := <-s.ws.Chan():
				keys = append(keys, string(r.Events[0].Kv.Key))
				continue
			default:
			}
			break
		}
		if diffStrings(keys, "x1", "marker", "x2", "marker", "x3", "marker") != "" {
			t.Fatalf("responses in the order of their keys: %q; want a write after each victim batch", keys)
		}
	})
	t.Run("lease revocations", func(t *testing.T) {
		e := newEnv(t, store.Options{})
		for _, k := range []string{"l1", "l2", "l3"} {
			l, err := e.s.LeaseGrant(0, 2)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.s.Put(&store.PutRequest{Key: []byte(k), Lease: l.ID}); err != nil {
				t.Fatal(err)
			}
		}
		from := e.s.Rev() + 1
		afterEachStep(e)
		e.step(3 * time.Second) // all three expired
		store.SetAfterStep(e.s, nil)
		s := openStream(t, e)
		s.watch(&store.WatchRequest{Key: []byte{0}, RangeEnd: []byte{0}, StartRevision: from})
		e.step(store.DefaultSyncInterval)
		evs := evsOf(s.next())
		var deletes []string
		for _, ev := range evs {
			if strings.HasPrefix(ev, "DELETE") {
				deletes = append(deletes, ev)
			}
		}
		if len(deletes) != 3 {
			t.Fatalf("events from revision %d: %q; want the three revocations", from, evs)
		}
		for i := 1; i < len(evs); i++ {
			if strings.HasPrefix(evs[i-1], "DELETE") && strings.HasPrefix(evs[i], "DELETE") {
				t.Fatalf("events from revision %d: %q; want a write between any two revocations", from, evs)
			}
		}
	})
	t.Run("progress ticks", func(t *testing.T) {
		e := newEnv(t, store.Options{ProgressNotifyInterval: time.Second})
		var streams []*stream
		for range 3 {
			s := openStream(t, e)
			s.watch(&store.WatchRequest{Key: []byte("p"), ProgressNotify: true})
			streams = append(streams, s)
		}
		afterEachStep(e)
		e.step(1100 * time.Millisecond) // each stream's first tick: the interval plus under 10% jitter
		revs := map[int64]bool{}
		for _, s := range streams {
			r := s.next()
			if !r.IsProgressNotify() {
				t.Fatalf("want a progress notification: %s", describe(r))
			}
			revs[r.Revision] = true
		}
		if len(revs) != 3 {
			t.Fatalf("progress notifications of three streams at revisions %v; want a write after each stream's tick", revs)
		}
	})
}

// drain reads every response queued on the stream.
func (s *stream) drain() []store.WatchResponse {
	var out []store.WatchResponse
	for {
		select {
		case r := <-s.ws.Chan():
			out = append(out, r)
		default:
			return out
		}
	}
}

// progressNotAhead fails the test if a progress notification in rs comes before an event at or below
// its revision.
func progressNotAhead(t *testing.T, rs []store.WatchResponse) (progress int) {
	t.Helper()
	var told int64
	for _, r := range rs {
		for _, ev := range r.Events {
			if ev.Kv.ModRevision <= told {
				t.Fatalf("event at %d after a progress notification at %d (etcd-io/etcd#15220)", ev.Kv.ModRevision, told)
			}
		}
		if r.WatchID == store.InvalidWatchID && len(r.Events) == 0 {
			told = max(told, r.Revision)
			progress++
		}
	}
	return progress
}

// TestRequestProgressAfterBurst is etcd-io/etcd#15220's trigger: a burst of writes to a synced
// watcher's key, more than its stream's channel holds, then at once a RequestProgress on its
// stream, and again at every step while the events are still queued. No notification may come
// ahead of them; once they are all sent, one is answered.
func TestRequestProgressAfterBurst(t *testing.T) {
	e := newEnv(t, store.Options{})
	s := openStream(t, e)
	s.watch(&store.WatchRequest{Key: []byte("a")})
	const burst = 300 // more than the stream's 128 responses: the rest wait as victims
	for i := range burst {
		e.put("a", fmt.Sprint(i))
	}
	s.ws.RequestProgress()
	var got []store.WatchResponse
	for events, steps := 0, 0; events < burst; steps++ {
		if steps == 1000 {
			t.Fatalf("%d of %d events after %d retry steps", events, burst, steps)
		}
		rs := s.drain()
		for _, r := range rs {
			events += len(r.Events)
		}
		got = append(got, rs...)
		s.ws.RequestProgress()
		e.step(store.DefaultVictimRetryInterval)
	}
	s.ws.RequestProgress()
	got = append(got, s.drain()...)
	if progressNotAhead(t, got) == 0 {
		t.Fatal("RequestProgress not answered once the burst was sent")
	}
	if last := got[len(got)-1]; last.Revision != int64(burst+1) || len(last.Events) != 0 {
		t.Fatalf("last response %s, want progress at %d", describe(last), burst+1)
	}
}

// TestRequestProgressAfterQuietCatchUp is etcd-io/etcd#17507's trigger: a watch from a past revision
// of a key nobody wrote since catches up without an event; a RequestProgress must then be answered.
func TestRequestProgressAfterQuietCatchUp(t *testing.T) {
	e := newEnv(t, store.Options{})
	start := e.put("other", "0").Header.Revision
	for i := range 20 {
		e.put("other", fmt.Sprint(i))
	}
	s := openStream(t, e)
	s.watch(&store.WatchRequest{Key: []byte("quiet"), StartRevision: start})
	s.ws.RequestProgress()
	s.none() // unsynced: not answered, not ahead
	e.step(store.DefaultSyncInterval)
	s.ws.RequestProgress()
	want := store.WatchResponse{WatchID: store.InvalidWatchID, Revision: 22}
	if diff := cmp.Diff(want, s.next()); diff != "" {
		t.Fatalf("progress (-want +got):\n%s", diff)
	}
}
