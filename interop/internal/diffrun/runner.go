package diffrun

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/proptest/kubemodel"
)

// maxFails is how many differences a seed reports before it stops.
const maxFails = 20

// maxFuture is how many requests for a revision not yet written a seed sends: each waits for the
// peers' 3 s freshness timeout.
const maxFuture = 2

// Peers is what a differential supplies to the runner: its two peers, upstream's (0) and
// listwatch's (1), and how a watch is sent to each. W is the differential's description of a watch
// request (a storage.Interface's ListOptions, an HTTP query).
type Peers[W any] interface {
	// Name names peer i in failure messages.
	Name(i int) string
	// History is the model that judges peer i's watches.
	History(i int) *kubemodel.History
	// Sync brings both peers to their store's revision (by a read that is itself compared) and
	// their models with them.
	Sync()
	// Watch sends peer i the pair's watch as o says, and returns the segment that reads it, or,
	// when the peer refused the request, nil and the refusal as compared.
	Watch(p *Pair[W], i int, o Opening) (*Segment, string)
	// Describe is an event of peer i as the two streams are compared: only what the other peer
	// must deliver alike.
	Describe(i int, e kubemodel.Event) string
	// Closed judges peer i's closing of the pair's last segment before it delivered everything it
	// owes (a slow reader, a deadline); it reports what upstream would not have done with Failf.
	Closed(p *Pair[W], i int, v kubemodel.Verdict)
}

// Opening says how a pair's watch is sent to a peer.
type Opening struct {
	// Again says the pair's request is sent again as first asked, with no deadline: the peer
	// closed the watch during its initial events, which leaves a client nothing to resume from.
	Again bool
	// Resume says a client re-watches from From, the last resourceVersion it saw.
	Resume bool
	From   int64
}

// Pair is one watch request sent to both peers, and what each delivered.
type Pair[W any] struct {
	ID int
	// What names the watch in failure messages: "watch 3 of ...".
	What string
	// Sel is what the watch covers, for the models.
	Sel kubemodel.Selection
	// Req is the request as the differential sends it.
	Req W
	// PausedUntil is the write count after which the pair's slow readers read again (0: they read).
	PausedUntil int
	// Refused: a peer refused the first request. Restarted: a peer closed it during its initial
	// events and the client started over, so the streams are judged, not compared. Failed: a
	// difference was reported, the pair is not judged further.
	Refused, Restarted, Stopped, Failed bool
	Sides                               [2]*Side
}

// Side is what one peer delivered for a pair: the first watch and every re-watch of a client that
// resumes whenever the peer closes the watch.
type Side struct {
	Segs []*Segment
}

// Last is the watch the client reads now.
func (s *Side) Last() *Segment { return s.Segs[len(s.Segs)-1] }

// Tally counts what the runner compared of the watches.
type Tally struct {
	Watches, Stops, Events, EndBookmarks, Bookmarks, Errors, Terminations, Resumes, Restarts int
}

// Add adds o's counts.
func (t *Tally) Add(o Tally) {
	t.Watches += o.Watches
	t.Stops += o.Stops
	t.Events += o.Events
	t.EndBookmarks += o.EndBookmarks
	t.Bookmarks += o.Bookmarks
	t.Errors += o.Errors
	t.Terminations += o.Terminations
	t.Resumes += o.Resumes
	t.Restarts += o.Restarts
}

// Runner plays one seed of a differential: its random source, its failures and its watch pairs.
type Runner[W any] struct {
	T    testing.TB
	Seed uint64
	Rng  *rand.Rand
	// Fails counts the differences reported.
	Fails   int
	Watches []*Pair[W]
	Tally   Tally
	peers   Peers[W]
	future  int
}

// New is a runner of seed over peers, drawing from a PCG source seeded with seed and seed^stream
// (each differential has its stream, so that one seed plays differently in each). The differential
// registers StopAll as a cleanup once its peers run, so that every watch is stopped before they are.
func New[W any](t testing.TB, seed, stream uint64, peers Peers[W]) *Runner[W] {
	return &Runner[W]{T: t, Seed: seed, Rng: rand.New(rand.NewPCG(seed, seed^stream)), peers: peers}
}

// Failf reports a difference, prefixed with the seed so that it can be replayed.
func (r *Runner[W]) Failf(format string, args ...any) {
	r.T.Helper()
	r.Fails++
	r.T.Errorf("seed %d: %s", r.Seed, fmt.Sprintf(format, args...))
}

// Fatalf ends the seed, prefixed with the seed.
func (r *Runner[W]) Fatalf(format string, args ...any) {
	r.T.Helper()
	r.T.Fatalf("seed %d: %s", r.Seed, fmt.Sprintf(format, args...))
}

// Future says whether the seed may still send a request for a revision not yet written (two
// each), and counts it.
func (r *Runner[W]) Future() bool {
	if r.future >= maxFuture {
		return false
	}
	r.future++
	return true
}

// Play runs ops operations, each one step, stopping the seed once it reported more than 20
// differences, then finishes every watch still open.
func (r *Runner[W]) Play(ops int, step func()) {
	r.T.Helper()
	for range ops {
		step()
		if r.T.Failed() && r.Fails > maxFails {
			r.Fatalf("stopping after %d differences", r.Fails)
		}
	}
	r.FinishAll()
}

// Open sends both peers the same watch, named "watch N " + what, and compares their refusals.
func (r *Runner[W]) Open(what string, sel kubemodel.Selection, req W) *Pair[W] {
	r.T.Helper()
	p := &Pair[W]{ID: len(r.Watches) + 1, Sel: sel, Req: req}
	p.What = fmt.Sprintf("watch %d %s", p.ID, what)
	p.Sides = [2]*Side{{}, {}}
	r.Watches = append(r.Watches, p)
	r.Tally.Watches++
	var refusals [2]string
	for i := range p.Sides {
		refusals[i] = r.start(p, i, Opening{})
	}
	if refusals[0] != "" || refusals[1] != "" {
		p.Refused = true
		for i, ref := range refusals {
			if ref == "" {
				refusals[i] = "a watch"
			}
		}
		if refusals[0] != refusals[1] {
			r.Failf("%s: the answers differ (-%s +%s):\n%s", p.What, r.peers.Name(0), r.peers.Name(1), cmp.Diff(refusals[0], refusals[1]))
		}
	}
	return p
}

// start sends peer i the pair's watch and keeps its segment; it returns the refusal, if any.
func (r *Runner[W]) start(p *Pair[W], i int, o Opening) string {
	r.T.Helper()
	s, refusal := r.peers.Watch(p, i, o)
	if s == nil {
		if refusal == "" {
			refusal = "refused"
		}
		return refusal
	}
	s.resume = o.Resume
	p.Sides[i].Segs = append(p.Sides[i].Segs, s)
	return ""
}

// Pause makes the pair's readers stop reading until untilWrites writes were made (UnpauseDue).
func (r *Runner[W]) Pause(p *Pair[W], untilWrites int) {
	p.PausedUntil = untilWrites
	for _, s := range p.Sides {
		if len(s.Segs) > 0 {
			s.Last().pause()
		}
	}
}

// UnpauseDue lets the slow readers whose pause is over after writes writes read again.
func (r *Runner[W]) UnpauseDue(writes int) {
	for _, p := range r.Watches {
		if p.PausedUntil != 0 && writes >= p.PausedUntil && !p.Refused {
			p.PausedUntil = 0
			for _, s := range p.Sides {
				s.Last().unpause()
			}
		}
	}
}

// SyncPair waits until each peer delivered what the pair's watch owes by now, judging every segment
// by that peer's model, and resumes a watch the peer closed, as a client does: from the last
// resourceVersion it saw, or, closed during its initial events, from scratch.
func (r *Runner[W]) SyncPair(p *Pair[W]) {
	r.T.Helper()
	if p.Refused || p.Failed {
		return
	}
	for i, side := range p.Sides {
		for !p.Failed {
			s := side.Last()
			v, closed, ok := r.await(p, i, s)
			if !ok {
				p.Failed = true
				break
			}
			if !closed || v.Error || p.Stopped {
				break
			}
			if !v.Complete {
				r.Tally.Terminations++
				r.peers.Closed(p, i, v)
			}
			if s.Exp.Replay && v.Events < len(r.peers.History(i).Initial(p.Sel, v.Start)) {
				// A client has no state to resume from and starts over, with both peers at their
				// store's revision. The streams are no longer the same request's.
				r.peers.Sync()
				p.Restarted = true
				r.Tally.Restarts++
				if ref := r.start(p, i, Opening{Again: true}); ref != "" {
					r.Failf("%s: %s: starting over: %s", p.What, r.peers.Name(i), ref)
					p.Failed = true
				}
				continue
			}
			from := v.Start
			if v.HasResumeRV {
				from = v.ResumeRV
			}
			r.Tally.Resumes++
			if ref := r.start(p, i, Opening{Resume: true, From: from}); ref != "" {
				r.Failf("%s: %s: resuming from %d: %s", p.What, r.peers.Name(i), from, ref)
				p.Failed = true
			}
		}
	}
}

// errFailed ends await's poll once it reported a failure.
var errFailed = errors.New("reported")

// await waits until the segment delivered everything it owes, or closed, and judges it by peer i's
// model. ok false says it reported a failure.
func (r *Runner[W]) await(p *Pair[W], i int, s *Segment) (v kubemodel.Verdict, closed, ok bool) {
	r.T.Helper()
	name, n := r.peers.Name(i), len(p.Sides[i].Segs)
	var events []kubemodel.Event
	var failure error
	err := testutil.Poll(fmt.Sprintf("%s (segment %d) to deliver what it owes", name, n), func() bool {
		var readErr error
		events, closed, readErr = s.Snapshot()
		if readErr != nil {
			failure = fmt.Errorf("%s: %s (segment %d) delivered an event the model cannot read: %w", p.What, name, n, readErr)
			return true
		}
		var err error
		if v, err = r.peers.History(i).Check(s.Exp, events); err != nil {
			failure = fmt.Errorf("%s: %s (segment %d) delivered what upstream's semantics do not allow: %w", p.What, name, n, err)
			return true
		}
		return v.Complete || closed
	}, nil)
	if err != nil {
		failure = fmt.Errorf("%s: %w: %v; got\n%s", p.What, err, s.Exp, DescribeEvents(events))
	}
	if failure != nil {
		r.Failf("%v", failure)
		return v, closed, false
	}
	return v, closed, true
}

// DescribeEvents is a watch's events, one a line, for failure messages.
func DescribeEvents(events []kubemodel.Event) string {
	var b strings.Builder
	for i, e := range events {
		fmt.Fprintf(&b, "  %d: %s\n", i, e)
	}
	return b.String()
}

// StopWatch finishes a random open pair.
func (r *Runner[W]) StopWatch() {
	r.T.Helper()
	var open []*Pair[W]
	for _, p := range r.Watches {
		if !p.Stopped {
			open = append(open, p)
		}
	}
	if len(open) == 0 {
		return
	}
	r.Finish(open[r.Rng.IntN(len(open))])
	r.Tally.Stops++
}

// FinishAll brings both peers to their store's revision and finishes every open pair.
func (r *Runner[W]) FinishAll() {
	r.T.Helper()
	r.peers.Sync()
	for _, p := range r.Watches {
		if !p.Stopped {
			r.Finish(p)
		}
	}
}

// Finish lets the pair's readers read, waits for what it owes, stops it and compares the peers'
// streams.
func (r *Runner[W]) Finish(p *Pair[W]) {
	r.T.Helper()
	p.PausedUntil = 0
	for _, s := range p.Sides {
		if len(s.Segs) > 0 {
			s.Last().unpause()
		}
	}
	r.SyncPair(p)
	p.Stopped = true
	for i, side := range p.Sides {
		for j, s := range side.Segs {
			if err := s.Stop(); err != nil {
				r.Fatalf("%s: %s, segment %d: %v", p.What, r.peers.Name(i), j+1, err)
			}
		}
	}
	if p.Refused || p.Failed || p.Restarted {
		return
	}
	r.compare(p)
}

// compare requires both peers' streams to be the same, up to a re-watch refused as too old.
func (r *Runner[W]) compare(p *Pair[W]) {
	r.T.Helper()
	var st Tally
	a, aOld := r.stream(p, 0, &st)
	b, bOld := r.stream(p, 1, &Tally{})
	r.Tally.Add(st)
	if aOld {
		b = b[:min(len(a), len(b))]
	}
	if bOld {
		a = a[:min(len(a), len(b))]
	}
	if d := cmp.Diff(a, b); d != "" {
		r.Failf("%s: the peers delivered different events (-%s +%s), over %d and %d watches:\n%s",
			p.What, r.peers.Name(0), r.peers.Name(1), len(p.Sides[0].Segs), len(p.Sides[1].Segs), d)
	}
}

// stream is what a client of peer i saw over every segment, as Describe renders it, without the
// bookmarks whose timing is the peer's own (each was judged by the model), and whether the last
// re-watch was refused as too old (then the other peer may have delivered more).
func (r *Runner[W]) stream(p *Pair[W], i int, st *Tally) (out []string, endsTooOld bool) {
	segs := p.Sides[i].Segs
	for j, s := range segs {
		events, _, _ := s.Snapshot()
		for _, e := range events {
			switch {
			case e.Type == watch.Bookmark && !e.InitialEventsEnd:
				st.Bookmarks++
				continue
			case e.Type == watch.Bookmark:
				st.EndBookmarks++
			case e.Type == watch.Error:
				st.Errors++
				if s.resume && j == len(segs)-1 && e.Status != nil && e.Status.Code == 410 {
					return out, true
				}
			default:
				st.Events++
			}
			out = append(out, r.peers.Describe(i, e))
		}
	}
	return out, false
}

// StopAll stops every watch still open, without judging it.
func (r *Runner[W]) StopAll() {
	for _, p := range r.Watches {
		for i, side := range p.Sides {
			for _, s := range side.Segs {
				if err := s.Stop(); err != nil {
					r.T.Errorf("seed %d: %s: %s: %v", r.Seed, p.What, r.peers.Name(i), err)
				}
			}
		}
	}
}
