package proptest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/proptest/chaintest"
	"github.com/listwatch/listwatch/store"
)

// The fault tests each break one thing on purpose and check that nobody else loses anything, that
// memory stays bounded (the peak is logged) and, through TestMain's goleak, that no goroutine is
// left behind.

func newTestChain(t *testing.T, opts chaintest.Options) *chaintest.Chain {
	t.Helper()
	c, err := chaintest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	testutil.CloseAtCleanup(t, "Close", c.Close)
	return c
}

// faultWatch is a watch and what the model says of it.
type faultWatch struct {
	name string
	w    *chaintest.Watch
	exp  chaintest.Expectation
}

func openFault(t *testing.T, c *chaintest.Chain, m *chaintest.Model, name string, spec chaintest.WatchSpec, step func()) *faultWatch {
	t.Helper()
	exp, err := m.Expect(spec)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.OpenWatch(spec, step)
	if err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusOK {
		t.Fatalf("%s: watch %s: HTTP %d %s", name, exp, w.Code, w.Body)
	}
	t.Cleanup(w.Disconnect)
	return &faultWatch{name: name, w: w, exp: exp}
}

// check judges every frame so far.
func (f *faultWatch) check(t *testing.T, m *chaintest.Model) chaintest.Verdict {
	t.Helper()
	frames, end, endErr := f.w.Frames()
	if end == chaintest.Broken {
		t.Fatalf("%s: the stream broke: %v", f.name, endErr)
	}
	v, err := m.Check(f.exp, frames)
	if err != nil {
		t.Fatalf("%s: %v", f.name, err)
	}
	return v
}

// delivered reports whether the watch delivered as many events as it owes, or ended; it fails the
// test if the watch ended short of that without an ERROR the model allows. It only counts frames,
// so that polling it stays cheap however long the stream grows.
func (f *faultWatch) delivered(t *testing.T, m *chaintest.Model) bool {
	t.Helper()
	// Ended first: the frames counted after it include all the stream will ever have.
	ended := f.w.Ended()
	events, _ := f.w.Counts()
	if owed := m.Owed(f.exp); events < owed {
		if !ended {
			return false
		}
		if v := f.check(t, m); !v.Error {
			t.Fatalf("%s: ended after %d of %d events: %+v", f.name, events, owed, v)
		}
	}
	return true
}

// complete reports whether the watch delivered all it owes, exactly (or ended with an ERROR the
// model allows); it fails the test if the watch ended short of that.
func (f *faultWatch) complete(t *testing.T, m *chaintest.Model) bool {
	t.Helper()
	return f.delivered(t, m) && f.check(t, m).Complete
}

// waitDelivered waits until every watch delivered as many events as it owes (see delivered).
func waitDelivered(t *testing.T, m *chaintest.Model, step func(), ws ...*faultWatch) {
	t.Helper()
	done := make([]bool, len(ws))
	err := testutil.Poll("every watch to deliver every event", func() bool {
		for i, f := range ws {
			if !done[i] && !f.delivered(t, m) {
				return false
			}
			done[i] = true
		}
		return true
	}, step)
	if err != nil {
		for _, f := range ws {
			events, _ := f.w.Counts()
			t.Logf("%s: %d of %d events", f.name, events, m.Owed(f.exp))
		}
		t.Fatal(err)
	}
}

// waitComplete waits until every watch delivered all it owes and then checks every frame of each
// against the model once.
func waitComplete(t *testing.T, m *chaintest.Model, step func(), ws ...*faultWatch) {
	t.Helper()
	waitDelivered(t, m, step, ws...)
	done := make([]bool, len(ws))
	err := testutil.Poll("every watch to deliver exactly what it must", func() bool {
		for i, f := range ws {
			if !done[i] && !f.complete(t, m) {
				return false
			}
			done[i] = true
		}
		return true
	}, step)
	if err != nil {
		t.Fatal(err)
	}
}

func putPod(t *testing.T, c *chaintest.Chain, m *chaintest.Model, p chaintest.Pod) {
	t.Helper()
	if _, err := c.PutRaw(p.EtcdKey(), p.JSON("")); err != nil {
		t.Fatal(err)
	}
	if err := m.Observe(c.Store, p.EtcdKey()); err != nil {
		t.Fatal(err)
	}
}

func updatePodHTTP(t *testing.T, c *chaintest.Chain, m *chaintest.Model, p chaintest.Pod) {
	t.Helper()
	cur := m.State(p.EtcdKey())
	var err error
	if cur == nil {
		_, err = c.CreatePod(p)
	} else {
		_, err = c.UpdatePod(p, cur.Rev)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Observe(c.Store, p.EtcdKey()); err != nil {
		t.Fatal(err)
	}
}

// syncCache waits until the watch cache has every write and tells the model. On a store with a fake
// clock, step must move it: the reflector's watch may reach the store after writes it must then
// catch up on.
func syncCache(t *testing.T, c *chaintest.Chain, m *chaintest.Model, step func()) {
	t.Helper()
	last := m.LastPodRev()
	err := testutil.Poll("the watch cache to catch up", func() bool {
		rv, err := c.ListRV()
		if err != nil {
			t.Fatal(err)
		}
		if rv >= last {
			m.CacheAt = rv
			return true
		}
		return false
	}, step)
	if err != nil {
		t.Fatal(err)
	}
}

func testPod(ns string, i, payload int) chaintest.Pod {
	p := chaintest.Pod{Namespace: ns, Name: fmt.Sprintf("p%03d", i), Payload: payload, Phase: "Running"}
	if i%2 == 0 {
		p.Labels = map[string]string{"l": "1"}
	}
	if i%3 == 0 {
		p.NodeName = "n1"
	}
	return p
}

// rawWatchThenClose opens a watch-list on a bare TCP connection, reads the headers and the first
// bodyBytes bytes of the chunked body (the middle of a frame, and of a chunk), then closes the
// connection, with a reset when abort.
func rawWatchThenClose(addr string, bodyBytes int, abort bool) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(testutil.WaitTimeout)); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(conn, "GET /api/v1/pods?watch=true&resourceVersion=0&allowWatchBookmarks=true HTTP/1.1\r\nHost: %s\r\nAccept-Encoding: identity\r\n\r\n", addr); err != nil {
		return err
	}
	br := bufio.NewReaderSize(conn, 256)
	tp := textproto.NewReader(br)
	status, err := tp.ReadLine()
	if err != nil {
		return err
	}
	if status != "HTTP/1.1 200 OK" {
		return fmt.Errorf("status line %q", status)
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return err
	}
	if te := h.Get("Transfer-Encoding"); te != "chunked" {
		return fmt.Errorf("Transfer-Encoding %q", te)
	}
	if _, err := io.ReadFull(br, make([]byte, bodyBytes)); err != nil {
		return fmt.Errorf("reading %d bytes of the body: %w", bodyBytes, err)
	}
	if abort {
		if err := conn.(*net.TCPConn).SetLinger(0); err != nil {
			return err
		}
	}
	return conn.Close()
}

// TestChainClientDisconnectMidFrame: 300 clients open a watch-list whose initial events are about
// 160 KiB of frames, read their headers and part of the body (up to 20000 bytes: mid-chunk,
// mid-frame), then close the connection, half of them with a reset, while pods keep changing.
// Every handler ends and stops its storage watch; three clients reading normally meanwhile get
// every event exactly; memory after all that is within a bound of what it was before.
func TestChainClientDisconnectMidFrame(t *testing.T) {
	c := newTestChain(t, chaintest.Options{})
	m := c.NewModel()
	peak := chaintest.StartMemPeak(10 * time.Millisecond)
	for i := range 40 {
		putPod(t, c, m, testPod("a", i, 4000))
	}
	syncCache(t, c, m, nil)
	base := chaintest.LiveHeap()
	readers := []*faultWatch{
		openFault(t, c, m, "watch-list", chaintest.WatchSpec{Unset: true, Bookmarks: true}, nil),
		openFault(t, c, m, "from now", chaintest.WatchSpec{ResourceVersion: strconv.FormatInt(m.Rev, 10)}, nil),
		openFault(t, c, m, "l=1 in a", chaintest.WatchSpec{Namespace: "a", Label: "l=1", ResourceVersion: "0"}, nil),
	}
	const clients = 300
	for i := range clients {
		if err := rawWatchThenClose(c.Addr(), 1+(i*7919)%20000, i%2 == 0); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		if i%10 == 9 {
			for j := range 3 {
				p := testPod("a", (i+j)%40, 4000)
				p.Labels = map[string]string{"l": strconv.Itoa(i % 3)}
				updatePodHTTP(t, c, m, p)
			}
		}
	}
	if err := testutil.Poll("the handlers of the closed connections to end", func() bool { return c.OpenWatches() == len(readers) }, nil); err != nil {
		t.Fatalf("%v: %d storage watches open, want %d", err, c.OpenWatches(), len(readers))
	}
	after := chaintest.LiveHeap()
	for _, r := range readers {
		after -= min(after, r.w.RetainedBytes()) // the readers' frames are the test's, not the chain's
	}
	waitComplete(t, m, nil, readers...)
	for _, r := range readers {
		r.w.Disconnect()
	}
	if err := testutil.Poll("every handler to end", func() bool { return c.OpenWatches() == 0 }, nil); err != nil {
		t.Fatal(err)
	}
	peak.Stop()
	growth := int64(after) - int64(base)
	t.Logf("%d clients closed mid-frame, %d writes meanwhile; live heap %.1f MiB before, %.1f MiB after (%+.1f MiB); %s",
		clients, len(m.Writes)-40, chaintest.MiB(base), chaintest.MiB(after), float64(growth)/(1<<20), peak)
	if growth > 32<<20 {
		t.Errorf("live heap grew by %.1f MiB over %d closed watches", float64(growth)/(1<<20), clients)
	}
}

// TestChainShutdownWith1000Watches opens 1000 HTTP watches of four kinds, lets them all catch up
// with 8 updates, then shuts the server down as `listwatch serve` does: every stream ends
// cleanly, each having delivered exactly every event, no handler is left, and the time the shutdown
// took is logged (it must finish within testutil.WaitTimeout).
func TestChainShutdownWith1000Watches(t *testing.T) {
	c := newTestChain(t, chaintest.Options{})
	m := c.NewModel()
	for i := range 5 {
		putPod(t, c, m, testPod("a", i, 200))
		putPod(t, c, m, testPod("b", i, 200))
	}
	syncCache(t, c, m, nil)
	peak := chaintest.StartMemPeak(10 * time.Millisecond)
	now := strconv.FormatInt(m.Rev, 10)
	specs := []chaintest.WatchSpec{
		{ResourceVersion: "0", Bookmarks: true},
		{ResourceVersion: now},
		{Label: "l=1", ResourceVersion: now, Bookmarks: true},
		{Namespace: "a", Field: "spec.nodeName=n1", Unset: true},
	}
	n := 1000
	if testing.Short() {
		n = 250
	}
	ws := make([]*faultWatch, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	exps := make([]chaintest.Expectation, len(specs))
	for i, s := range specs {
		e, err := m.Expect(s)
		if err != nil {
			t.Fatal(err)
		}
		exps[i] = e
	}
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 4 {
				w, err := c.StartWatch(specs[i%len(specs)])
				if err != nil {
					errs <- err
					return
				}
				ws[i] = &faultWatch{name: fmt.Sprintf("watch %d", i), w: w, exp: exps[i%len(specs)]}
				if w.Code != http.StatusOK {
					errs <- fmt.Errorf("watch %d: HTTP %d %s", i, w.Code, w.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for _, f := range ws {
		if f != nil {
			t.Cleanup(f.w.Disconnect)
		}
	}
	for err := range errs {
		t.Fatal(err)
	}
	for i := range 8 {
		p := testPod([]string{"a", "b"}[i%2], i/2, 200)
		p.NodeName = []string{"n1", "n2"}[i%3%2]
		updatePodHTTP(t, c, m, p)
	}
	waitComplete(t, m, nil, ws...)
	lens := make([]int, n)
	for i, f := range ws {
		lens[i] = f.w.Len()
	}
	goroutines := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	took, err := c.Shutdown(ctx)
	if err != nil {
		t.Fatalf("shutdown after %v: %v", took, err)
	}
	start := time.Now()
	for i, f := range ws {
		if err := f.w.WaitEnd(nil); err != nil {
			t.Fatal(err)
		}
		// Checked complete above; nothing may have come since.
		frames, end, err := f.w.Frames()
		if end != chaintest.Clean {
			t.Fatalf("%s ended with %s (%v), want a clean end", f.name, end, err)
		}
		if len(frames) != lens[i] {
			t.Fatalf("%s: %d frames after shutdown, %d before:\n%s", f.name, len(frames), lens[i], chaintest.DescribeFrames(frames))
		}
	}
	clientsSaw := took + time.Since(start)
	if open, opened := c.OpenWatches(), c.WatchesOpened(); open != 0 || opened != n {
		t.Errorf("%d storage watches open after shutdown, %d opened, want 0 and %d", open, opened, n)
	}
	peak.Stop()
	t.Logf("shutdown with %d open watches (%d goroutines) took %v; every client saw its clean end within %v; %s",
		n, goroutines, took, clientsSaw, peak)
}

// TestChainCompactionDuringCatchUp lands a compaction while a watch replays history.
func TestChainCompactionDuringCatchUp(t *testing.T) {
	t.Run("storage", testCompactionDuringStorageCatchUp)
	t.Run("reflector", testCompactionDuringReflectorCatchUp)
}

// testCompactionDuringStorageCatchUp: over the etcd3 storage without a cache, a watch from
// revision 1 replays 6000 revisions in etcd's catch-up batches of at most 1000 (the store ticks
// only when the test says, and each tick is one batch). Once the first batch reaches the client, a
// compaction at the middle of the history lands: the watch delivers exactly a prefix of the history
// and then ERROR 410 (the model allows it only if the prefix stops short of the compaction), or
// exactly all of it; re-watching from its last revision gets 410, as the model says, while a watch
// from the compaction revision gets exactly the rest (from one before it, the 500 of an event whose
// previous value was compacted, as upstream) and a live watch gets everything.
func testCompactionDuringStorageCatchUp(t *testing.T) {
	c := newTestChain(t, chaintest.Options{Uncached: true, StoreManualTick: true})
	m := c.NewModel()
	peak := chaintest.StartMemPeak(10 * time.Millisecond)
	start := m.Rev
	for i := range 6000 {
		putPod(t, c, m, testPod("a", i%10, 500))
	}
	storeStep := func() { c.Store.Tick() }
	live := openFault(t, c, m, "live", chaintest.WatchSpec{ResourceVersion: strconv.FormatInt(m.Rev, 10)}, nil)
	replay := openFault(t, c, m, "replay", chaintest.WatchSpec{ResourceVersion: strconv.FormatInt(start, 10), Bookmarks: true}, nil)
	// Catch-up batches until the client has part of one. The watch reaches the store some time
	// after its HTTP answer, so the store ticks now and then until then; with six batches of
	// history and the compaction after the fifth, the watch is almost surely still behind it.
	polls := 0
	err := testutil.Poll("the first catch-up batch", func() bool { return replay.w.Len() > 0 }, func() {
		if polls%20 == 0 {
			storeStep()
		}
		polls++
	})
	if err != nil {
		t.Fatal(err)
	}
	compactAt := start + 5000
	if err := c.Storage.Compact(context.Background(), compactAt); err != nil {
		t.Fatal(err)
	}
	m.CompactRev = compactAt
	replay.exp.MayCompactAt = compactAt
	for i := range 50 {
		putPod(t, c, m, testPod("a", i%10, 500))
	}
	var v chaintest.Verdict
	err = testutil.Poll("the replaying watch to end or catch up", func() bool {
		if !replay.w.Ended() && !replay.complete(t, m) {
			return false
		}
		v = replay.check(t, m)
		return v.Complete
	}, storeStep)
	if err != nil {
		t.Fatal(err)
	}
	waitComplete(t, m, storeStep, live)
	events, _ := replay.w.Counts()
	t.Logf("the replaying watch delivered %d of %d events, then %s", events, m.Owed(replay.exp), map[bool]string{true: "ERROR 410", false: "kept going"}[v.Error])
	if v.Error {
		resume := openFault(t, c, m, "resume", chaintest.WatchSpec{ResourceVersion: strconv.FormatInt(v.ResumeRV, 10)}, storeStep)
		if resume.exp.ErrorCode() != 410 {
			t.Fatalf("the model does not expect a 410 for %s", resume.exp)
		}
		if err := resume.w.WaitEnd(storeStep); err != nil {
			t.Fatal(err)
		}
		if !resume.check(t, m).Error {
			t.Fatalf("the resumed watch got no 410")
		}
	}
	// From the compaction revision: exactly the rest. From one before: the event at the compaction
	// revision lost its previous value, which the etcd3 storage answers with a 500 as upstream
	// does. From two before: 410.
	from := openFault(t, c, m, "from the compaction", chaintest.WatchSpec{ResourceVersion: strconv.FormatInt(compactAt, 10)}, storeStep)
	justBefore := openFault(t, c, m, "from compaction-1", chaintest.WatchSpec{ResourceVersion: strconv.FormatInt(compactAt-1, 10)}, storeStep)
	before := openFault(t, c, m, "from compaction-2", chaintest.WatchSpec{ResourceVersion: strconv.FormatInt(compactAt-2, 10)}, storeStep)
	if justBefore.exp.ErrorCode() != 500 || before.exp.ErrorCode() != 410 {
		t.Fatalf("the model expects %s and %s", justBefore.exp, before.exp)
	}
	waitComplete(t, m, storeStep, from)
	for _, f := range []*faultWatch{justBefore, before} {
		if err := f.w.WaitEnd(storeStep); err != nil {
			t.Fatal(err)
		}
		if !f.check(t, m).Error {
			t.Fatalf("%s: no ERROR", f.name)
		}
	}
	peak.Stop()
	t.Logf("%s", peak)
}

// catchUpWrites is how many writes wait in etcd's history for the reflector's re-watch: four catch-up
// batches.
const catchUpWrites = 3500

// testCompactionDuringReflectorCatchUp: the Cacher's reflector loses its watch and re-watches from
// its last revision while catchUpWrites writes wait in etcd's history; after its first catch-up batch a
// compaction lands, so its re-watch fails with 410 and the cache relists. HTTP watchers of the
// cache get exactly what the model says up to their end; re-watching from their last revision
// gets the 410 of a watch from before the relist (the model's), and a fresh watch-list the exact
// state; writes after that reach everyone.
func testCompactionDuringReflectorCatchUp(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	c := newTestChain(t, chaintest.Options{StoreClock: clk, StoreManualTick: true})
	m := c.NewModel()
	peak := chaintest.StartMemPeak(10 * time.Millisecond)
	storeStep := func() {
		clk.Step(10 * time.Millisecond)
		c.Store.Tick()
	}
	step := func() {
		storeStep()
		c.CacheClock.Step(10 * time.Millisecond)
	}
	for i := range 10 {
		putPod(t, c, m, testPod("a", i, 500))
	}
	syncCache(t, c, m, step)
	ws := []*faultWatch{
		openFault(t, c, m, "from now", chaintest.WatchSpec{ResourceVersion: strconv.FormatInt(m.Rev, 10), Bookmarks: true}, nil),
		openFault(t, c, m, "watch-list", chaintest.WatchSpec{Unset: true, Bookmarks: true}, nil),
		openFault(t, c, m, "l=1", chaintest.WatchSpec{Label: "l=1", ResourceVersion: "0"}, nil),
	}
	if err := testutil.Poll("the reflector to watch", c.ReflectorWatching, nil); err != nil {
		t.Fatal(err)
	}
	startReflectorCatchUp(t, c, m, storeStep)
	compactAt := m.Rev
	if err := c.Storage.Compact(context.Background(), compactAt); err != nil {
		t.Fatal(err)
	}
	m.CompactRev = compactAt
	if err := testutil.Poll("the cache to relist", func() bool { return !c.Cacher.Ready() }, storeStep); err != nil {
		t.Fatal(err)
	}
	if err := testutil.Poll("the cache to be ready", c.Cacher.Ready, func() { storeStep(); c.CacheClock.Step(50 * time.Millisecond) }); err != nil {
		t.Fatal(err)
	}
	m.ListRV = m.Rev
	var resumed []*faultWatch
	for _, f := range ws {
		if err := f.w.WaitEnd(step); err != nil {
			t.Fatal(err)
		}
		v := f.check(t, m)
		events, _ := f.w.Counts()
		t.Logf("%s: %d events, resumes from %d", f.name, events, v.ResumeRV)
		spec := f.exp.Spec
		spec.Unset, spec.SendInitialEvents, spec.ResourceVersion = false, nil, strconv.FormatInt(v.ResumeRV, 10)
		r := openFault(t, c, m, f.name+" resumed", spec, step)
		if r.exp.ErrorCode() != 410 {
			t.Fatalf("the model does not expect a 410 for %s", r.exp)
		}
		if err := r.w.WaitEnd(step); err != nil {
			t.Fatal(err)
		}
		if !r.check(t, m).Error {
			t.Fatalf("%s: no 410", r.name)
		}
		spec.Unset, spec.ResourceVersion = true, ""
		resumed = append(resumed, openFault(t, c, m, f.name+" relisted", spec, step))
	}
	for i := range 20 {
		updatePodHTTP(t, c, m, testPod("a", i%10, 100))
	}
	waitComplete(t, m, step, resumed...)
	peak.Stop()
	t.Logf("relisted at %d after the compaction at %d; %s", m.ListRV, compactAt, peak)
}

// startReflectorCatchUp breaks the reflector's watch, writes catchUpWrites pods while its re-watch
// is held, and lets it catch up by exactly one batch: it returns with the re-watch unsynced in the
// store and the batch in the cache. storeStep moves the store's clock and ticks it (the chain runs
// with StoreManualTick).
func startReflectorCatchUp(t *testing.T, c *chaintest.Chain, m *chaintest.Model, storeStep func()) {
	t.Helper()
	// The store's watchers are counted below to tell when the reflector's re-watch is there; the
	// etcd3 storage's other watch, of compact_rev_key, starts a second after the chain, so it is
	// waited for first.
	err := testutil.Poll("the store's two watches (the reflector's and compact_rev_key's), synced", func() bool {
		st := c.Store.Stats()
		return st.Watchers == 2 && st.SlowWatchers == 0
	}, storeStep)
	if err != nil {
		t.Fatal(err)
	}
	held := m.Rev
	c.HoldReflector()
	c.CacheClock.Step(1500 * time.Millisecond) // not a "very short watch"
	c.BreakReflectorWatch()
	if err := testutil.Poll("the reflector to re-watch", c.ReflectorBlocked, nil); err != nil {
		t.Fatal(err)
	}
	// The broken watch's cancel reaches the store on its own time; until it has, the writes would
	// go to it too and it would count below as the re-watch.
	if err := testutil.Poll("the broken watch to leave the store", func() bool { return c.Store.Stats().Watchers == 1 }, nil); err != nil {
		t.Fatal(err)
	}
	for i := range catchUpWrites {
		putPod(t, c, m, testPod("a", i%10, 500))
	}
	c.UnholdReflector()
	// The store catches the re-watch up by one batch per sync pass, and only the test ticks it. The
	// re-watch reaches the store some time after the reflector's Watch returned: once it is the
	// store's one unsynced watcher (its created answer out, as the stream's channel has room), one
	// tick sends exactly one batch of the four, and the compaction lands mid-catch-up whatever the
	// schedule. (On the store's own goroutine a step could be lost to a tick the watch's creation
	// woke, or land twice, so that the re-watch caught up before the compaction.)
	err = testutil.Poll("the re-watch to reach the store, behind", func() bool {
		st := c.Store.Stats()
		return st.Watchers == 2 && st.SlowWatchers == 1
	}, nil)
	if err != nil {
		st := c.Store.Stats()
		t.Fatalf("%v: %d store watchers, %d slow, revision %d; %s", err, st.Watchers, st.SlowWatchers, st.Revision, c.DescribeReflector())
	}
	storeStep()
	if err := testutil.Poll("the first catch-up batch to reach the reflector", func() bool { return c.ReflectorEvents() > 0 }, nil); err != nil {
		st := c.Store.Stats()
		t.Fatalf("%v: %d store watchers, %d slow, revision %d; %s", err, st.Watchers, st.SlowWatchers, st.Revision, c.DescribeReflector())
	}
	err = testutil.Poll("the first catch-up batch in the cache", func() bool {
		rv, err := c.ListRV()
		if err != nil {
			t.Fatal(err)
		}
		return rv > held
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Store.Stats(); st.SlowWatchers != 1 {
		t.Fatalf("the re-watch caught up before the compaction (%d slow watchers of %d): the store caught it up more than one batch", st.SlowWatchers, st.Watchers)
	}
}

// TestChainLeaseExpiry: pods written through the etcd3 storage with a TTL share one etcd lease;
// when the store's (fake) clock passes it, the lease's keys go in one revision and every watcher
// that selects them sees DELETED (the last state, at the deletion revision) in key order, while
// pods without a TTL stay and every other event still arrives. With and without the watch cache.
func TestChainLeaseExpiry(t *testing.T) {
	for _, uncached := range []bool{false, true} {
		name := map[bool]string{false: "cached", true: "uncached"}[uncached]
		t.Run(name, func(t *testing.T) { testLeaseExpiry(t, uncached) })
	}
}

func testLeaseExpiry(t *testing.T, uncached bool) {
	clk := testingclock.NewFakeClock(time.Now())
	c := newTestChain(t, chaintest.Options{Uncached: uncached, StoreClock: clk})
	m := c.NewModel()
	peak := chaintest.StartMemPeak(10 * time.Millisecond)
	step := func() {
		clk.Step(10 * time.Millisecond)
		c.CacheClock.Step(10 * time.Millisecond)
	}
	for i := range 4 {
		updatePodHTTP(t, c, m, testPod("a", 100+i, 100))
	}
	if !uncached {
		syncCache(t, c, m, step)
	}
	ws := []*faultWatch{
		openFault(t, c, m, "watch-list", chaintest.WatchSpec{Unset: true, Bookmarks: true}, step),
		openFault(t, c, m, "from now in a", chaintest.WatchSpec{Namespace: "a", ResourceVersion: strconv.FormatInt(m.Rev, 10)}, step),
		openFault(t, c, m, "l=1", chaintest.WatchSpec{Label: "l=1", ResourceVersion: strconv.FormatInt(m.Rev, 10), Bookmarks: true}, step),
	}
	var leased []string
	for i := range 3 {
		p := testPod("a", i, 100)
		obj := &unstructured.Unstructured{Object: p.Object("")}
		out := &unstructured.Unstructured{}
		if err := c.Storage.Create(context.Background(), "/pods/a/"+p.Name, obj, out, 100); err != nil {
			t.Fatal(err)
		}
		if err := m.Observe(c.Store, p.EtcdKey()); err != nil {
			t.Fatal(err)
		}
		leased = append(leased, p.EtcdKey())
	}
	leases, err := c.Store.LeaseLeases()
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Leases) != 1 {
		t.Fatalf("%d leases for three objects created together, want one reused", len(leases.Leases))
	}
	updatePodHTTP(t, c, m, testPod("a", 100, 300))
	waitComplete(t, m, step, ws...)
	before := c.Store.Rev()
	clk.Step(2 * time.Minute)
	if err := testutil.Poll("the lease to expire", func() bool { return c.Store.Rev() > before }, func() { clk.Step(100 * time.Millisecond) }); err != nil {
		t.Fatal(err)
	}
	if got := c.Store.Rev(); got != before+1 {
		t.Fatalf("the expiry moved the revision from %d to %d, want one revision", before, got)
	}
	if err := m.ObserveRevoke(before+1, leased); err != nil {
		t.Fatal(err)
	}
	for _, k := range leased {
		if resp, err := c.Store.Range(&store.RangeRequest{Key: []byte(k)}); err != nil || len(resp.Kvs) != 0 {
			t.Fatalf("%s after the expiry: %v %v", k, resp, err)
		}
	}
	updatePodHTTP(t, c, m, testPod("a", 101, 300))
	waitComplete(t, m, step, ws...)
	fresh := openFault(t, c, m, "watch-list after", chaintest.WatchSpec{Unset: true}, step)
	waitComplete(t, m, step, fresh)
	var deleted int
	for _, f := range ws {
		frames, _, _ := f.w.Frames()
		for _, fr := range frames {
			if fr.Type == "DELETED" {
				deleted++
			}
		}
	}
	peak.Stop()
	t.Logf("one revoke at %d deleted %d pods; the watchers got %d DELETED events; %s", before+1, len(leased), deleted, peak)
	if deleted == 0 {
		t.Fatal("no watcher saw the expiry")
	}
}

// TestChainStuckReader: one client stops reading for good while 600 updates of 16 KiB pods flow
// to it and to three clients that read. The Cacher closes the stuck one (its stream ends without an
// ERROR once it reads again, after an exact prefix); the others get every event exactly; the live
// heap, less what the test itself holds (the frames its clients read), does not grow with what the
// stuck client missed (the store is compacted as it goes and the cache's clock moves a second per
// write, so both histories stay bounded).
func TestChainStuckReader(t *testing.T) {
	c := newTestChain(t, chaintest.Options{SocketBuffer: 4096})
	m := c.NewModel()
	const payload = 16 << 10
	writes, baseAt := 600, 150
	if testing.Short() {
		// Half the writes: the stuck client still misses 4.5 MiB, the chain's growth halves too.
		writes, baseAt = 300, 75
	}
	for i := range 10 {
		putPod(t, c, m, testPod("a", i, payload))
	}
	syncCache(t, c, m, nil)
	peak := chaintest.StartMemPeak(10 * time.Millisecond)
	now := strconv.FormatInt(m.Rev, 10)
	readers := []*faultWatch{
		openFault(t, c, m, "all", chaintest.WatchSpec{ResourceVersion: now, Bookmarks: true}, nil),
		openFault(t, c, m, "l=1", chaintest.WatchSpec{Label: "l=1", ResourceVersion: now}, nil),
		openFault(t, c, m, "watch-list", chaintest.WatchSpec{ResourceVersion: "0", Bookmarks: true}, nil),
	}
	stuck := openFault(t, c, m, "stuck", chaintest.WatchSpec{ResourceVersion: now, Bookmarks: true}, nil)
	stuck.w.Pause()
	// chainHeap is the live heap less the frames the test's clients hold.
	chainHeap := func() uint64 {
		live := chaintest.LiveHeap()
		for _, f := range append(readers, stuck) {
			live -= min(live, f.w.RetainedBytes())
		}
		return live
	}
	var base uint64
	step := func() { c.CacheClock.Step(10 * time.Millisecond) }
	for i := range writes {
		p := testPod("a", i%10, payload)
		p.Labels = map[string]string{"l": strconv.Itoa(i % 3)}
		putPod(t, c, m, p)
		c.CacheClock.Step(time.Second)
		if i%5 == 4 {
			// Pace the writes by the readers: the Cacher must close only the stuck client.
			waitDelivered(t, m, step, readers...)
		}
		if i+1 == baseAt || i+1 == writes {
			if err := c.Storage.Compact(context.Background(), m.Rev); err != nil {
				t.Fatal(err)
			}
			m.CompactRev = m.Rev
		}
		if i+1 == baseAt {
			base = chainHeap()
		}
	}
	waitDelivered(t, m, step, readers...)
	end := chainHeap()
	waitComplete(t, m, step, readers...)
	stuck.w.Resume()
	if err := stuck.w.WaitEnd(step); err != nil {
		t.Fatal(err)
	}
	v := stuck.check(t, m)
	events, _ := stuck.w.Counts()
	if v.Complete {
		t.Fatalf("the stuck client got all %d events", events)
	}
	peak.Stop()
	growth := int64(end) - int64(base)
	missed := uint64(m.Owed(stuck.exp)-events) * payload
	t.Logf("the stuck client got %d of %d events and its stream ended; chain's live heap %.1f MiB after %d writes, %.1f MiB after %d (%+.1f MiB) while it missed %.1f MiB; %s",
		events, m.Owed(stuck.exp), chaintest.MiB(base), baseAt, chaintest.MiB(end), writes, float64(growth)/(1<<20), chaintest.MiB(missed), peak)
	if growth > int64(missed/2) {
		t.Errorf("the chain's live heap grew by %.1f MiB while the stuck client missed %.1f MiB", float64(growth)/(1<<20), chaintest.MiB(missed))
	}
}
