package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/internal/runplan"
)

// Defaults of Config.
const (
	DefaultClients        = 4
	DefaultWatchers       = 4
	DefaultObjects        = 8
	DefaultRequestTimeout = 10 * time.Second
)

// Config describes a workload run.
type Config struct {
	// Seed seeds every client's and watcher's choices.
	Seed uint64
	// Clients send requests concurrently, each one at a time; at least one.
	Clients int
	// Watchers keep watches open, resuming and restarting them; zero or more.
	Watchers int
	// Objects is how many names the clients contend for. Default DefaultObjects.
	Objects int
	// Ops bounds the requests the clients send, split among them; 0: no bound.
	Ops int64
	// Duration bounds the run; 0: no bound. Without Ops or Duration, Run goes on until ctx ends.
	Duration time.Duration
	// RequestTimeout bounds each request; one that runs out has an unknown outcome.
	RequestTimeout time.Duration
	// Clock times the run. Default the real clock.
	Clock clock.WithTicker
	// Stats, if set, is updated while the run goes.
	Stats *Stats
}

// Validate checks the config; its errors wrap ErrInvalidConfig.
func (c Config) Validate() error {
	if err := c.load().Validate(ErrInvalidConfig); err != nil {
		return err
	}
	if c.Objects < 0 {
		return check.Invalid(ErrInvalidConfig, "objects %d: must not be negative", c.Objects)
	}
	return nil
}

// load is what c bounds as every workload does.
func (c Config) load() check.Load {
	return check.Load{Clients: c.Clients, Watchers: c.Watchers, Ops: c.Ops, Duration: c.Duration, RequestTimeout: c.RequestTimeout}
}

// Stats counts what a running workload did, safely for concurrent use.
type Stats struct {
	requests, failed, unknown, watches, frames atomic.Int64
}

// Snapshot is a Stats reading.
type Snapshot struct {
	Requests, Failed, Unknown, Watches, Frames int64
}

// Snapshot reads s.
func (s *Stats) Snapshot() Snapshot {
	return Snapshot{Requests: s.requests.Load(), Failed: s.failed.Load(), Unknown: s.unknown.Load(),
		Watches: s.watches.Load(), Frames: s.frames.Load()}
}

// Timing of the run's housekeeping.
const (
	// syncIdle: at the end, the watches are taken to be done once none has received a frame for
	// this long.
	syncIdle = 500 * time.Millisecond
	// syncTimeout bounds that wait.
	syncTimeout = 10 * time.Second
	// retryBackoff spaces a watcher's attempts after a refused or failed watch.
	retryBackoff = 50 * time.Millisecond
)

// The label the workload writes, which its selectors select on, and its values.
const bucketLabel = AnnotationPrefix + "bucket"

var buckets = []string{"a", "b", "c"}

// Roles seed the generators: each (role, index) gets its own stream.
const (
	roleClient uint64 = iota + 1
	roleWatcher
)

// runner is one run.
type runner struct {
	cfg   Config
	rec   *Recorder
	clock clock.WithTicker
	stats *Stats
	// reqCtx is never canceled: requests end by their own timeout, so that stopping does not
	// turn the request in flight into an unknown outcome
	reqCtx context.Context
	stop   chan struct{}
	// watchCtx ends the watches once the end is synced
	watchCtx context.Context
	ending   atomic.Bool

	mu        sync.Mutex
	lastFrame time.Time
	rvs       []string // resourceVersions seen, most recent last (a few hundred)
}

// Run runs the workload through rec: creates, conditional updates and deletes, gets and lists of
// every resourceVersion semantics, and watches of every start, until Ops requests are done,
// Duration is over or ctx ends; then it lets the watches catch up and stops them. It returns
// once every goroutine it started has ended, and fails only for an invalid cfg or when the
// initial list fails (the namespace cannot be read).
func Run(ctx context.Context, rec *Recorder, cfg Config) (Snapshot, error) {
	if err := cfg.Validate(); err != nil {
		return Snapshot{}, err
	}
	if cfg.Objects == 0 {
		cfg.Objects = DefaultObjects
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Stats == nil {
		cfg.Stats = &Stats{}
	}
	reqCtx := context.WithoutCancel(ctx)
	ictx, cancel := context.WithTimeout(reqCtx, cfg.RequestTimeout)
	initial, err := rec.ReadInitial(ictx)
	cancel()
	if err != nil {
		return Snapshot{}, err
	}
	watchCtx, endWatches := context.WithCancel(reqCtx)
	defer endWatches()
	r := &runner{cfg: cfg, rec: rec, clock: cfg.Clock, stats: cfg.Stats, reqCtx: reqCtx,
		stop: make(chan struct{}), watchCtx: watchCtx, lastFrame: cfg.Clock.Now(), rvs: []string{initial.ResourceVersion}}

	var clients, watchers sync.WaitGroup
	for i := range cfg.Watchers {
		rng := runplan.Rand(cfg.Seed, roleWatcher, i)
		if i == 0 {
			// the witness watches before any write
			first := ListOptions{ResourceVersion: initial.ResourceVersion, AllowWatchBookmarks: true, TimeoutSeconds: 2 + rng.Int64N(6)}
			s, err := r.rec.Watch(r.watchCtx, cfg.Clients, first, nil)
			r.stats.watches.Add(1)
			if err != nil {
				s = nil
			}
			watchers.Go(func() { r.witness(s, first, rng) })
			continue
		}
		watchers.Go(func() { r.watcher(i, rng) })
	}
	for i := range cfg.Clients {
		c := &kclient{r: r, id: i, rng: runplan.Rand(cfg.Seed, roleClient, i), left: runplan.Share(cfg.Ops, cfg.Clients, i), cache: map[string]*Object{}}
		clients.Go(c.run)
	}
	// the bound: Duration, ctx, or every client done
	done := make(chan struct{})
	go func() { clients.Wait(); close(done) }()
	var timer <-chan time.Time
	if cfg.Duration > 0 {
		t := r.clock.NewTimer(cfg.Duration)
		defer t.Stop()
		timer = t.C()
	}
	select {
	case <-done:
	case <-timer:
	case <-ctx.Done():
	}
	close(r.stop)
	<-done
	r.ending.Store(true)
	r.syncEnd()
	endWatches()
	watchers.Wait()
	return cfg.Stats.Snapshot(), nil
}

// syncEnd waits until no watch has received a frame for syncIdle (at most syncTimeout), so that
// each watch has the changes made before the end.
func (r *runner) syncEnd() {
	deadline := r.clock.Now().Add(syncTimeout)
	t := r.clock.NewTicker(syncIdle / 5)
	defer t.Stop()
	for r.clock.Now().Before(deadline) {
		r.mu.Lock()
		idle := r.clock.Since(r.lastFrame) >= syncIdle
		r.mu.Unlock()
		if idle {
			return
		}
		<-t.C()
	}
}

func (r *runner) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// sawRV remembers a resourceVersion a request showed, for the requests at a resourceVersion.
func (r *runner) sawRV(rv string) {
	if rv == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rvs = append(r.rvs, rv)
	if len(r.rvs) > 512 {
		r.rvs = append(r.rvs[:0], r.rvs[256:]...)
	}
}

// pastRV draws a resourceVersion seen: mostly a recent one, sometimes an older one.
func (r *runner) pastRV(rng *rand.Rand) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.rvs)
	if rng.IntN(4) == 0 {
		return r.rvs[rng.IntN(n)]
	}
	return r.rvs[n-1-rng.IntN(min(n, 8))]
}

func (r *runner) request() (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.reqCtx, r.cfg.RequestTimeout)
}

// count updates the stats after a request.
func (r *runner) count(err error) {
	r.stats.requests.Add(1)
	switch {
	case errors.Is(err, ErrNoAnswer):
		r.stats.unknown.Add(1)
	case err != nil:
		r.stats.failed.Add(1)
	}
}

// kclient is one client: creates, updates, deletes, gets and lists, from its own generator.
type kclient struct {
	r     *runner
	id    int
	rng   *rand.Rand
	left  int64 // requests left; -1: no bound
	seq   int
	cache map[string]*Object // the last state seen of each name
}

func (c *kclient) more() bool { return c.left != 0 && !c.r.stopped() }

func (c *kclient) spend() bool {
	if !c.more() {
		return false
	}
	if c.left > 0 {
		c.left--
	}
	return true
}

func (c *kclient) run() {
	for c.more() {
		name := "obj-" + strconv.Itoa(c.rng.IntN(c.r.cfg.Objects))
		switch p := c.rng.IntN(100); {
		case p < 20:
			c.create(name)
		case p < 50:
			c.update(name)
		case p < 62:
			c.delete(name)
		case p < 72:
			c.get(name)
		default:
			c.list()
		}
	}
}

// content draws what a write writes: a bucket label and the write's own annotation.
func (c *kclient) content(name string) *Object {
	c.seq++
	return &Object{Name: name,
		Labels: map[string]string{bucketLabel: buckets[c.rng.IntN(len(buckets))]},
		Annotations: map[string]string{WriteAnnotation: fmt.Sprintf("c%d-%d", c.id, c.seq),
			AnnotationPrefix + "value": strconv.Itoa(c.rng.IntN(1000))}}
}

func (c *kclient) remember(name string, o *Object, err error) {
	var st *Status
	switch {
	case err == nil && o != nil:
		c.cache[name] = o
		c.r.sawRV(o.ResourceVersion)
	case errors.As(err, &st) && st.Code == http.StatusNotFound:
		delete(c.cache, name)
	}
}

func (c *kclient) create(name string) {
	if !c.spend() {
		return
	}
	ctx, cancel := c.r.request()
	defer cancel()
	o, err := c.r.rec.Create(ctx, c.id, c.content(name))
	c.r.count(err)
	c.remember(name, o, err)
}

// current is the state an update or delete starts from: the cached copy half of the time (as
// the apiserver starts from its watch cache's), else a get.
func (c *kclient) current(name string) *Object {
	if o := c.cache[name]; o != nil && c.rng.IntN(2) == 0 {
		return o
	}
	return c.get(name)
}

// update replaces name with new content, on condition of the uid and resourceVersion it read,
// retrying from a fresh read on a conflict, as a client's read-modify-write loop does.
func (c *kclient) update(name string) {
	cur := c.current(name)
	for attempt := 0; cur != nil && attempt < 3 && c.spend(); attempt++ {
		next := c.content(name)
		next.ResourceVersion = cur.ResourceVersion
		if c.rng.IntN(2) == 0 {
			next.UID = cur.UID
		}
		ctx, cancel := c.r.request()
		o, err := c.r.rec.Update(ctx, c.id, next)
		cancel()
		c.r.count(err)
		c.remember(name, o, err)
		var st *Status
		if !errors.As(err, &st) || st.Code != http.StatusConflict {
			return
		}
		cur = c.get(name)
	}
}

func (c *kclient) delete(name string) {
	var pre *Precondition
	if c.rng.IntN(10) < 7 {
		cur := c.current(name)
		if cur == nil {
			return
		}
		pre = &Precondition{ResourceVersion: cur.ResourceVersion}
		if c.rng.IntN(3) == 0 {
			pre.UID = cur.UID
		}
	}
	if !c.spend() {
		return
	}
	ctx, cancel := c.r.request()
	defer cancel()
	_, err := c.r.rec.Delete(ctx, c.id, name, pre)
	c.r.count(err)
	if err == nil {
		delete(c.cache, name)
	}
}

// get reads name: mostly consistently, sometimes at "0" or not older than a past version.
func (c *kclient) get(name string) *Object {
	if !c.spend() {
		return nil
	}
	rv := ""
	switch p := c.rng.IntN(10); {
	case p == 0:
		rv = "0"
	case p == 1:
		rv = c.r.pastRV(c.rng)
	}
	ctx, cancel := c.r.request()
	defer cancel()
	o, err := c.r.rec.Get(ctx, c.id, name, rv)
	c.r.count(err)
	c.remember(name, o, err)
	if err != nil {
		return nil
	}
	return o
}

// selector draws a list's or watch's selectors: mostly none, else on the bucket label or a name.
func drawSelector(rng *rand.Rand, objects int, o *ListOptions) {
	switch p := rng.IntN(10); {
	case p < 2:
		b := buckets[rng.IntN(len(buckets))]
		o.LabelSelector = []string{bucketLabel + "=" + b, bucketLabel + "!=" + b,
			bucketLabel + " in (a,b)", bucketLabel + " notin (" + b + ")"}[rng.IntN(4)]
	case p == 2:
		o.FieldSelector = "metadata.name=obj-" + strconv.Itoa(rng.IntN(objects))
	case p == 3:
		o.LabelSelector = bucketLabel + "=" + buckets[rng.IntN(len(buckets))]
		o.FieldSelector = "metadata.name!=obj-" + strconv.Itoa(rng.IntN(objects))
	}
}

// list draws one list of every resourceVersion semantics, limit and selector, and follows its
// continue tokens (sometimes not to the end).
func (c *kclient) list() {
	o := ListOptions{}
	switch p := c.rng.IntN(100); {
	case p < 30: // most recent
	case p < 45:
		o.ResourceVersion = "0"
		if c.rng.IntN(2) == 0 {
			o.ResourceVersionMatch = MatchNotOlderThan
		}
	case p < 65:
		o.ResourceVersion, o.ResourceVersionMatch = c.r.pastRV(c.rng), MatchExact
	case p < 80:
		o.ResourceVersion, o.ResourceVersionMatch = c.r.pastRV(c.rng), MatchNotOlderThan
	case p < 92: // legacy: exact with a limit, not older than without
		o.ResourceVersion = c.r.pastRV(c.rng)
	case p < 95: // far in the past: below the retained window of a long-running server
		o.ResourceVersion, o.ResourceVersionMatch = "1", MatchExact
	default: // refused combinations
		switch c.rng.IntN(4) {
		case 0:
			o.ResourceVersionMatch = MatchExact
		case 1:
			o.ResourceVersion, o.ResourceVersionMatch = "0", MatchExact
		case 2:
			o.ResourceVersion, o.ResourceVersionMatch = c.r.pastRV(c.rng), "Newest"
		default:
			t := true
			o.SendInitialEvents = &t
		}
	}
	switch p := c.rng.IntN(10); {
	case p < 4:
	case p < 8:
		o.Limit = 1 + c.rng.Int64N(3)
	default:
		o.Limit = 500
	}
	drawSelector(c.rng, c.r.cfg.Objects, &o)
	abandon := c.rng.IntN(10) == 0
	for page := 0; c.spend(); page++ {
		ctx, cancel := c.r.request()
		lr, err := c.r.rec.List(ctx, c.id, o)
		cancel()
		c.r.count(err)
		if err != nil {
			return
		}
		if page == 0 {
			c.r.sawRV(lr.ResourceVersion)
		}
		if lr.Continue == "" || (abandon && page == 0) {
			return
		}
		next := ListOptions{Limit: o.Limit, Continue: lr.Continue, LabelSelector: o.LabelSelector, FieldSelector: o.FieldSelector}
		switch c.rng.IntN(10) {
		case 0: // allowed with a continue token
			next.ResourceVersion = "0"
		case 1: // refused with a continue token: 400
			next.ResourceVersion = lr.ResourceVersion
		}
		o = next
	}
}

// watcher keeps a watch open: it starts one of a drawn kind, reads it until the server ends it
// or a drawn number of frames came, resumes from the last resourceVersion delivered, and starts
// afresh after a 410 or a refusal.
func (r *runner) watcher(id int, rng *rand.Rand) {
	client := r.cfg.Clients + id
	var resume *ListOptions
	var from *int
	resumes := 0     // resumptions left before a fresh start
	first := id == 1 // the second watcher starts from far in the past: a 410 on most servers
	for !r.watchEnded() {
		if resumes == 0 && !r.ending.Load() {
			resume = nil
		}
		o := ListOptions{}
		if resume != nil {
			o = *resume
		} else {
			o = r.drawWatch(rng, client)
			if first {
				o = ListOptions{ResourceVersion: "1", AllowWatchBookmarks: true}
				first = false
			}
			from, resumes = nil, 1+rng.IntN(4)
			if o.ResourceVersion == "-" { // the list failed
				r.sleep(retryBackoff)
				continue
			}
		}
		o.TimeoutSeconds = 2 + rng.Int64N(6)
		s, err := r.rec.Watch(r.watchCtx, client, o, from)
		r.stats.watches.Add(1)
		if err != nil {
			resume, from = nil, nil
			r.sleep(retryBackoff)
			continue
		}
		last, expired := r.read(s, 5+rng.IntN(40), o)
		s.Stop()
		switch {
		case expired || last == "":
			resume, from = nil, nil
		default:
			idx := s.Index()
			resume = &ListOptions{ResourceVersion: last, LabelSelector: o.LabelSelector, FieldSelector: o.FieldSelector,
				AllowWatchBookmarks: o.AllowWatchBookmarks}
			from = &idx
			resumes--
		}
	}
}

// witness is the first watcher: one unfiltered watch from before the first write, resumed from
// the last resourceVersion delivered whenever it ends, restarted from a list only after a 410, so
// that every delete (whose answer, a Status, carries no resourceVersion) is seen by a watch.
func (r *runner) witness(s *WatchStream, o ListOptions, rng *rand.Rand) {
	client := r.cfg.Clients
	for {
		last, expired := "", false
		if s != nil {
			last, expired = r.read(s, math.MaxInt, o)
			s.Stop()
		}
		if r.watchEnded() {
			return
		}
		from := (*int)(nil)
		switch {
		case s != nil && !expired && last != "":
			idx := s.Index()
			from = &idx
			o = ListOptions{ResourceVersion: last, AllowWatchBookmarks: true}
		default:
			if s == nil {
				r.sleep(retryBackoff)
			}
			ctx, cancel := r.request()
			lr, err := r.rec.List(ctx, client, ListOptions{})
			cancel()
			r.count(err)
			if err != nil {
				s = nil
				continue
			}
			o = ListOptions{ResourceVersion: lr.ResourceVersion, AllowWatchBookmarks: true}
		}
		o.TimeoutSeconds = 2 + rng.Int64N(6)
		var err error
		s, err = r.rec.Watch(r.watchCtx, client, o, from)
		r.stats.watches.Add(1)
		if err != nil {
			s = nil
		}
	}
}

// drawWatch draws a fresh watch: from a list's resourceVersion (a reflector), a streaming list
// (sendInitialEvents), legacy starts from "" and "0", from "now", from far in the past, or refused
// options. A ResourceVersion of "-" says the list before it failed.
func (r *runner) drawWatch(rng *rand.Rand, client int) ListOptions {
	o := ListOptions{AllowWatchBookmarks: rng.IntN(10) < 7}
	drawSelector(rng, r.cfg.Objects, &o)
	yes, no := true, false
	switch p := rng.IntN(100); {
	case p < 25: // a reflector: list, then watch from its resourceVersion
		ctx, cancel := r.request()
		lr, err := r.rec.List(ctx, client, ListOptions{LabelSelector: o.LabelSelector, FieldSelector: o.FieldSelector})
		cancel()
		r.count(err)
		if err != nil {
			o.ResourceVersion = "-"
			return o
		}
		r.sawRV(lr.ResourceVersion)
		o.ResourceVersion = lr.ResourceVersion
	case p < 45: // client-go's streaming list
		o.SendInitialEvents, o.ResourceVersionMatch, o.AllowWatchBookmarks = &yes, MatchNotOlderThan, true
	case p < 55:
		o.SendInitialEvents, o.ResourceVersionMatch = &yes, MatchNotOlderThan
		o.ResourceVersion = r.pastRV(rng)
	case p < 70:
		o.ResourceVersion = "0"
	case p < 80:
	case p < 88:
		o.SendInitialEvents, o.ResourceVersionMatch = &no, MatchNotOlderThan
		if rng.IntN(2) == 0 {
			o.ResourceVersion = "0"
		}
	case p < 90:
		o.ResourceVersion = r.pastRV(rng)
	case p < 97: // far in the past: below the watch cache's window
		o.ResourceVersion = "1"
	default: // refused: sendInitialEvents without resourceVersionMatch
		o.SendInitialEvents = &yes
	}
	return o
}

// read reads s until it ends or max frames came (more once the run is ending, so that the
// watches catch up). It returns the last resourceVersion delivered (event or bookmark) and
// whether the watch ended with a 410.
func (r *runner) read(s *WatchStream, maxFrames int, o ListOptions) (string, bool) {
	last := ""
	class := watchClass(&o)
	if class == startExact {
		last = o.ResourceVersion
	}
	// the initial events carry their objects' resourceVersions, not a point to resume from:
	// that is the initial-events-end bookmark's
	live := class != startInitial
	for n := 0; ; n++ {
		if n >= maxFrames && !r.ending.Load() {
			return last, false
		}
		f, err := s.Next()
		if err != nil {
			if err != io.EOF {
				return "", false
			}
			return last, false
		}
		r.stats.frames.Add(1)
		r.mu.Lock()
		r.lastFrame = r.clock.Now()
		r.mu.Unlock()
		if f.Type == Error {
			return "", f.Status.Code == http.StatusGone
		}
		if f.Type == Bookmark && f.Object.InitialEventsEnd {
			live = true
		}
		if live {
			last = f.Object.ResourceVersion
			r.sawRV(last)
		}
	}
}

func (r *runner) watchEnded() bool { return r.watchCtx.Err() != nil }

func (r *runner) sleep(d time.Duration) {
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
	case <-r.watchCtx.Done():
	}
}
