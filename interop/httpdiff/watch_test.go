package httpdiff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/proptest/kubemodel"
	"github.com/listwatch/listwatch/storage"
)

// watchPair is one watch request sent to both servers, and what each delivered.
type watchPair struct {
	id      int
	what    string
	ns      string
	q       url.Values // everything but resourceVersion
	rv      asked
	sie     *bool
	sel     kubemodel.Selection
	refused bool
	failed  bool
	stopped bool
	// restarted: a server ended it during its initial events and the client started over.
	restarted bool
	sides     [2]*watchSide
}

type watchSide struct {
	s    *server
	segs []*segment
}

func (w *watchSide) last() *segment { return w.segs[len(w.segs)-1] }

// segment is one HTTP watch and a reader that records its frames.
type segment struct {
	exp    kubemodel.Expectation
	resume bool
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	events  []kubemodel.Event
	readErr error
	closed  bool
}

func (g *segment) read(body io.ReadCloser) {
	defer close(g.done)
	defer body.Close()
	dec := json.NewDecoder(body)
	for {
		var frame struct {
			Type   watch.EventType `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		err := dec.Decode(&frame)
		if err != nil {
			g.mu.Lock()
			g.closed = true
			if !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "canceled") {
				g.readErr = fmt.Errorf("reading a frame: %w", err)
			}
			g.mu.Unlock()
			return
		}
		var ev watch.Event
		ev.Type = frame.Type
		if frame.Type == watch.Error {
			st := &metav1.Status{}
			err = json.Unmarshal(frame.Object, st)
			ev.Object = st
		} else {
			u := &unstructured.Unstructured{}
			err = u.UnmarshalJSON(frame.Object)
			ev.Object = u
		}
		var e kubemodel.Event
		if err == nil {
			e, err = kubemodel.EventOf(ev)
		}
		g.mu.Lock()
		if err != nil && g.readErr == nil {
			g.readErr = fmt.Errorf("frame %s: %w", frame.Object, err)
		}
		g.events = append(g.events, e)
		g.mu.Unlock()
	}
}

func (g *segment) snapshot() ([]kubemodel.Event, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]kubemodel.Event(nil), g.events...), g.closed, g.readErr
}

func (g *segment) stop() error {
	g.cancel()
	select {
	case <-g.done:
		return nil
	case <-time.After(testutil.WaitTimeout):
		return fmt.Errorf("the watch's body stayed open %v after its request was canceled", testutil.WaitTimeout)
	}
}

// selection is what a watch covers, for the model: the collection's keys and the selectors, matched
// against a widget's labels, name and namespace.
func selection(ns string, q url.Values) (kubemodel.Selection, error) {
	sel := kubemodel.Selection{Key: "/widgets/", Recursive: true}
	if ns != "" {
		sel.Key = "/widgets/" + ns + "/"
	}
	ls, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return sel, err
	}
	fs, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return sel, err
	}
	sel.Predicate = storage.Predicate{Label: ls, Field: fs}
	return sel, nil
}

// openWatch sends both servers the same random watch.
func (r *runner) openWatch() {
	r.t.Helper()
	r.sync()
	p := &watchPair{id: len(r.watches) + 1, q: url.Values{}}
	if r.rng.IntN(3) > 0 {
		p.ns = pick(r.rng, namespaces)
	}
	var future bool
	p.rv, future = r.resourceVersion()
	if ls := pick(r.rng, labelSels); ls != "" {
		p.q.Set("labelSelector", ls)
	}
	if fs := r.fieldSelector(); fs != "" {
		p.q.Set("fieldSelector", fs)
	}
	if r.rng.IntN(2) == 0 {
		p.q.Set("allowWatchBookmarks", "true")
	}
	switch r.rng.IntN(4) {
	case 1, 2:
		t := true
		p.sie = &t
		p.q.Set("sendInitialEvents", "true")
	case 3:
		f := false
		p.sie = &f
		p.q.Set("sendInitialEvents", "false")
	}
	if p.sie != nil && r.rng.IntN(8) > 0 {
		p.q.Set("resourceVersionMatch", "NotOlderThan")
	}
	if r.rng.IntN(10) == 0 {
		// The servers send a bookmark 2 s before the end, then end the watch.
		p.q.Set("timeoutSeconds", "3")
	}
	sel, err := selection(p.ns, p.q)
	if err != nil {
		// A malformed selector: both must refuse it.
		sel = kubemodel.Selection{Key: "/widgets/", Recursive: true, Predicate: storage.Everything}
	}
	p.sel = sel
	p.what = fmt.Sprintf("watch %d of %s rv=%s %s", p.id, collection(p.ns), p.rv, p.q.Encode())
	r.watches = append(r.watches, p)
	r.stats.watches++

	var refusals [2]*response
	for i, s := range r.servers {
		p.sides[i] = &watchSide{s: s}
		refusals[i] = r.startSegment(p, p.sides[i], p.rv.on(s), p.sie, p.q, false)
	}
	if refusals[0] != nil || refusals[1] != nil {
		p.refused = true
		var desc [2]string
		for i, s := range r.servers {
			if refusals[i] == nil {
				desc[i] = "200 and a stream"
			} else {
				desc[i] = s.describe(*refusals[i], p.rv.on(s))
			}
		}
		if desc[0] != desc[1] {
			r.failf("%s: the answers differ (-kube +listwatch):\n%s", p.what, cmp.Diff(desc[0], desc[1]))
		}
		return
	}
	if future {
		r.syncPair(p)
	}
}

// startSegment opens the watch on one server; a refusal (not 200) is returned, else the stream is
// read into a new segment.
func (r *runner) startSegment(p *watchPair, side *watchSide, rv string, sie *bool, q url.Values, resume bool) *response {
	r.t.Helper()
	s := side.s
	qq := url.Values{"watch": {"true"}}
	for k, v := range q {
		qq[k] = v
	}
	if rv != "" || !resume && p.rv == "" && p.id%2 == 0 {
		qq.Set("resourceVersion", rv)
	}
	req := kubemodel.Request{ResourceVersion: rv, SendInitialEvents: sie, AllowWatchBookmarks: q.Get("allowWatchBookmarks") == "true"}
	if q.Get("resourceVersionMatch") == "" {
		// The apiserver's defaulting (SetListOptionsDefaults), which both servers apply.
		req = req.WithWatchListDefaults()
	}
	exp, err := s.h.ExpectCache(req, p.sel, kubemodel.Cache{Lo: s.h.Rev, Hi: s.h.Rev + 5, EtcdRev: s.h.Rev})
	if err != nil && !errors.Is(err, kubemodel.ErrRequest) {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	hreq, err := http.NewRequestWithContext(ctx, "GET", s.base+collection(p.ns)+"?"+qq.Encode(), nil)
	if err != nil {
		cancel()
		r.t.Fatal(err)
	}
	resp, err := s.c.Do(hreq)
	if err != nil {
		cancel()
		r.t.Fatalf("seed %d: %s: %s: %v", r.seed, p.what, s.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		out := &response{code: resp.StatusCode, header: resp.Header, raw: raw}
		_ = json.Unmarshal(raw, &out.body)
		return out
	}
	g := &segment{exp: exp, resume: resume, cancel: cancel, done: make(chan struct{})}
	side.segs = append(side.segs, g)
	go g.read(resp.Body)
	return nil
}

// syncPair waits until each server delivered what the watch owes by now, judging each by its own
// model, and resumes a watch the server ended.
func (r *runner) syncPair(p *watchPair) {
	r.t.Helper()
	if p.refused || p.failed {
		return
	}
	for _, side := range p.sides {
		for !p.failed {
			g := side.last()
			v, closed, ok := r.awaitSegment(p, side, g)
			if !ok {
				p.failed = true
				break
			}
			if !closed || v.Error || p.stopped {
				break
			}
			if g.exp.Replay && v.Events < len(side.s.h.Initial(p.sel, v.Start)) {
				// Ended before its initial events were all delivered: a client has no state to
				// resume from and starts over, with both servers at their store's revision. The
				// streams are no longer the same request's: each is judged, not compared.
				r.sync()
				p.restarted = true
				r.stats.restarts++
				if ref := r.startSegment(p, side, p.rv.on(side.s), p.sie, p.q, false); ref != nil {
					r.failf("%s: %s: starting over: %d %s", p.what, side.s.name, ref.code, ref.raw)
					p.failed = true
				}
				continue
			}
			from := v.Start
			if v.HasResumeRV {
				from = v.ResumeRV
			}
			q := url.Values{}
			for k, vs := range p.q {
				if k != "sendInitialEvents" && k != "resourceVersionMatch" && k != "timeoutSeconds" {
					q[k] = vs
				}
			}
			r.stats.resumes++
			if ref := r.startSegment(p, side, strconv.FormatInt(from, 10), nil, q, true); ref != nil {
				r.failf("%s: %s: resuming from %d: %d %s", p.what, side.s.name, from, ref.code, ref.raw)
				p.failed = true
			}
		}
	}
}

func (r *runner) awaitSegment(p *watchPair, side *watchSide, g *segment) (kubemodel.Verdict, bool, bool) {
	r.t.Helper()
	deadline := time.Now().Add(testutil.WaitTimeout)
	for {
		events, closed, readErr := g.snapshot()
		if readErr != nil {
			r.failf("%s: %s: %v", p.what, side.s.name, readErr)
			return kubemodel.Verdict{}, closed, false
		}
		v, err := side.s.h.Check(g.exp, events)
		if err != nil {
			r.failf("%s: %s (request %d) delivered what upstream's semantics do not allow: %v", p.what, side.s.name, len(side.segs), err)
			return v, closed, false
		}
		if v.Complete || closed {
			return v, closed, true
		}
		if time.Now().After(deadline) {
			r.failf("%s: %s (request %d) did not deliver what it owes within %v: %v; got\n%s", p.what, side.s.name,
				len(side.segs), testutil.WaitTimeout, g.exp, describeEvents(events))
			return v, closed, false
		}
		time.Sleep(testutil.PollInterval)
	}
}

func describeEvents(events []kubemodel.Event) string {
	var b strings.Builder
	for i, e := range events {
		fmt.Fprintf(&b, "  %d: %s\n", i, e)
	}
	return b.String()
}

// stopWatch finishes a random open watch.
func (r *runner) stopWatch() {
	r.t.Helper()
	var open []*watchPair
	for _, p := range r.watches {
		if !p.stopped {
			open = append(open, p)
		}
	}
	if len(open) > 0 {
		r.finish(pick(r.rng, open))
	}
}

// finish waits for what the watch owes, stops it on both servers and compares them.
func (r *runner) finish(p *watchPair) {
	r.t.Helper()
	r.syncPair(p)
	p.stopped = true
	for _, side := range p.sides {
		if side == nil {
			continue
		}
		for i, g := range side.segs {
			if err := g.stop(); err != nil {
				r.t.Fatalf("seed %d: %s: %s, request %d: %v", r.seed, p.what, side.s.name, i+1, err)
			}
		}
	}
	if p.refused || p.failed || p.restarted {
		return
	}
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
		r.failf("%s: the servers delivered different events (-kube +listwatch), over %d and %d requests:\n%s",
			p.what, len(p.sides[0].segs), len(p.sides[1].segs), d)
	}
}

// stream is what a client of one server saw over every request, normalized, without the bookmarks
// whose timing is the server's (each judged by the model), and whether the last re-watch was
// refused as too old.
func (w *watchSide) stream(st *stats) (out []string, endsTooOld bool) {
	for i, g := range w.segs {
		events, _, _ := g.snapshot()
		for _, e := range events {
			switch {
			case e.Type == watch.Bookmark && !e.InitialEventsEnd:
				st.bookmarks++
				continue
			case e.Type == watch.Bookmark:
				st.endBookmarks++
				out = append(out, "BOOKMARK (initial-events-end) "+w.s.rvName(strconv.FormatInt(e.RV, 10)))
			case e.Type == watch.Error:
				st.errors++
				if g.resume && i == len(w.segs)-1 && e.Status != nil && e.Status.Code == 410 {
					return out, true
				}
				out = append(out, fmt.Sprintf("ERROR %d %s %q", e.Status.Code, e.Status.Reason, w.s.normalMessage(e.Status.Message, "")))
			default:
				st.events++
				var obj map[string]any
				if err := json.Unmarshal([]byte(e.Object), &obj); err != nil {
					out = append(out, fmt.Sprintf("%s undecodable %s", e.Type, e.Object))
					continue
				}
				norm, _ := json.Marshal(w.s.normalize(obj, ""))
				out = append(out, fmt.Sprintf("%s %s", e.Type, norm))
			}
		}
	}
	return out, false
}

// stopAll stops every watch still open, without judging it.
func (r *runner) stopAll() {
	for _, p := range r.watches {
		for _, side := range p.sides {
			if side == nil {
				continue
			}
			for _, g := range side.segs {
				if err := g.stop(); err != nil {
					r.t.Errorf("seed %d: %s: %s: %v", r.seed, p.what, side.s.name, err)
				}
			}
		}
	}
}
