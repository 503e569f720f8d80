package kubemodel

import (
	"slices"

	"k8s.io/apimachinery/pkg/fields"
)

// Dispatch is where a watch cache indexes a watcher, which decides the events its dispatcher offers
// to it (k8s.io/apiserver pkg/storage/cacher/cacher.go Watch, which registers the watcher, and
// startDispatching, which picks the watchers of an event). A watcher indexed by a trigger value is
// offered the events whose object has that value now or had it before; any other is offered the
// events of its scope: its namespace and name, or its namespace, or its name, or everything.
type Dispatch struct {
	// Namespace and Name are the watcher's scope ("" for any).
	Namespace, Name string
	// Trigger is the field of the cache's trigger when the watcher is indexed by it ("" otherwise),
	// and Value the value the watcher's field selector pins it to.
	Trigger, Value string
}

// DispatchOf is where a cache whose trigger is the field trigger ("" for none) indexes the watch of
// a request for namespace and name ("" for none: the apiserver's request namespace and
// RequestInfo.Name) with the field selector field and a predicate naming indexFields. The request's
// namespace and name win; the field selector's metadata.namespace and metadata.name stand in where
// the request has none. The trigger indexes the watcher only if indexFields names it and the
// selector pins it to one value.
//
// Mirrors cacher.go Watch.
func DispatchOf(namespace, name string, field fields.Selector, indexFields []string, trigger string) Dispatch {
	d := Dispatch{Namespace: namespace, Name: name}
	if field == nil {
		field = fields.Everything()
	}
	if d.Namespace == "" {
		d.Namespace, _ = field.RequiresExactMatch("metadata.namespace")
	}
	if d.Name == "" {
		d.Name, _ = field.RequiresExactMatch("metadata.name")
	}
	if trigger != "" && slices.Contains(indexFields, trigger) {
		if v, ok := field.RequiresExactMatch(trigger); ok {
			d.Trigger, d.Value = trigger, v
		}
	}
	return d
}

// offers reports whether the cache offers w to a watcher indexed by d.
//
// Mirrors cacher.go startDispatching and triggerValuesThreadUnsafe.
func (d Dispatch) offers(w Write) bool {
	obj := w.Cur
	if obj == nil {
		obj = w.Prev
	}
	if d.Trigger != "" {
		return obj.Fields[d.Trigger] == d.Value || (w.Prev != nil && w.Prev.Fields[d.Trigger] == d.Value)
	}
	ns, name := obj.Fields["metadata.namespace"], obj.Fields["metadata.name"]
	switch {
	case d.Namespace != "" && d.Name != "":
		return ns != "" && d.Namespace == ns && d.Name == name
	case d.Namespace != "":
		return ns != "" && d.Namespace == ns
	case d.Name != "":
		return name != "" && d.Name == name
	default:
		return true
	}
}

// Offered counts the writes after revision after that the cache offers to a watcher indexed by d:
// each takes a place in the watcher's input until its goroutine takes it, and an offer that finds
// the input full closes a watcher that does not make room within the dispatcher's budget.
func (h *History) Offered(d Dispatch, after int64) int {
	n := 0
	for _, w := range h.Writes {
		if w.Rev > after && d.offers(w) {
			n++
		}
	}
	return n
}
