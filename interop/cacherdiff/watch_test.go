package cacherdiff

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/request"
	k8sstorage "k8s.io/apiserver/pkg/storage"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/cachepair"
	"github.com/listwatch/listwatch/interop/internal/storageadapter"
	"github.com/listwatch/listwatch/proptest/kubemodel"
)

// minWatchChanSize is the least buffer upstream gives a cache watcher's input
// (pkg/storage/cacher/watch_cache_history.go minWatchChanSize): a watcher offered at most this many
// events since it started never blocks the dispatcher, so upstream never closes it as slow.
const minWatchChanSize = 10

// watchPair is one watch request sent to both caches, and what each delivered.
type watchPair struct {
	id   int
	what string
	key  string
	opts k8sstorage.ListOptions
	req  kubemodel.Request
	sel  kubemodel.Selection
	// scope is the namespace and name the apiserver puts in the request's context for this watch
	// (request.WithNamespace, RequestInfo.Name): upstream's Cacher.Watch registers the watcher under
	// them (or under those its field selector pins).
	scopeNS, scopeName string
	// trigger is the spec.nodeName the field selector pins, under which upstream registers the
	// watcher instead (the pods' trigger index).
	trigger string
	// deadline, if set, is the first request's timeout.
	deadline time.Duration
	// pausedUntil is the operation after which a slow reader reads again (0: it reads).
	pausedUntil int
	refused     bool // Watch itself refused the request on both caches
	restarted   bool // a cache closed it during its initial events and the client started over
	stopped     bool
	failed      bool // a difference was reported; the pair is not judged further
	sides       [2]*watchSide
}

// watchSide is what one cache delivered for a pair: the first watch and the re-watches of a client
// that resumes from the last resourceVersion it saw whenever the cache closes the watch.
type watchSide struct {
	cache *cachepair.Cache
	segs  []*segment
}

func (s *watchSide) last() *segment { return s.segs[len(s.segs)-1] }

// segment is one watch and a reader that records its events; a paused reader does not read.
type segment struct {
	exp    kubemodel.Expectation
	resume bool
	w      watch.Interface
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	events  []kubemodel.Event
	readErr error
	closed  bool
	paused  chan struct{} // open while paused; nil while reading
}

func (s *segment) read() {
	defer close(s.done)
	for {
		s.mu.Lock()
		gate := s.paused
		s.mu.Unlock()
		if gate != nil {
			<-gate
		}
		ev, ok := <-s.w.ResultChan()
		if !ok {
			s.mu.Lock()
			s.closed = true
			s.mu.Unlock()
			return
		}
		e, err := kubemodel.EventOf(ev)
		s.mu.Lock()
		if err != nil && s.readErr == nil {
			s.readErr = err
		}
		s.events = append(s.events, e)
		s.mu.Unlock()
	}
}

func (s *segment) snapshot() ([]kubemodel.Event, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]kubemodel.Event(nil), s.events...), s.closed, s.readErr
}

func (s *segment) pause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused == nil {
		s.paused = make(chan struct{})
	}
}

func (s *segment) unpause() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused != nil {
		close(s.paused)
		s.paused = nil
	}
}

// stop stops the watch and waits until the reader has read it to its close.
func (s *segment) stop() error {
	s.cancel()
	s.w.Stop()
	s.unpause()
	select {
	case <-s.done:
		return nil
	case <-time.After(testutil.WaitTimeout):
		return fmt.Errorf("the result channel stayed open %v after Stop", testutil.WaitTimeout)
	}
}

// openWatch sends both caches the same random watch.
func (r *runner) openWatch() {
	r.t.Helper()
	r.sync()
	key, recursive := r.key()
	pred, sel := r.predicate()
	pred.AllowWatchBookmarks = r.rng.IntN(2) == 0
	rv, future := r.revision()
	var sie *bool
	switch r.rng.IntN(3) {
	case 1:
		t := true
		sie = &t
	case 2:
		f := false
		sie = &f
	}
	var deadline time.Duration
	if future && sie != nil && *sie {
		// A watch-list for a future revision waits for the caches' freshness timeout; a short
		// deadline checks that the wait runs its course whatever the request's deadline.
		if r.rng.IntN(2) == 0 {
			deadline = time.Second
		}
	} else if r.rng.IntN(10) == 0 {
		// Bookmarks come 2 s before the deadline, then the caches close the watch.
		deadline = 2500 * time.Millisecond
	}
	p := r.startPair(key, recursive, pred, sel, rv, sie, deadline)
	if p.refused {
		return
	}
	if future {
		// The caches wait for the revision (or refuse after 3 s): judge the pair before writing on.
		r.syncPair(p)
		return
	}
	if r.rng.IntN(4) == 0 {
		r.pausePair(p, r.stats.writes+20+r.rng.IntN(60))
	}
}

// pausePair makes the pair's readers stop reading until the given number of writes was made.
func (r *runner) pausePair(p *watchPair, untilWrites int) {
	p.pausedUntil = untilWrites
	for _, s := range p.sides {
		s.last().pause()
	}
}

// startPair opens the watch on both caches, in the context the apiserver gives a watch of its scope,
// and compares their refusals.
func (r *runner) startPair(key string, recursive bool, pred k8sstorage.SelectionPredicate, sel, rv string, sie *bool, deadline time.Duration) *watchPair {
	r.t.Helper()
	p := &watchPair{id: len(r.watches) + 1, key: key, deadline: deadline}
	p.opts = k8sstorage.ListOptions{ResourceVersion: rv, Predicate: pred, Recursive: recursive, SendInitialEvents: sie}
	p.req = kubemodel.Request{ResourceVersion: rv, SendInitialEvents: sie, AllowWatchBookmarks: pred.AllowWatchBookmarks}
	lwPred, err := storageadapter.Predicate(pred)
	if err != nil {
		r.t.Fatal(err)
	}
	p.sel = kubemodel.Selection{Key: key, Recursive: recursive, Predicate: lwPred}
	p.what = fmt.Sprintf("watch %d of %s recursive=%t %s %s deadline=%v", p.id, key, recursive, p.req, sel, deadline)
	if recursive && key != cachepair.ResourcePrefix {
		p.scopeNS = strings.Split(key, "/")[2]
	}
	if !recursive {
		parts := strings.Split(key, "/")
		p.scopeNS, p.scopeName = parts[2], parts[3]
	}
	if pred.IndexFields != nil {
		p.trigger, _ = pred.Field.RequiresExactMatch("spec.nodeName")
	}
	r.watches = append(r.watches, p)
	r.stats.watches++

	var errs [2]error
	for i, c := range r.caches {
		p.sides[i] = &watchSide{cache: c}
		errs[i] = r.startSegment(p, p.sides[i], p.opts, p.req, false, deadline)
	}
	if errs[0] != nil || errs[1] != nil {
		p.refused = true
		if a, b := describeError(errs[0]), describeError(errs[1]); a != b {
			r.failf("%s: Watch answers differ:\nupstream:  %s\nlistwatch: %s", p.what, a, b)
		}
	}
	return p
}

// startSegment opens the watch on one cache, in the context the apiserver gives a watch of that
// scope.
func (r *runner) startSegment(p *watchPair, side *watchSide, opts k8sstorage.ListOptions, req kubemodel.Request, resume bool, deadline time.Duration) error {
	r.t.Helper()
	exp, err := r.h.ExpectCache(req, p.sel, kubemodel.Cache{Lo: r.h.Rev, Hi: r.h.Rev, EtcdRev: r.h.Rev, ListRV: r.listRV})
	if err != nil && !errors.Is(err, kubemodel.ErrRequest) {
		r.t.Fatal(err)
	}
	ctx := r.ctx
	if p.scopeNS != "" {
		ctx = request.WithNamespace(ctx, p.scopeNS)
	}
	if p.scopeName != "" {
		ctx = request.WithRequestInfo(ctx, &request.RequestInfo{IsResourceRequest: true, Verb: "watch", Resource: "pods", Namespace: p.scopeNS, Name: p.scopeName})
	}
	var cancel context.CancelFunc
	if deadline > 0 {
		ctx, cancel = context.WithTimeout(ctx, deadline)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	w, err := side.cache.Storage.Watch(ctx, p.key, opts)
	if err != nil {
		cancel()
		return err
	}
	s := &segment{exp: exp, resume: resume, w: w, cancel: cancel, done: make(chan struct{})}
	side.segs = append(side.segs, s)
	go s.read()
	return nil
}

// unpauseDue lets the slow readers whose pause is over read again.
func (r *runner) unpauseDue() {
	for _, p := range r.watches {
		if p.pausedUntil != 0 && r.stats.writes >= p.pausedUntil && !p.refused {
			p.pausedUntil = 0
			for _, s := range p.sides {
				s.last().unpause()
			}
		}
	}
}

// syncPair waits until each cache delivered what the pair's watch owes by now, judging every
// segment by the model, and resumes a watch the cache closed.
func (r *runner) syncPair(p *watchPair) {
	r.t.Helper()
	if p.refused || p.failed {
		return
	}
	for i, side := range p.sides {
		for !p.failed {
			s := side.last()
			v, closed, ok := r.awaitSegment(p, side, s)
			if !ok {
				p.failed = true
				break
			}
			if !closed || v.Error || p.stopped {
				break
			}
			if !v.Complete {
				r.stats.terminations++
				r.checkTerminationAllowed(p, i, s, v)
			}
			if s.exp.Replay && v.Events < len(r.h.Initial(p.sel, v.Start)) {
				// Closed before its initial events were all delivered: a client has no state to
				// resume from and starts over, with both caches at etcd's revision. The streams
				// are no longer the same request's: each is judged, not compared.
				r.sync()
				p.restarted = true
				r.stats.restarts++
				if err := r.startSegment(p, side, p.opts, p.req, false, 0); err != nil {
					r.failf("%s: %s: starting over: %v", p.what, side.cache.Name, err)
					p.failed = true
				}
				continue
			}
			// A client re-watches from the last resourceVersion it saw.
			from := v.Start
			if v.HasResumeRV {
				from = v.ResumeRV
			}
			opts := p.opts
			opts.ResourceVersion, opts.SendInitialEvents = strconv.FormatInt(from, 10), nil
			req := kubemodel.Request{ResourceVersion: opts.ResourceVersion, AllowWatchBookmarks: p.req.AllowWatchBookmarks}
			r.stats.resumes++
			if err := r.startSegment(p, side, opts, req, true, 0); err != nil {
				r.failf("%s: %s: resuming from %d: %v", p.what, side.cache.Name, from, err)
				p.failed = true
			}
		}
	}
}

// awaitSegment waits until the segment delivered everything it owes, or closed, and judges it.
func (r *runner) awaitSegment(p *watchPair, side *watchSide, s *segment) (kubemodel.Verdict, bool, bool) {
	r.t.Helper()
	deadline := time.Now().Add(testutil.WaitTimeout)
	for {
		events, closed, readErr := s.snapshot()
		if readErr != nil {
			r.failf("%s: %s delivered an event the model cannot read: %v", p.what, side.cache.Name, readErr)
			return kubemodel.Verdict{}, closed, false
		}
		v, err := r.h.Check(s.exp, events)
		if err != nil {
			r.failf("%s: %s (segment %d) delivered what upstream's semantics do not allow: %v", p.what, side.cache.Name, len(side.segs), err)
			return v, closed, false
		}
		if v.Complete || closed {
			return v, closed, true
		}
		if time.Now().After(deadline) {
			r.failf("%s: %s (segment %d) did not deliver what it owes within %v: %v; got\n%s", p.what, side.cache.Name,
				len(side.segs), testutil.WaitTimeout, s.exp, describeEvents(events))
			return v, closed, false
		}
		time.Sleep(testutil.PollInterval)
	}
}

// checkTerminationAllowed holds a cache's closing of a watch that had not delivered everything to
// upstream's rule. Upstream offers a watcher only the events of its scope (namespace and name, or
// trigger value) and closes it only when its input buffer is full while its goroutine holds an event
// it cannot hand over because the result buffer is full (minWatchChanSize each); the result buffer
// is still delivered after the close. So when upstream closes a watcher, at least the input buffer,
// the held event and the one that found the input full were never delivered: a cache that closes a
// watch with fewer of its scope's events undelivered (less a margin for bookmarks, which take buffer
// room too) closed one upstream keeps.
func (r *runner) checkTerminationAllowed(p *watchPair, i int, s *segment, v kubemodel.Verdict) {
	r.t.Helper()
	if p.deadline > 0 && len(p.sides[i].segs) == 1 {
		return // the deadline closed it
	}
	held := 0
	if s.exp.Replay {
		held = len(r.h.Initial(p.sel, v.Start))
	}
	// What the watch replays from the history (from a resourceVersion in the past) fills the
	// buffers as live events do: count every write after the start.
	for _, w := range r.h.Writes {
		if w.Rev > v.Start && p.offered(w) {
			held++
		}
	}
	held -= v.Events
	const bookmarkMargin = 2
	if limit := minWatchChanSize + 2 - 1 - bookmarkMargin; held <= limit {
		r.failf("%s: %s closed the watch (segment %d) as a slow reader with at most %d events of its scope undelivered "+
			"(namespace %q, name %q, trigger %q); upstream offers a watcher only its scope's events and closes one only with "+
			"at least %d undelivered", p.what, p.sides[i].cache.Name, len(p.sides[i].segs), held, p.scopeNS, p.scopeName,
			p.trigger, minWatchChanSize+2)
	}
}

// offered says whether upstream's dispatcher offers the write to the pair's watcher.
//
// Mirrors pkg/storage/cacher/cacher.go Watch (the scope) and startDispatching.
func (p *watchPair) offered(w kubemodel.Write) bool {
	if p.trigger != "" {
		return (w.Cur != nil && w.Cur.Fields["spec.nodeName"] == p.trigger) || (w.Prev != nil && w.Prev.Fields["spec.nodeName"] == p.trigger)
	}
	ns, name := p.scopeNS, p.scopeName
	if f := p.opts.Predicate.Field; f != nil {
		if v, ok := f.RequiresExactMatch("metadata.namespace"); ok && ns == "" {
			ns = v
		}
		if v, ok := f.RequiresExactMatch("metadata.name"); ok && name == "" {
			name = v
		}
	}
	parts := strings.Split(w.Key, "/")
	return (ns == "" || parts[2] == ns) && (name == "" || parts[3] == name)
}

// stopWatch stops a random open pair once both caches delivered what it owes, and compares them.
func (r *runner) stopWatch() {
	r.t.Helper()
	var open []*watchPair
	for _, p := range r.watches {
		if !p.stopped {
			open = append(open, p)
		}
	}
	if len(open) == 0 {
		return
	}
	r.finish(pick(r.rng, open))
	r.stats.stops++
}

// finish lets the pair's readers read, waits for what it owes, stops it and compares the caches.
func (r *runner) finish(p *watchPair) {
	r.t.Helper()
	p.pausedUntil = 0
	for _, s := range p.sides {
		if s != nil && len(s.segs) > 0 {
			s.last().unpause()
		}
	}
	r.syncPair(p)
	p.stopped = true
	for _, s := range p.sides {
		if s == nil {
			continue
		}
		for i, seg := range s.segs {
			if err := seg.stop(); err != nil {
				r.t.Fatalf("seed %d: %s: %s, segment %d: %v", r.seed, p.what, s.cache.Name, i+1, err)
			}
		}
	}
	if p.refused || p.failed || p.restarted {
		return
	}
	r.comparePair(p)
}

// stream is what a client of one cache saw: the events of every segment, without the bookmarks
// whose timing is the cache's (each was judged by the model), and whether the last re-watch was
// refused as too old (then the other cache may have delivered more).
func (s *watchSide) stream(st *stats) (out []string, endsTooOld bool) {
	for i, seg := range s.segs {
		events, _, _ := seg.snapshot()
		for _, e := range events {
			switch {
			case e.Type == watch.Bookmark && !e.InitialEventsEnd:
				st.bookmarks++
				continue
			case e.Type == watch.Bookmark:
				st.endBookmarks++
			case e.Type == watch.Error:
				st.errors++
				if seg.resume && i == len(s.segs)-1 && e.Status != nil && e.Status.Code == 410 {
					return out, true
				}
			default:
				st.events++
			}
			out = append(out, describeEvent(e))
		}
	}
	return out, false
}

func describeEvent(e kubemodel.Event) string {
	switch e.Type {
	case watch.Error, watch.Bookmark:
		return e.String()
	}
	return fmt.Sprintf("%s rv=%d %s", e.Type, e.RV, e.Object)
}

func describeEvents(events []kubemodel.Event) string {
	var b strings.Builder
	for i, e := range events {
		fmt.Fprintf(&b, "  %d: %s\n", i, e)
	}
	return b.String()
}

// comparePair requires both caches' streams to be the same, up to a re-watch refused as too old.
func (r *runner) comparePair(p *watchPair) {
	r.t.Helper()
	var st stats
	a, aOld := p.sides[0].stream(&st)
	b, bOld := p.sides[1].stream(&stats{})
	r.stats.Add(st)
	if aOld {
		b = b[:min(len(a), len(b))]
	}
	if bOld {
		a = a[:min(len(a), len(b))]
	}
	if d := cmp.Diff(a, b); d != "" {
		r.failf("%s: the caches delivered different events (-upstream +listwatch), over %d and %d watches:\n%s",
			p.what, len(p.sides[0].segs), len(p.sides[1].segs), d)
	}
}

// stopAll stops every watch still open, without judging it.
func (r *runner) stopAll() {
	for _, p := range r.watches {
		for _, s := range p.sides {
			if s == nil {
				continue
			}
			for _, seg := range s.segs {
				if err := seg.stop(); err != nil {
					r.t.Errorf("seed %d: %s: %s: %v", r.seed, p.what, s.cache.Name, err)
				}
			}
		}
	}
}
