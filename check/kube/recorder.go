package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// initialEventsEndAnnotation marks the bookmark that ends a watch's initial events
// (k8s.io/apimachinery pkg/apis/meta/v1 InitialEventsAnnotationKey).
const initialEventsEndAnnotation = metav1.InitialEventsAnnotationKey

// ErrNoAnswer is wrapped by the errors of requests that got no answer (a timeout, a broken
// connection): their outcome is unknown.
var ErrNoAnswer = errors.New("kube: no answer")

// Error makes a Status the error of a request the server answered with it.
func (s *Status) Error() string { return s.String() }

// Recorder sends requests to one resource in one namespace of a Kubernetes API server over
// plain HTTP (the wire format of k8s.io/apiserver pkg/endpoints, JSON) and records each, with what
// the wire said, into a History. It is safe for concurrent use.
type Recorder struct {
	client *http.Client
	base   *url.URL
	res    Resource
	clock  clock.PassiveClock
	origin time.Time

	mu sync.Mutex
	h  History
}

// Discover asks the server's discovery document (/api/v1 or /apis/<group>/<version>) about a
// resource: its kind, and whether it is namespaced (cluster-scoped resources are refused, wrapping
// ErrInvalidConfig). The namespace is left empty.
func Discover(ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource) (Resource, error) {
	client, base, err := httpClientFor(cfg)
	if err != nil {
		return Resource{}, err
	}
	p := "/api/" + gvr.Version
	if gvr.Group != "" {
		p = "/apis/" + gvr.Group + "/" + gvr.Version
	}
	u := *base
	u.Path = path.Join(u.Path, p)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Resource{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return Resource{}, fmt.Errorf("discovery %s: %w", u.String(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Resource{}, fmt.Errorf("discovery %s: %w", u.String(), err)
	}
	if resp.StatusCode != http.StatusOK {
		return Resource{}, fmt.Errorf("%w: discovery %s: %s", ErrInvalidConfig, u.String(), statusOf(resp.StatusCode, body))
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return Resource{}, fmt.Errorf("discovery %s: %w", u.String(), err)
	}
	for _, r := range list.APIResources {
		if r.Name != gvr.Resource {
			continue
		}
		if !r.Namespaced {
			return Resource{}, fmt.Errorf("%w: %s is cluster-scoped: the workload needs a namespaced resource", ErrInvalidConfig, gvr)
		}
		return Resource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource, Kind: r.Kind}, nil
	}
	return Resource{}, fmt.Errorf("%w: the server does not serve %s (not in %s)", ErrInvalidConfig, gvr, u.String())
}

func httpClientFor(cfg *rest.Config) (*http.Client, *url.URL, error) {
	base, _, err := rest.DefaultServerURL(cfg.Host, "", schema.GroupVersion{}, rest.IsConfigTransportTLS(*cfg))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: host %q: %v", ErrInvalidConfig, cfg.Host, err)
	}
	// no client-side timeout: each request carries its own context, and watches last long
	c := rest.CopyConfig(cfg)
	c.Timeout = 0
	client, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return client, base, nil
}

// NewRecorder returns a Recorder of res (its Namespace set) on the server cfg names; its times
// come from clk (nil: the real clock).
func NewRecorder(cfg *rest.Config, res Resource, clk clock.PassiveClock) (*Recorder, error) {
	if res.Namespace == "" || res.Resource == "" || res.Version == "" || res.Kind == "" {
		return nil, fmt.Errorf("%w: resource %+v: version, resource, kind and namespace are required", ErrInvalidConfig, res)
	}
	client, base, err := httpClientFor(cfg)
	if err != nil {
		return nil, err
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Recorder{client: client, base: base, res: res, clock: clk, origin: clk.Now(), h: History{Resource: res}}, nil
}

func (r *Recorder) now() int64 { return int64(r.clock.Since(r.origin)) }

// Close releases the recorder's idle connections. Open watches must have been stopped.
func (r *Recorder) Close() { r.client.CloseIdleConnections() }

// History returns a copy of what was recorded so far.
func (r *Recorder) History() *History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.h
	h.Operations = append([]Operation(nil), r.h.Operations...)
	h.Watches = make([]Watch, len(r.h.Watches))
	for i, w := range r.h.Watches {
		w.Frames = append([]Frame(nil), w.Frames...)
		h.Watches[i] = w
	}
	return &h
}

// collection is the URL of the resource in the namespace, or of one object.
func (r *Recorder) url(name string, q url.Values) string {
	p := "/api/" + r.res.Version
	if r.res.Group != "" {
		p = "/apis/" + r.res.Group + "/" + r.res.Version
	}
	p += "/namespaces/" + r.res.Namespace + "/" + r.res.Resource
	if name != "" {
		p += "/" + name
	}
	u := *r.base
	u.Path = path.Join(u.Path, p)
	u.RawQuery = q.Encode()
	return u.String()
}

// wireObject is what the recorder reads of an object on the wire.
type wireObject struct {
	Kind     string            `json:"kind"`
	Metadata metav1.ObjectMeta `json:"metadata"`
}

func (o *wireObject) object() *Object {
	m := &o.Metadata
	return &Object{Name: m.Name, UID: string(m.UID), ResourceVersion: m.ResourceVersion, Labels: m.Labels, Annotations: m.Annotations}
}

// statusOf reads an error answer: its Status, or a Status made of the code and the body.
func statusOf(code int, body []byte) *Status {
	var s metav1.Status
	if err := json.Unmarshal(body, &s); err == nil && s.Kind == "Status" {
		c := int(s.Code)
		if c == 0 {
			c = code
		}
		return &Status{Code: c, Reason: string(s.Reason), Message: s.Message}
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return &Status{Code: code, Message: msg}
}

// begin records the call of an operation and returns its index.
func (r *Recorder) begin(op Operation) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Call = r.now()
	r.h.Operations = append(r.h.Operations, op)
	return len(r.h.Operations) - 1
}

// finish records an operation's answer.
func (r *Recorder) finish(i int, fill func(op *Operation)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op := &r.h.Operations[i]
	op.Return = r.now()
	fill(op)
}

// do sends a request and returns the status code and body; an error means no answer.
func (r *Recorder) do(ctx context.Context, method, u string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %v", ErrNoAnswer, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: reading the answer: %v", ErrNoAnswer, err)
	}
	return resp.StatusCode, b, nil
}

// objectRequest sends a write or a get and records it; it returns the object answered (nil for
// a delete answered with a Status), the Status of an error answer, or an error wrapping ErrNoAnswer.
func (r *Recorder) objectRequest(ctx context.Context, op Operation, method, u string, body any) (*Object, error) {
	i := r.begin(op)
	code, b, err := r.do(ctx, method, u, body)
	var result *Object
	var status *Status
	if err == nil {
		if code >= 200 && code < 300 {
			var w wireObject
			if jerr := json.Unmarshal(b, &w); jerr != nil {
				err = fmt.Errorf("%w: undecodable answer (%d): %v", ErrNoAnswer, code, jerr)
			} else if w.Kind != "Status" {
				result = w.object()
			}
		} else {
			status = statusOf(code, b)
		}
	}
	r.finish(i, func(o *Operation) {
		switch {
		case err != nil:
			o.Unknown = true
		default:
			o.Status, o.Result, o.Error = code, result, status
		}
	})
	switch {
	case err != nil:
		return nil, err
	case status != nil:
		return nil, status
	}
	return result, nil
}

func (r *Recorder) body(obj *Object, withVersion bool) map[string]any {
	meta := map[string]any{"name": obj.Name, "namespace": r.res.Namespace}
	if len(obj.Labels) > 0 {
		meta["labels"] = obj.Labels
	}
	if len(obj.Annotations) > 0 {
		meta["annotations"] = obj.Annotations
	}
	if withVersion {
		if obj.UID != "" {
			meta["uid"] = obj.UID
		}
		if obj.ResourceVersion != "" {
			meta["resourceVersion"] = obj.ResourceVersion
		}
	}
	return map[string]any{"apiVersion": r.res.APIVersion(), "kind": r.res.Kind, "metadata": meta}
}

// Create creates obj (its name, labels and annotations) and returns what the server answered.
func (r *Recorder) Create(ctx context.Context, client int, obj *Object) (*Object, error) {
	sent := &Object{Name: obj.Name, Labels: obj.Labels, Annotations: obj.Annotations}
	return r.objectRequest(ctx, Operation{Client: client, Verb: Create, Name: obj.Name, Object: sent}, http.MethodPost, r.url("", nil), r.body(sent, false))
}

// Update replaces obj; its uid and resourceVersion, when set, are the update's preconditions.
func (r *Recorder) Update(ctx context.Context, client int, obj *Object) (*Object, error) {
	sent := &Object{Name: obj.Name, UID: obj.UID, ResourceVersion: obj.ResourceVersion, Labels: obj.Labels, Annotations: obj.Annotations}
	return r.objectRequest(ctx, Operation{Client: client, Verb: Update, Name: obj.Name, Object: sent}, http.MethodPut, r.url(obj.Name, nil), r.body(sent, true))
}

// Delete deletes name, with preconditions if pre is set. It returns the deleted object when the
// server answers with it (nil when it answers a Status).
func (r *Recorder) Delete(ctx context.Context, client int, name string, pre *Precondition) (*Object, error) {
	var body any
	if pre != nil {
		p := map[string]string{}
		if pre.UID != "" {
			p["uid"] = pre.UID
		}
		if pre.ResourceVersion != "" {
			p["resourceVersion"] = pre.ResourceVersion
		}
		body = map[string]any{"preconditions": p}
	}
	return r.objectRequest(ctx, Operation{Client: client, Verb: Delete, Name: name, Precondition: pre}, http.MethodDelete, r.url(name, nil), body)
}

// Get reads name at resourceVersion rv ("" for the most recent).
func (r *Recorder) Get(ctx context.Context, client int, name, rv string) (*Object, error) {
	q := url.Values{}
	if rv != "" {
		q.Set("resourceVersion", rv)
	}
	return r.objectRequest(ctx, Operation{Client: client, Verb: Get, Name: name, Options: &ListOptions{ResourceVersion: rv}}, http.MethodGet, r.url(name, q), nil)
}

func (o *ListOptions) query(watch bool) url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	if watch {
		q.Set("watch", "true")
	}
	set("resourceVersion", o.ResourceVersion)
	set("resourceVersionMatch", o.ResourceVersionMatch)
	if o.Limit != 0 {
		q.Set("limit", strconv.FormatInt(o.Limit, 10))
	}
	set("continue", o.Continue)
	set("labelSelector", o.LabelSelector)
	set("fieldSelector", o.FieldSelector)
	if o.SendInitialEvents != nil {
		q.Set("sendInitialEvents", strconv.FormatBool(*o.SendInitialEvents))
	}
	if o.AllowWatchBookmarks {
		q.Set("allowWatchBookmarks", "true")
	}
	if o.TimeoutSeconds != 0 {
		q.Set("timeoutSeconds", strconv.FormatInt(o.TimeoutSeconds, 10))
	}
	return q
}

// wireList is what the recorder reads of a list.
type wireList struct {
	Metadata metav1.ListMeta `json:"metadata"`
	Items    []wireObject    `json:"items"`
}

func (r *Recorder) list(ctx context.Context, o ListOptions) (int, *ListResult, *Status, error) {
	code, b, err := r.do(ctx, http.MethodGet, r.url("", o.query(false)), nil)
	if err != nil {
		return 0, nil, nil, err
	}
	if code < 200 || code >= 300 {
		return code, nil, statusOf(code, b), nil
	}
	var wl wireList
	if err := json.Unmarshal(b, &wl); err != nil {
		return 0, nil, nil, fmt.Errorf("%w: undecodable list (%d): %v", ErrNoAnswer, code, err)
	}
	lr := &ListResult{ResourceVersion: wl.Metadata.ResourceVersion, Continue: wl.Metadata.Continue, RemainingItemCount: wl.Metadata.RemainingItemCount}
	for i := range wl.Items {
		lr.Items = append(lr.Items, *wl.Items[i].object())
	}
	return code, lr, nil, nil
}

// List lists the namespace with o and records the page.
func (r *Recorder) List(ctx context.Context, client int, o ListOptions) (*ListResult, error) {
	opts := o
	i := r.begin(Operation{Client: client, Verb: List, Options: &opts})
	code, lr, status, err := r.list(ctx, o)
	r.finish(i, func(op *Operation) {
		if err != nil {
			op.Unknown = true
			return
		}
		op.Status, op.List, op.Error = code, lr, status
	})
	switch {
	case err != nil:
		return nil, err
	case status != nil:
		return nil, status
	}
	return lr, nil
}

// ReadInitial reads the namespace's content with a consistent list (not an operation of the
// history) and records it as History.Initial, the state the check starts from.
func (r *Recorder) ReadInitial(ctx context.Context) (*ListResult, error) {
	code, lr, status, err := r.list(ctx, ListOptions{})
	switch {
	case err != nil:
		return nil, err
	case status != nil:
		return nil, fmt.Errorf("listing %s: %d: %w", r.res, code, status)
	}
	r.mu.Lock()
	r.h.Initial = lr
	r.mu.Unlock()
	return lr, nil
}

// Namespace creates the namespace (POST /api/v1/namespaces) and reports whether it did; a
// server that serves no namespaces (404) or has it already (409) is fine. Not recorded.
func (r *Recorder) Namespace(ctx context.Context) (bool, error) {
	u := *r.base
	u.Path = path.Join(u.Path, "/api/v1/namespaces")
	body := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": r.res.Namespace}}
	code, b, err := r.do(ctx, http.MethodPost, u.String(), body)
	switch {
	case err != nil:
		return false, err
	case code == http.StatusCreated || code == http.StatusOK:
		return true, nil
	case code == http.StatusNotFound || code == http.StatusConflict:
		return false, nil
	}
	return false, fmt.Errorf("creating namespace %s: %w", r.res.Namespace, statusOf(code, b))
}

// DeleteNamespace deletes the namespace Namespace created. Not recorded.
func (r *Recorder) DeleteNamespace(ctx context.Context) error {
	u := *r.base
	u.Path = path.Join(u.Path, "/api/v1/namespaces", r.res.Namespace)
	code, b, err := r.do(ctx, http.MethodDelete, u.String(), nil)
	if err != nil {
		return err
	}
	if code >= 300 && code != http.StatusNotFound {
		return fmt.Errorf("deleting namespace %s: %w", r.res.Namespace, statusOf(code, b))
	}
	return nil
}

// Resource is what the recorder records requests to.
func (r *Recorder) Resource() Resource { return r.res }

// DeleteObjects deletes every object of the resource in the namespace, for the cleanup after a
// run: it lists them and deletes each (an object already gone is not an error). Not recorded. It
// returns how many it deleted.
func (r *Recorder) DeleteObjects(ctx context.Context) (int, error) {
	code, b, err := r.do(ctx, http.MethodGet, r.url("", nil), nil)
	switch {
	case err != nil:
		return 0, err
	case code == http.StatusNotFound:
		return 0, nil
	case code != http.StatusOK:
		return 0, fmt.Errorf("listing %s in %s to delete them: %w", r.res.Resource, r.res.Namespace, statusOf(code, b))
	}
	var list struct {
		Items []wireObject `json:"items"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return 0, fmt.Errorf("listing %s in %s to delete them: %w", r.res.Resource, r.res.Namespace, err)
	}
	deleted := 0
	for _, o := range list.Items {
		code, b, err := r.do(ctx, http.MethodDelete, r.url(o.Metadata.Name, nil), nil)
		switch {
		case err != nil:
			return deleted, err
		case code < 300:
			deleted++
		case code != http.StatusNotFound:
			return deleted, fmt.Errorf("deleting %s %s: %w", r.res.Resource, o.Metadata.Name, statusOf(code, b))
		}
	}
	return deleted, nil
}

// namespaceGonePoll spaces WaitNamespaceGone's reads.
const namespaceGonePoll = 100 * time.Millisecond

// WaitNamespaceGone waits until the namespace is gone (a read of it answers 404), reading it every
// namespaceGonePoll on clk; false when ctx ends first (a namespace left Terminating).
func (r *Recorder) WaitNamespaceGone(ctx context.Context, clk clock.Clock) (bool, error) {
	u := *r.base
	u.Path = path.Join(u.Path, "/api/v1/namespaces", r.res.Namespace)
	for {
		code, b, err := r.do(ctx, http.MethodGet, u.String(), nil)
		switch {
		case ctx.Err() != nil:
			return false, nil
		case err != nil:
			return false, err
		case code == http.StatusNotFound:
			return true, nil
		case code != http.StatusOK:
			return false, fmt.Errorf("reading namespace %s: %w", r.res.Namespace, statusOf(code, b))
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-clk.After(namespaceGonePoll):
		}
	}
}

// WatchStream is one recorded watch. Next returns its frames; Stop ends it. Its owner must call
// Stop (after Next returned an error, too).
type WatchStream struct {
	r      *Recorder
	index  int
	body   io.ReadCloser
	dec    *json.Decoder
	ctx    context.Context
	cancel context.CancelFunc
	ended  bool
	mu     sync.Mutex
}

// Index is the watch's index in the history.
func (s *WatchStream) Index() int { return s.index }

// Watch starts a watch of the namespace with o; resumedFrom, if set, is the index of the watch
// whose delivered resourceVersion it starts from. An answer other than 200 is returned as its
// *Status (the watch is recorded with it); no answer, as an error wrapping ErrNoAnswer.
func (r *Recorder) Watch(ctx context.Context, client int, o ListOptions, resumedFrom *int) (*WatchStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	r.h.Watches = append(r.h.Watches, Watch{Client: client, Call: r.now(), Options: o, ResumedFrom: resumedFrom})
	i := len(r.h.Watches) - 1
	r.mu.Unlock()
	s := &WatchStream{r: r, index: i, ctx: ctx, cancel: cancel}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url("", o.query(true)), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		s.end(fmt.Sprintf("no answer: %v", err))
		cancel()
		return nil, fmt.Errorf("%w: %v", ErrNoAnswer, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		status := statusOf(resp.StatusCode, b)
		r.mu.Lock()
		w := &r.h.Watches[i]
		w.Status, w.Error = resp.StatusCode, status
		r.mu.Unlock()
		s.end(EndClosed)
		cancel()
		return nil, status
	}
	r.mu.Lock()
	r.h.Watches[i].Status = http.StatusOK
	r.mu.Unlock()
	s.body, s.dec = resp.Body, json.NewDecoder(resp.Body)
	return s, nil
}

func (s *WatchStream) end(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	s.r.mu.Lock()
	w := &s.r.h.Watches[s.index]
	w.End, w.EndReason = s.r.now(), reason
	s.r.mu.Unlock()
}

// Next returns the next frame, recorded. It returns io.EOF when the server ended the stream, and
// another error when the stream broke or was stopped.
func (s *WatchStream) Next() (Frame, error) {
	var ev struct {
		Type   string          `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	err := s.dec.Decode(&ev)
	if err != nil {
		if errors.Is(err, io.EOF) {
			s.end(EndClosed)
			return Frame{}, io.EOF
		}
		if s.ctx.Err() != nil {
			s.end(EndStopped)
		} else {
			s.end(fmt.Sprintf("broken: %v", err))
		}
		return Frame{}, err
	}
	f := Frame{Type: ev.Type}
	if ev.Type == Error {
		var st metav1.Status
		if jerr := json.Unmarshal(ev.Object, &st); jerr != nil {
			f.Status = &Status{Message: "undecodable ERROR object: " + jerr.Error()}
		} else {
			f.Status = &Status{Code: int(st.Code), Reason: string(st.Reason), Message: st.Message}
		}
	} else {
		var w wireObject
		if jerr := json.Unmarshal(ev.Object, &w); jerr != nil {
			s.end(fmt.Sprintf("broken: undecodable %s object: %v", ev.Type, jerr))
			return Frame{}, jerr
		}
		f.Object = w.object()
		if ev.Type == Bookmark {
			// a bookmark carries a resourceVersion and, at the end of the initial events, its
			// annotation; nothing else is the checker's business
			f.Object = &Object{ResourceVersion: w.Metadata.ResourceVersion,
				InitialEventsEnd: w.Metadata.Annotations[initialEventsEndAnnotation] == "true"}
		}
	}
	s.r.mu.Lock()
	f.Time = s.r.now()
	w := &s.r.h.Watches[s.index]
	w.Frames = append(w.Frames, f)
	s.r.mu.Unlock()
	return f, nil
}

// Stop ends the watch: the stream is closed and recorded as stopped by the client, unless it had
// ended already.
func (s *WatchStream) Stop() {
	s.end(EndStopped)
	s.cancel()
	if s.body != nil {
		s.body.Close()
	}
}
