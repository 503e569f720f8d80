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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/interop/internal/diffrun"
	"github.com/listwatch/listwatch/proptest/kubemodel"
	"github.com/listwatch/listwatch/storage"
)

// watchReq is one watch request as both servers receive it.
type watchReq struct {
	ns  string
	q   url.Values // everything but resourceVersion
	rv  asked
	sie *bool
}

// watchPair is one watch sent to both servers, and what each delivered.
type watchPair = diffrun.Pair[watchReq]

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
	r.T.Helper()
	r.Sync()
	w := watchReq{q: url.Values{}}
	if r.Rng.IntN(3) > 0 {
		w.ns = pick(r.Rng, namespaces)
	}
	var future bool
	w.rv, future = r.resourceVersion()
	if ls := pick(r.Rng, labelSels); ls != "" {
		w.q.Set("labelSelector", ls)
	}
	if fs := r.fieldSelector(); fs != "" {
		w.q.Set("fieldSelector", fs)
	}
	if r.Rng.IntN(2) == 0 {
		w.q.Set("allowWatchBookmarks", "true")
	}
	switch r.Rng.IntN(4) {
	case 1, 2:
		t := true
		w.sie = &t
		w.q.Set("sendInitialEvents", "true")
	case 3:
		f := false
		w.sie = &f
		w.q.Set("sendInitialEvents", "false")
	}
	if w.sie != nil && r.Rng.IntN(8) > 0 {
		w.q.Set("resourceVersionMatch", "NotOlderThan")
	}
	if r.Rng.IntN(10) == 0 {
		// The servers send a bookmark 2 s before the end, then end the watch.
		w.q.Set("timeoutSeconds", "3")
	}
	sel, err := selection(w.ns, w.q)
	if err != nil {
		// A malformed selector: both must refuse it.
		sel = kubemodel.Selection{Key: "/widgets/", Recursive: true, Predicate: storage.Everything}
	}
	p := r.Open(fmt.Sprintf("of %s rv=%s %s", collection(w.ns), w.rv, w.q.Encode()), sel, w)
	if !p.Refused && future {
		r.SyncPair(p)
	}
}

// Name names server i; with History, Sync (runner_test.go), Watch, Describe and Closed the runner is
// the shared runner's diffrun.Peers.
func (r *runner) Name(i int) string { return r.servers[i].name }

// History is server i's model, in its own resourceVersions.
func (r *runner) History(i int) *kubemodel.History { return r.servers[i].h }

// Watch opens the watch on server i: as first asked (again), or resumed from a revision without
// what only a first request says. A refusal (not 200) is returned as compared, else the stream is
// read into a new segment.
func (r *runner) Watch(p *watchPair, i int, o diffrun.Opening) (*diffrun.Segment, string) {
	r.T.Helper()
	s := r.servers[i]
	rv, sie, q := p.Req.rv.on(s), p.Req.sie, p.Req.q
	if o.Resume {
		rv, sie, q = strconv.FormatInt(o.From, 10), nil, url.Values{}
		for k, vs := range p.Req.q {
			if k != "sendInitialEvents" && k != "resourceVersionMatch" && k != "timeoutSeconds" {
				q[k] = vs
			}
		}
	}
	qq := url.Values{"watch": {"true"}}
	for k, v := range q {
		qq[k] = v
	}
	// An unset resourceVersion is sent empty on every other watch.
	if rv != "" || !o.Resume && p.Req.rv == "" && p.ID%2 == 0 {
		qq.Set("resourceVersion", rv)
	}
	req := kubemodel.Request{ResourceVersion: rv, SendInitialEvents: sie, AllowWatchBookmarks: q.Get("allowWatchBookmarks") == "true"}
	if q.Get("resourceVersionMatch") == "" {
		// The apiserver's defaulting (SetListOptionsDefaults), which both servers apply.
		req = req.WithWatchListDefaults()
	}
	exp, err := s.h.ExpectCache(req, p.Sel, kubemodel.Cache{Lo: s.h.Rev, Hi: s.h.Rev + 5, EtcdRev: s.h.Rev})
	if err != nil && !errors.Is(err, kubemodel.ErrRequest) {
		r.T.Fatal(err)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	hreq, err := http.NewRequestWithContext(ctx, "GET", s.base+collection(p.Req.ns)+"?"+qq.Encode(), nil)
	if err != nil {
		cancel()
		r.T.Fatal(err)
	}
	resp, err := s.c.Do(hreq)
	if err != nil {
		cancel()
		r.Fatalf("%s: %s: %v", p.What, s.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		out := response{code: resp.StatusCode, header: resp.Header, raw: raw}
		_ = json.Unmarshal(raw, &out.body)
		return nil, s.describe(out, rv)
	}
	return diffrun.NewSegment(exp, frames(resp.Body), cancel), ""
}

// frames reads a watch's body frame by frame, and closes it at its end.
func frames(body io.ReadCloser) diffrun.Next {
	dec := json.NewDecoder(body)
	return func() (kubemodel.Event, bool, error) {
		var frame struct {
			Type   watch.EventType `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&frame); err != nil {
			body.Close()
			if !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "canceled") {
				return kubemodel.Event{}, false, fmt.Errorf("reading a frame: %w", err)
			}
			return kubemodel.Event{}, false, nil
		}
		ev := watch.Event{Type: frame.Type}
		var err error
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
		if err != nil {
			err = fmt.Errorf("frame %s: %w", frame.Object, err)
		}
		return e, true, err
	}
}

// Describe is an event of server i as both must deliver it once normalized: resourceVersions by
// their place among the writes, objects without what is each server's own.
func (r *runner) Describe(i int, e kubemodel.Event) string {
	s := r.servers[i]
	switch e.Type {
	case watch.Bookmark:
		return "BOOKMARK (initial-events-end) " + s.rvName(strconv.FormatInt(e.RV, 10))
	case watch.Error:
		return fmt.Sprintf("ERROR %d %s %q", e.Status.Code, e.Status.Reason, s.normalMessage(e.Status.Message, ""))
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(e.Object), &obj); err != nil {
		return fmt.Sprintf("%s undecodable %s", e.Type, e.Object)
	}
	norm, _ := json.Marshal(s.normalize(obj, ""))
	return fmt.Sprintf("%s %s", e.Type, norm)
}

// Closed accepts every early end: the servers end a watch only at its timeoutSeconds, which the
// model judges, and neither is read slowly.
func (r *runner) Closed(*watchPair, int, kubemodel.Verdict) {}
