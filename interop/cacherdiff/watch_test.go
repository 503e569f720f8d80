package cacherdiff

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/request"
	k8sstorage "k8s.io/apiserver/pkg/storage"

	"github.com/listwatch/listwatch/interop/internal/cachepair"
	"github.com/listwatch/listwatch/interop/internal/diffrun"
	"github.com/listwatch/listwatch/interop/internal/storageadapter"
	"github.com/listwatch/listwatch/proptest/kubemodel"
)

// minWatchChanSize is the least buffer upstream gives a cache watcher's input
// (pkg/storage/cacher/watch_cache_history.go minWatchChanSize): a watcher offered at most this many
// events since it started never blocks the dispatcher, so upstream never closes it as slow.
const minWatchChanSize = 10

// watchReq is one watch request as both caches receive it.
type watchReq struct {
	key  string
	opts k8sstorage.ListOptions
	req  kubemodel.Request
	// scope is the namespace and name the apiserver puts in the request's context for this watch
	// (request.WithNamespace, RequestInfo.Name): upstream's Cacher.Watch registers the watcher under
	// them (or under those its field selector pins).
	scopeNS, scopeName string
	// trigger is the spec.nodeName the field selector pins, under which upstream registers the
	// watcher instead (the pods' trigger index).
	trigger string
	// deadline, if set, is the first request's timeout.
	deadline time.Duration
}

// watchPair is one watch sent to both caches, and what each delivered.
type watchPair = diffrun.Pair[watchReq]

// openWatch sends both caches the same random watch.
func (r *runner) openWatch() {
	r.T.Helper()
	r.Sync()
	key, recursive := r.key()
	pred, sel := r.predicate()
	pred.AllowWatchBookmarks = r.Rng.IntN(2) == 0
	rv, future := r.revision()
	var sie *bool
	switch r.Rng.IntN(3) {
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
		if r.Rng.IntN(2) == 0 {
			deadline = time.Second
		}
	} else if r.Rng.IntN(10) == 0 {
		// Bookmarks come 2 s before the deadline, then the caches close the watch.
		deadline = 2500 * time.Millisecond
	}
	p := r.startPair(key, recursive, pred, sel, rv, sie, deadline)
	if p.Refused {
		return
	}
	if future {
		// The caches wait for the revision (or refuse after 3 s): judge the pair before writing on.
		r.SyncPair(p)
		return
	}
	if r.Rng.IntN(4) == 0 {
		r.Pause(p, r.stats.writes+20+r.Rng.IntN(60))
	}
}

// startPair opens the watch on both caches, in the context the apiserver gives a watch of its scope,
// and compares their refusals.
func (r *runner) startPair(key string, recursive bool, pred k8sstorage.SelectionPredicate, sel, rv string, sie *bool, deadline time.Duration) *watchPair {
	r.T.Helper()
	q := watchReq{key: key, deadline: deadline}
	q.opts = k8sstorage.ListOptions{ResourceVersion: rv, Predicate: pred, Recursive: recursive, SendInitialEvents: sie}
	q.req = kubemodel.Request{ResourceVersion: rv, SendInitialEvents: sie, AllowWatchBookmarks: pred.AllowWatchBookmarks}
	lwPred, err := storageadapter.Predicate(pred)
	if err != nil {
		r.T.Fatal(err)
	}
	if recursive && key != cachepair.ResourcePrefix {
		q.scopeNS = strings.Split(key, "/")[2]
	}
	if !recursive {
		parts := strings.Split(key, "/")
		q.scopeNS, q.scopeName = parts[2], parts[3]
	}
	if pred.IndexFields != nil {
		q.trigger, _ = pred.Field.RequiresExactMatch("spec.nodeName")
	}
	what := fmt.Sprintf("of %s recursive=%t %s %s deadline=%v", key, recursive, q.req, sel, deadline)
	return r.Open(what, kubemodel.Selection{Key: key, Recursive: recursive, Predicate: lwPred}, q)
}

// Name names cache i; with History, Sync (reads_test.go), Watch, Describe and Closed the runner is
// the shared runner's diffrun.Peers.
func (r *runner) Name(i int) string { return r.caches[i].Name }

// History is the model of both caches: they serve one store.
func (r *runner) History(int) *kubemodel.History { return r.h }

// Watch opens the pair's watch on cache i, in the context the apiserver gives a watch of that
// scope: as first asked (with its deadline), again from scratch, or resumed from a revision.
func (r *runner) Watch(p *watchPair, i int, o diffrun.Opening) (*diffrun.Segment, string) {
	r.T.Helper()
	opts, req, deadline := p.Req.opts, p.Req.req, p.Req.deadline
	if o.Again || o.Resume {
		deadline = 0
	}
	if o.Resume {
		opts.ResourceVersion, opts.SendInitialEvents = strconv.FormatInt(o.From, 10), nil
		req = kubemodel.Request{ResourceVersion: opts.ResourceVersion, AllowWatchBookmarks: req.AllowWatchBookmarks}
	}
	exp, err := r.h.ExpectCache(req, p.Sel, kubemodel.Cache{Lo: r.h.Rev, Hi: r.h.Rev, EtcdRev: r.h.Rev, ListRV: r.listRV})
	if err != nil && !errors.Is(err, kubemodel.ErrRequest) {
		r.T.Fatal(err)
	}
	ctx := r.ctx
	if p.Req.scopeNS != "" {
		ctx = request.WithNamespace(ctx, p.Req.scopeNS)
	}
	if p.Req.scopeName != "" {
		ctx = request.WithRequestInfo(ctx, &request.RequestInfo{IsResourceRequest: true, Verb: "watch", Resource: "pods",
			Namespace: p.Req.scopeNS, Name: p.Req.scopeName})
	}
	var cancel context.CancelFunc
	if deadline > 0 {
		ctx, cancel = context.WithTimeout(ctx, deadline)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	w, err := r.caches[i].Storage.Watch(ctx, p.Req.key, opts)
	if err != nil {
		cancel()
		return nil, describeError(err)
	}
	next := func() (kubemodel.Event, bool, error) {
		ev, ok := <-w.ResultChan()
		if !ok {
			return kubemodel.Event{}, false, nil
		}
		e, err := kubemodel.EventOf(ev)
		return e, true, err
	}
	return diffrun.NewSegment(exp, next, func() { cancel(); w.Stop() }), ""
}

// Describe is an event as both caches must deliver it.
func (r *runner) Describe(_ int, e kubemodel.Event) string {
	switch e.Type {
	case watch.Error, watch.Bookmark:
		return e.String()
	}
	return fmt.Sprintf("%s rv=%d %s", e.Type, e.RV, e.Object)
}

// Closed holds a cache's closing of a watch that had not delivered everything to upstream's rule.
// Upstream offers a watcher only the events of its scope (namespace and name, or trigger value) and
// closes it only when its input buffer is full while its goroutine holds an event it cannot hand
// over because the result buffer is full (minWatchChanSize each); the result buffer is still
// delivered after the close. So when upstream closes a watcher, at least the input buffer, the held
// event and the one that found the input full were never delivered: a cache that closes a watch
// with fewer of its scope's events undelivered (less a margin for bookmarks, which take buffer room
// too) closed one upstream keeps.
func (r *runner) Closed(p *watchPair, i int, v kubemodel.Verdict) {
	r.T.Helper()
	segs := p.Sides[i].Segs
	if p.Req.deadline > 0 && len(segs) == 1 {
		return // the deadline closed it
	}
	held := 0
	if segs[len(segs)-1].Exp.Replay {
		held = len(r.h.Initial(p.Sel, v.Start))
	}
	// What the watch replays from the history (from a resourceVersion in the past) fills the
	// buffers as live events do: count every write after the start.
	for _, w := range r.h.Writes {
		if w.Rev > v.Start && p.Req.offered(w) {
			held++
		}
	}
	held -= v.Events
	const bookmarkMargin = 2
	if limit := minWatchChanSize + 2 - 1 - bookmarkMargin; held <= limit {
		r.Failf("%s: %s closed the watch (segment %d) as a slow reader with at most %d events of its scope undelivered "+
			"(namespace %q, name %q, trigger %q); upstream offers a watcher only its scope's events and closes one only with "+
			"at least %d undelivered", p.What, r.Name(i), len(segs), held, p.Req.scopeNS, p.Req.scopeName,
			p.Req.trigger, minWatchChanSize+2)
	}
}

// offered says whether upstream's dispatcher offers the write to the request's watcher.
//
// Mirrors pkg/storage/cacher/cacher.go Watch (the scope) and startDispatching.
func (q watchReq) offered(w kubemodel.Write) bool {
	if q.trigger != "" {
		return (w.Cur != nil && w.Cur.Fields["spec.nodeName"] == q.trigger) || (w.Prev != nil && w.Prev.Fields["spec.nodeName"] == q.trigger)
	}
	ns, name := q.scopeNS, q.scopeName
	if f := q.opts.Predicate.Field; f != nil {
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
