package chaintest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/listwatch/listwatch/httpwatch/watchclient"
	"github.com/listwatch/listwatch/internal/testutil"
)

// WatchSpec is one HTTP watch request for pods.
type WatchSpec struct {
	// Namespace scopes the watch; "" watches every namespace.
	Namespace string
	// Label and Field are the labelSelector and fieldSelector ("" for none).
	Label, Field string
	// ResourceVersion is the resourceVersion parameter; Unset leaves it out.
	ResourceVersion string
	Unset           bool
	// SendInitialEvents, when set, is sent with resourceVersionMatch=NotOlderThan.
	SendInitialEvents *bool
	// Bookmarks is allowWatchBookmarks.
	Bookmarks bool
	// TimeoutSeconds is timeoutSeconds; 0 leaves it out.
	TimeoutSeconds int64
	// Gzip lets the transport ask for gzip (and decompress it); otherwise Accept-Encoding is identity.
	Gzip bool
}

// Path is the request path and query.
func (s WatchSpec) Path() string {
	q := url.Values{"watch": {"true"}}
	if !s.Unset {
		q.Set("resourceVersion", s.ResourceVersion)
	}
	if s.Label != "" {
		q.Set("labelSelector", s.Label)
	}
	if s.Field != "" {
		q.Set("fieldSelector", s.Field)
	}
	if s.SendInitialEvents != nil {
		q.Set("sendInitialEvents", strconv.FormatBool(*s.SendInitialEvents))
		q.Set("resourceVersionMatch", "NotOlderThan")
	}
	if s.Bookmarks {
		q.Set("allowWatchBookmarks", "true")
	}
	if s.TimeoutSeconds > 0 {
		q.Set("timeoutSeconds", strconv.FormatInt(s.TimeoutSeconds, 10))
	}
	p := "/api/v1/pods"
	if s.Namespace != "" {
		p = "/api/v1/namespaces/" + s.Namespace + "/pods"
	}
	return p + "?" + q.Encode()
}

func (s WatchSpec) String() string {
	sie := "unset"
	if s.SendInitialEvents != nil {
		sie = strconv.FormatBool(*s.SendInitialEvents)
	}
	rv := strconv.Quote(s.ResourceVersion)
	if s.Unset {
		rv = "unset"
	}
	return fmt.Sprintf("ns=%q labels=%q fields=%q rv=%s sie=%s bookmarks=%t timeout=%d gzip=%t",
		s.Namespace, s.Label, s.Field, rv, sie, s.Bookmarks, s.TimeoutSeconds, s.Gzip)
}

// EndKind says how a watch stream ended.
type EndKind int

const (
	// Open: the stream has not ended (as far as the client has read).
	Open EndKind = iota
	// Clean: the body ended between two frames.
	Clean
	// Broken: the body ended inside a frame, or a frame was not a watch event.
	Broken
	// Disconnected: the client closed the connection.
	Disconnected
)

func (k EndKind) String() string {
	return [...]string{"open", "clean end", "broken", "disconnected"}[k]
}

// Watch is one HTTP watch as a client reads it: a goroutine reads and decodes the body into Frames
// unless Paused, in which case it stops reading the connection altogether.
type Watch struct {
	Spec WatchSpec
	// Code is the HTTP status; Body is the whole body when it is not 200.
	Code int
	Body []byte
	// Header holds the response headers.
	Header http.Header

	cancel context.CancelFunc
	body   io.ReadCloser
	done   chan struct{}

	mu           sync.Mutex
	cond         *sync.Cond
	frames       []watchclient.Frame
	end          EndKind
	endErr       error
	paused       bool
	disconnected bool
}

// OpenWatch sends the watch request and returns once the response headers arrived, calling step
// (if not nil) while it waits: step moves whatever fake clock the server may be waiting on.
func (c *Chain) OpenWatch(spec WatchSpec, step func()) (*Watch, error) {
	return c.openWatch(spec, step, false)
}

// OpenPausedWatch is OpenWatch for a client that does not read the body until Resume: not even the
// first frame is taken from the connection.
func (c *Chain) OpenPausedWatch(spec WatchSpec, step func()) (*Watch, error) {
	return c.openWatch(spec, step, true)
}

func (c *Chain) openWatch(spec WatchSpec, step func(), paused bool) (*Watch, error) {
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL+spec.Path(), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	if !spec.Gzip {
		req.Header.Set("Accept-Encoding", "identity")
	}
	type result struct {
		resp *http.Response
		err  error
	}
	answered := make(chan result, 1)
	go func() {
		resp, err := c.http.Do(req)
		answered <- result{resp, err}
	}()
	var res result
	deadline := time.Now().Add(testutil.WaitTimeout)
wait:
	for {
		select {
		case res = <-answered:
			break wait
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			<-answered
			return nil, fmt.Errorf("GET %s: no response headers within %v", spec.Path(), testutil.WaitTimeout)
		}
		if step != nil {
			step()
		}
		time.Sleep(time.Millisecond)
	}
	if res.err != nil {
		cancel()
		return nil, fmt.Errorf("GET %s: %w", spec.Path(), res.err)
	}
	w := &Watch{Spec: spec, Code: res.resp.StatusCode, Header: res.resp.Header, cancel: cancel, body: res.resp.Body,
		done: make(chan struct{}), paused: paused}
	w.cond = sync.NewCond(&w.mu)
	if w.Code != http.StatusOK {
		w.Body, err = io.ReadAll(res.resp.Body)
		res.resp.Body.Close()
		cancel()
		w.end = Clean
		close(w.done)
		return w, err
	}
	go w.read()
	return w, nil
}

// StartWatch opens a watch whose answer comes without waiting on any fake clock.
func (c *Chain) StartWatch(spec WatchSpec) (*Watch, error) { return c.OpenWatch(spec, nil) }

func (w *Watch) read() {
	defer close(w.done)
	dec := watchclient.NewDecoder(w.body)
	for {
		w.mu.Lock()
		for w.paused && !w.disconnected {
			w.cond.Wait()
		}
		if w.disconnected {
			w.end = Disconnected
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		f, err := dec.Decode()
		w.mu.Lock()
		if err != nil {
			switch {
			case w.disconnected:
				w.end = Disconnected
			case errors.Is(err, io.EOF):
				w.end = Clean
			default:
				w.end, w.endErr = Broken, err
			}
			w.mu.Unlock()
			return
		}
		w.frames = append(w.frames, f)
		w.mu.Unlock()
	}
}

// Frames returns the frames read so far and how the stream ended (Open if it has not).
func (w *Watch) Frames() ([]watchclient.Frame, EndKind, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.frames[:len(w.frames):len(w.frames)], w.end, w.endErr
}

// Len is how many frames were read so far.
func (w *Watch) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.frames)
}

// Counts is how many event frames (ADDED, MODIFIED, DELETED) and BOOKMARK frames were read so far.
func (w *Watch) Counts() (events, bookmarks int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.frames {
		if f.Type == "BOOKMARK" {
			bookmarks++
		} else if f.Type != "ERROR" {
			events++
		}
	}
	return events, bookmarks
}

// RetainedBytes is the memory the frames read so far hold: the test's own, to be told apart from
// the chain's when a test measures the heap.
func (w *Watch) RetainedBytes() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var n uint64
	for _, f := range w.frames {
		n += uint64(cap(f.Object))
	}
	return n + uint64(cap(w.frames))*uint64(unsafe.Sizeof(watchclient.Frame{}))
}

// Ended reports whether the stream ended.
func (w *Watch) Ended() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.end != Open
}

// Pause stops reading the connection; Resume reads on.
func (w *Watch) Pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.paused = true
}

// Resume reads the connection again after Pause.
func (w *Watch) Resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.paused = false
	w.cond.Broadcast()
}

// Paused reports whether the client stopped reading.
func (w *Watch) Paused() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.paused
}

// Disconnect closes the connection, if the stream has not ended, and waits for the reader.
func (w *Watch) Disconnect() {
	w.mu.Lock()
	w.disconnected = true
	w.cond.Broadcast()
	w.mu.Unlock()
	w.cancel()
	w.body.Close()
	<-w.done
}

// WaitEnd waits until the stream ends (the client must not be paused), calling step while it waits.
func (w *Watch) WaitEnd(step func()) error {
	return testutil.Poll("the watch "+w.Spec.String()+" to end", w.Ended, step)
}

// ErrorFrame reports whether the frames start with an ERROR frame, and returns its Status.
func ErrorFrame(frames []watchclient.Frame) (code int32, reason, message string, ok bool) {
	if len(frames) == 0 || frames[0].Type != "ERROR" {
		return 0, "", "", false
	}
	st, err := frames[0].Status()
	if err != nil {
		return 0, "", "", false
	}
	return st.Code, string(st.Reason), st.Message, true
}

// describeFrame is a short form of a frame for failure messages.
func describeFrame(f watchclient.Frame) string {
	if f.Type == "ERROR" {
		if st, err := f.Status(); err == nil {
			return fmt.Sprintf("ERROR %d %s %q", st.Code, st.Reason, st.Message)
		}
	}
	_, m, err := f.Meta()
	if err != nil {
		return fmt.Sprintf("%s <%v>", f.Type, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s rv=%s", f.Type, m.Namespace, m.Name, m.ResourceVersion)
	if len(m.Labels) > 0 {
		fmt.Fprintf(&b, " labels=%v", m.Labels)
	}
	if len(m.Annotations) > 0 {
		keys := make([]string, 0, len(m.Annotations))
		for k := range m.Annotations {
			if k == payloadAnnotation {
				keys = append(keys, fmt.Sprintf("%s(%d)", k, len(m.Annotations[k])))
				continue
			}
			keys = append(keys, k+"="+m.Annotations[k])
		}
		fmt.Fprintf(&b, " annotations=%v", keys)
	}
	return b.String()
}
