package httpdiff

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coder/websocket"
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
	// ws sends the watch over a websocket (each event one message) instead of a chunked stream.
	ws bool
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
	w.ws = r.Rng.IntN(4) == 0
	sel, err := selection(w.ns, w.q)
	if err != nil {
		// A malformed selector: both must refuse it.
		sel = kubemodel.Selection{Key: "/widgets/", Recursive: true, Predicate: storage.Everything}
	}
	over := ""
	if w.ws {
		over = " over a websocket"
	}
	p := r.Open(fmt.Sprintf("of %s rv=%s %s%s", collection(w.ns), w.rv, w.q.Encode(), over), sel, w)
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
	// The watch's start is bounded by the store's revision once it is open: both servers register
	// a watcher before they answer (upstream's Cacher.Watch adds it before the handler writes the
	// headers), and the test writes nothing while it opens. A bound taken before the request would
	// miss what a server writes of its own meanwhile; a looser one lets a watch that starts "Any"
	// (resourceVersion 0 without initial events) skip the writes made after it opened.
	expect := func() kubemodel.Expectation {
		exp, err := s.h.ExpectCache(req, p.Sel, kubemodel.Cache{Lo: s.h.Rev, Hi: max(s.h.Rev, s.st.Rev()), EtcdRev: s.h.Rev})
		if err != nil && !errors.Is(err, kubemodel.ErrRequest) {
			r.T.Fatal(err)
		}
		return exp
	}
	u := s.base + collection(p.Req.ns) + "?" + qq.Encode()
	if p.Req.ws {
		return r.watchWS(p, s, u, expect, rv)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	hreq, err := http.NewRequestWithContext(ctx, "GET", u, nil)
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
	return diffrun.NewSegment(expect(), frames(resp.Body), cancel), ""
}

// frames reads a watch's body frame by frame, and closes it at its end.
func frames(body io.ReadCloser) diffrun.Next {
	dec := json.NewDecoder(body)
	return func() (kubemodel.Event, bool, error) {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			body.Close()
			if !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "canceled") {
				return kubemodel.Event{}, false, fmt.Errorf("reading a frame: %w", err)
			}
			return kubemodel.Event{}, false, nil
		}
		e, err := eventOf(raw)
		return e, true, err
	}
}

// watchWS opens the watch over a websocket, as a browser or kubectl's websocket client does (an
// Origin is sent: upstream's handshake refuses a request without one). A refusal before the upgrade
// is returned as compared, else the messages are read into a new segment.
func (r *runner) watchWS(p *watchPair, s *server, u string, expect func() kubemodel.Expectation, rv string) (*diffrun.Segment, string) {
	r.T.Helper()
	ctx, cancel := context.WithCancel(r.ctx)
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(u, "http"), &websocket.DialOptions{
		HTTPClient: s.c, HTTPHeader: http.Header{"Origin": {s.base}}, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		defer cancel()
		if resp == nil || resp.StatusCode == http.StatusSwitchingProtocols {
			r.Fatalf("%s: %s: %v", p.What, s.name, err)
		}
		// The dialer keeps the first 1024 bytes of a refusal's body: enough for a Status.
		raw, _ := io.ReadAll(resp.Body)
		out := response{code: resp.StatusCode, header: resp.Header, raw: raw}
		_ = json.Unmarshal(raw, &out.body)
		return nil, s.describe(out, rv)
	}
	conn.SetReadLimit(-1)
	return diffrun.NewSegment(expect(), messages(ctx, conn), func() {
		cancel()
		conn.CloseNow()
	}), ""
}

// messages reads a websocket watch message by message: each must be a text message holding one
// event's JSON and its newline, as upstream's HandleWS sends it. A normal closure (the watch's
// timeoutSeconds) or the test's cancel ends it cleanly.
func messages(ctx context.Context, conn *websocket.Conn) diffrun.Next {
	return func() (kubemodel.Event, bool, error) {
		typ, msg, err := conn.Read(ctx)
		if err != nil {
			conn.CloseNow()
			if ctx.Err() != nil || websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				return kubemodel.Event{}, false, nil
			}
			return kubemodel.Event{}, false, fmt.Errorf("reading a message: %w", err)
		}
		e, err := eventOf(msg)
		if err == nil && (typ != websocket.MessageText || bytes.IndexByte(msg, '\n') != len(msg)-1) {
			err = fmt.Errorf("a %v message %q: want a text message of one event and its newline", typ, msg)
		}
		return e, true, err
	}
}

// eventOf is one watch frame (type and object) as the model reads it.
func eventOf(raw []byte) (kubemodel.Event, error) {
	var frame struct {
		Type   watch.EventType `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(raw, &frame); err != nil {
		return kubemodel.Event{}, fmt.Errorf("frame %s: %w", raw, err)
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
	return e, err
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
