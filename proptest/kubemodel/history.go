package kubemodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/listwatch/listwatch/storage"
)

// ErrHistory is the error of a write the History cannot take: out of revision order, a deletion of
// an absent object, or a state that does not belong to its key and revision.
var ErrHistory = errors.New("kubemodel: write does not fit the history")

// Object is one stored state of an object: what selecting and ordering it needs, and how a watch
// delivers it.
type Object struct {
	// Key is the object's storage key. Initial events come in the byte order of keys, as etcd ranges
	// them and the watch cache's store keeps them; a Selection covers keys by prefix.
	Key string
	// Rev is the revision that wrote this state: the resourceVersion it carries when listed.
	Rev int64
	// Labels and Fields are what a watch's predicate matches.
	Labels labels.Set
	Fields fields.Set
	// Render is the object as a watch delivers it carrying resourceVersion rv, in the form the test
	// compares delivered events in (Event.Object): a DELETED event carries the last state at the
	// deletion's revision.
	Render func(rv int64) string
}

func (o *Object) String() string {
	if o == nil {
		return "absent"
	}
	return o.Key + " " + o.attributes()
}

// attributes describes the state without its key.
func (o *Object) attributes() string {
	if o == nil {
		return "absent"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "rv=%d", o.Rev)
	if len(o.Labels) > 0 {
		b.WriteString(" labels=" + o.Labels.String())
	}
	for _, k := range slices.Sorted(maps.Keys(o.Fields)) {
		// The key already names the object.
		if v := o.Fields[k]; v != "" && k != "metadata.name" && k != "metadata.namespace" {
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	return b.String()
}

// FromUnstructured is the stored state u of the object at key, matched by the attributes attrs
// returns. Its Render is the canonical JSON (Canonical) of a copy of u carrying the asked
// resourceVersion, which is what EventOf makes of a delivered *unstructured.Unstructured.
func FromUnstructured(key string, u *unstructured.Unstructured, attrs storage.AttrFunc) (*Object, error) {
	rev, err := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: %s has resourceVersion %q", ErrHistory, key, u.GetResourceVersion())
	}
	if attrs == nil {
		attrs = storage.DefaultNamespaceScopedAttr
	}
	l, f, err := attrs(u)
	if err != nil {
		return nil, fmt.Errorf("%w: attributes of %s: %v", ErrHistory, key, err)
	}
	u = u.DeepCopy()
	rendered := map[int64]string{}
	render := func(rv int64) string {
		if s, ok := rendered[rv]; ok {
			return s
		}
		c := u.DeepCopy()
		c.SetResourceVersion(strconv.FormatInt(rv, 10))
		data, err := json.Marshal(c.Object)
		if err != nil {
			return fmt.Sprintf("<%s does not encode: %v>", key, err)
		}
		rendered[rv] = string(data)
		return string(data)
	}
	return &Object{Key: key, Rev: rev, Labels: l, Fields: f, Render: render}, nil
}

// Write is one change of one object at revision Rev: its state before and after (nil: absent).
type Write struct {
	Rev       int64
	Key       string
	Prev, Cur *Object
}

// History is the write history of the objects a test watches, in revision order, and the store's
// revision (which writes of other resources move too). It is kept by one goroutine.
type History struct {
	// Writes are the writes of watched objects, in revision order; several may share a revision (a
	// transaction or a lease's expiry).
	Writes []Write
	// Rev is the store's revision after the last write recorded (Apply or Advance).
	Rev int64

	state map[string]*Object
}

// NewHistory is the history of a store at revision rev holding none of the objects.
func NewHistory(rev int64) *History {
	return &History{Rev: rev, state: map[string]*Object{}}
}

// Apply records a write at rev of the object at key: cur is its new state, nil for a deletion.
// Writes come in revision order; several keys may change at one revision, each once.
func (h *History) Apply(rev int64, key string, cur *Object) error {
	last := h.LastRev()
	switch {
	case rev < h.Rev:
		return fmt.Errorf("%w: a write of %s at %d after revision %d", ErrHistory, key, rev, h.Rev)
	case rev == h.Rev && last != rev:
		return fmt.Errorf("%w: a write of %s at %d, which is not a new revision", ErrHistory, key, rev)
	case cur == nil && h.state[key] == nil:
		return fmt.Errorf("%w: a deletion of %s, which is absent", ErrHistory, key)
	case cur != nil && (cur.Key != key || cur.Rev != rev):
		return fmt.Errorf("%w: the state %s written at %s %d", ErrHistory, cur, key, rev)
	}
	for i := len(h.Writes) - 1; i >= 0 && h.Writes[i].Rev == rev; i-- {
		if h.Writes[i].Key == key {
			return fmt.Errorf("%w: %s written twice at %d", ErrHistory, key, rev)
		}
	}
	h.Writes = append(h.Writes, Write{Rev: rev, Key: key, Prev: h.state[key], Cur: cur})
	if cur == nil {
		delete(h.state, key)
	} else {
		h.state[key] = cur
	}
	h.Rev = rev
	return nil
}

// Advance records that the store reached rev by writes the history does not hold (other resources).
func (h *History) Advance(rev int64) error {
	if rev < h.Rev {
		return fmt.Errorf("%w: the store went back from revision %d to %d", ErrHistory, h.Rev, rev)
	}
	h.Rev = rev
	return nil
}

// State is the current state of the object at key (nil: absent).
func (h *History) State(key string) *Object { return h.state[key] }

// LastRev is the revision of the last write recorded by Apply (0: none).
func (h *History) LastRev() int64 {
	if len(h.Writes) == 0 {
		return 0
	}
	return h.Writes[len(h.Writes)-1].Rev
}

// StateAt is every object present at revision rev, in key order.
func (h *History) StateAt(rev int64) []*Object {
	st := map[string]*Object{}
	for _, w := range h.Writes {
		if w.Rev > rev {
			break
		}
		if w.Cur == nil {
			delete(st, w.Key)
		} else {
			st[w.Key] = w.Cur
		}
	}
	out := make([]*Object, 0, len(st))
	for _, k := range slices.Sorted(maps.Keys(st)) {
		out = append(out, st[k])
	}
	return out
}

// String describes the writes, one a line, for failure messages.
func (h *History) String() string {
	var b strings.Builder
	for _, w := range h.Writes {
		fmt.Fprintf(&b, "  %d %s: %s -> %s\n", w.Rev, w.Key, w.Prev.attributes(), w.Cur.attributes())
	}
	return b.String()
}
