package storagetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
)

// Env is the server a case runs against and the storage under test, both given by the caller: the
// suite imports no storage implementation, as upstream's pkg/storage/testing takes its store and
// its hooks from the etcd3 and cacher tests.
type Env struct {
	// Client is connected to the etcd server the storage keeps its objects in: the cases read and
	// write its keys raw (the base revision, Sync's write, the stored values Stats averages) and, unless
	// Compact is set, compact it.
	Client *clientv3.Client
	// NewStorage builds the storage under test for cfg; required. The etcd3 storage's tests build
	// watch.New over Client; a watch cache builds its Cacher over one and returns it once ready.
	NewStorage func(cfg Config) (storage.Interface, error)
	// RequestProgress, when set, replaces the progress requests of W.Sync and W.NextBookmark: it must
	// make w, a watch of s, deliver a BOOKMARK at a revision at or after rev once it has delivered
	// every event up to rev, or do nothing yet (it is called again every 20 ms). nil means
	// s.RequestWatchProgress, which etcd answers on every watch of the client. A watch cache, which
	// forwards no storage progress, passes a marker bookmark behind the events it has dispatched.
	RequestProgress func(ctx context.Context, s storage.Interface, w apiwatch.Interface, rev int64) error
	// Compact, when set, replaces H.Compact's compaction of etcd at rev; a watch cache drops its
	// history up to rev too, as upstream's cacher tests do (cacher_testing_utils_test.go compactWatch).
	Compact func(ctx context.Context, s storage.Interface, rev int64) error
	// Timeout bounds every wait for an event; 0 means 30 s.
	Timeout time.Duration
}

// Config is the storage a case asks NewStorage for: where its objects are and what the case varies.
type Config struct {
	// Prefix is the etcd path prefix of the case (never empty: the case's own, so cases may share a
	// server).
	Prefix string
	// ResourcePrefix is the key prefix of the resource ("/pods/").
	ResourcePrefix string
	// GroupResource names the resource in errors (pods).
	GroupResource schema.GroupResource
	// Codec, when set, replaces the default unstructured JSON codec; the storage then has no NewFunc,
	// as upstream's etcd3 storage built without one (the cases check what it refuses).
	Codec storage.Codec
	// Transformer, when set, converts values at rest (nil: identity).
	Transformer storage.Transformer
	// Logger receives the storage's warnings; the cases provoke them, so it discards them.
	Logger *slog.Logger
	// DisableWatchList turns the WatchList feature off.
	DisableWatchList bool
}

// Case is one conformance scenario.
type Case struct {
	// Name identifies the case.
	Name string
	// Upstream names the k8s.io/apiserver pkg/storage/testing function the case ports (such as
	// "RunTestWatchFromZero"), or, where upstream has no such function, the upstream test or the
	// upstream file and function whose behaviour the case checks.
	Upstream string
	// Fresh marks cases that compact, or read from revision 1, and so need a server of their own.
	Fresh bool
	// Slow marks cases that wait for real time to pass (a lease expiry, a 3 s watch deadline).
	Slow bool
	// Run plays the scenario on h.
	Run func(h *H)
	// Want is the transcript the scenario must produce.
	Want []string
}

// Play runs c against env and returns its transcript. An error means the scenario could not be played
// (a write failed, an awaited event never came); a wrong event shows up in the transcript instead.
func (c Case) Play(ctx context.Context, env Env) (transcript []string, err error) {
	h, err := newH(ctx, env)
	if err != nil {
		return nil, err
	}
	defer h.stopAll()
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(failure)
			if !ok {
				panic(r)
			}
			transcript, err = h.lines, fmt.Errorf("%s: %w", c.Name, f.err)
		}
	}()
	c.Run(h)
	return h.lines, nil
}

// failure carries a harness error out of a scenario.
type failure struct{ err error }

var prefixSeq atomic.Int64

// H is the harness a scenario drives: it writes objects, opens watches and records the transcript.
type H struct {
	ctx     context.Context
	env     Env
	base    int64
	prefix  string
	lines   []string
	watches []*W
	storage storage.Interface
	// closers close the storages of the case that have a Close (the etcd3 storage stops its watch of
	// compact_rev_key) once it ends.
	closers []func()
}

func newH(ctx context.Context, env Env) (*H, error) {
	if env.NewStorage == nil {
		return nil, errors.New("storagetest: Env.NewStorage is nil")
	}
	if env.Timeout <= 0 {
		env.Timeout = 30 * time.Second
	}
	resp, err := env.Client.Get(ctx, "listwatch-base-revision")
	if err != nil {
		return nil, err
	}
	h := &H{
		ctx:    ctx,
		env:    env,
		base:   resp.Header.Revision,
		prefix: fmt.Sprintf("/registry-%d-%d", time.Now().UnixNano(), prefixSeq.Add(1)),
	}
	h.storage = h.NewStorage(Config{})
	return h, nil
}

// Fail ends the scenario with an error.
func (h *H) Fail(format string, args ...any) { panic(failure{fmt.Errorf(format, args...)}) }

func (h *H) check(err error, what string) {
	if err != nil {
		h.Fail("%s: %w", what, err)
	}
}

// Ctx returns the scenario's context.
func (h *H) Ctx() context.Context { return h.ctx }

// Client returns the server's client.
func (h *H) Client() *clientv3.Client { return h.env.Client }

// Logf appends a free-form line to the transcript.
func (h *H) Logf(format string, args ...any) { h.lines = append(h.lines, fmt.Sprintf(format, args...)) }

// Rel renders a revision relative to the case's start.
func (h *H) Rel(rev int64) string {
	if rev == 0 {
		return "0"
	}
	return fmt.Sprintf("+%d", rev-h.base)
}

// Abs returns the absolute resourceVersion of a relative revision.
func (h *H) Abs(rel int64) string { return strconv.FormatInt(h.base+rel, 10) }

func (h *H) relRV(rv string) string {
	if rv == "" {
		return ""
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		return "bad:" + rv
	}
	return h.Rel(n)
}

// NewStorage builds a storage for pods under the case's own etcd prefix. cfg.Prefix, ResourcePrefix
// and GroupResource are set unless given.
func (h *H) NewStorage(cfg Config) storage.Interface {
	if cfg.Prefix == "" {
		cfg.Prefix = h.prefix
	}
	if cfg.ResourcePrefix == "" {
		cfg.ResourcePrefix = "/pods/"
	}
	if cfg.GroupResource.Resource == "" {
		cfg.GroupResource.Resource = "pods"
	}
	if cfg.Logger == nil {
		// The cases provoke the errors the storage logs; the transcript shows them.
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := h.env.NewStorage(cfg)
	h.check(err, "new storage")
	if c, ok := s.(interface{ Close() }); ok {
		h.closers = append(h.closers, c.Close)
	}
	return s
}

// S returns the case's default storage.
func (h *H) S() storage.Interface { return h.storage }

// CurrentRev returns the server's current revision.
func (h *H) CurrentRev() int64 {
	rv, err := h.storage.GetCurrentResourceVersion(h.ctx)
	h.check(err, "current resource version")
	return int64(rv)
}

// Compact compacts the server (and, through Env.Compact, the storage under test) at a relative
// revision and records it.
func (h *H) Compact(rel int64) {
	var err error
	if h.env.Compact != nil {
		err = h.env.Compact(h.ctx, h.storage, h.base+rel)
	} else {
		_, err = h.env.Client.Compact(h.ctx, h.base+rel, clientv3.WithCompactPhysical())
	}
	h.check(err, "compact")
	h.Logf("compact %s", h.Rel(h.base+rel))
}

// Pod builds a v1 Pod object.
func Pod(ns, name string, mods ...func(*unstructured.Unstructured)) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]interface{}{"name": name},
	}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	for _, m := range mods {
		m(u)
	}
	return u
}

// Node sets spec.nodeName.
func Node(n string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, n, "spec", "nodeName") }
}

// Phase sets status.phase.
func Phase(p string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, p, "status", "phase") }
}

// Labels sets metadata.labels from "k=v" pairs.
func Labels(kv ...string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		m := map[string]string{}
		for _, p := range kv {
			k, v, _ := strings.Cut(p, "=")
			m[k] = v
		}
		u.SetLabels(m)
	}
}

// Annotations sets metadata.annotations from "k=v" pairs.
func Annotations(kv ...string) func(*unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		m := map[string]string{}
		for _, p := range kv {
			k, v, _ := strings.Cut(p, "=")
			m[k] = v
		}
		u.SetAnnotations(m)
	}
}

// PodAttrs are the attributes pod predicates match: labels, metadata.name, metadata.namespace,
// spec.nodeName and status.phase.
func PodAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil, fmt.Errorf("not an unstructured object: %T", obj)
	}
	node, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName")
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return labels.Set(u.GetLabels()), fields.Set{
		"metadata.name":      u.GetName(),
		"metadata.namespace": u.GetNamespace(),
		"spec.nodeName":      node,
		"status.phase":       phase,
	}, nil
}

// PodPredicate selects pods by a label and a field selector ("" selects everything).
func PodPredicate(labelSelector, fieldSelector string) storage.Predicate {
	ls, err := labels.Parse(labelSelector)
	if err != nil {
		panic(err)
	}
	fs, err := fields.ParseSelector(fieldSelector)
	if err != nil {
		panic(err)
	}
	return storage.Predicate{Label: ls, Field: fs, GetAttrs: PodAttrs}
}

// Key returns the key of a namespaced pod, or of a cluster-scoped one when ns is "".
func Key(ns, name string) string {
	if ns == "" {
		return "/pods/" + name
	}
	return "/pods/" + ns + "/" + name
}

// Create creates obj at its key and records the write; it returns the stored object.
func (h *H) Create(obj *unstructured.Unstructured) *unstructured.Unstructured {
	return h.CreateIn(h.storage, obj, 0)
}

// CreateIn creates obj through s with a TTL.
func (h *H) CreateIn(s storage.Interface, obj *unstructured.Unstructured, ttl uint64) *unstructured.Unstructured {
	out := &unstructured.Unstructured{}
	h.check(s.Create(h.ctx, Key(obj.GetNamespace(), obj.GetName()), obj.DeepCopy(), out, ttl), "create")
	h.Logf("create %s", h.describe(out))
	return out
}

// Put writes obj with GuaranteedUpdate(ignoreNotFound), creating or replacing it, and records it.
func (h *H) Put(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{}
	h.check(h.storage.GuaranteedUpdate(h.ctx, Key(obj.GetNamespace(), obj.GetName()), out, true, nil,
		storage.SimpleUpdate(func(runtime.Object) (runtime.Object, error) { return obj.DeepCopy(), nil }), nil), "update")
	h.Logf("put %s", h.describe(out))
	return out
}

// Delete deletes the object at key and records it; it returns the deleted object.
func (h *H) Delete(key string) *unstructured.Unstructured {
	out := &unstructured.Unstructured{}
	h.check(h.storage.Delete(h.ctx, key, out, nil, storage.ValidateAllObjectFunc, nil, storage.DeleteOptions{}), "delete")
	h.Logf("delete %s", h.describe(out))
	return out
}

// W is a watch the scenario reads.
type W struct {
	h    *H
	name string
	w    apiwatch.Interface
	s    storage.Interface
	// syncedRev is the highest revision a Sync or NextBookmark reached. Progress requests are repeated
	// until answered, so answers to the earlier ones can still arrive afterwards; plain bookmarks at
	// or below it are those answers and are not recorded.
	syncedRev int64
	// closed is set once the close of the result channel has been recorded.
	closed bool
	// bookmarksWithin, when set, is a range of revisions: a plain bookmark within it is recorded
	// without its revision, which depends on timing.
	bookmarksWithin [2]int64
}

// Watch opens a watch named name on key and records it; a Watch error is recorded instead.
func (h *H) Watch(name, key string, opts storage.ListOptions) *W {
	return h.WatchIn(h.storage, name, key, opts)
}

// WatchIn opens a watch through s.
func (h *H) WatchIn(s storage.Interface, name, key string, opts storage.ListOptions) *W {
	return h.watchCtx(h.ctx, s, name, key, opts)
}

// watchCtx opens a watch through s on ctx.
func (h *H) watchCtx(ctx context.Context, s storage.Interface, name, key string, opts storage.ListOptions) *W {
	w, err := s.Watch(ctx, key, opts)
	if err != nil {
		h.Logf("%s watch error: %s", name, h.describeErr(err))
		return nil
	}
	ww := &W{h: h, name: name, w: w, s: s}
	h.watches = append(h.watches, ww)
	return ww
}

func (h *H) stopAll() {
	for _, w := range h.watches {
		w.w.Stop()
		for range w.w.ResultChan() {
		}
	}
	for _, c := range h.closers {
		c()
	}
}

func (w *W) next() (apiwatch.Event, bool) {
	select {
	case ev, ok := <-w.w.ResultChan():
		return ev, ok
	case <-time.After(w.h.env.Timeout):
		w.h.Fail("%s: no event within %v", w.name, w.h.env.Timeout)
	case <-w.h.ctx.Done():
		w.h.Fail("%s: %v", w.name, w.h.ctx.Err())
	}
	return apiwatch.Event{}, false
}

// Next records the next n events (or the close, which ends the reading).
func (w *W) Next(n int) {
	for range n {
		if !w.recordNext() {
			return
		}
	}
}

// NextSkippingBookmarks records the next n events that are not plain bookmarks (or the close);
// plain bookmarks on the way are dropped, as upstream's checks after a watch is established drop
// them (RunWatchSemantics' ignoreEventsFn): a watch with AllowWatchBookmarks may get one whenever
// the storage's clock says so. An initial-events-end bookmark is still recorded.
func (w *W) NextSkippingBookmarks(n int) {
	for n > 0 {
		ev, ok := w.next()
		if !ok {
			w.logClosed()
			return
		}
		if ev.Type == apiwatch.Bookmark && !isEndBookmark(ev.Object) {
			continue
		}
		w.record(ev)
		n--
	}
}

// UntilClosed records every event up to the close of the result channel.
func (w *W) UntilClosed() {
	for w.recordNext() {
	}
}

// recordNext records the next event, or the close; it reports whether the watch is still open.
func (w *W) recordNext() bool {
	ev, ok := w.next()
	if !ok {
		w.logClosed()
		return false
	}
	w.record(ev)
	return true
}

// Stop stops the watch and records what is left on it up to the close.
func (w *W) Stop() {
	w.w.Stop()
	w.UntilClosed()
}

// Sync makes sure every event up to the server's current revision has been delivered: it requests
// progress until a BOOKMARK at or past that revision arrives, recording every other event on the way.
// Progress bookmarks are not recorded, as their number depends on timing.
//
// etcd answers progress requests only for watches whose start revision is not in the future, and a
// watch that just listed starts at the current revision + 1; so Sync first writes a key outside every
// watched range, which takes a revision (recorded as "sync +N"). The watch's start revision must be
// settled before: it is for a watch from an RV, and for one that lists once an event of the list
// has been read.
func (w *W) Sync() {
	resp, err := w.h.env.Client.Put(w.h.ctx, "listwatch-sync", "")
	w.h.check(err, "sync write")
	w.h.Logf("sync %s", w.h.Rel(resp.Header.Revision))
	w.syncTo(resp.Header.Revision, false)
}

// NextBookmark requests progress until a BOOKMARK at the current revision arrives and records it (and
// the events before it). Unlike Sync it writes nothing, so the watch must not start in the future.
func (w *W) NextBookmark() { w.syncTo(w.h.CurrentRev(), true) }

func (w *W) syncTo(target int64, recordBookmark bool) {
	deadline := time.After(w.h.env.Timeout)
	// etcd answers a progress request only while every watch of the stream is synced and never queues
	// it, so the request is repeated until the answer comes.
	retry := time.NewTicker(20 * time.Millisecond)
	defer retry.Stop()
	for {
		if err := w.requestProgress(target); err != nil {
			w.h.Fail("%s: request progress: %v", w.name, err)
		}
	wait:
		for {
			select {
			case ev, ok := <-w.w.ResultChan():
				if !ok {
					w.logClosed()
					return
				}
				if ev.Type == apiwatch.Bookmark && !isEndBookmark(ev.Object) {
					if objectRV(ev.Object) >= target {
						if recordBookmark {
							w.log(ev)
						}
						w.syncedRev = max(w.syncedRev, objectRV(ev.Object))
						return
					}
					continue
				}
				w.record(ev)
			case <-retry.C:
				break wait
			case <-deadline:
				w.h.Fail("%s: no progress bookmark at revision %s within %v", w.name, w.h.Rel(target), w.h.env.Timeout)
			}
		}
	}
}

// logClosed records the close of the result channel, once.
func (w *W) logClosed() {
	if !w.closed {
		w.closed = true
		w.h.Logf("%s closed", w.name)
	}
}

func (w *W) requestProgress(rev int64) error {
	if w.h.env.RequestProgress != nil {
		return w.h.env.RequestProgress(w.h.ctx, w.s, w.w, rev)
	}
	return w.s.RequestWatchProgress(w.h.ctx)
}

// plain unwraps the object of a watch cache event, which is shared between watchers behind a
// runtime.CacheableObject (the watch cache's CachingObject), as upstream's tests do.
func plain(obj runtime.Object) runtime.Object {
	if co, ok := obj.(runtime.CacheableObject); ok {
		return co.GetObject()
	}
	return obj
}

func isEndBookmark(obj runtime.Object) bool {
	u, ok := plain(obj).(*unstructured.Unstructured)
	return ok && u.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}

func objectRV(obj runtime.Object) int64 {
	u, ok := plain(obj).(*unstructured.Unstructured)
	if !ok {
		return 0
	}
	n, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	return n
}

// record writes an event to the transcript, except a late answer to one of Sync's progress requests.
func (w *W) record(ev apiwatch.Event) {
	if ev.Type == apiwatch.Bookmark && !isEndBookmark(ev.Object) && objectRV(ev.Object) <= w.syncedRev {
		return
	}
	w.log(ev)
}

func (w *W) log(ev apiwatch.Event) {
	if ev.Type == apiwatch.Bookmark && !isEndBookmark(ev.Object) && w.bookmarksWithin[1] != 0 {
		if rv := objectRV(ev.Object); rv >= w.bookmarksWithin[0] && rv <= w.bookmarksWithin[1] {
			w.h.Logf("%s BOOKMARK", w.name)
			return
		}
	}
	w.h.Logf("%s %s %s", w.name, ev.Type, w.h.describe(ev.Object))
}

// describe renders an object for the transcript: a pod as ns/name, revision and its distinguishing
// fields; a bookmark as its revision and annotations (and any other content, which it must not have);
// a Status as code, reason and message.
func (h *H) describe(obj runtime.Object) string {
	switch o := plain(obj).(type) {
	case *metav1.Status:
		return h.describeStatus(*o)
	case *unstructured.Unstructured:
		return h.describeUnstructured(o)
	case nil:
		return "<nil>"
	}
	return fmt.Sprintf("%T", obj)
}

func (h *H) describeUnstructured(u *unstructured.Unstructured) string {
	return formatObject(u, h.relRV(u.GetResourceVersion()))
}

// formatObject renders u with rv standing for its resourceVersion.
func formatObject(u *unstructured.Unstructured, rv string) string {
	var b strings.Builder
	if u.GetName() == "" && u.GetKind() == "" {
		// A bookmark: only the resourceVersion and the end annotation may be set.
		fmt.Fprintf(&b, "rv=%s", rv)
		if isEndBookmark(u) {
			b.WriteString(" initial-events-end")
		}
		rest := u.DeepCopy()
		rest.SetResourceVersion("")
		a := rest.GetAnnotations()
		delete(a, metav1.InitialEventsAnnotationKey)
		if len(a) == 0 {
			unstructured.RemoveNestedField(rest.Object, "metadata", "annotations")
		} else {
			rest.SetAnnotations(a)
		}
		if m, ok := rest.Object["metadata"].(map[string]interface{}); ok && len(m) == 0 {
			delete(rest.Object, "metadata")
		}
		if len(rest.Object) != 0 {
			fmt.Fprintf(&b, " extra=%v", rest.Object)
		}
		return b.String()
	}
	if ns := u.GetNamespace(); ns != "" {
		b.WriteString(ns + "/")
	}
	b.WriteString(u.GetName())
	fmt.Fprintf(&b, " rv=%s", rv)
	if n, _, _ := unstructured.NestedString(u.Object, "spec", "nodeName"); n != "" {
		b.WriteString(" node=" + n)
	}
	if p, _, _ := unstructured.NestedString(u.Object, "status", "phase"); p != "" {
		b.WriteString(" phase=" + p)
	}
	if l := u.GetLabels(); len(l) > 0 {
		b.WriteString(" labels=" + sortedPairs(l))
	}
	if a := u.GetAnnotations(); len(a) > 0 {
		b.WriteString(" annotations=" + sortedPairs(a))
	}
	return b.String()
}

// At renders u as it is stored at relative revision rel, for writing Want lines.
func At(u *unstructured.Unstructured, rel int) string {
	return formatObject(u, fmt.Sprintf("+%d", rel))
}

func sortedPairs(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

// List lists key and records the list's revision, items and continue state.
func (h *H) List(name, key string, opts storage.ListOptions) *unstructured.UnstructuredList {
	return h.ListIn(h.storage, name, key, opts)
}

// ListIn lists through s; an error is recorded.
func (h *H) ListIn(s storage.Interface, name, key string, opts storage.ListOptions) *unstructured.UnstructuredList {
	list := &unstructured.UnstructuredList{}
	if err := s.GetList(h.ctx, key, opts, list); err != nil {
		h.Logf("%s list error: %s", name, h.describeErr(err))
		return nil
	}
	var items []string
	for i := range list.Items {
		items = append(items, h.describe(&list.Items[i]))
	}
	line := fmt.Sprintf("%s list rv=%s items=[%s]", name, h.relRV(list.GetResourceVersion()), strings.Join(items, "; "))
	if list.GetContinue() != "" {
		line += " continue"
	}
	if n := list.GetRemainingItemCount(); n != nil {
		line += fmt.Sprintf(" remaining=%d", *n)
	}
	h.lines = append(h.lines, line)
	return list
}

// describeErr renders an error: an API error as its Status, anything else as its message.
func (h *H) describeErr(err error) string {
	var se interface{ Status() metav1.Status }
	if errors.As(err, &se) {
		return h.describeStatus(se.Status())
	}
	return h.normalize(err.Error())
}

// describeStatus renders code, reason and message, and the details a client acts on: the causes'
// types and whether Retry-After is in the 1-4 s the etcd3 watch uses.
func (h *H) describeStatus(st metav1.Status) string {
	line := fmt.Sprintf("%d %s: %s", st.Code, st.Reason, h.normalize(st.Message))
	if d := st.Details; d != nil {
		for _, c := range d.Causes {
			if c.Type != "" {
				line += " cause=" + string(c.Type)
			}
		}
		switch {
		case d.RetryAfterSeconds >= 1 && d.RetryAfterSeconds <= 4:
			line += " retry=1..4"
		case d.RetryAfterSeconds != 0:
			line += fmt.Sprintf(" retry=%d", d.RetryAfterSeconds)
		}
	}
	if st.Continue != "" {
		line += " continue"
	}
	return line
}

var (
	revisionPatterns = []*regexp.Regexp{
		regexp.MustCompile(`(current: )(\d+)`),
		regexp.MustCompile(`(modRevision=)(\d+)`),
		regexp.MustCompile(`(Too large resource version: )(\d+)`),
		regexp.MustCompile(`( revision=)(\d+)`),
		regexp.MustCompile(`(ResourceVersion in object meta: )(\d+)`),
		regexp.MustCompile(`(ResourceVersion: )(\d+)`),
		regexp.MustCompile(`(too old resource version: )(\d+)`),
		regexp.MustCompile(`(too old resource version: \+?\d+ \()(\d+)`),
	}
	maxRelativized = int64(1) << 40
)

// normalize makes a message independent of the server the case ran on: the case's etcd prefix reads
// /registry and revisions read relative to the case's start (absurdly large ones stay as they are).
func (h *H) normalize(msg string) string {
	msg = strings.ReplaceAll(msg, h.prefix+"/", "/registry/")
	for _, re := range revisionPatterns {
		msg = re.ReplaceAllStringFunc(msg, func(m string) string {
			sub := re.FindStringSubmatch(m)
			n, err := strconv.ParseInt(sub[2], 10, 64)
			if err != nil || n == 0 || n > maxRelativized {
				return m
			}
			return sub[1] + h.Rel(n)
		})
	}
	return msg
}

// ErrorLine records err (or "ok").
func (h *H) ErrorLine(what string, err error) {
	if err == nil {
		h.Logf("%s ok", what)
		return
	}
	h.Logf("%s error: %s", what, h.describeErr(err))
}
