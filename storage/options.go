package storage

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// ListOptions are the options of GetList and Watch, as storage.ListOptions.
type ListOptions struct {
	// ResourceVersion is the raw resourceVersion the client sent. "" and "0" both parse to 0 but mean
	// different things (consistent read versus any version), so the string is kept as given.
	ResourceVersion string
	// ResourceVersionMatch is how ResourceVersion applies to a list: "" (legacy), NotOlderThan or Exact.
	ResourceVersionMatch metav1.ResourceVersionMatch
	// Predicate selects the objects returned or watched.
	Predicate Predicate
	// Recursive treats the key as a prefix (a directory); otherwise the key names one object.
	Recursive bool
	// ProgressNotify asks a watch for BOOKMARK events built from etcd progress notifications. It is meant
	// for internal clients such as the watch cache; external clients set Predicate.AllowWatchBookmarks.
	ProgressNotify bool
	// SendInitialEvents asks a watch to begin with the current state as ADDED events, ended (with
	// Predicate.AllowWatchBookmarks) by a BOOKMARK annotated k8s.io/initial-events-end.
	SendInitialEvents *bool
}

// GetOptions are the options of Get, as storage.GetOptions.
type GetOptions struct {
	// IgnoreNotFound returns a zero object instead of a KeyNotFound error.
	IgnoreNotFound bool
	// ResourceVersion is a "not older than" constraint on the returned data; "" means none.
	ResourceVersion string
}

// DeleteOptions are the options of Delete, as storage.DeleteOptions.
type DeleteOptions struct {
	// ExpectTransformOrDecodeError deletes an object only if it can no longer be read (unsafe deletion of
	// a corrupt object). It is honoured only while AllowUnsafeMalformedObjectDeletion is on.
	ExpectTransformOrDecodeError bool
}

// AttrFunc returns the label and field sets a Predicate matches against.
type AttrFunc func(obj runtime.Object) (labels.Set, fields.Set, error)

// DefaultNamespaceScopedAttr returns the object's labels and the fields metadata.name and
// metadata.namespace. It is the GetAttrs a Predicate uses when none is set.
//
// Mirrors storage/selection_predicate.go DefaultNamespaceScopedAttr.
func DefaultNamespaceScopedAttr(obj runtime.Object) (labels.Set, fields.Set, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, err
	}
	return labels.Set(m.GetLabels()), fields.Set{
		"metadata.name":      m.GetName(),
		"metadata.namespace": m.GetNamespace(),
	}, nil
}

// DefaultClusterScopedAttr returns the object's labels and the field metadata.name.
//
// Mirrors storage/selection_predicate.go DefaultClusterScopedAttr.
func DefaultClusterScopedAttr(obj runtime.Object) (labels.Set, fields.Set, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, err
	}
	return labels.Set(m.GetLabels()), fields.Set{"metadata.name": m.GetName()}, nil
}

// Predicate selects objects by label and field selectors, as storage.SelectionPredicate. A nil Label
// or Field selects everything; a nil GetAttrs means DefaultNamespaceScopedAttr.
type Predicate struct {
	Label    labels.Selector
	Field    fields.Selector
	GetAttrs AttrFunc
	// Limit caps the number of items of one GetList page; 0 means no paging.
	Limit int64
	// Continue is the continue token of the previous GetList page.
	Continue string
	// AllowWatchBookmarks lets a watch-list send its initial-events-end BOOKMARK. The etcd watch sends no
	// other bookmarks for it (those come from ListOptions.ProgressNotify).
	AllowWatchBookmarks bool
	// IndexFields are the fields the resource's registry lets a watch cache index this predicate's
	// watchers by (pods: spec.nodeName, as MatchPod sets it). A watch cache uses its trigger only for
	// a predicate that names the trigger's field here and pins that field to one value.
	IndexFields []string
}

// Everything is the predicate that selects every object.
var Everything = Predicate{Label: labels.Everything(), Field: fields.Everything()}

// Empty reports whether the predicate filters nothing.
//
// Mirrors storage/selection_predicate.go SelectionPredicate.Empty.
func (p *Predicate) Empty() bool {
	return (p.Label == nil || p.Label.Empty()) && (p.Field == nil || p.Field.Empty())
}

// MatchesEverything is Empty, named for readers of the watch path.
func (p *Predicate) MatchesEverything() bool { return p.Empty() }

// Matches reports whether obj's attributes satisfy both selectors. An error from GetAttrs is returned
// with false; callers on the watch and list paths treat it as no match.
//
// Mirrors storage/selection_predicate.go SelectionPredicate.Matches.
func (p *Predicate) Matches(obj runtime.Object) (bool, error) {
	if p.Empty() {
		return true, nil
	}
	attrs := p.GetAttrs
	if attrs == nil {
		attrs = DefaultNamespaceScopedAttr
	}
	ls, fs, err := attrs(obj)
	if err != nil {
		return false, err
	}
	return p.MatchesObjectAttributes(ls, fs), nil
}

// MatchesObjectAttributes reports whether the given label and field sets satisfy both selectors.
func (p *Predicate) MatchesObjectAttributes(l labels.Set, f fields.Set) bool {
	if p.Label != nil && !p.Label.Matches(l) {
		return false
	}
	return p.Field == nil || p.Field.Matches(f)
}

// MatchesSingle returns the name the field selector pins with metadata.name=..., if any.
//
// Mirrors storage/selection_predicate.go SelectionPredicate.MatchesSingle.
func (p *Predicate) MatchesSingle() (string, bool) {
	if len(p.Continue) > 0 || p.Field == nil {
		return "", false
	}
	return p.Field.RequiresExactMatch("metadata.name")
}

// MatchesSingleNamespace returns the namespace the field selector pins with metadata.namespace=..., if any.
//
// Mirrors storage/selection_predicate.go SelectionPredicate.MatchesSingleNamespace.
func (p *Predicate) MatchesSingleNamespace() (string, bool) {
	if len(p.Continue) > 0 || p.Field == nil {
		return "", false
	}
	return p.Field.RequiresExactMatch("metadata.namespace")
}

// Preconditions must hold on the stored object before an update or delete, as storage.Preconditions.
type Preconditions struct {
	UID             *types.UID
	ResourceVersion *string
}

// Check returns an InvalidObj storage error naming the first precondition obj fails.
//
// Mirrors storage/interfaces.go Preconditions.Check.
func (p *Preconditions) Check(key string, obj runtime.Object) error {
	if p == nil {
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return NewInternalError(fmt.Errorf("can't enforce preconditions %v on un-introspectable object %v, got error: %w", *p, obj, err))
	}
	if p.UID != nil && *p.UID != m.GetUID() {
		return NewInvalidObjError(key, fmt.Sprintf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, m.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != m.GetResourceVersion() {
		return NewInvalidObjError(key, fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, m.GetResourceVersion()))
	}
	return nil
}

// ResponseMeta is what GuaranteedUpdate tells tryUpdate about the stored object.
type ResponseMeta struct {
	// TTL is the remaining time to live in seconds; 0 when the object has none or it is unknown.
	TTL int64
	// ResourceVersion is the mod revision the object was read at; 0 when it does not exist.
	ResourceVersion uint64
}

// UpdateFunc computes the new object from the current one. A non-nil ttl gives the object a lease of
// that many seconds.
type UpdateFunc func(input runtime.Object, res ResponseMeta) (output runtime.Object, ttl *uint64, err error)

// SimpleUpdate adapts a function of the current object to an UpdateFunc that keeps no TTL.
func SimpleUpdate(fn func(runtime.Object) (runtime.Object, error)) UpdateFunc {
	return func(input runtime.Object, _ ResponseMeta) (runtime.Object, *uint64, error) {
		out, err := fn(input)
		return out, nil, err
	}
}

// ValidateObjectFunc vets the stored object before a delete; obj is nil when it cannot be read.
type ValidateObjectFunc func(ctx context.Context, obj runtime.Object) error

// ValidateAllObjectFunc admits every object.
func ValidateAllObjectFunc(context.Context, runtime.Object) error { return nil }
