package proptest

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/proptest/chaintest"
	"github.com/listwatch/listwatch/proptest/kubemodel"
)

// unreadPropertyChecks is TestChainUnreadClientsMatchModel's own default number of checks (each
// builds the whole chain); -rapid.checks or RAPID_CHECKS given explicitly wins.
const unreadPropertyChecks = 50

// keptInput is the fewest events a watcher's input holds: the watch cache sizes it by the history
// (watch_cache_history.go suggestedWatchChannelSize) but never below minWatchChanSize, 10.
const keptInput = 10

var (
	// unreadNamespaces are the namespaces the property writes; fenceNamespace holds only the fence.
	unreadNamespaces = []string{"a", "b", "c"}
	fenceNamespace   = "w"
	unreadNodes      = []string{"", "n1", "n2"}
)

// keptClaim is what a watch opened as an unread client is held to: upstream's Cacher closes a
// watcher only when an event offered to it finds its input full (cacher.go dispatchEvent,
// cache_watcher.go add), and offers it only the events of its dispatch index (cacher.go Watch,
// startDispatching). A watcher without bookmarks (bookmarks take input places too) that was offered
// at most keptInput events since it registered is therefore never closed by the dispatcher, however
// long its client does not read and however busy other namespaces and nodes are; while no relist
// reset the cache and its timeout has not passed, its stream must not end.
type keptClaim struct {
	dispatch kubemodel.Dispatch
	// after: every write up to it was dispatched before the watcher registered (the fence).
	after int64
	// relists is the run's relist count when it opened; realStart and timeout bound the real-time
	// deadline of its storage watch context.
	relists   int
	realStart time.Time
	timeout   time.Duration
	// fromHistory: it replays events from the cache's history, whose interval an eviction (more
	// than its 100 events at least since the relist at listRV) would invalidate.
	fromHistory bool
	listRV      int64
}

// unreadRun is the part of a chainRun the unread-clients property adds: a witness, a cluster-wide
// watch that always reads, whose delivery of a fence write proves that the watch cache's dispatcher
// is done with every write before it.
type unreadRun struct {
	witness       *chainWatch
	witnessOpened int64
	witnesses     []*chainWatch
	fenceRV       int64
	fences        int
	kept, closed  int
	offeredMax    int
}

// openWitness opens a new witness: resourceVersion 0 without initial events starts at the cache's
// revision, so everything it delivers was written, and dispatched to it, after it registered.
func (u *unreadRun) openWitness(r *chainRun) {
	f := false
	spec := chaintest.WatchSpec{ResourceVersion: "0", SendInitialEvents: &f, TimeoutSeconds: 1 << 20}
	exp, err := r.m.Expect(spec)
	if err != nil {
		r.fatalf("expectation of the witness: %v", err)
	}
	w, err := r.c.OpenWatch(spec, r.openStep(exp))
	if err != nil {
		r.fatalf("witness: %v", err)
	}
	if w.Code != 200 {
		r.fatalf("witness: HTTP %d %s", w.Code, w.Body)
	}
	u.witness = &chainWatch{w: w, exp: exp}
	u.witnesses = append(u.witnesses, u.witness)
	u.witnessOpened = r.m.Rev
}

// fence writes the fence pod and waits until the witness delivered it; a witness that ended is
// replaced (its frames are judged at the end) and the fence written again.
func (u *unreadRun) fence(r *chainRun) {
	for attempt := 0; ; attempt++ {
		if attempt == 3 {
			r.fatalf("three witnesses ended before delivering a fence")
		}
		if u.witness == nil || u.witness.w.Ended() {
			u.openWitness(r)
		}
		u.fences++
		p := chaintest.Pod{Namespace: fenceNamespace, Name: "fence", Phase: strconv.Itoa(u.fences)}
		key := p.EtcdKey()
		var err error
		if cur := r.m.State(key); cur != nil {
			_, err = r.c.UpdatePod(p, cur.Rev)
		} else {
			_, err = r.c.CreatePod(p)
		}
		if err != nil {
			r.fatalf("fence: %v", err)
		}
		r.observe(key)
		rev := r.m.Rev
		delivered := func() bool {
			frames, _, _ := u.witness.w.Frames()
			for _, f := range frames {
				if _, m, err := f.Meta(); err == nil && m.Namespace == fenceNamespace && m.ResourceVersion == strconv.FormatInt(rev, 10) {
					return true
				}
			}
			return false
		}
		// The dispatcher may be blocked on a full watcher until its budget's timer fires: the
		// Cacher's clock moves while the fence is awaited, as time passes upstream.
		if err := testutil.Poll("the witness to deliver the fence", func() bool { return delivered() || u.witness.w.Ended() }, r.cacheStep); err != nil {
			r.fatalf("%v", err)
		}
		if delivered() {
			u.fenceRV = rev
			return
		}
	}
}

// openUnread opens a watch whose client never reads until finish, after a fence, and holds it to
// keptClaim when it qualifies (no bookmarks, no expected ERROR).
func (u *unreadRun) openUnread(r *chainRun, l *lineage) {
	u.fence(r)
	spec := u.drawUnreadSpec(r)
	r.openWith(l, spec, true)
	cw := l.cur
	cw.paused = true
	r.stats.pauses++
	d, err := r.m.Dispatch(spec)
	if err != nil {
		r.fatalf("dispatch of %s: %v", spec, err)
	}
	if spec.Bookmarks || cw.exp.ErrorCode() != 0 {
		return
	}
	timeout := time.Duration(spec.TimeoutSeconds) * time.Second
	if timeout == 0 {
		timeout = chainMinRequestTimeout
	}
	fromHistory := !spec.Unset && spec.ResourceVersion != "0" && spec.ResourceVersion != strconv.FormatInt(r.m.Rev, 10) &&
		(spec.SendInitialEvents == nil || !*spec.SendInitialEvents)
	cw.kept = &keptClaim{dispatch: d, after: u.fenceRV, relists: r.stats.relists, realStart: time.Now(), timeout: timeout,
		fromHistory: fromHistory, listRV: r.m.ListRV}
	u.kept++
}

// drawUnreadSpec draws a watch narrowed the ways the cache indexes watchers: by the path's
// namespace, by a metadata.name selector within it, or by the spec.nodeName trigger; its
// resourceVersion makes it replay the current state (which a client that does not read may never
// take in) or start from a revision.
func (u *unreadRun) drawUnreadSpec(r *chainRun) chaintest.WatchSpec {
	var s chaintest.WatchSpec
	switch rapid.IntRange(0, 3).Draw(r.t, "unreadScope") {
	case 0, 1:
		s.Namespace = rapid.SampledFrom(unreadNamespaces).Draw(r.t, "unreadNS")
	case 2:
		s.Namespace = rapid.SampledFrom(unreadNamespaces).Draw(r.t, "unreadNS")
		s.Field = "metadata.name=" + unreadName(rapid.IntRange(0, 19).Draw(r.t, "unreadName"))
	default:
		s.Field = "spec.nodeName=" + rapid.SampledFrom(unreadNodes[1:]).Draw(r.t, "unreadNode")
	}
	s.Label = rapid.SampledFrom([]string{"", "", "", "l=1"}).Draw(r.t, "unreadLabel")
	switch rapid.IntRange(0, 3).Draw(r.t, "unreadRV") {
	case 0:
		s.Unset = true
	case 1:
		s.ResourceVersion = "0"
	case 2:
		s.ResourceVersion = strconv.FormatInt(r.m.Rev, 10)
	default:
		s.ResourceVersion = strconv.FormatInt(rapid.Int64Range(max(1, r.m.ListRV), r.m.Rev).Draw(r.t, "unreadPastRV"), 10)
	}
	s.Bookmarks = rapid.IntRange(0, 3).Draw(r.t, "unreadBookmarks") == 0
	s.TimeoutSeconds = rapid.SampledFrom([]int64{0, 0, 100}).Draw(r.t, "unreadTimeout")
	return s
}

// disconnect ends every witness.
func (u *unreadRun) disconnect() {
	for _, cw := range u.witnesses {
		cw.w.Disconnect()
	}
}

// judgeKept fails a watch held to keptClaim that the server ended before its time.
func (u *unreadRun) judgeKept(r *chainRun, cw *chainWatch, end chaintest.EndKind, v chaintest.Verdict) {
	k := cw.kept
	offered := r.m.Offered(k.dispatch, k.after)
	u.offeredMax = max(u.offeredMax, offered)
	if end != chaintest.Clean || cw.disconnected || r.stats.relists != k.relists ||
		!r.c.HTTPClock.Now().Before(cw.deadline) || time.Since(k.realStart) > k.timeout-10*time.Second {
		return
	}
	if k.fromHistory && r.m.Offered(kubemodel.Dispatch{}, k.listRV) > 100 {
		// The history may have evicted events of its interval: the Cacher then closes it.
		return
	}
	u.closed++
	if offered > keptInput {
		return
	}
	frames, _, _ := cw.w.Frames()
	r.fatalf("watch %s (indexed %+v) was closed by the server before its timeout though only %d events were offered to it since it registered "+
		"(its input holds at least %d): upstream keeps it open.\ncomplete: %t; frames:\n%s\nwrites:\n%s",
		cw.exp, k.dispatch, offered, keptInput, v.Complete, chaintest.DescribeFrames(frames), r.m.History)
}

func unreadName(i int) string { return fmt.Sprintf("p%02d", i) }

// unreadWrite writes a pod of namespace ns, most often in the busy namespace b.
func (r *chainRun) unreadWrite(ns string) {
	name := unreadName(rapid.IntRange(0, 19).Draw(r.t, "name"))
	key := chaintest.EtcdPrefix + ns + "/" + name
	cur := r.m.State(key)
	r.stats.writes++
	r.stats.httpWrites++
	p := chaintest.Pod{Namespace: ns, Name: name,
		NodeName: rapid.SampledFrom(unreadNodes).Draw(r.t, "node"),
		Phase:    rapid.SampledFrom([]string{"Pending", "Running"}).Draw(r.t, "phase"),
		Payload:  rapid.SampledFrom([]int{0, 16000, 32000, 32000}).Draw(r.t, "payload")}
	if rapid.Bool().Draw(r.t, "labelled") {
		p.Labels = map[string]string{"l": "1"}
	}
	var err error
	switch {
	case cur != nil && rapid.IntRange(0, 4).Draw(r.t, "delete") == 0:
		err = r.c.DeletePod(ns, name)
	case cur != nil:
		_, err = r.c.UpdatePod(p, cur.Rev)
	default:
		_, err = r.c.CreatePod(p)
	}
	if err != nil {
		r.fatalf("write of %s: %v", key, err)
	}
	r.observe(key)
}

// TestChainUnreadClientsMatchModel drives the whole chain with clients that stop reading in quiet
// namespaces and nodes while other namespaces are busy: pods in namespaces a, b and c (most writes
// in b, some in bursts while the Cacher's clock runs; large pods, moves between nodes), watches
// narrowed by the path's namespace, a metadata.name selector or the spec.nodeName trigger whose
// clients read nothing until the end (among them watches replaying more state than the connection
// and the watcher's buffers hold), reading watches of every kind, timeouts, cache clock steps and
// forced relists. Every stream is held to the shared model, as in
// TestChainWatchersMatchModel; besides, a non-bookmark watch of an unread client that the watch
// cache offered at most 10 events since it registered (kubemodel.Dispatch: what upstream's Cacher
// offers a watcher of that index) must still be open when its client reads again: upstream keeps
// it, since its input never fills. Which writes were dispatched before such a watch registered is
// fenced by a witness watch that reads everything.
func TestChainUnreadClientsMatchModel(t *testing.T) {
	withChecks(t, unreadPropertyChecks)
	stats := &chainStats{}
	u := &unreadRun{}
	rapid.Check(t, func(rt *rapid.T) {
		c, err := chaintest.New(chaintest.Options{SocketBuffer: 4096, MinRequestTimeout: chainMinRequestTimeout})
		if err != nil {
			rt.Fatal(err)
		}
		defer func() {
			if err := c.Close(); err != nil {
				rt.Fatal(err)
			}
		}()
		*u = unreadRun{kept: u.kept, closed: u.closed, offeredMax: u.offeredMax}
		r := &chainRun{t: rt, c: c, m: c.NewModel(), stats: stats, unread: u}
		stats.checks++
		u.openWitness(r)
		// The state unread clients are given to replay: up to 20 pods in each namespace, more than a
		// watcher's result channel and a connection hold when they are large.
		for _, ns := range unreadNamespaces {
			for range rapid.IntRange(0, 20).Draw(rt, "populate") {
				r.unreadWrite(ns)
			}
		}
		steps := rapid.IntRange(5, 24).Draw(rt, "steps")
		for range steps {
			switch a := rapid.IntRange(0, 19).Draw(rt, "action"); {
			case a < 6:
				ns := rapid.SampledFrom([]string{"a", "b", "b", "b", "c"}).Draw(rt, "writeNS")
				r.unreadWrite(ns)
			case a < 8:
				// A burst in one namespace, as the Cacher's clock runs: a dispatcher waiting on a
				// full watcher gives up on it once its budget is spent.
				ns := rapid.SampledFrom([]string{"a", "b", "b", "b", "c"}).Draw(rt, "burstNS")
				for range rapid.IntRange(5, 20).Draw(rt, "burst") {
					r.unreadWrite(ns)
					c.CacheClock.Step(50 * time.Millisecond)
				}
			case a < 10:
				if len(r.lineages) < 8 {
					l := &lineage{id: len(r.lineages), reconnect: rapid.Bool().Draw(rt, "reconnect")}
					r.lineages = append(r.lineages, l)
					u.openUnread(r, l)
				}
			case a < 12:
				if len(r.lineages) < 8 {
					l := &lineage{id: len(r.lineages), reconnect: rapid.Bool().Draw(rt, "reconnect")}
					r.lineages = append(r.lineages, l)
					r.open(l, r.drawSpec())
				}
			case a < 13:
				if l := r.pick("pause", func(l *lineage) bool { return !l.cur.w.Paused() }); l != nil {
					l.cur.w.Pause()
					l.cur.paused = true
					r.stats.pauses++
				}
			case a < 14:
				if l := r.pick("disconnect", func(l *lineage) bool { return l.cur.kept == nil }); l != nil {
					l.cur.w.Disconnect()
					l.cur.disconnected = true
					r.stats.disconnects++
				}
			case a < 15:
				if rapid.IntRange(0, 3).Draw(rt, "relistNow") == 0 {
					r.relist()
				}
			case a < 17:
				r.timePasses()
			default:
				c.CacheClock.Step(time.Duration(rapid.IntRange(10, 2000).Draw(rt, "cacheMillis")) * time.Millisecond)
			}
			r.settle()
		}
		r.finish()
		for _, l := range r.lineages {
			for _, cw := range l.watches {
				if cw.kept != nil {
					u.offeredMax = max(u.offeredMax, r.m.Offered(cw.kept.dispatch, cw.kept.after))
				}
			}
		}
		// The witnesses are held to the model too.
		for _, cw := range u.witnesses {
			frames, end, endErr := cw.w.Frames()
			if end == chaintest.Broken {
				r.fatalf("witness %s: the stream broke: %v", cw.exp, endErr)
			}
			if _, err := r.m.Check(cw.exp, frames); err != nil {
				r.fatalf("witness: %v", err)
			}
		}
	})
	t.Logf("%s; %d watches of unread clients held to the claim, %d of them closed by the server with more than %d events offered; at most %d offered to one",
		stats, u.kept, u.closed, keptInput, u.offeredMax)
}
