package chaintest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/httpwatch/watchclient"
	"github.com/listwatch/listwatch/proptest/kubemodel"
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

// storedPod is one stored revision of a pod: its content as the store holds it (no
// resourceVersion), rendered as canonical JSON at whatever resourceVersion a watch delivers it.
type storedPod struct {
	content   map[string]any
	canonical map[int64]string
}

// at is the canonical JSON of the pod carrying resourceVersion rev.
func (o *storedPod) at(rev int64) string {
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

// decodeObject is the pod stored at key at revision rev, as the model holds it: its labels and the
// fields pod selectors match, and its content for rendering.
func decodeObject(key string, value []byte, rev int64) (*kubemodel.Object, error) {
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
	o := &kubemodel.Object{Key: key, Rev: rev, Labels: labels.Set{}}
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
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
		"metadata.name":      name,
		"metadata.namespace": namespace,
		"spec.nodeName":      str("spec", "nodeName"),
		"status.phase":       str("status", "phase"),
	}
	o.Render = (&storedPod{content: content}).at
	return o, nil
}

// Model is the write history of the pods of a chain, in kubemodel's terms, and the state of the
// chain the start of a watch depends on. It is kept by the one goroutine that writes.
type Model struct {
	// History is every pod write (keys are etcd keys) and the store's revision (Rev), which writes
	// of other keys move too.
	*kubemodel.History
	// Cached says the chain has a watch cache; the answers differ for past and future
	// resourceVersions.
	Cached bool
	// ListRV is the revision of the watch cache's last relist.
	ListRV int64
	// CompactRev is the last compaction's revision (0: none).
	CompactRev int64
	// CacheAt is a revision the watch cache is known to have reached (by ListRV, say): watches
	// that start wherever the cache is start there or later.
	CacheAt int64
	// Trigger is the field the watch cache indexes watchers by (the resource's TriggerField).
	Trigger string
}

// NewModel returns the model of a fresh chain.
func (c *Chain) NewModel() *Model {
	rev := c.Store.Rev()
	return &Model{History: kubemodel.NewHistory(rev), Cached: c.Cacher != nil, ListRV: rev, Trigger: c.Resource.TriggerField}
}

// Dispatch is where the watch cache indexes the watcher of a watch request with spec, which decides
// the writes offered to it (kubemodel.DispatchOf): the request's namespace is the path's, its name
// the field selector's, and the HTTP API names the resource's trigger field in the predicate's
// IndexFields, as the pod registry's MatchPod does.
func (m *Model) Dispatch(spec WatchSpec) (kubemodel.Dispatch, error) {
	field, err := fields.ParseSelector(spec.Field)
	if err != nil {
		return kubemodel.Dispatch{}, err
	}
	var indexFields []string
	if m.Trigger != "" {
		indexFields = []string{m.Trigger}
	}
	return kubemodel.DispatchOf(spec.Namespace, "", field, indexFields, m.Trigger), nil
}

// LastPodRev is the revision of the last pod write (0: none).
func (m *Model) LastPodRev() int64 { return m.LastRev() }

// Observe records the effect of a write that may have changed the pod at key: it reads the store,
// which no one else writes meanwhile. A write elsewhere (other keys) only moves Rev.
func (m *Model) Observe(st *store.Store, key string) error {
	rev := st.Rev()
	switch {
	case rev == m.Rev:
		return nil
	case rev < m.Rev:
		return fmt.Errorf("the store went back from revision %d to %d", m.Rev, rev)
	case rev != m.Rev+1:
		return fmt.Errorf("revision moved from %d to %d for one write of %s", m.Rev, rev, key)
	case !strings.HasPrefix(key, EtcdPrefix):
		return m.Advance(rev)
	}
	resp, err := st.Range(&store.RangeRequest{Key: []byte(key)})
	if err != nil {
		return err
	}
	switch {
	case len(resp.Kvs) == 1 && resp.Kvs[0].ModRevision == rev:
		cur, err := decodeObject(key, resp.Kvs[0].Value, rev)
		if err != nil {
			return err
		}
		return m.Apply(rev, key, cur)
	case len(resp.Kvs) == 0 && m.State(key) != nil:
		return m.Apply(rev, key, nil)
	default:
		// Not a change of key: the write went elsewhere.
		return m.Advance(rev)
	}
}

// ObserveRevoke records a write at rev that deleted several pods at once (a lease expiry), in key
// order, as etcd delivers them.
func (m *Model) ObserveRevoke(rev int64, keys []string) error {
	if rev != m.Rev+1 {
		return fmt.Errorf("revision moved from %d to %d for one revoke", m.Rev, rev)
	}
	slices.Sort(keys)
	for _, key := range keys {
		if m.State(key) == nil {
			return fmt.Errorf("revoke of %s, which the model does not have", key)
		}
		if err := m.Apply(rev, key, nil); err != nil {
			return err
		}
	}
	return nil
}

// Expectation is what the model says a watch opened now must do; Check judges its frames by it.
type Expectation struct {
	Spec WatchSpec
	kubemodel.Expectation
}

// ErrorCode is the code of the one ERROR the watch must deliver instead of events (0: none).
func (e Expectation) ErrorCode() int32 {
	if e.Refusal == nil {
		return 0
	}
	return e.Refusal.Code
}

func (e Expectation) String() string { return e.Spec.String() + ": " + e.Expectation.String() }

// selection is what the HTTP API asks the storage to watch for spec: the namespace narrows the key,
// the selectors filter.
func selection(spec WatchSpec) (kubemodel.Selection, error) {
	sel := kubemodel.Selection{Key: EtcdPrefix, Recursive: true}
	if spec.Namespace != "" {
		sel.Key = EtcdPrefix + spec.Namespace
	}
	var err error
	if sel.Predicate.Label, err = labels.Parse(spec.Label); err != nil {
		return sel, err
	}
	if sel.Predicate.Field, err = fields.ParseSelector(spec.Field); err != nil {
		return sel, err
	}
	sel.Predicate.AllowWatchBookmarks = spec.Bookmarks
	return sel, nil
}

// Expect says what a watch opened now with spec must deliver. The caller opens it before any
// further write. The HTTP API defaults the request as the apiserver does, then hands it to the
// watch cache, or to the etcd3 storage in an uncached chain.
func (m *Model) Expect(spec WatchSpec) (Expectation, error) {
	e := Expectation{Spec: spec}
	sel, err := selection(spec)
	if err != nil {
		return e, err
	}
	rv := spec.ResourceVersion
	if spec.Unset {
		rv = ""
	}
	req := kubemodel.Request{ResourceVersion: rv, SendInitialEvents: spec.SendInitialEvents, AllowWatchBookmarks: spec.Bookmarks}.WithWatchListDefaults()
	g := m.Rev
	if !m.Cached {
		e.Expectation, err = m.ExpectStorage(req, sel, kubemodel.Storage{Rev: g, CompactRev: m.CompactRev})
		return e, err
	}
	// Nothing writes while the watch opens, so the cache is at etcd's revision g at most, and at
	// least where it is known to be.
	e.Expectation, err = m.ExpectCache(req, sel, kubemodel.Cache{Lo: max(m.ListRV, min(m.CacheAt, g)), Hi: g, EtcdRev: g, ListRV: m.ListRV})
	return e, err
}

// Verdict is what Check concluded about a watch's frames.
type Verdict = kubemodel.Verdict

// Owed is the fewest ADDED, MODIFIED and DELETED frames the watch must deliver by now
// (kubemodel's History.Owed).
func (m *Model) Owed(e Expectation) int { return m.History.Owed(e.Expectation) }

// Check judges a watch's frames (all of them so far) by kubemodel's History.Check, after checking
// what only the HTTP API adds: BOOKMARK frames carry an empty v1 Pod, ERROR frames a v1 Status.
func (m *Model) Check(e Expectation, frames []watchclient.Frame) (Verdict, error) {
	evs, err := frameEvents(frames)
	if err != nil {
		return Verdict{}, fmt.Errorf("watch %s: %w\nframes:\n%s", e, err, DescribeFrames(frames))
	}
	v, err := m.History.Check(e.Expectation, evs)
	if err != nil {
		return v, fmt.Errorf("watch %s: %w", e.Spec, err)
	}
	return v, nil
}

// frameEvents reads frames as kubemodel events: objects as canonical JSON, as storedPod renders them.
func frameEvents(frames []watchclient.Frame) ([]kubemodel.Event, error) {
	evs := make([]kubemodel.Event, 0, len(frames))
	for i, f := range frames {
		// Summary stands for the object alone: kubemodel names the type itself.
		ev := kubemodel.Event{Type: f.Type, Summary: strings.TrimPrefix(describeFrame(f), string(f.Type)+" ")}
		switch f.Type {
		case watch.Error:
			st, err := f.Status()
			if err != nil {
				return nil, fmt.Errorf("frame %d: %w", i, err)
			}
			if st.APIVersion != "v1" {
				return nil, fmt.Errorf("frame %d: ERROR Status of apiVersion %q", i, st.APIVersion)
			}
			ev.Status = st
		case watch.Bookmark:
			tm, meta, err := f.Meta()
			if err != nil {
				return nil, fmt.Errorf("frame %d: %w", i, err)
			}
			if tm.Kind != "Pod" || tm.APIVersion != "v1" {
				return nil, fmt.Errorf("frame %d: bookmark of kind %q apiVersion %q", i, tm.Kind, tm.APIVersion)
			}
			if ev, err = kubemodel.BookmarkEvent(&meta); err != nil {
				return nil, fmt.Errorf("frame %d: %w", i, err)
			}
		case watch.Added, watch.Modified, watch.Deleted:
			_, meta, err := f.Meta()
			if err != nil {
				return nil, fmt.Errorf("frame %d: %w", i, err)
			}
			if ev.RV, err = strconv.ParseInt(meta.ResourceVersion, 10, 64); err != nil {
				return nil, fmt.Errorf("frame %d: resourceVersion %q", i, meta.ResourceVersion)
			}
			if ev.Object, err = kubemodel.Canonical(f.Object); err != nil {
				return nil, fmt.Errorf("frame %d: %w", i, err)
			}
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// DescribeFrames describes frames one a line.
func DescribeFrames(frames []watchclient.Frame) string {
	var b strings.Builder
	for i, f := range frames {
		fmt.Fprintf(&b, "  %d: %s\n", i, describeFrame(f))
	}
	return b.String()
}
