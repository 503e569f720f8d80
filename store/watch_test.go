package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
		if ev.PrevKv != nil {
			s += fmt.Sprintf("/%s@%d", ev.PrevKv.Value, ev.PrevKv.ModRevision)
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
	noPut := s.watch(&store.WatchRequest{Key: []byte("a"), Filters: []store.WatchFilter{store.FilterNoPut}, PrevKv: true})
	noDel := s.watch(&store.WatchRequest{Key: []byte("a"), Filters: []store.WatchFilter{store.FilterNoDelete}, PrevKv: true})
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
	s.watch(&store.WatchRequest{Key: []byte("a"), StartRevision: 3, PrevKv: true})
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
	s.watch(&store.WatchRequest{Key: []byte("a"), RangeEnd: []byte("z"), PrevKv: true})
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

func TestWatchBlocksOnFullChannelUntilContextEnds(t *testing.T) {
	e := newEnv(t, store.Options{})
	s := openStream(t, e)
	s.watch(&store.WatchRequest{Key: []byte("a")})
	for i := range 200 {
		e.put("a", fmt.Sprint(i)) // 128 queue, the rest become victims
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.ws.Watch(ctx, &store.WatchRequest{Key: []byte("b")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("watch on a full stream with a dead context: %v", err)
	}
	// the failed create left no watcher behind: its ID is free again
	for range 128 {
		s.next()
	}
	if id := s.watch(&store.WatchRequest{Key: []byte("b"), WatchID: 1}); id != 1 {
		t.Fatalf("ID of the abandoned create was not released: got %d", id)
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
