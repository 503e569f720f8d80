package proptest

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/proptest/chaintest"
)

// chainPropertyChecks is TestChainWatchersMatchModel's own default number of checks. Each check
// builds the whole chain (store, etcd gRPC client, storage, watch cache, HTTP server), so the
// package's default of 1000 would take minutes under -race; -rapid.checks (or RAPID_CHECKS) given
// explicitly wins.
const chainPropertyChecks = 200

// withChecks runs rapid with n checks (shortChecks(n) with -short) unless the command line or the
// environment chose a number.
func withChecks(t *testing.T, n int) {
	if rapidChecksChosen {
		return
	}
	old := flag.Lookup("rapid.checks").Value.String()
	if err := flag.Set("rapid.checks", strconv.Itoa(shortChecks(n))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { flag.Set("rapid.checks", old) })
}

// chainStats counts what the property exercised, over all checks.
type chainStats struct {
	checks, uncached, writes, httpWrites, rawWrites, otherWrites, watches, resumes, restarts int
	events, bookmarks, expired, tooLarge, prevless, relists, compactions, timeouts           int
	disconnects, pauses, earlyEnds, pausedEnds                                               int
}

func (s chainStats) String() string {
	return fmt.Sprintf("%d checks (%d without a watch cache): %d writes (%d HTTP, %d straight to the store, %d to other keys), "+
		"%d watches (%d resumed from their last RV, %d restarted after a 410), %d events and %d bookmarks delivered, "+
		"%d ERROR 410, %d ERROR 504 and %d ERROR 500 as the model said, %d relists, %d compactions, %d timeouts, "+
		"%d disconnects, %d pauses; %d streams closed early by the server (%d of them while the client had stopped reading)",
		s.checks, s.uncached, s.writes, s.httpWrites, s.rawWrites, s.otherWrites, s.watches, s.resumes, s.restarts,
		s.events, s.bookmarks, s.expired, s.tooLarge, s.prevless, s.relists, s.compactions, s.timeouts,
		s.disconnects, s.pauses, s.earlyEnds, s.pausedEnds)
}

var (
	chainNamespaces = []string{"a", "b"}
	chainNames      = []string{"x", "y", "z"}
)

// chainWatch is one HTTP watch request of a lineage.
type chainWatch struct {
	w        *chaintest.Watch
	exp      chaintest.Expectation
	deadline time.Time // on the HTTP clock
	// disconnected: the test closed it; pausedAt: the client stopped reading at some point.
	disconnected, paused bool
	judged               bool
	// kept, when set, is the claim TestChainUnreadClientsMatchModel holds the watch to: the
	// server keeps it open while few events were offered to it.
	kept *keptClaim
}

// lineage is one client: a watch, and the watches it re-opens after each end, as a reflector does.
type lineage struct {
	id        int
	watches   []*chainWatch
	cur       *chainWatch
	reconnect bool // after a disconnect by the test, resume (else the client is gone)
}

type chainRun struct {
	t        *rapid.T
	c        *chaintest.Chain
	m        *chaintest.Model
	lineages []*lineage
	stats    *chainStats
	// unread is set by TestChainUnreadClientsMatchModel.
	unread *unreadRun
}

func (r *chainRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf(format, args...)
}

func (r *chainRun) drawPod(ns, name string) chaintest.Pod {
	p := chaintest.Pod{Namespace: ns, Name: name}
	if l := rapid.SampledFrom([]string{"", "1", "2"}).Draw(r.t, "label"); l != "" {
		p.Labels = map[string]string{"l": l}
	}
	p.NodeName = rapid.SampledFrom([]string{"", "n1", "n2"}).Draw(r.t, "node")
	p.Phase = rapid.SampledFrom([]string{"Pending", "Running"}).Draw(r.t, "phase")
	p.Payload = rapid.SampledFrom([]int{0, 0, 200, 3000}).Draw(r.t, "payload")
	return p
}

// write makes one write, through the HTTP API or straight into the store, and records it.
func (r *chainRun) write() {
	r.stats.writes++
	if rapid.IntRange(0, 9).Draw(r.t, "otherKey") == 0 {
		// Another resource's write: only the revision moves, which the cache learns from progress
		// notifications.
		r.stats.otherWrites++
		if _, err := r.c.PutRaw("/registry/configmaps/a/bump", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bump","namespace":"a"}}`)); err != nil {
			r.fatalf("configmap write: %v", err)
		}
		r.observe("/registry/configmaps/a/bump")
		return
	}
	ns := rapid.SampledFrom(chainNamespaces).Draw(r.t, "ns")
	name := rapid.SampledFrom(chainNames).Draw(r.t, "name")
	key := chaintest.EtcdPrefix + ns + "/" + name
	cur := r.m.State(key)
	raw := rapid.IntRange(0, 4).Draw(r.t, "raw") == 0
	if raw {
		r.stats.rawWrites++
	} else {
		r.stats.httpWrites++
	}
	var err error
	var answer int64
	switch {
	case cur != nil && rapid.IntRange(0, 3).Draw(r.t, "delete") == 0:
		if raw {
			_, err = r.c.DeleteRaw(key)
		} else {
			err = r.c.DeletePod(ns, name)
		}
	case cur != nil:
		p := r.drawPod(ns, name)
		if raw {
			answer, err = r.c.PutRaw(key, p.JSON(""))
		} else {
			answer, err = r.c.UpdatePod(p, cur.Rev)
		}
	default:
		p := r.drawPod(ns, name)
		if raw {
			answer, err = r.c.PutRaw(key, p.JSON(""))
		} else {
			answer, err = r.c.CreatePod(p)
		}
	}
	if err != nil {
		r.fatalf("write of %s: %v", key, err)
	}
	r.observe(key)
	if answer != 0 && answer != r.m.Rev && (cur == nil || answer != cur.Rev) {
		r.fatalf("write of %s answered resourceVersion %d; the store is at %d", key, answer, r.m.Rev)
	}
}

func (r *chainRun) observe(key string) {
	if err := r.m.Observe(r.c.Store, key); err != nil {
		r.fatalf("%v", err)
	}
}

func (r *chainRun) drawSpec() chaintest.WatchSpec {
	var s chaintest.WatchSpec
	s.Namespace = rapid.SampledFrom([]string{"", "", "a", "b"}).Draw(r.t, "watchNS")
	s.Label = rapid.SampledFrom([]string{"", "", "l=1", "l!=1", "l in (1,2)", "!l"}).Draw(r.t, "labelSelector")
	s.Field = rapid.SampledFrom([]string{"", "", "spec.nodeName=n1", "spec.nodeName!=n1", "status.phase=Running",
		"metadata.name=x", "spec.nodeName=n1,status.phase=Running"}).Draw(r.t, "fieldSelector")
	g := r.m.Rev
	switch rapid.IntRange(0, 4).Draw(r.t, "rvKind") {
	case 0:
		s.Unset = true
	case 1:
		s.ResourceVersion = "0"
	case 2:
		s.ResourceVersion = strconv.FormatInt(rapid.Int64Range(1, g).Draw(r.t, "pastRV"), 10)
	case 3:
		s.ResourceVersion = strconv.FormatInt(g, 10)
	default:
		s.ResourceVersion = strconv.FormatInt(g+rapid.Int64Range(1, 3).Draw(r.t, "ahead"), 10)
	}
	switch rapid.IntRange(0, 4).Draw(r.t, "sie") {
	case 0:
		t := true
		s.SendInitialEvents = &t
	case 1:
		f := false
		s.SendInitialEvents = &f
	}
	s.Bookmarks = rapid.Bool().Draw(r.t, "bookmarks")
	s.TimeoutSeconds = rapid.SampledFrom([]int64{0, 0, 10, 30, 100}).Draw(r.t, "timeoutSeconds")
	s.Gzip = rapid.IntRange(0, 2).Draw(r.t, "gzip") == 0
	return s
}

// openStep is how an open moves the Cacher's clock while it waits for the answer: enough for
// progress requests (every 100 ms) to bring a watch-list's wait to an end, never the 3 s after which
// the Cacher gives up, unless the model says it must give up.
func (r *chainRun) openStep(exp chaintest.Expectation) func() {
	if exp.ErrorCode() == 504 {
		return func() { r.c.CacheClock.Step(10 * time.Millisecond) }
	}
	var stepped time.Duration
	return func() {
		if stepped < 2500*time.Millisecond {
			r.c.CacheClock.Step(5 * time.Millisecond)
			stepped += 5 * time.Millisecond
		}
	}
}

func (r *chainRun) open(l *lineage, spec chaintest.WatchSpec) { r.openWith(l, spec, false) }

// openWith opens a watch of lineage l; a paused client reads nothing until it resumes.
func (r *chainRun) openWith(l *lineage, spec chaintest.WatchSpec, paused bool) {
	exp, err := r.m.Expect(spec)
	if err != nil {
		r.fatalf("expectation of %s: %v", spec, err)
	}
	start := r.c.HTTPClock.Now()
	open := r.c.OpenWatch
	if paused {
		open = r.c.OpenPausedWatch
	}
	w, err := open(spec, r.openStep(exp))
	if err != nil {
		r.fatalf("%v", err)
	}
	if w.Code != 200 {
		r.fatalf("watch %s: HTTP %d %s", exp, w.Code, w.Body)
	}
	if ct := w.Header.Get("Content-Type"); ct != "application/json" {
		r.fatalf("watch %s: Content-Type %q", exp, ct)
	}
	if exp.ErrorCode() == 504 && !r.m.Cached {
		// The etcd3 storage compares the resourceVersion with etcd's only in the watch's own
		// goroutine (watcher.go startWatching): a write before then could make the watch valid.
		if err := testutil.Poll("the ERROR 504 of a watch-list from the future", func() bool { return w.Len() > 0 || w.Ended() }, nil); err != nil {
			r.fatalf("watch %s: %v", exp, err)
		}
	}
	if exp.ErrorCode() != 0 && !paused {
		// The ERROR (410 of a watch too old, 504 of a cached watch-list from the future, 500 of an
		// event whose previous value was compacted) is written after the headers: if the HTTP clock
		// passed the watch's timeout before then, the server's loop could pick the timeout first, as
		// upstream's serveWatch may.
		what := fmt.Sprintf("the ERROR %d of %s", exp.ErrorCode(), exp)
		if err := testutil.Poll(what, func() bool { return hasError(w) || w.Ended() }, r.cacheStep); err != nil {
			r.fatalf("watch %s: %v", exp, err)
		}
	}
	timeout := time.Duration(spec.TimeoutSeconds) * time.Second
	if timeout == 0 {
		timeout = chainMinRequestTimeout * 3 / 2
	}
	cw := &chainWatch{w: w, exp: exp, deadline: start.Add(timeout)}
	l.watches = append(l.watches, cw)
	l.cur = cw
	r.stats.watches++
}

const chainMinRequestTimeout = 240 * time.Second

// hasError reports whether w has read an ERROR frame.
func hasError(w *chaintest.Watch) bool {
	frames, _, _ := w.Frames()
	return len(frames) > 0 && frames[len(frames)-1].Type == "ERROR"
}

// judge checks an ended watch and re-opens its lineage as a client would.
func (r *chainRun) judge(l *lineage) {
	cw := l.cur
	frames, end, endErr := cw.w.Frames()
	if end == chaintest.Broken {
		r.fatalf("watch %s: the stream broke: %v\nframes:\n%s", cw.exp, endErr, chaintest.DescribeFrames(frames))
	}
	v, err := r.m.Check(cw.exp, frames)
	if err != nil {
		r.fatalf("%v", err)
	}
	// A paused client's ERROR may still be unwritten when its timeout passes; then the server's loop
	// may end the watch cleanly first.
	timedOut := cw.paused && end == chaintest.Clean && !r.c.HTTPClock.Now().Before(cw.deadline)
	if cw.exp.ErrorCode() != 0 && !v.Complete && end != chaintest.Disconnected && !timedOut {
		r.fatalf("watch %s: ended without its ERROR", cw.exp)
	}
	if cw.kept != nil {
		r.unread.judgeKept(r, cw, end, v)
	}
	cw.judged = true
	l.cur = nil
	if end == chaintest.Disconnected && !l.reconnect {
		return
	}
	if !v.Complete && end == chaintest.Clean && cw.exp.ErrorCode() == 0 {
		r.stats.earlyEnds++
		if cw.paused {
			r.stats.pausedEnds++
		}
	}
	if len(l.watches) >= 12 {
		return // enough for one client
	}
	spec := cw.exp.Spec
	switch {
	case cw.exp.ErrorCode() == 504:
		return
	case cw.exp.ErrorCode() == 410 || !v.HasResumeRV:
		// A reflector relists: a fresh watch-list.
		r.stats.restarts++
		spec.Unset, spec.ResourceVersion, spec.SendInitialEvents = true, "", nil
	default:
		r.stats.resumes++
		spec.Unset, spec.ResourceVersion, spec.SendInitialEvents = false, strconv.FormatInt(v.ResumeRV, 10), nil
	}
	r.open(l, spec)
}

// settle judges and re-opens every lineage whose watch ended (and whose client reads).
func (r *chainRun) settle() {
	for again := true; again; {
		again = false
		for _, l := range r.lineages {
			if l.cur != nil && !l.cur.w.Paused() && l.cur.w.Ended() {
				r.judge(l)
				again = true
			}
		}
	}
}

// pick draws a client; nil if it has no open watch that ok accepts. What is drawn never depends
// on timing (which watches the server ended by now), so that rapid can replay and shrink.
func (r *chainRun) pick(what string, ok func(*lineage) bool) *lineage {
	if len(r.lineages) == 0 {
		return nil
	}
	l := r.lineages[rapid.IntRange(0, len(r.lineages)-1).Draw(r.t, what)]
	if l.cur == nil || !ok(l) {
		return nil
	}
	return l
}

func (r *chainRun) cacheStep() { r.c.CacheClock.Step(10 * time.Millisecond) }

// timePasses moves the HTTP clock; every watch whose timeout passed must end cleanly.
func (r *chainRun) timePasses() {
	d := time.Duration(rapid.IntRange(1, 60).Draw(r.t, "seconds")) * time.Second
	r.c.HTTPClock.Step(d)
	now := r.c.HTTPClock.Now()
	for _, l := range r.lineages {
		cw := l.cur
		if cw == nil || cw.w.Paused() || cw.deadline.After(now) {
			continue
		}
		if err := cw.w.WaitEnd(r.cacheStep); err != nil {
			r.fatalf("timeout passed: %v", err)
		}
		if _, end, _ := cw.w.Frames(); end != chaintest.Clean {
			r.fatalf("watch %s ended with %s at its timeout", cw.exp, end)
		}
		r.stats.timeouts++
	}
}

func (r *chainRun) relist() {
	rev, err := r.c.ForceRelist(context.Background(), func() error {
		// Two writes: the reflector may have seen the revision before them.
		if rapid.Bool().Draw(r.t, "relistByPod") {
			r.write()
		}
		if _, err := r.c.PutRaw("/registry/configmaps/b/bump", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bump","namespace":"b"}}`)); err != nil {
			return err
		}
		r.observe("/registry/configmaps/b/bump")
		r.stats.writes++
		r.stats.otherWrites++
		r.stats.writes++
		r.stats.otherWrites++
		if _, err := r.c.PutRaw("/registry/configmaps/a/bump", []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bump","namespace":"a","labels":{"relist":"true"}}}`)); err != nil {
			return err
		}
		r.observe("/registry/configmaps/a/bump")
		return nil
	})
	if err != nil {
		r.fatalf("relist: %v", err)
	}
	if rev != r.m.Rev {
		r.fatalf("relisted at %d, the model is at %d", rev, r.m.Rev)
	}
	r.m.ListRV = rev
	r.m.CompactRev = rev
	r.stats.relists++
	r.stats.compactions++
}

// finish lets every client read to the end: each watch either ends or delivers all it must, is
// then disconnected, and every frame of every watch is judged once more.
func (r *chainRun) finish() {
	for _, l := range r.lineages {
		if l.cur != nil {
			l.cur.w.Resume()
		}
	}
	settled := func() bool {
		r.settle()
		for _, l := range r.lineages {
			if l.cur == nil {
				continue
			}
			frames, _, _ := l.cur.w.Frames()
			v, err := r.m.Check(l.cur.exp, frames)
			if err != nil {
				r.fatalf("%v", err)
			}
			if !v.Complete {
				return false
			}
		}
		return true
	}
	if err := testutil.Poll("every watch to deliver what it must", settled, r.cacheStep); err != nil {
		var open []string
		for _, l := range r.lineages {
			if l.cur != nil {
				frames, end, _ := l.cur.w.Frames()
				open = append(open, fmt.Sprintf("%s (%s):\n%s", l.cur.exp, end, chaintest.DescribeFrames(frames)))
			}
		}
		r.fatalf("%v\nwatches still open:\n%s\nwrites:\n%s", err, strings.Join(open, "\n"), r.m.History)
	}
	for _, l := range r.lineages {
		if l.cur != nil {
			l.cur.w.Disconnect()
		}
	}
	if r.unread != nil {
		r.unread.disconnect()
	}
	if err := testutil.Poll("every handler to stop its storage watch", func() bool { return r.c.OpenWatches() == 0 }, nil); err != nil {
		r.fatalf("%v (%d still open)", err, r.c.OpenWatches())
	}
	for _, l := range r.lineages {
		for _, cw := range l.watches {
			frames, end, endErr := cw.w.Frames()
			if end == chaintest.Broken {
				r.fatalf("watch %s: the stream broke: %v", cw.exp, endErr)
			}
			v, err := r.m.Check(cw.exp, frames)
			if err != nil {
				r.fatalf("%v", err)
			}
			if cw == l.cur && !v.Complete {
				r.fatalf("watch %s: incomplete after it settled", cw.exp)
			}
			r.stats.events += v.Events
			r.stats.bookmarks += v.Bookmarks
			if v.Error && len(frames) == 1 {
				switch code, _, _, _ := chaintest.ErrorFrame(frames); code {
				case 410:
					r.stats.expired++
				case 504:
					r.stats.tooLarge++
				case 500:
					r.stats.prevless++
				}
			}
		}
	}
}

// TestChainWatchersMatchModel drives the whole chain (store, etcd gRPC, etcd3 storage, watch cache,
// HTTP API; in a quarter of the checks without the watch cache) with random pod writes (HTTP create/update/delete, or straight into the store, and
// writes to other keys), random HTTP watchers (all namespaces or one; label and field selectors,
// the spec.nodeName trigger among them; resourceVersion unset, 0, past, current or future;
// sendInitialEvents true/false/unset; allowWatchBookmarks; timeoutSeconds; gzip), clients that stop
// reading for a while or disconnect, forced relists (the reflector's re-watch fails with the
// storage's 410 after a compaction), compactions, watch timeouts and bookmark ticks. Every watch's
// frames must be, for one start revision the model allows, a prefix of what the model computes
// from the write history (initial state in key order, the initial-events-end bookmark, exact
// objects, filter transitions, bookmarks never decreasing and never passing an undelivered event),
// or exactly the ERROR 410/504/500 the model predicts (without a cache, a watch behind a compaction
// may end with its 410, or the 500 of an event that lost its previous value); a stream ends only
// cleanly; a watch whose timeout passed ends; a client re-watching from its last resourceVersion
// gets the rest, or a 410 after a relist or compaction. Compactions drawn in a cached chain first
// bring the cache to etcd's revision with a consistent list, so that they never end the
// reflector's watch behind the model's back. At the end every client reads all it must, and after it disconnects no handler
// holds a storage watch.
func TestChainWatchersMatchModel(t *testing.T) {
	withChecks(t, chainPropertyChecks)
	stats := &chainStats{}
	rapid.Check(t, func(rt *rapid.T) {
		// Mostly the chain `listwatch serve` runs; sometimes the etcd3 storage served directly.
		uncached := rapid.IntRange(0, 3).Draw(rt, "uncached") == 0
		c, err := chaintest.New(chaintest.Options{Uncached: uncached, SocketBuffer: 4096, MinRequestTimeout: chainMinRequestTimeout})
		if err != nil {
			rt.Fatal(err)
		}
		defer func() {
			if err := c.Close(); err != nil {
				rt.Fatal(err)
			}
		}()
		r := &chainRun{t: rt, c: c, m: c.NewModel(), stats: stats}
		stats.checks++
		if uncached {
			stats.uncached++
		}
		steps := rapid.IntRange(5, 30).Draw(rt, "steps")
		for range steps {
			switch a := rapid.IntRange(0, 19).Draw(rt, "action"); {
			case a < 8:
				r.write()
			case a < 11:
				if len(r.lineages) < 8 {
					l := &lineage{id: len(r.lineages), reconnect: rapid.Bool().Draw(rt, "reconnect")}
					r.lineages = append(r.lineages, l)
					r.open(l, r.drawSpec())
				}
			case a < 12:
				if l := r.pick("pause", func(l *lineage) bool { return !l.cur.w.Paused() }); l != nil {
					l.cur.w.Pause()
					l.cur.paused = true
					r.stats.pauses++
				}
			case a < 13:
				if l := r.pick("resume", func(l *lineage) bool { return l.cur.w.Paused() }); l != nil {
					l.cur.w.Resume()
				}
			case a < 14:
				if l := r.pick("disconnect", func(*lineage) bool { return true }); l != nil {
					l.cur.w.Disconnect()
					l.cur.disconnected = true
					r.stats.disconnects++
				}
			case a < 15:
				if !uncached {
					r.relist()
				}
			case a < 16:
				if r.m.CompactRev < r.m.Rev {
					rev := rapid.Int64Range(r.m.CompactRev+1, r.m.Rev).Draw(rt, "compactRev")
					// The compactions the property draws are not meant to end the reflector's
					// watch (ForceRelist does that on purpose): one that reaches past where the
					// reflector's watch is would make the cache relist behind the model's back,
					// as it would upstream.
					if !uncached {
						at, err := c.SyncCache()
						if err != nil {
							rt.Fatalf("syncing the cache before compacting at %d: %v", rev, err)
						}
						if at < rev-1 {
							rt.Fatalf("the cache is at %d after a consistent list, etcd at %d", at, r.m.Rev)
						}
						r.m.CacheAt = max(r.m.CacheAt, at)
					} else {
						// Without a cache, a watch still catching up (or not yet at etcd) may
						// end with the compaction's 410.
						for _, l := range r.lineages {
							if l.cur != nil {
								l.cur.exp.MayCompactAt = rev
							}
						}
					}
					if err := c.Storage.Compact(context.Background(), rev); err != nil {
						rt.Fatalf("compact at %d: %v", rev, err)
					}
					r.m.CompactRev = rev
					r.stats.compactions++
				}
			case a < 18:
				r.timePasses()
			default:
				c.CacheClock.Step(61 * time.Second)
			}
			r.settle()
		}
		r.finish()
	})
	t.Logf("%s", stats)
}
