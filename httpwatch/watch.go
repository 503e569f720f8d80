package httpwatch

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/coder/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// InitialEventsEndAnnotation marks the BOOKMARK that ends a watch-list's initial events.
const InitialEventsEndAnnotation = "k8s.io/initial-events-end"

// watchTimeout is how long a watch lasts: timeoutSeconds when given and non-zero, else
// minRequestTimeout stretched by a factor in [1, 2) so that watches opened together do not all end
// together.
//
// Mirrors handlers.handleWatch.
func watchTimeout(timeoutSeconds *int64, minRequestTimeout time.Duration, jitter func() float64) time.Duration {
	timeout := time.Duration(0)
	if timeoutSeconds != nil {
		timeout = time.Duration(*timeoutSeconds) * time.Second
	}
	if timeout == 0 && minRequestTimeout > 0 {
		timeout = time.Duration(float64(minRequestTimeout) * (jitter() + 1.0))
	}
	return timeout
}

// isListWatchRequest mirrors handlers.isListWatchRequest.
func isListWatchRequest(opts *metainternalversion.ListOptions) bool {
	return opts.SendInitialEvents != nil && *opts.SendInitialEvents && opts.AllowWatchBookmarks
}

// serveWatch starts the watch and streams it, over a websocket if the request asks for one.
//
// Mirrors handlers.handleWatch and serveWatchHandler.
func (h *resourceHandler) serveWatch(w http.ResponseWriter, req *http.Request, namespace string, opts *metainternalversion.ListOptions) {
	n, err := h.ep.negotiateOutput(req, true)
	if err != nil {
		h.writeError(w, req, err)
		return
	}
	var tableOptions *metav1.TableOptions
	if n.convert != nil && n.convert.Kind == asTable {
		if tableOptions, err = h.tableOptions(n); err != nil {
			h.writeError(w, req, err)
			return
		}
	}
	timeout := watchTimeout(opts.TimeoutSeconds, h.server.minRequestTimeout, h.server.jitter)
	// The deadline travels down to the storage: the watch cache times its last bookmark by it.
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	defer cancel()
	watcher, err := h.watch(ctx, namespace, opts)
	if err != nil {
		h.writeError(w, req, err)
		return
	}
	defer watcher.Stop()
	s := &watchServer{
		server:      h.server,
		res:         h.res,
		watcher:     watcher,
		timeout:     timeout,
		isWatchList: isListWatchRequest(opts),
		format:      n.format,
		recorder:    h.watchEvents,
	}
	if n.convert != nil {
		s.transform = func(obj runtime.Object) (runtime.Object, error) {
			if _, ok := obj.(*metav1.Status); ok {
				return obj, nil
			}
			if tableOptions != nil {
				out, err := h.asTable(obj, tableOptions, n.convert.GroupVersion())
				// Only the first event carries the column definitions.
				tableOptions.NoHeaders = true
				return out, err
			}
			return h.transform(obj, n)
		}
	}
	if isWebSocketRequest(req) {
		w.Header().Set("Content-Type", s.mediaType())
		s.handleWS(w, req)
		return
	}
	s.handleHTTP(w, req)
}

// watchServer streams one watch.
//
// Mirrors handlers.WatchServer.
type watchServer struct {
	server      *Server
	res         Resource
	watcher     watch.Interface
	timeout     time.Duration
	isWatchList bool
	// format is JSON or protobuf.
	format *format
	// transform converts each event's object (Table, PartialObjectMetadata); nil for none.
	transform func(runtime.Object) (runtime.Object, error)
	// recorder counts the events sent and their sizes; nil without metrics.
	recorder *watchEventRecorder
}

// mediaType is the Content-Type of the stream.
//
// Mirrors serveWatchHandler's choice: JSON as it is, any other format with ;stream=watch.
func (s *watchServer) mediaType() string {
	if s.format == formatJSON {
		return contentTypeJSON
	}
	return s.format.mediaType + ";stream=watch"
}

func (s *watchServer) newEncoder(websocket bool) *frameEncoder {
	return &frameEncoder{res: s.res, format: s.format, transform: s.transform, websocket: websocket, json: newFrameEncoder(s.res)}
}

// handleHTTP writes the watch as a chunked JSON stream, one frame per event: 200 and the headers are
// flushed before the first event, and the stream is flushed whenever no event is waiting. The
// response ends without a final event when the watch ends, its time is up, the client goes away or
// the server shuts down.
//
// Mirrors WatchServer.HandleHTTP.
func (s *watchServer) handleHTTP(w http.ResponseWriter, req *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		err := fmt.Errorf("unable to start watch - can't get http.Flusher: %#v", w)
		s.server.logger.Error("Unable to start watch", "err", err)
		s.server.writeError(w, req, apierrors.NewInternalError(err))
		return
	}
	gzipStream := s.isWatchList && !s.server.features.DisableWatchListCompression && acceptsGzip(req)
	rw := &watchResponseWriter{w: w, flusher: flusher, gzip: gzipStream}
	defer func() {
		if err := rw.Close(); err != nil {
			s.server.logger.Debug("Failed to close watch response writer", "err", err)
		}
	}()

	timer := s.server.clock.NewTimer(s.timeout)
	defer timer.Stop()

	rw.beginStream(s.mediaType())

	enc := s.newEncoder(false)
	out := &eventWriter{w: rw, recorder: s.recorder}
	ch := s.watcher.ResultChan()
	done := req.Context().Done()
	for {
		select {
		case <-s.server.shuttingDown:
			return
		case <-done:
			return
		case <-timer.C():
			return
		case event, ok := <-ch:
			if !ok {
				return
			}
			initialEventsEnd := !s.server.features.DisableWatchList && isInitialEventsEndBookmark(event)
			if err := enc.encode(event, out); err != nil {
				s.server.logger.Debug("Failed to encode watch event", "err", err)
				return
			}
			out.recordEvent()
			if len(ch) == 0 && s.moreComing(ch) {
				// An event the watch cache queued is on its way to ch: written with this one, both
				// cost one write(2) on the connection.
				continue
			}
			if len(ch) == 0 {
				if err := rw.Flush(); err != nil {
					s.server.logger.Debug("Failed to flush watch response", "err", err)
					return
				}
			}
			if initialEventsEnd {
				// The initial events are all out: send them now and, with gzip, end the member so an
				// idle watch holds no compressor.
				if err := rw.Flush(); err != nil {
					s.server.logger.Debug("Failed to flush watch response after initial events", "err", err)
					return
				}
			}
		}
	}
}

// backlogged is a watch that queues events before its result channel: the watch cache's.
type backlogged interface {
	// Backlog is how many events are queued but not yet in the result channel.
	Backlog() int
}

// moreComing reports whether an event reached ch after the watch's own goroutine was given a chance
// to move what it had queued. Under load the cache's watcher goroutine and the handler take turns, so
// an event already dispatched to the watcher is often not yet in ch when the handler looks; flushing
// then would cost a write(2) per event just when events come faster than they are written. Without
// such events queued, or once they turn out to be filtered out, the handler flushes as it otherwise
// does.
func (s *watchServer) moreComing(ch <-chan watch.Event) bool {
	b, ok := s.watcher.(backlogged)
	if !ok || b.Backlog() == 0 {
		return false
	}
	goruntime.Gosched()
	return len(ch) > 0
}

// handleWS sends one text message per event over a websocket and ignores what the client sends. It
// ends, closing the websocket, when the watch ends, its time is up, the client closes or the server
// shuts down.
//
// Mirrors WatchServer.HandleWS.
func (s *watchServer) handleWS(w http.ResponseWriter, req *http.Request) {
	// Upstream's x/net/websocket handler accepts any non-empty Origin. This server has no
	// authentication, so it keeps coder/websocket's same-origin check instead: a web page from
	// elsewhere must not read the watch.
	conn, err := websocket.Accept(w, req, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		s.server.logger.Debug("Websocket upgrade failed", "err", err)
		return
	}
	conn.SetReadLimit(-1)
	// Writes end with the request, and at shutdown: a hijacked connection is beyond
	// http.Server.Shutdown. Not with the storage's deadline (ctx): as upstream's, the stream lasts
	// until its own timer, started now, fires, and an event the storage sends at its deadline (the
	// watch cache's 504 for a resourceVersion it did not reach) still goes out.
	writeCtx, cancel := context.WithCancel(req.Context())
	shutdownWatched := make(chan struct{})
	go func() {
		defer close(shutdownWatched)
		select {
		case <-s.server.shuttingDown:
			cancel()
		case <-writeCtx.Done():
		}
	}()
	defer func() {
		cancel()
		<-shutdownWatched
	}()

	clientGone := make(chan struct{})
	go func() {
		defer close(clientGone)
		// Client messages are read and dropped until the connection closes.
		for {
			_, r, err := conn.Reader(context.Background())
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, r); err != nil {
				return
			}
		}
	}()
	defer func() {
		conn.Close(websocket.StatusNormalClosure, "")
		<-clientGone
	}()

	timer := s.server.clock.NewTimer(s.timeout)
	defer timer.Stop()

	framer := websocketFramer{ctx: writeCtx, conn: conn, binary: s.format != formatJSON}
	enc := s.newEncoder(true)
	out := &eventWriter{w: framer, recorder: s.recorder}
	ch := s.watcher.ResultChan()
	for {
		select {
		case <-clientGone:
			return
		case <-writeCtx.Done():
			return
		case <-timer.C():
			return
		case event, ok := <-ch:
			if !ok {
				return
			}
			if err := enc.encode(event, out); err != nil {
				s.server.logger.Debug("Failed to encode watch event", "err", err)
				return
			}
			out.recordEvent()
		}
	}
}

// websocketFramer sends each write as one message: text for JSON, binary for protobuf.
type websocketFramer struct {
	ctx    context.Context
	conn   *websocket.Conn
	binary bool
}

func (f websocketFramer) Write(p []byte) (int, error) {
	typ := websocket.MessageText
	if f.binary {
		typ = websocket.MessageBinary
	}
	if err := f.conn.Write(f.ctx, typ, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// isWebSocketRequest mirrors wsstream.IsWebSocketRequest.
func isWebSocketRequest(req *http.Request) bool {
	if !strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
		return false
	}
	for _, v := range req.Header.Values("Connection") {
		for _, token := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(token), "upgrade") {
				return true
			}
		}
	}
	return false
}

// isInitialEventsEndBookmark mirrors shouldRecordWatchListLatency's test of the event.
func isInitialEventsEndBookmark(event watch.Event) bool {
	if event.Type != watch.Bookmark || event.Object == nil {
		return false
	}
	m, err := meta.Accessor(event.Object)
	if err != nil {
		return false
	}
	return m.GetAnnotations()[InitialEventsEndAnnotation] == "true"
}

// watchResponseWriter is the body of an HTTP watch; for a watch-list with gzip, each flush ends one
// gzip member, so the writer holds no compressor between flushes.
//
// Mirrors handlers.watchResponseWriter, plainResponseWriter and perFlushGzipWriter.
type watchResponseWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	gzip    bool
	gw      *gzip.Writer
}

func (w *watchResponseWriter) beginStream(mediaType string) {
	h := w.w.Header()
	h.Set("Content-Type", mediaType)
	h.Set("Transfer-Encoding", "chunked")
	if w.gzip {
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
	}
	w.w.WriteHeader(http.StatusOK)
	// Only the headers: gzip applies to the body.
	w.flusher.Flush()
}

func (w *watchResponseWriter) Write(p []byte) (int, error) {
	if !w.gzip {
		return w.w.Write(p)
	}
	if w.gw == nil {
		w.gw = gzipPool.Get().(*gzip.Writer)
		w.gw.Reset(w.w)
	}
	return w.gw.Write(p)
}

func (w *watchResponseWriter) Flush() error {
	if w.gzip {
		if w.gw == nil {
			return nil
		}
		if err := w.gw.Flush(); err != nil {
			return err
		}
		err := w.Close()
		w.flusher.Flush()
		return err
	}
	w.flusher.Flush()
	return nil
}

// Close returns the compressor to the pool; the plain writer has nothing to close.
func (w *watchResponseWriter) Close() error {
	if w.gw == nil {
		return nil
	}
	err := w.gw.Close()
	w.gw.Reset(nil)
	gzipPool.Put(w.gw)
	w.gw = nil
	return err
}

// jsonFrameEncoder writes watch events as the apiserver's JSON stream frames:
// {"type":"ADDED","object":{...}} and a newline, byte for byte what json.Encoder makes of a
// metav1.WatchEvent whose object is the JSON of the event object.
//
// Mirrors handlers.watchEncoder and watchEmbeddedEncoder without transformations.
type jsonFrameEncoder struct {
	res Resource
	buf bytes.Buffer
	// framers hold, per event type, the function CacheEncode calls to frame a shared object, made once
	// per watch so that an event costs a watcher no allocation.
	framers [len(frameEventTypes)]func(runtime.Object, io.Writer) error
}

func newFrameEncoder(res Resource) *jsonFrameEncoder {
	e := &jsonFrameEncoder{res: res}
	for i, t := range frameEventTypes {
		e.framers[i] = func(obj runtime.Object, w io.Writer) error { return e.writeFrame(t, obj, w) }
	}
	return e
}

// frameEventTypes are the event types a watch frame can carry.
var frameEventTypes = [...]watch.EventType{watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error}

// frameEventIndex is the index of typ in frameEventTypes, or -1.
func frameEventIndex(typ watch.EventType) int {
	switch typ {
	case watch.Added:
		return 0
	case watch.Modified:
		return 1
	case watch.Deleted:
		return 2
	case watch.Bookmark:
		return 3
	case watch.Error:
		return 4
	}
	return -1
}

// frameIdentifiers name the encoding of a whole frame per event type (indexed as frameEventTypes): an
// object the watch cache shares between watchers is framed once for all of them.
var frameIdentifiers [len(frameEventTypes)]runtime.Identifier

func init() {
	for i, t := range frameEventTypes {
		frameIdentifiers[i] = runtime.Identifier(`{"name":"watch","embeddedEncoder":"json","encoder":"json","eventType":"` + string(t) + `"}`)
	}
}

// encode writes one frame for event to w.
func (e *jsonFrameEncoder) encode(event watch.Event, w io.Writer) error {
	if co, ok := event.Object.(runtime.CacheableObject); ok {
		if i := frameEventIndex(event.Type); i >= 0 {
			return co.CacheEncode(frameIdentifiers[i], e.framers[i], w)
		}
	}
	return e.writeFrame(event.Type, event.Object, w)
}

func (e *jsonFrameEncoder) writeFrame(typ watch.EventType, obj runtime.Object, w io.Writer) error {
	e.buf.Reset()
	e.buf.WriteString(`{"type":`)
	switch typ {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error:
		e.buf.WriteByte('"')
		e.buf.WriteString(string(typ))
		e.buf.WriteByte('"')
	default:
		quoted, err := json.Marshal(string(typ))
		if err != nil {
			return err
		}
		e.buf.Write(quoted)
	}
	e.buf.WriteString(`,"object":`)
	if err := e.encodeEmbedded(obj); err != nil {
		return fmt.Errorf("unable to encode watch object %T: %v", obj, err)
	}
	// The embedded encoder ends the object with a newline; the frame ends with one.
	if b := e.buf.Bytes(); len(b) > 0 && b[len(b)-1] == '\n' {
		e.buf.Truncate(e.buf.Len() - 1)
	}
	e.buf.WriteString("}\n")
	_, err := w.Write(e.buf.Bytes())
	releaseLarge(&e.buf)
	return err
}

// maxRetainedFrameBuffer is the largest scratch buffer a watch keeps between events. A watch whose
// one event was a large object would otherwise hold that object's size for as long as it stays open:
// with thousands of watches started on large objects, memory proportional to what they once sent.
const maxRetainedFrameBuffer = 64 << 10

// releaseLarge drops buf's storage when it grew beyond maxRetainedFrameBuffer.
func releaseLarge(buf *bytes.Buffer) {
	if buf.Cap() > maxRetainedFrameBuffer {
		*buf = bytes.Buffer{}
	}
}

// encodeEmbedded appends the JSON of obj. Like the apiserver's versioning encoder, it names the kind of
// an object that has none (a bookmark from a storage without NewFunc, a Status).
func (e *jsonFrameEncoder) encodeEmbedded(obj runtime.Object) error {
	switch t := obj.(type) {
	case nil:
		return fmt.Errorf("nil object")
	case *unstructured.Unstructured:
		if t.GetKind() == "" || t.GetAPIVersion() == "" {
			c := &unstructured.Unstructured{Object: make(map[string]any, len(t.Object)+2)}
			for k, v := range t.Object {
				c.Object[k] = v
			}
			gvk := t.GroupVersionKind()
			if gvk.Kind == "" {
				gvk.Kind = e.res.Kind
			}
			if gvk.Version == "" {
				gvk.Group, gvk.Version = e.res.Group, e.res.Version
			}
			c.SetGroupVersionKind(gvk)
			t = c
		}
		return unstructured.UnstructuredJSONScheme.Encode(t, &e.buf)
	case *metav1.Status:
		c := *t
		c.Kind, c.APIVersion = "Status", "v1"
		return json.NewEncoder(&e.buf).Encode(&c)
	default:
		return json.NewEncoder(&e.buf).Encode(obj)
	}
}

// frameEncoder writes each event in the stream's format: JSON frames (jsonFrameEncoder) or
// length-prefixed protobuf WatchEvents (bare over a websocket), after the negotiated conversion of
// the event's object.
//
// Mirrors handlers.watchEncoder with watchEmbeddedEncoder.
type frameEncoder struct {
	res       Resource
	format    *format
	transform func(runtime.Object) (runtime.Object, error)
	websocket bool
	json      *jsonFrameEncoder
	scratch   bytes.Buffer
}

// protobufIdentifiers name the protobuf framing of an object shared by the watch cache, per event
// type (indexed as frameEventTypes) and for a length prefix or none.
var protobufIdentifiers [2][len(frameEventTypes)]runtime.Identifier

func init() {
	for i, t := range frameEventTypes {
		protobufIdentifiers[0][i] = runtime.Identifier(`{"name":"watch","embeddedEncoder":"protobuf","encoder":"raw-protobuf","framer":"length-delimited","eventType":"` + string(t) + `"}`)
		protobufIdentifiers[1][i] = runtime.Identifier(`{"name":"watch","embeddedEncoder":"protobuf","encoder":"raw-protobuf","eventType":"` + string(t) + `"}`)
	}
}

func (e *frameEncoder) encode(event watch.Event, w io.Writer) error {
	if e.transform != nil {
		obj, err := e.transform(event.Object)
		if err != nil {
			return err
		}
		event.Object = obj
		if e.format == formatJSON {
			return e.json.writeFrame(event.Type, obj, w)
		}
	} else if e.format == formatJSON {
		return e.json.encode(event, w)
	}
	write := func(obj runtime.Object, w io.Writer) error {
		err := writeProtobufWatchFrame(string(event.Type), obj, &e.scratch, !e.websocket, w)
		releaseLarge(&e.scratch)
		return err
	}
	if co, ok := event.Object.(runtime.CacheableObject); ok && e.transform == nil {
		if i := frameEventIndex(event.Type); i >= 0 {
			ws := 0
			if e.websocket {
				ws = 1
			}
			return co.CacheEncode(protobufIdentifiers[ws][i], write, w)
		}
	}
	return write(event.Object, w)
}
