package cache

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"pgregory.net/rapid"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/proptest/kubemodel"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
)

// The property test drives one Cacher with random writes, watchers, reads, stops, relists and
// bookmark ticks, then checks every watcher against a model of the write history.

// propSpec is a watch request.
type propSpec struct {
	key       string // as given to Watch
	recursive bool
	label     string
	field     string
	rv        string
	sie       *bool
	bookmarks bool
}

func (s propSpec) predicate() storage.Predicate {
	p := storagetest.PodPredicate(s.label, s.field)
	p.GetAttrs = storagetest.PodAttrs
	p.AllowWatchBookmarks = s.bookmarks
	return p
}

func (s propSpec) opts() storage.ListOptions {
	return storage.ListOptions{ResourceVersion: s.rv, Predicate: s.predicate(), Recursive: s.recursive, SendInitialEvents: s.sie}
}

func (s propSpec) String() string {
	sie := "unset"
	if s.sie != nil {
		sie = strconv.FormatBool(*s.sie)
	}
	return fmt.Sprintf("key=%s recursive=%t labels=%q fields=%q rv=%q sie=%s bookmarks=%t", s.key, s.recursive, s.label, s.field, s.rv, sie, s.bookmarks)
}

// request is the watch request as the storage.Interface receives it.
func (s propSpec) request() kubemodel.Request {
	return kubemodel.Request{ResourceVersion: s.rv, SendInitialEvents: s.sie, AllowWatchBookmarks: s.bookmarks}
}

func (s propSpec) selection() kubemodel.Selection {
	return kubemodel.Selection{Key: s.key, Recursive: s.recursive, Predicate: s.predicate()}
}

type reader int

const (
	fastReader reader = iota
	slowReader
	idleReader
)

type propWatcher struct {
	spec   propSpec
	reader reader
	w      watch.Interface
	// lo and hi bound the cache's RV during the Watch call; required is etcd's revision then.
	lo, hi, required uint64
	listRV           uint64 // the relist RV of the generation the watch was opened in
	got              []watch.Event
	closed           bool
	stopped          bool // by the test
	resumeOf         *propWatcher
	resumed          bool
}

type propRun struct {
	t        *rapid.T
	e        *env
	h        *kubemodel.History
	watchers []*propWatcher
}

var (
	propNamespaces = []string{"a", "b"}
	propNames      = []string{"x", "y", "z"}
)

func (r *propRun) listRV() uint64 {
	r.e.cacher.watchCache.RLock()
	defer r.e.cacher.watchCache.RUnlock()
	return r.e.cacher.watchCache.listResourceVersion
}

// rev is etcd's revision: every write is a pod write.
func (r *propRun) rev() uint64 { return uint64(r.h.Rev) }

func (r *propRun) write() {
	ns := rapid.SampledFrom(propNamespaces).Draw(r.t, "ns")
	name := rapid.SampledFrom(propNames).Draw(r.t, "name")
	key := "/pods/" + ns + "/" + name
	prev := r.h.State(key)
	if prev != nil && rapid.IntRange(0, 3).Draw(r.t, "delete") == 0 {
		out := r.e.remove(storagetest.Pod(ns, name))
		if err := r.h.Apply(int64(rvOf(r.t, out)), key, nil); err != nil {
			r.t.Fatal(err)
		}
		return
	}
	var mods []func(*unstructured.Unstructured)
	if l := rapid.SampledFrom([]string{"", "1", "2"}).Draw(r.t, "label"); l != "" {
		mods = append(mods, storagetest.Labels("l="+l))
	}
	if rapid.Bool().Draw(r.t, "onNode") {
		mods = append(mods, storagetest.Node("n1"))
	}
	out := r.e.put(storagetest.Pod(ns, name, mods...))
	if prev != nil && int64(rvOf(r.t, out)) == prev.Rev {
		return // GuaranteedUpdate writes nothing when nothing changes
	}
	cur, err := kubemodel.FromUnstructured(key, out, storagetest.PodAttrs)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.h.Apply(cur.Rev, key, cur); err != nil {
		r.t.Fatal(err)
	}
}

func (r *propRun) drawSpec() propSpec {
	var s propSpec
	switch rapid.IntRange(0, 3).Draw(r.t, "scope") {
	case 0:
		s.key, s.recursive = "/pods/", true
	case 1:
		s.key, s.recursive = "/pods/"+rapid.SampledFrom(propNamespaces).Draw(r.t, "scopeNS"), true
	case 2:
		s.key = "/pods/" + rapid.SampledFrom(propNamespaces).Draw(r.t, "scopeNS") + "/" + rapid.SampledFrom(propNames).Draw(r.t, "scopeName")
	default:
		s.key, s.recursive = "/pods/", true
		s.field = "metadata.namespace=" + rapid.SampledFrom(propNamespaces).Draw(r.t, "fieldNS")
	}
	if s.field == "" {
		s.field = rapid.SampledFrom([]string{"", "", "spec.nodeName=n1", "spec.nodeName!=n1"}).Draw(r.t, "field")
	}
	s.label = rapid.SampledFrom([]string{"", "", "l=1", "l!=1"}).Draw(r.t, "labelSel")
	switch rapid.IntRange(0, 4).Draw(r.t, "rvMode") {
	case 0:
		s.rv = ""
	case 1:
		s.rv = "0"
	case 2:
		if r.rev() > 1 {
			s.rv = strconv.FormatUint(rapid.Uint64Range(1, r.rev()).Draw(r.t, "pastRV"), 10)
		} else {
			s.rv = "1"
		}
	case 3:
		s.rv = strconv.FormatUint(r.rev(), 10)
	default:
		s.rv = strconv.FormatUint(r.rev()+rapid.Uint64Range(1, 2).Draw(r.t, "ahead"), 10)
	}
	switch rapid.IntRange(0, 2).Draw(r.t, "sie") {
	case 1:
		s.sie = ptrTo(true)
	case 2:
		s.sie = ptrTo(false)
	}
	s.bookmarks = rapid.Bool().Draw(r.t, "bookmarks")
	return s
}

// open opens a watch; the call may wait for freshness, so the fake clock is stepped meanwhile.
func (r *propRun) open(spec propSpec, rd reader, resumeOf *propWatcher) {
	pw := &propWatcher{spec: spec, reader: rd, resumeOf: resumeOf, required: r.rev(), listRV: r.listRV()}
	pw.lo = r.e.cacheRV()
	type result struct {
		w   watch.Interface
		err error
	}
	done := make(chan result, 1)
	go func() {
		w, err := r.e.cacher.Watch(r.e.ctx, spec.key, spec.opts())
		done <- result{w, err}
	}()
	var res result
	deadline := time.Now().Add(testutil.WaitTimeout)
wait:
	for {
		select {
		case res = <-done:
			break wait
		case <-time.After(time.Millisecond):
			r.e.clock.Step(10 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("Watch(%s) did not return", spec)
		}
	}
	if res.err != nil {
		r.t.Fatalf("Watch(%s): %v", spec, res.err)
	}
	pw.hi = r.e.cacheRV()
	pw.w = res.w
	r.watchers = append(r.watchers, pw)
}

// drain reads what a watcher has delivered so far, up to max events (-1: all), without waiting.
func (r *propRun) drain(pw *propWatcher, max int) {
	for n := 0; max < 0 || n < max; n++ {
		if pw.closed {
			return
		}
		select {
		case ev, ok := <-pw.w.ResultChan():
			if !ok {
				pw.closed = true
				return
			}
			pw.got = append(pw.got, ev)
		default:
			return
		}
	}
}

// afterAction reads the fast watchers and re-watches those closed without the test stopping them.
func (r *propRun) afterAction() {
	for _, pw := range r.watchers {
		if pw.reader == fastReader {
			r.drain(pw, -1)
		}
	}
	for _, pw := range append([]*propWatcher(nil), r.watchers...) {
		if !pw.closed || pw.stopped || pw.resumed {
			continue
		}
		pw.resumed = true
		if rv, ok := lastSeenRV(pw); ok && r.e.cacher.Ready() {
			spec := pw.spec
			spec.rv, spec.sie = strconv.FormatUint(rv, 10), nil
			r.open(spec, fastReader, pw)
		}
	}
}

// lastSeenRV is the RV a client resumes from: that of the last live event or bookmark it got.
func lastSeenRV(pw *propWatcher) (uint64, bool) {
	for i := len(pw.got) - 1; i >= 0; i-- {
		ev := pw.got[i]
		if ev.Type == watch.Error {
			return 0, false
		}
		if ev.Type == watch.Bookmark || !pw.spec.request().Replays() {
			return rvOfEvent(ev), true
		}
	}
	return 0, false
}

func rvOfEvent(ev watch.Event) uint64 {
	rv, _ := storage.APIObjectVersioner{}.ObjectResourceVersion(ev.Object)
	return rv
}

func (r *propRun) relist() {
	gen := r.e.generation()
	r.e.storage.breakWatch(r.t, &apierrors.NewResourceExpired("The resourceVersion for the provided watch is too old.").ErrStatus)
	r.e.eventually("the cache relists", func() bool { return r.e.generation() == gen+1 })
}

// finish reads every watcher to its end: closed ones to the close, open ones up to a fence behind
// every write.
func (r *propRun) finish() {
	r.e.lastRV = r.rev()
	// After a relist that already covers the last write there is nothing left to dispatch.
	r.e.eventually("the dispatcher processes the last write", func() bool {
		return r.e.cacheRV() >= r.rev() && (r.e.cacher.lastProcessedRV.Load() >= r.rev() || r.listRV() >= r.rev())
	})
	for _, pw := range r.watchers {
		r.drain(pw, -1)
		if pw.closed {
			continue
		}
		cw, ok := pw.w.(*cacheWatcher)
		if !ok {
			r.readToClose(pw)
			continue
		}
		for !r.tryFence(cw) {
			if !r.readOne(pw) {
				break
			}
		}
		for !pw.closed {
			if !r.readOne(pw) {
				break
			}
			if last := pw.got[len(pw.got)-1]; last.Type == watch.Bookmark && rvOfEvent(last) == fenceRV {
				pw.got = pw.got[:len(pw.got)-1]
				break
			}
		}
	}
}

func (r *propRun) tryFence(cw *cacheWatcher) bool {
	c := r.e.cacher
	c.mu.Lock()
	defer c.mu.Unlock()
	if cw.stopped {
		return false
	}
	marker := &unstructured.Unstructured{}
	marker.SetResourceVersion(strconv.FormatUint(fenceRV, 10))
	select {
	case cw.input <- &watchCacheEvent{Type: watch.Bookmark, Object: marker, ResourceVersion: fenceRV}:
		return true
	default:
		return false
	}
}

// readOne waits for the next event (stepping the clock); false when the watch closed.
func (r *propRun) readOne(pw *propWatcher) bool {
	deadline := time.After(testutil.WaitTimeout)
	for {
		select {
		case ev, ok := <-pw.w.ResultChan():
			if !ok {
				pw.closed = true
				return false
			}
			pw.got = append(pw.got, ev)
			return true
		case <-time.After(time.Millisecond):
			r.e.clock.Step(10 * time.Millisecond)
		case <-deadline:
			r.t.Fatalf("watch %s: no event within %v", pw.spec, testutil.WaitTimeout)
		}
	}
}

func (r *propRun) readToClose(pw *propWatcher) {
	for r.readOne(pw) {
	}
}

// check verifies one watcher's delivered events against the model: a prefix of what it owes for
// one start the cache may have picked (all of it while the watch is open), or the one ERROR it owes.
func (r *propRun) check(pw *propWatcher) {
	fail := func(format string, args ...any) {
		var got []string
		for _, e := range pw.got {
			got = append(got, describe(e))
		}
		r.t.Fatalf("watch %s (lo=%d hi=%d required=%d listRV=%d closed=%t stopped=%t resume=%t reader=%d): %s\ngot:\n  %s\nwrites:\n%s", pw.spec, pw.lo, pw.hi, pw.required,
			pw.listRV, pw.closed, pw.stopped, pw.resumeOf != nil, pw.reader, fmt.Sprintf(format, args...), strings.Join(got, "\n  "), r.h)
	}
	exp, err := r.h.ExpectCache(pw.spec.request(), pw.spec.selection(), kubemodel.Cache{
		Lo: int64(pw.lo), Hi: int64(pw.hi), EtcdRev: int64(pw.required), ListRV: int64(pw.listRV),
		// open moves the cache's clock until Watch returns, past the freshness wait's timeout.
		MayTimeOut: true,
	})
	if err != nil {
		fail("%v", err)
	}
	events := make([]kubemodel.Event, 0, len(pw.got))
	for _, e := range pw.got {
		ev, err := kubemodel.EventOf(e)
		if err != nil {
			fail("%v", err)
		}
		events = append(events, ev)
	}
	v, err := r.h.Check(exp, events)
	switch {
	case err != nil:
		fail("%v", err)
	case v.Error && !pw.closed:
		fail("an ERROR on a watch that stays open")
	case exp.Refusal != nil && !v.Complete:
		fail("closed without its %s", exp.Refusal)
	case !pw.closed && !v.Complete:
		fail("open, and delivered only %d events of what it owes from %d", v.Events, v.Start)
	}
}

// compareWithStorage watches the storage directly with the same request and compares the events.
func (r *propRun) compareWithStorage(pw *propWatcher) {
	var want []string
	for _, e := range pw.got {
		if e.Type != watch.Bookmark {
			want = append(want, describe(e))
		}
	}
	opts := pw.spec.opts()
	if opts.ResourceVersion == "" {
		// RV "" with SendInitialEvents=false started at etcd's revision of the time.
		opts.ResourceVersion = strconv.FormatUint(pw.required, 10)
	}
	direct, err := r.e.storage.Store.Watch(r.e.ctx, pw.spec.key, opts)
	if err != nil {
		r.t.Fatalf("direct watch %s: %v", pw.spec, err)
	}
	defer func() {
		direct.Stop()
		for range direct.ResultChan() {
		}
	}()
	var got []string
	deadline := time.After(testutil.WaitTimeout)
	for len(got) < len(want) {
		select {
		case e, ok := <-direct.ResultChan():
			if !ok {
				r.t.Fatalf("direct watch %s closed after %v", pw.spec, got)
			}
			if e.Type != watch.Bookmark {
				got = append(got, describe(e))
			}
		case <-deadline:
			r.t.Fatalf("direct watch %s: got %v, cacher delivered %v", pw.spec, got, want)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		r.t.Fatalf("watch %s: the cacher delivered\n  %s\nthe storage\n  %s", pw.spec, strings.Join(want, "\n  "), strings.Join(got, "\n  "))
	}
}

// TestWatchersMatchModel: for random write histories, random watchers (scope, selectors, RV
// unset/0/past/current/future, SendInitialEvents unset/true/false, bookmarks, fast, slow and idle
// readers, random stops), random relists and bookmark ticks, every watcher delivers a gap-free,
// duplicate-free, in-order prefix of what the model says (all of it if still open); a watcher closed
// for slowness or by a relist resumes from its last RV with exactly the rest or a 410; bookmark RVs
// never decrease and never pass an undelivered event; and a history watch delivers what the storage's
// own watch delivers for the same request. Raise -rapid.checks for a longer run.
func TestWatchersMatchModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		e, closeEnv := openEnv(rt, withFakeClock, withNodeNameTrigger)
		defer closeEnv()
		r := &propRun{t: rt, e: e, h: kubemodel.NewHistory(int64(e.currentRV()))}
		steps := rapid.IntRange(5, 40).Draw(rt, "steps")
		for range steps {
			switch action := rapid.IntRange(0, 19).Draw(rt, "action"); {
			case action < 9:
				r.write()
			case action < 13:
				if len(r.watchers) < 10 {
					r.open(r.drawSpec(), reader(rapid.IntRange(0, 2).Draw(rt, "reader")), nil)
				}
			case action < 15:
				if len(r.watchers) > 0 {
					pw := r.watchers[rapid.IntRange(0, len(r.watchers)-1).Draw(rt, "slow")]
					r.drain(pw, rapid.IntRange(1, 5).Draw(rt, "count"))
				}
			case action < 16:
				if len(r.watchers) > 0 {
					pw := r.watchers[rapid.IntRange(0, len(r.watchers)-1).Draw(rt, "stop")]
					pw.stopped = true
					pw.w.Stop()
				}
			case action < 17:
				r.relist()
			default:
				r.e.clock.Step(defaultBookmarkFrequency + time.Second)
			}
			r.afterAction()
		}
		r.finish()
		for _, pw := range r.watchers {
			r.check(pw)
			if !pw.closed && !pw.spec.request().Replays() && pw.spec.rv != "0" {
				r.compareWithStorage(pw)
			}
		}
		for _, pw := range r.watchers {
			pw.w.Stop()
			for range pw.w.ResultChan() {
			}
		}
	})
}
