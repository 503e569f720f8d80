package diffrun

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/proptest/kubemodel"
	"github.com/listwatch/listwatch/storage"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakePeers are two peers over one history of two writes of /pods/a/p0 (at revisions 2 and 3).
// Each serves a watch from a revision with the canned events segments[i][n] for its segment n
// (ending it after them when the segment is not its last), or refuses it with refuse[i].
type fakePeers struct {
	t        testing.TB
	h        *kubemodel.History
	segments [2][][]kubemodel.Event
	refuse   [2]string
	// tag, when set, is added to peer 1's MODIFIED events as Describe renders them: a difference
	// the model cannot see, as a normalization that differs.
	tag    string
	served [2]int
	closed [2]int
	syncs  int
}

const podKey = "/pods/a/p0"

func render(rv int64) string { return `{"name":"p0","rv":` + strconv.FormatInt(rv, 10) + `}` }

func newFakePeers(t testing.TB) *fakePeers {
	h := kubemodel.NewHistory(1)
	for rev := int64(2); rev <= 3; rev++ {
		if err := h.Apply(rev, podKey, &kubemodel.Object{Key: podKey, Rev: rev, Render: render}); err != nil {
			t.Fatal(err)
		}
	}
	return &fakePeers{t: t, h: h}
}

var (
	added    = kubemodel.Event{Type: watch.Added, RV: 2, Object: render(2)}
	modified = kubemodel.Event{Type: watch.Modified, RV: 3, Object: render(3)}
	// wrong is a MODIFIED the history does not hold.
	wrong = kubemodel.Event{Type: watch.Modified, RV: 3, Object: render(4)}
)

var everything = kubemodel.Selection{Key: "/pods/", Recursive: true, Predicate: storage.Everything}

func (f *fakePeers) Name(i int) string              { return []string{"up", "lw"}[i] }
func (f *fakePeers) History(int) *kubemodel.History { return f.h }
func (f *fakePeers) Sync()                          { f.syncs++ }

func (f *fakePeers) Closed(_ *Pair[int64], i int, _ kubemodel.Verdict) { f.closed[i]++ }

func (f *fakePeers) Describe(i int, e kubemodel.Event) string {
	if i == 1 && e.Type == watch.Modified {
		return e.String() + f.tag
	}
	return e.String()
}

// Watch serves the pair's watch from revision p.Req, or from o.From when resumed.
func (f *fakePeers) Watch(p *Pair[int64], i int, o Opening) (*Segment, string) {
	if f.refuse[i] != "" {
		return nil, f.refuse[i]
	}
	from := p.Req
	if o.Resume {
		from = o.From
	}
	exp, err := f.h.ExpectCache(kubemodel.Request{ResourceVersion: strconv.FormatInt(from, 10)}, p.Sel,
		kubemodel.Cache{Lo: f.h.Rev, Hi: f.h.Rev, EtcdRev: f.h.Rev})
	if err != nil {
		f.t.Error(err) // not Fatal: Watch runs in the goroutine of testutil.Record
		return nil, err.Error()
	}
	n := f.served[i]
	f.served[i]++
	events, last := f.segments[i][n], n == len(f.segments[i])-1
	stopped := make(chan struct{})
	var once sync.Once
	next := func() (kubemodel.Event, bool, error) {
		if len(events) > 0 {
			e := events[0]
			events = events[1:]
			return e, true, nil
		}
		if last {
			<-stopped
		}
		return kubemodel.Event{}, false, nil
	}
	return NewSegment(exp, next, func() { once.Do(func() { close(stopped) }) }), ""
}

// run opens one pair of seed 7 on the peers and finishes it, recording what it reports.
func run(t *testing.T, f *fakePeers) (*testutil.Recorder, *Runner[int64]) {
	var r *Runner[int64]
	rec := testutil.Record(t, func(tb testing.TB) {
		r = New[int64](tb, 7, 7, f)
		t.Cleanup(r.StopAll)
		r.Finish(r.Open("of everything", everything, 1))
	})
	return rec, r
}

// TestSameStreams: peer up delivers both writes on one watch; peer lw closes its watch after the
// first, and the client resumes from it: the streams are the same, nothing is reported, and the
// tally counts the close and the resume.
func TestSameStreams(t *testing.T) {
	f := newFakePeers(t)
	f.segments[0] = [][]kubemodel.Event{{added, modified}}
	f.segments[1] = [][]kubemodel.Event{{added}, {modified}}
	rec, r := run(t, f)
	if len(rec.Errors()) > 0 {
		t.Fatalf("reported %q", rec.Errors())
	}
	want := Tally{Watches: 1, Events: 2, Terminations: 1, Resumes: 1}
	if r.Tally != want || f.closed != [2]int{0, 1} {
		t.Errorf("tally %+v, closes %v; want %+v, [0 1]", r.Tally, f.closed, want)
	}
}

// TestDifferentStreamsReported: both peers deliver what the model allows, but peer lw's MODIFIED
// differs as Describe renders it: the difference is reported once, naming the seed, the watch and
// both renderings.
func TestDifferentStreamsReported(t *testing.T) {
	f := newFakePeers(t)
	f.segments[0] = [][]kubemodel.Event{{added, modified}}
	f.segments[1] = [][]kubemodel.Event{{added, modified}}
	f.tag = " (tagged)"
	rec, r := run(t, f)
	if len(rec.Errors()) != 1 || r.Fails != 1 {
		t.Fatalf("reported %q, want one difference", rec.Errors())
	}
	msg := rec.Errors()[0]
	for _, want := range []string{"seed 7: watch 1 of everything: the peers delivered different events (-up +lw)", "(tagged)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the report %q does not say %q", msg, want)
		}
	}
}

// TestModelViolationNamesSegment: peer lw closes its first watch, and its re-watch delivers a
// MODIFIED the history does not hold: the failure names the seed, the watch, the peer and segment
// 2, and the streams are not compared.
func TestModelViolationNamesSegment(t *testing.T) {
	f := newFakePeers(t)
	f.segments[0] = [][]kubemodel.Event{{added, modified}}
	f.segments[1] = [][]kubemodel.Event{{added}, {wrong}}
	rec, r := run(t, f)
	if len(rec.Errors()) != 1 {
		t.Fatalf("reported %q, want one failure", rec.Errors())
	}
	if want := "seed 7: watch 1 of everything: lw (segment 2) delivered what upstream's semantics do not allow"; !strings.HasPrefix(rec.Errors()[0], want) {
		t.Errorf("the report %q does not start with %q", rec.Errors()[0], want)
	}
	if p := r.Watches[0]; !p.Failed || r.Tally.Events != 0 {
		t.Errorf("failed=%t, %d events compared: a failed pair is not compared", p.Failed, r.Tally.Events)
	}
}

// TestRefusalsCompared: peer up refuses the watch and peer lw serves it: the difference is
// reported with both answers, and the pair is not waited for.
func TestRefusalsCompared(t *testing.T) {
	f := newFakePeers(t)
	f.segments[1] = [][]kubemodel.Event{{added, modified}}
	f.refuse[0] = "410 Gone"
	rec, r := run(t, f)
	if len(rec.Errors()) != 1 || !r.Watches[0].Refused {
		t.Fatalf("reported %q, refused=%t; want one difference and a refused pair", rec.Errors(), r.Watches[0].Refused)
	}
	for _, want := range []string{"seed 7: watch 1 of everything: the answers differ (-up +lw)", "410 Gone", "a watch"} {
		if !strings.Contains(rec.Errors()[0], want) {
			t.Errorf("the report %q does not say %q", rec.Errors()[0], want)
		}
	}
}

// TestPlayStopsAfterManyDifferences: a seed whose every step reports a difference stops after 20,
// naming the seed, rather than running its steps out.
func TestPlayStopsAfterManyDifferences(t *testing.T) {
	f := newFakePeers(t)
	steps := 0
	rec := testutil.Record(t, func(tb testing.TB) {
		r := New[int64](tb, 7, 7, f)
		r.Play(100, func() {
			steps++
			r.Failf("difference %d", steps)
		})
	})
	if steps != maxFails+1 || rec.FatalMessage() != "seed 7: stopping after 21 differences" {
		t.Errorf("%d steps, fatal %q; want %d steps and a stop naming the seed", steps, rec.FatalMessage(), maxFails+1)
	}
}

// TestFuture: a seed sends two requests for a revision not yet written, then no more.
func TestFuture(t *testing.T) {
	r := New[int64](t, 7, 7, newFakePeers(t))
	var got []bool
	for range 3 {
		got = append(got, r.Future())
	}
	if want := []bool{true, true, false}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Future gave %v, want %v", got, want)
	}
}
