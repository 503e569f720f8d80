package cache

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"pgregory.net/rapid"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
)

// The property test drives one Cacher with random writes, watchers, reads, stops, relists and
// bookmark ticks, then checks every watcher against a model of the write history.

// write is one write of the history: the object before and after (nil: absent) at rev.
type write struct {
	rev       uint64
	key       string
	prev, cur *unstructured.Unstructured
}

type propModel struct {
	writes []write
	state  map[string]*unstructured.Unstructured
	rev    uint64 // etcd's revision: every write is a pod write
}

func (m *propModel) stateAt(rev uint64) map[string]*unstructured.Unstructured {
	st := map[string]*unstructured.Unstructured{}
	for _, w := range m.writes {
		if w.rev > rev {
			break
		}
		if w.cur == nil {
			delete(st, w.key)
		} else {
			st[w.key] = w.cur
		}
	}
	return st
}

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

// selects reports whether the watch selects the object at key.
func (s propSpec) selects(key string, u *unstructured.Unstructured) bool {
	if u == nil {
		return false
	}
	prefix := s.key
	if s.recursive && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	if !hasPathPrefix(key, prefix) {
		return false
	}
	l, f, _ := storagetest.PodAttrs(u)
	p := s.predicate()
	return p.MatchesObjectAttributes(l, f)
}

// mode is how the watch starts: replay of the state, or history after an RV.
func (s propSpec) replays() bool {
	return (s.sie != nil && *s.sie) || (s.sie == nil && (s.rv == "" || s.rv == "0"))
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
	m        *propModel
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

func (r *propRun) write() {
	ns := rapid.SampledFrom(propNamespaces).Draw(r.t, "ns")
	name := rapid.SampledFrom(propNames).Draw(r.t, "name")
	key := "/pods/" + ns + "/" + name
	prev := r.m.state[key]
	var out *unstructured.Unstructured
	if prev != nil && rapid.IntRange(0, 3).Draw(r.t, "delete") == 0 {
		out = r.e.remove(prev)
		delete(r.m.state, key)
		r.m.writes = append(r.m.writes, write{rev: rvOf(r.t, out), key: key, prev: prev})
	} else {
		var mods []func(*unstructured.Unstructured)
		if l := rapid.SampledFrom([]string{"", "1", "2"}).Draw(r.t, "label"); l != "" {
			mods = append(mods, storagetest.Labels("l="+l))
		}
		if rapid.Bool().Draw(r.t, "onNode") {
			mods = append(mods, storagetest.Node("n1"))
		}
		out = r.e.put(storagetest.Pod(ns, name, mods...))
		if prev != nil && out.GetResourceVersion() == prev.GetResourceVersion() {
			return // GuaranteedUpdate writes nothing when nothing changes
		}
		r.m.state[key] = out
		r.m.writes = append(r.m.writes, write{rev: rvOf(r.t, out), key: key, prev: prev, cur: out})
	}
	r.m.rev = rvOf(r.t, out)
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
		if r.m.rev > 1 {
			s.rv = strconv.FormatUint(rapid.Uint64Range(1, r.m.rev).Draw(r.t, "pastRV"), 10)
		} else {
			s.rv = "1"
		}
	case 3:
		s.rv = strconv.FormatUint(r.m.rev, 10)
	default:
		s.rv = strconv.FormatUint(r.m.rev+rapid.Uint64Range(1, 2).Draw(r.t, "ahead"), 10)
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
	pw := &propWatcher{spec: spec, reader: rd, resumeOf: resumeOf, required: r.m.rev, listRV: r.listRV()}
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
		if ev.Type == watch.Bookmark || !pw.spec.replays() {
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
	r.e.lastRV = r.m.rev
	// After a relist that already covers the last write there is nothing left to dispatch.
	r.e.eventually("the dispatcher processes the last write", func() bool {
		return r.e.cacheRV() >= r.m.rev && (r.e.cacher.lastProcessedRV.Load() >= r.m.rev || r.listRV() >= r.m.rev)
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

// expected is what a watch started at S (after the initial state at S, if it replays) must deliver.
func (r *propRun) expected(pw *propWatcher, s uint64) (initial, live []string, liveRVs []uint64) {
	if pw.spec.replays() {
		st := r.m.stateAt(s)
		keys := make([]string, 0, len(st))
		for k := range st {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if pw.spec.selects(k, st[k]) {
				initial = append(initial, ev(watch.Added, st[k]))
			}
		}
	}
	for _, w := range r.m.writes {
		if w.rev <= s {
			continue
		}
		cur, old := pw.spec.selects(w.key, w.cur), pw.spec.selects(w.key, w.prev)
		var d string
		switch {
		case cur && !old:
			d = ev(watch.Added, w.cur)
		case cur && old:
			d = ev(watch.Modified, w.cur)
		case old:
			d = ev(watch.Deleted, atRV(w.prev, w.rev))
		default:
			continue
		}
		live = append(live, d)
		liveRVs = append(liveRVs, w.rev)
	}
	return initial, live, liveRVs
}

// startCandidates are the RVs the watch may have started at.
func (r *propRun) startCandidates(pw *propWatcher) []uint64 {
	s := pw.spec
	switch {
	case s.sie != nil && *s.sie:
		// The snapshot is at least as fresh as the required RV: etcd's for "", none for "0".
		lo := pw.lo
		switch s.rv {
		case "":
			lo = max(lo, pw.required)
		case "0":
		default:
			n, _ := strconv.ParseUint(s.rv, 10, 64)
			lo = max(lo, n)
		}
		return rvRange(lo, pw.hi)
	case s.rv == "" && s.sie != nil:
		return []uint64{pw.required}
	case s.rv == "" || s.rv == "0":
		return rvRange(pw.lo, pw.hi)
	default:
		n, _ := strconv.ParseUint(s.rv, 10, 64)
		return []uint64{n}
	}
}

func rvRange(lo, hi uint64) []uint64 {
	var out []uint64
	for v := lo; v <= hi; v++ {
		out = append(out, v)
	}
	return out
}

// check verifies one watcher's delivered events.
func (r *propRun) check(pw *propWatcher) {
	fail := func(format string, args ...any) {
		var got []string
		for _, e := range pw.got {
			got = append(got, describe(e))
		}
		var hist []string
		for _, w := range r.m.writes {
			d := fmt.Sprintf("%d %s:", w.rev, w.key)
			if w.prev != nil {
				d += " from " + describeObject(w.prev)
			}
			if w.cur != nil {
				d += " to " + describeObject(w.cur)
			} else {
				d += " deleted"
			}
			hist = append(hist, d)
		}
		r.t.Fatalf("watch %s (lo=%d hi=%d required=%d listRV=%d closed=%t stopped=%t resume=%t reader=%d): %s\ngot:\n  %s\nwrites:\n  %s", pw.spec, pw.lo, pw.hi, pw.required,
			pw.listRV, pw.closed, pw.stopped, pw.resumeOf != nil, pw.reader, fmt.Sprintf(format, args...), strings.Join(got, "\n  "), strings.Join(hist, "\n  "))
	}
	s := pw.spec
	if len(pw.got) > 0 && pw.got[0].Type == watch.Error {
		if len(pw.got) != 1 || !pw.closed {
			fail("an ERROR that is not the only event of a closed watch")
		}
		st := pw.got[0].Object.(*metav1.Status)
		switch {
		case st.Code == 410:
			n, _ := strconv.ParseUint(s.rv, 10, 64)
			if s.replays() || n >= pw.listRV || st.Message != fmt.Sprintf("too old resource version: %d (%d)", n, pw.listRV) {
				fail("unexpected 410")
			}
		case st.Code == 504 && s.sie != nil && *s.sie:
		default:
			fail("unexpected ERROR")
		}
		return
	}
	if n, err := strconv.ParseUint(s.rv, 10, 64); err == nil && n > 0 && !s.replays() && n < pw.listRV {
		fail("a watch from before the relist was not refused")
	}
	var reasons []string
	for _, start := range r.startCandidates(pw) {
		reason := r.matches(pw, start)
		if reason == "" {
			return
		}
		reasons = append(reasons, fmt.Sprintf("from %d: %s", start, reason))
	}
	fail("no start RV explains the events:\n  %s", strings.Join(reasons, "\n  "))
}

// matches reports why the delivered events are not what a watch started at start must deliver ("" if
// they are).
func (r *propRun) matches(pw *propWatcher, start uint64) string {
	initial, live, liveRVs := r.expected(pw, start)
	got := pw.got
	for i, want := range initial {
		if i >= len(got) {
			if pw.closed {
				return "" // a closed watch delivers a prefix
			}
			return fmt.Sprintf("initial event %d missing: %s", i, want)
		}
		if d := describe(got[i]); d != want {
			return fmt.Sprintf("initial event %d: %s, want %s", i, d, want)
		}
	}
	got = got[len(initial):]
	s := pw.spec
	if s.sie != nil && *s.sie && s.bookmarks {
		if len(got) == 0 {
			if pw.closed {
				return ""
			}
			return "end bookmark missing"
		}
		if d := describe(got[0]); d != bookmark(start, true) {
			return fmt.Sprintf("got %s, want %s", d, bookmark(start, true))
		}
		got = got[1:]
	}
	delivered := 0
	lastBookmark := start
	for _, e := range got {
		if e.Type == watch.Bookmark {
			if !s.bookmarks {
				return "a bookmark for a watch without bookmarks"
			}
			b := rvOfEvent(e)
			if d := describe(e); d != bookmark(b, false) {
				return "an annotated bookmark after the initial events: " + d
			}
			if b < lastBookmark {
				return fmt.Sprintf("bookmark %d below %d", b, lastBookmark)
			}
			if delivered > 0 && b < liveRVs[delivered-1] {
				return fmt.Sprintf("bookmark %d below the last event %d", b, liveRVs[delivered-1])
			}
			if delivered < len(liveRVs) && liveRVs[delivered] <= b {
				return fmt.Sprintf("bookmark %d passes the undelivered event at %d", b, liveRVs[delivered])
			}
			lastBookmark = b
			continue
		}
		if delivered >= len(live) {
			return "extra event " + describe(e)
		}
		if d := describe(e); d != live[delivered] {
			return fmt.Sprintf("live event %d: %s, want %s", delivered, d, live[delivered])
		}
		delivered++
	}
	if !pw.closed && delivered < len(live) {
		return fmt.Sprintf("open watch missing %d events from %s", len(live)-delivered, live[delivered])
	}
	return ""
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
		r := &propRun{t: rt, e: e, m: &propModel{state: map[string]*unstructured.Unstructured{}, rev: e.currentRV()}}
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
			if !pw.closed && !pw.spec.replays() && pw.spec.rv != "0" {
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
