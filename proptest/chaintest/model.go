package chaintest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/listwatch/listwatch/httpwatch/watchclient"
	"github.com/listwatch/listwatch/store"
)

// payloadAnnotation carries filler that makes an object as large as a test wants.
const payloadAnnotation = "payload"

// filler stands for the payload annotation's value in the model's copy of an object, so that the
// model's own memory does not grow with the payloads the tests measure the chain's memory by.
type filler int

func (f filler) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, int(f)+2)
	b = append(b, '"')
	b = append(b, strings.Repeat("p", int(f))...)
	return append(b, '"'), nil
}

// EtcdPrefix is where the chain keeps pods in etcd.
const EtcdPrefix = "/registry/pods/"

// Pod is the content of a pod the tests write.
type Pod struct {
	Namespace, Name string
	Labels          map[string]string
	NodeName, Phase string
	// Payload is the length of the filler annotation.
	Payload int
}

// EtcdKey is the pod's etcd key.
func (p Pod) EtcdKey() string { return EtcdPrefix + p.Namespace + "/" + p.Name }

// Object is the pod as a JSON object; resourceVersion, when not "", goes in metadata.
func (p Pod) Object(resourceVersion string) map[string]any {
	meta := map[string]any{"name": p.Name, "namespace": p.Namespace}
	if len(p.Labels) > 0 {
		l := map[string]any{}
		for k, v := range p.Labels {
			l[k] = v
		}
		meta["labels"] = l
	}
	if p.Payload > 0 {
		meta["annotations"] = map[string]any{payloadAnnotation: strings.Repeat("p", p.Payload)}
	}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	obj := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta}
	spec := map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}
	if p.NodeName != "" {
		spec["nodeName"] = p.NodeName
	}
	obj["spec"] = spec
	if p.Phase != "" {
		obj["status"] = map[string]any{"phase": p.Phase}
	}
	return obj
}

// JSON is Object encoded.
func (p Pod) JSON(resourceVersion string) []byte {
	data, err := json.Marshal(p.Object(resourceVersion))
	if err != nil {
		panic(err) // a map of strings always encodes
	}
	return data
}

// Object is one stored revision of a pod, as the store holds it.
type Object struct {
	Key             string // etcd key
	Namespace, Name string
	Rev             int64 // mod revision
	Labels          labels.Set
	Fields          fields.Set
	content         map[string]any // without resourceVersion
	canonical       map[int64]string
}

// at is the canonical JSON of the object carrying resourceVersion rev.
func (o *Object) at(rev int64) string {
	if s, ok := o.canonical[rev]; ok {
		return s
	}
	c := maps.Clone(o.content)
	meta, _ := c["metadata"].(map[string]any)
	meta = maps.Clone(meta)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["resourceVersion"] = strconv.FormatInt(rev, 10)
	c["metadata"] = meta
	data, err := json.Marshal(c)
	if err != nil {
		panic(err) // decoded JSON always encodes
	}
	if o.canonical == nil {
		o.canonical = map[int64]string{}
	}
	o.canonical[rev] = string(data)
	return string(data)
}

func decodeObject(key string, value []byte, rev int64) (*Object, error) {
	var content map[string]any
	if err := json.Unmarshal(value, &content); err != nil {
		return nil, fmt.Errorf("stored value of %s is not a JSON object: %w", key, err)
	}
	meta, _ := content["metadata"].(map[string]any)
	if _, ok := meta["resourceVersion"]; ok {
		return nil, fmt.Errorf("stored value of %s carries a resourceVersion: %s", key, value)
	}
	if ann, ok := meta["annotations"].(map[string]any); ok {
		if v, ok := ann[payloadAnnotation].(string); ok && strings.Count(v, "p") == len(v) {
			ann[payloadAnnotation] = filler(len(v))
		}
	}
	o := &Object{Key: key, Rev: rev, content: content, Labels: labels.Set{}}
	o.Name, _ = meta["name"].(string)
	o.Namespace, _ = meta["namespace"].(string)
	if l, ok := meta["labels"].(map[string]any); ok {
		for k, v := range l {
			o.Labels[k], _ = v.(string)
		}
	}
	str := func(path ...string) string {
		var cur any = content
		for _, p := range path {
			m, _ := cur.(map[string]any)
			cur = m[p]
		}
		s, _ := cur.(string)
		return s
	}
	o.Fields = fields.Set{
		"metadata.name":      o.Name,
		"metadata.namespace": o.Namespace,
		"spec.nodeName":      str("spec", "nodeName"),
		"status.phase":       str("status", "phase"),
	}
	return o, nil
}

func (o *Object) String() string {
	if o == nil {
		return "absent"
	}
	s := fmt.Sprintf("rv=%d", o.Rev)
	if len(o.Labels) > 0 {
		s += " labels=" + o.Labels.String()
	}
	if n := o.Fields["spec.nodeName"]; n != "" {
		s += " node=" + n
	}
	if p := o.Fields["status.phase"]; p != "" {
		s += " phase=" + p
	}
	return s
}

// Write is one change of one pod: its state before and after (nil: absent), at revision Rev.
type Write struct {
	Rev       int64
	Key       string
	Prev, Cur *Object
}

// Model is the write history of the pods of a chain and what every watch must therefore deliver.
// It is kept by the one goroutine that writes.
type Model struct {
	// Cached says the chain has a watch cache; the answers differ for past and future
	// resourceVersions.
	Cached bool
	// Writes are the pod writes, in revision order.
	Writes []Write
	// Rev is the store's revision after the last write (pods or not).
	Rev int64
	// ListRV is the revision of the watch cache's last relist.
	ListRV int64
	// CompactRev is the last compaction's revision (0: none).
	CompactRev int64
	// CacheAt is a revision the watch cache is known to have reached (by ListRV, say): watches
	// that start wherever the cache is start there or later.
	CacheAt int64

	state map[string]*Object
}

// NewModel returns the model of a fresh chain.
func (c *Chain) NewModel() *Model {
	rev := c.Store.Rev()
	return &Model{Cached: c.Cacher != nil, Rev: rev, ListRV: rev, state: map[string]*Object{}}
}

// State returns the current object at an etcd key (nil if absent).
func (m *Model) State(key string) *Object { return m.state[key] }

// LastPodRev is the revision of the last pod write (0: none).
func (m *Model) LastPodRev() int64 {
	if len(m.Writes) == 0 {
		return 0
	}
	return m.Writes[len(m.Writes)-1].Rev
}

// Observe records the effect of a write that may have changed the pod at key: it reads the store,
// which no one else writes meanwhile. A write elsewhere (other keys) only moves Rev.
func (m *Model) Observe(st *store.Store, key string) error {
	rev := st.Rev()
	if rev == m.Rev {
		return nil
	}
	if rev < m.Rev {
		return fmt.Errorf("the store went back from revision %d to %d", m.Rev, rev)
	}
	if !strings.HasPrefix(key, EtcdPrefix) {
		if rev != m.Rev+1 {
			return fmt.Errorf("revision moved from %d to %d for one write of %s", m.Rev, rev, key)
		}
		m.Rev = rev
		return nil
	}
	resp, err := st.Range(&store.RangeRequest{Key: []byte(key)})
	if err != nil {
		return err
	}
	prev := m.state[key]
	var cur *Object
	switch {
	case len(resp.Kvs) == 1 && resp.Kvs[0].ModRevision == rev:
		if cur, err = decodeObject(key, resp.Kvs[0].Value, rev); err != nil {
			return err
		}
		m.state[key] = cur
	case len(resp.Kvs) == 0 && prev != nil:
		delete(m.state, key)
	default:
		// Not a change of key: the write went elsewhere.
		if rev != m.Rev+1 {
			return fmt.Errorf("revision moved from %d to %d for one write", m.Rev, rev)
		}
		m.Rev = rev
		return nil
	}
	if rev != m.Rev+1 {
		return fmt.Errorf("revision moved from %d to %d for one write of %s", m.Rev, rev, key)
	}
	m.Writes = append(m.Writes, Write{Rev: rev, Key: key, Prev: prev, Cur: cur})
	m.Rev = rev
	return nil
}

// ObserveRevoke records a write at rev that deleted several pods at once (a lease expiry).
func (m *Model) ObserveRevoke(rev int64, keys []string) error {
	if rev != m.Rev+1 {
		return fmt.Errorf("revision moved from %d to %d for one revoke", m.Rev, rev)
	}
	slices.Sort(keys)
	for _, key := range keys {
		prev := m.state[key]
		if prev == nil {
			return fmt.Errorf("revoke of %s, which the model does not have", key)
		}
		delete(m.state, key)
		m.Writes = append(m.Writes, Write{Rev: rev, Key: key, Prev: prev})
	}
	m.Rev = rev
	return nil
}

// History describes the pod writes, one a line.
func (m *Model) History() string {
	var b strings.Builder
	for _, w := range m.Writes {
		fmt.Fprintf(&b, "  %d %s: %s -> %s\n", w.Rev, strings.TrimPrefix(w.Key, EtcdPrefix), w.Prev, w.Cur)
	}
	return b.String()
}

// Expectation is what the model says a watch opened now must do; Check judges its frames by it.
type Expectation struct {
	Spec WatchSpec
	// Replay says the watch starts with the state at its snapshot (a watch-list).
	Replay bool
	// Lo and Hi bound the start: the snapshot revision of a replay, else the revision after which
	// events are delivered. Revisions in between are all possible.
	Lo, Hi int64
	// Floating says the start is not fixed when the answer's headers arrive: the etcd3 storage
	// lists, or opens its etcd watch, in the watch's own goroutine, at whatever revision etcd has
	// reached by then (as upstream). Any revision from Lo to the model's current one is possible.
	Floating bool
	// ErrorCode, when not 0, is the one ERROR frame the watch must deliver (410 or 504), with
	// ErrorMessage (a prefix for 504).
	ErrorCode    int32
	ErrorMessage string
	// MayCompactAt, when not 0, says a compaction at that revision may land while the watch of an
	// uncached chain catches up: the watch may then end with ERROR 410, if what it delivered
	// stops short of the compacted revision.
	MayCompactAt int64

	label labels.Selector
	field fields.Selector
}

// Expect says what a watch opened now with spec must deliver. The caller opens it before any
// further write.
func (m *Model) Expect(spec WatchSpec) (Expectation, error) {
	e := Expectation{Spec: spec}
	var err error
	if e.label, err = labels.Parse(spec.Label); err != nil {
		return e, err
	}
	if e.field, err = fields.ParseSelector(spec.Field); err != nil {
		return e, err
	}
	rvParam := spec.ResourceVersion
	if spec.Unset {
		rvParam = ""
	}
	rv := int64(0)
	if rvParam != "" {
		if rv, err = strconv.ParseInt(rvParam, 10, 64); err != nil {
			return e, err
		}
	}
	sie := spec.SendInitialEvents
	if sie == nil && rv == 0 {
		// The WatchList defaulting: a watch from "" or "0" is a watch-list.
		t := true
		sie = &t
	}
	e.Replay = sie != nil && *sie
	g := m.Rev
	switch {
	case !m.Cached && e.Replay && rv > g:
		// The etcd3 storage refuses initial events from the future (watcher.go startWatching, in
		// the watch's goroutine: the caller writes nothing until the ERROR came), where the cache
		// waits for them first.
		e.ErrorCode, e.ErrorMessage = 504, fmt.Sprintf("Timeout: Too large resource version: %d, current: ", rv)
	case !m.Cached && e.Replay:
		// The etcd3 storage lists at etcd's current revision, in the watch's goroutine.
		e.Lo, e.Hi, e.Floating = g, g, true
	case !m.Cached && rv == 0:
		// The etcd watch starts at etcd's current revision once the watch's goroutine opens it.
		e.Lo, e.Hi, e.Floating = g, g, true
	case !m.Cached:
		e.Lo, e.Hi = rv, rv
		if rv+1 < m.CompactRev {
			e.ErrorCode, e.ErrorMessage = 410, compactedWatch
		}
		if rv+1 == m.CompactRev {
			if w, ok := m.prevlessAt(spec, m.CompactRev); ok {
				e.ErrorCode, e.ErrorMessage = 500, prevKvNil(w)
			}
		}
	case e.Replay && rv > g:
		e.ErrorCode, e.ErrorMessage = 504, fmt.Sprintf("Timeout: Too large resource version: %d, current: ", rv)
	case e.Replay && rvParam == "":
		// Consistent: the cache waits for etcd's current revision, which nothing moves meanwhile.
		e.Lo, e.Hi = g, g
	case e.Replay:
		e.Lo, e.Hi = max(rv, m.ListRV, min(m.CacheAt, g)), g
	case rvParam == "0":
		// sendInitialEvents=false from "0": from wherever the cache is.
		e.Lo, e.Hi = max(m.ListRV, min(m.CacheAt, g)), g
	case rv == 0:
		// sendInitialEvents=false from "": from etcd's current revision.
		e.Lo, e.Hi = g, g
	default:
		e.Lo, e.Hi = rv, rv
		if rv < m.ListRV {
			e.ErrorCode, e.ErrorMessage = 410, fmt.Sprintf("too old resource version: %d (%d)", rv, m.ListRV)
		}
	}
	return e, nil
}

// watchPrefix is the etcd key prefix the etcd3 storage watches for spec: selectors filter after
// the etcd watch, the namespace narrows the watch itself.
func watchPrefix(spec WatchSpec) string {
	if spec.Namespace == "" {
		return EtcdPrefix
	}
	return EtcdPrefix + spec.Namespace + "/"
}

// prevlessAt finds the write at rev, under the etcd watch of spec, that a watch from rev-1 receives
// without its previous value once rev is compacted: an update or delete, which the etcd3 storage
// refuses, whatever the selectors, before it filters (upstream watcher.go parseEvent).
func (m *Model) prevlessAt(spec WatchSpec, rev int64) (Write, bool) {
	for _, w := range m.Writes {
		if w.Rev == rev && w.Prev != nil && strings.HasPrefix(w.Key, watchPrefix(spec)) {
			return w, true
		}
	}
	return Write{}, false
}

// prevKvNil is the etcd3 storage's ERROR message for an event without its previous value.
func prevKvNil(w Write) string {
	typ := "PUT"
	if w.Cur == nil {
		typ = "DELETE"
	}
	return fmt.Sprintf("Internal error occurred: etcd event received with PrevKv=nil (key=%q, modRevision=%d, type=%s)", w.Key, w.Rev, typ)
}

// mayEndCompacted says whether a watch that delivered up to last may end with the ERROR (code, msg)
// because of the compaction at e.MayCompactAt: a 410 if the etcd watch's next revision was
// compacted, or the 500 of an event at the compaction revision that lost its previous value, if
// nothing under the watch came in between.
func (m *Model) mayEndCompacted(e Expectation, last int64, code int32, msg string) bool {
	c := e.MayCompactAt
	switch {
	case c == 0:
		return false
	case code == 410:
		return msg == compactedWatch && last+1 < c
	case code == 500:
		w, ok := m.prevlessAt(e.Spec, c)
		if !ok || msg != prevKvNil(w) || last >= c {
			return false
		}
		for _, x := range m.Writes {
			if x.Rev > last && x.Rev < c && strings.HasPrefix(x.Key, watchPrefix(e.Spec)) {
				return false
			}
		}
		return true
	}
	return false
}

func (e Expectation) String() string {
	s := fmt.Sprintf("%s replay=%t start=[%d,%d]", e.Spec, e.Replay, e.Lo, e.Hi)
	if e.Floating {
		s = fmt.Sprintf("%s replay=%t start=[%d,now]", e.Spec, e.Replay, e.Lo)
	}
	if e.ErrorCode != 0 {
		s += fmt.Sprintf(" error=%d %q", e.ErrorCode, e.ErrorMessage)
	}
	return s
}

func (e Expectation) selects(o *Object) bool {
	if o == nil {
		return false
	}
	if e.Spec.Namespace != "" && o.Namespace != e.Spec.Namespace {
		return false
	}
	return e.label.Matches(o.Labels) && e.field.Matches(o.Fields)
}

// Verdict is what Check concluded about a watch's frames.
type Verdict struct {
	// Start is the start revision that explains the frames.
	Start int64
	// Complete says every event the watch must deliver so far (and the initial-events-end bookmark)
	// was delivered.
	Complete bool
	// Error says the frames end with an ERROR the model expects (Expectation.ErrorCode, or a
	// compaction the expectation allows).
	Error bool
	// ResumeRV is the resourceVersion a client resumes from (that of the last event after the
	// initial ones, or of the last bookmark); HasResumeRV is false when there is none.
	ResumeRV    int64
	HasResumeRV bool
	// Events counts the ADDED, MODIFIED and DELETED frames.
	Events int
	// Bookmarks counts the BOOKMARK frames.
	Bookmarks int
}

type expectedEvent struct {
	typ  string
	rev  int64
	json string
}

func (m *Model) initialAt(e Expectation, s int64) []*Object {
	state := map[string]*Object{}
	for _, w := range m.Writes {
		if w.Rev > s {
			break
		}
		if w.Cur == nil {
			delete(state, w.Key)
		} else {
			state[w.Key] = w.Cur
		}
	}
	keys := slices.Sorted(maps.Keys(state))
	var out []*Object
	for _, k := range keys {
		if e.selects(state[k]) {
			out = append(out, state[k])
		}
	}
	return out
}

func (m *Model) liveAfter(e Expectation, s int64) []expectedEvent {
	var out []expectedEvent
	for _, w := range m.Writes {
		if w.Rev <= s {
			continue
		}
		cur, old := e.selects(w.Cur), e.selects(w.Prev)
		switch {
		case cur && !old:
			out = append(out, expectedEvent{"ADDED", w.Rev, w.Cur.at(w.Rev)})
		case cur && old:
			out = append(out, expectedEvent{"MODIFIED", w.Rev, w.Cur.at(w.Rev)})
		case old:
			out = append(out, expectedEvent{"DELETED", w.Rev, w.Prev.at(w.Rev)})
		}
	}
	return out
}

// hi is the latest start the expectation allows by now.
func (m *Model) hi(e Expectation) int64 {
	if e.Floating {
		return max(e.Hi, m.Rev)
	}
	return e.Hi
}

// Owed is the fewest ADDED, MODIFIED and DELETED frames the watch must deliver by now, over the
// starts the expectation allows: a watch that delivered fewer is not complete. It is cheap (no
// JSON), for waits that poll.
func (m *Model) Owed(e Expectation) int {
	owed := -1
	for s := e.Lo; s <= m.hi(e); s++ {
		n := 0
		if e.Replay {
			n = len(m.initialAt(e, s))
		}
		for _, w := range m.Writes {
			if w.Rev > s && (e.selects(w.Cur) || e.selects(w.Prev)) {
				n++
			}
		}
		if owed < 0 || n < owed {
			owed = n
		}
	}
	return max(owed, 0)
}

func canonical(raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	data, err := json.Marshal(v)
	return string(data), err
}

// bookmarkRV checks a BOOKMARK frame's object and returns its resourceVersion and whether it is
// annotated as the end of the initial events.
func bookmarkRV(f watchclient.Frame) (int64, bool, error) {
	tm, meta, err := f.Meta()
	if err != nil {
		return 0, false, err
	}
	if tm.Kind != "Pod" || tm.APIVersion != "v1" {
		return 0, false, fmt.Errorf("bookmark of kind %q apiVersion %q", tm.Kind, tm.APIVersion)
	}
	if meta.Name != "" || meta.Namespace != "" || len(meta.Labels) > 0 || meta.UID != "" {
		return 0, false, fmt.Errorf("bookmark with object metadata: %s", f.Object)
	}
	rv, err := strconv.ParseInt(meta.ResourceVersion, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("bookmark resourceVersion %q", meta.ResourceVersion)
	}
	annotated := false
	for k, v := range meta.Annotations {
		if k != metav1.InitialEventsAnnotationKey || v != "true" {
			return 0, false, fmt.Errorf("bookmark annotation %s=%q", k, v)
		}
		annotated = true
	}
	return rv, annotated, nil
}

// Check judges a watch's frames (all of them so far): they must be, for one start revision in
// [Lo, Hi], a prefix of what the model says the watch delivers, with every bookmark in its place.
// Whether the watch may stop short (a prefix) is for the caller to judge from Verdict.Complete.
func (m *Model) Check(e Expectation, frames []watchclient.Frame) (Verdict, error) {
	if e.ErrorCode != 0 {
		return checkError(e, frames)
	}
	var reasons []string
	var found *Verdict
	for s := e.Lo; s <= m.hi(e); s++ {
		v, err := m.explain(e, frames, s)
		if err == nil {
			if v.Complete {
				return v, nil
			}
			if found == nil {
				found = &v
			}
			continue
		}
		if s == e.Lo || s == m.hi(e) || len(reasons) < 3 {
			reasons = append(reasons, fmt.Sprintf("from %d: %v", s, err))
		}
	}
	if found != nil {
		return *found, nil
	}
	return Verdict{}, fmt.Errorf("watch %s: no start explains the frames:\n  %s\nframes:\n%swrites:\n%s",
		e, strings.Join(reasons, "\n  "), DescribeFrames(frames), m.History())
}

func checkError(e Expectation, frames []watchclient.Frame) (Verdict, error) {
	v := Verdict{Error: true}
	if len(frames) == 0 {
		return v, nil
	}
	code, _, msg, ok := ErrorFrame(frames)
	wantMsg := msg == e.ErrorMessage || (e.ErrorCode == 504 && strings.HasPrefix(msg, e.ErrorMessage))
	if !ok || len(frames) != 1 || code != e.ErrorCode || !wantMsg {
		return v, fmt.Errorf("watch %s: want exactly one ERROR %d %q, got\n%s", e, e.ErrorCode, e.ErrorMessage, DescribeFrames(frames))
	}
	if st, _ := frames[0].Status(); st != nil {
		wantReason := map[int32]metav1.StatusReason{410: metav1.StatusReasonExpired, 504: metav1.StatusReasonTimeout,
			500: metav1.StatusReasonInternalError}[e.ErrorCode]
		if st.Status != metav1.StatusFailure || st.Reason != wantReason || st.Kind != "Status" || st.APIVersion != "v1" {
			return v, fmt.Errorf("watch %s: ERROR Status %+v, want Failure %s", e, st, wantReason)
		}
	}
	v.Complete = true
	return v, nil
}

func (m *Model) explain(e Expectation, frames []watchclient.Frame, s int64) (Verdict, error) {
	v := Verdict{Start: s}
	i := 0
	if e.Replay {
		for _, o := range m.initialAt(e, s) {
			if i == len(frames) {
				return v, nil
			}
			f := frames[i]
			got, err := canonical(f.Object)
			if err != nil {
				return v, fmt.Errorf("frame %d: %v", i, err)
			}
			if f.Type != "ADDED" || got != o.at(o.Rev) {
				return v, fmt.Errorf("frame %d: %s, want initial ADDED %s %s", i, describeFrame(f), strings.TrimPrefix(o.Key, EtcdPrefix), o)
			}
			i++
			v.Events++
		}
	}
	live := m.liveAfter(e, s)
	lastBookmark := int64(-1)
	if e.Replay && e.Spec.Bookmarks {
		if i == len(frames) {
			return v, nil
		}
		f := frames[i]
		if f.Type != "BOOKMARK" {
			return v, fmt.Errorf("frame %d: %s, want the initial-events-end bookmark", i, describeFrame(f))
		}
		rv, annotated, err := bookmarkRV(f)
		if err != nil {
			return v, fmt.Errorf("frame %d: %v", i, err)
		}
		if !annotated || rv != s {
			return v, fmt.Errorf("frame %d: bookmark at %d annotated=%t, want the initial-events-end bookmark at %d", i, rv, annotated, s)
		}
		lastBookmark = rv
		v.ResumeRV, v.HasResumeRV = rv, true
		v.Bookmarks++
		i++
	} else if !e.Replay {
		// A watch from a resourceVersion resumes from it until something arrives.
		if rv, err := strconv.ParseInt(e.Spec.ResourceVersion, 10, 64); err == nil && rv > 0 {
			v.ResumeRV, v.HasResumeRV = rv, true
		}
	}
	delivered := 0
	for ; i < len(frames); i++ {
		f := frames[i]
		switch f.Type {
		case "BOOKMARK":
			if !e.Spec.Bookmarks {
				return v, fmt.Errorf("frame %d: %s on a watch without allowWatchBookmarks", i, describeFrame(f))
			}
			rv, annotated, err := bookmarkRV(f)
			if err != nil {
				return v, fmt.Errorf("frame %d: %v", i, err)
			}
			switch {
			case annotated:
				return v, fmt.Errorf("frame %d: an initial-events-end bookmark at %d after the initial events", i, rv)
			case rv <= s:
				return v, fmt.Errorf("frame %d: bookmark at %d, not after the start %d", i, rv, s)
			case rv < lastBookmark:
				return v, fmt.Errorf("frame %d: bookmark at %d after one at %d", i, rv, lastBookmark)
			case delivered > 0 && rv < live[delivered-1].rev:
				return v, fmt.Errorf("frame %d: bookmark at %d after the event at %d", i, rv, live[delivered-1].rev)
			case delivered < len(live) && rv >= live[delivered].rev:
				return v, fmt.Errorf("frame %d: bookmark at %d passes the undelivered %s at %d", i, rv, live[delivered].typ, live[delivered].rev)
			}
			lastBookmark = rv
			v.ResumeRV, v.HasResumeRV = rv, true
			v.Bookmarks++
		case "ADDED", "MODIFIED", "DELETED":
			if delivered == len(live) {
				return v, fmt.Errorf("frame %d: %s, where no further event is due", i, describeFrame(f))
			}
			want := live[delivered]
			got, err := canonical(f.Object)
			if err != nil {
				return v, fmt.Errorf("frame %d: %v", i, err)
			}
			if string(f.Type) != want.typ || got != want.json {
				return v, fmt.Errorf("frame %d: %s, want %s at %d:\n    got  %s\n    want %s", i, describeFrame(f), want.typ, want.rev, got, want.json)
			}
			delivered++
			v.Events++
			v.ResumeRV, v.HasResumeRV = want.rev, true
		case "ERROR":
			last := s
			if v.HasResumeRV {
				last = v.ResumeRV
			}
			code, _, msg, _ := ErrorFrame(frames[i:])
			if i != len(frames)-1 || !m.mayEndCompacted(e, last, code, msg) {
				return v, fmt.Errorf("frame %d: unexpected %s after revision %d", i, describeFrame(f), last)
			}
			v.Error, v.Complete = true, true
			return v, nil
		default:
			return v, fmt.Errorf("frame %d: unexpected %s %s", i, f.Type, f.Object)
		}
	}
	v.Complete = delivered == len(live)
	return v, nil
}

// compactedWatch is the etcd3 storage's ERROR for a watch that etcd compacted.
const compactedWatch = "The resourceVersion for the provided watch is too old."

// DescribeFrames describes frames one a line.
func DescribeFrames(frames []watchclient.Frame) string {
	var b strings.Builder
	for i, f := range frames {
		fmt.Fprintf(&b, "  %d: %s\n", i, describeFrame(f))
	}
	return b.String()
}
