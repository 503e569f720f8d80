package cache

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/storage"
)

// metaObject is an API object with ObjectMeta.
type metaObject interface {
	runtime.Object
	metav1.Object
}

// serialization is one encoding of a CachingObject, computed at most once.
type serialization struct {
	id   runtime.Identifier
	once sync.Once
	raw  []byte
	err  error
}

// CachingObject is the object of every ADDED, MODIFIED and DELETED event the Cacher dispatches to its
// watchers. All the watchers that receive an event share one CachingObject, which remembers each
// encoding of the object: however many watchers write the event, the object is serialized at most once
// per encoder.
//
// It implements runtime.CacheableObject, so apimachinery's serializers (the JSON serializer,
// unstructured.UnstructuredJSONScheme, protobuf) already reuse the cached bytes when given it: call
// encoder.Encode(event.Object, w). Code that frames objects itself calls CacheEncode with the
// encoder's Identifier. GetObject returns a private deep copy of the wrapped object.
//
// It also implements metav1.Object so that meta.Accessor works on event objects. The object is shared
// between watchers and must not be modified; a setter that changes a field copies the object first and
// drops the cached encodings, as upstream, but the change is seen by every watcher holding it.
//
// Mirrors cacher/caching_object.go cachingObject.
type CachingObject struct {
	mu         sync.RWMutex
	deepCopied bool
	object     metaObject

	// first is the first encoding asked for, read without locking: nearly every event is written with
	// one encoder only.
	first atomic.Pointer[serialization]
	more  []*serialization // guarded by mu
}

var (
	_ runtime.CacheableObject = (*CachingObject)(nil)
	_ metav1.Object           = (*CachingObject)(nil)
)

// newCachingObject wraps object without copying it; it fails if object has no ObjectMeta.
func newCachingObject(object runtime.Object) (*CachingObject, error) {
	obj, ok := object.(metaObject)
	if !ok {
		return nil, fmt.Errorf("can't cast object to metav1.Object: %T", object)
	}
	return &CachingObject{object: obj}, nil
}

func (o *CachingObject) serializationFor(id runtime.Identifier) *serialization {
	if s := o.first.Load(); s != nil && s.id == id {
		return s
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.first.Load()
	if s == nil {
		s = &serialization{id: id}
		o.first.Store(s)
		return s
	}
	if s.id == id {
		return s
	}
	for _, s := range o.more {
		if s.id == id {
			return s
		}
	}
	s = &serialization{id: id}
	o.more = append(o.more, s)
	return s
}

// cachingCopy is event as watchers deliver it: a copy whose objects are wrapped in CachingObjects,
// a DELETED event's previous object at the deletion's resourceVersion.
//
// Mirrors cacher.go setCachingObjects.
func cachingCopy(event *watchCacheEvent, versioner storage.Versioner, logger *slog.Logger) *watchCacheEvent {
	c := *event
	switch c.Type {
	case watch.Added, watch.Modified:
		if co, err := newCachingObject(c.Object); err == nil {
			c.Object = co
		} else {
			logger.Error("couldn't create cachingObject", "err", err)
		}
	case watch.Deleted:
		if c.PrevObject == nil {
			break
		}
		prev := c.PrevObject.DeepCopyObject()
		if err := versioner.UpdateObject(prev, c.ResourceVersion); err != nil {
			logger.Error("failure to version api object", "resourceVersion", c.ResourceVersion, "err", err)
		}
		if co, err := newCachingObject(prev); err == nil {
			co.deepCopied = true
			c.PrevObject = co
		} else {
			logger.Error("couldn't create cachingObject", "err", err)
		}
	}
	return &c
}

// CacheEncode writes the encoding of the object that encoder id produces, computing it with encode the
// first time only. It assumes encode always produces the same bytes for the same id.
//
// Implements runtime.CacheableObject.
func (o *CachingObject) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	s := o.serializationFor(id)
	s.once.Do(func() {
		var buf bytes.Buffer
		// Encoders may touch the object they are given, so they get a private copy.
		s.err = encode(o.GetObject(), &buf)
		s.raw = buf.Bytes()
	})
	if s.err != nil {
		return s.err
	}
	if sp, ok := w.(runtime.Splice); ok {
		sp.Splice(s.raw)
		return nil
	}
	_, err := w.Write(s.raw)
	return err
}

// GetObject returns a deep copy of the wrapped object.
//
// Implements runtime.CacheableObject.
func (o *CachingObject) GetObject() runtime.Object {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.DeepCopyObject()
}

// GetObjectKind implements runtime.Object.
func (o *CachingObject) GetObjectKind() schema.ObjectKind {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetObjectKind()
}

// DeepCopyObject implements runtime.Object; the copy starts with no cached encoding.
func (o *CachingObject) DeepCopyObject() runtime.Object {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return &CachingObject{deepCopied: true, object: o.object.DeepCopyObject().(metaObject)}
}

// conditionalSet applies set unless isNoop, copying the object on the first real change and dropping
// the cached encodings, which no longer match.
func (o *CachingObject) conditionalSet(isNoop func() bool, set func()) {
	o.mu.RLock()
	noop := isNoop()
	o.mu.RUnlock()
	if noop {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if isNoop() {
		return
	}
	if !o.deepCopied {
		o.object = o.object.DeepCopyObject().(metaObject)
		o.deepCopied = true
	}
	o.first.Store(nil)
	o.more = nil
	set()
}

// The metav1.Object accessors: getters read the wrapped object, setters go through conditionalSet.

// GetNamespace implements metav1.Object.
func (o *CachingObject) GetNamespace() string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetNamespace()
}

// SetNamespace implements metav1.Object.
func (o *CachingObject) SetNamespace(v string) {
	o.conditionalSet(func() bool { return o.object.GetNamespace() == v }, func() { o.object.SetNamespace(v) })
}

// GetName implements metav1.Object.
func (o *CachingObject) GetName() string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetName()
}

// SetName implements metav1.Object.
func (o *CachingObject) SetName(v string) {
	o.conditionalSet(func() bool { return o.object.GetName() == v }, func() { o.object.SetName(v) })
}

// GetGenerateName implements metav1.Object.
func (o *CachingObject) GetGenerateName() string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetGenerateName()
}

// SetGenerateName implements metav1.Object.
func (o *CachingObject) SetGenerateName(v string) {
	o.conditionalSet(func() bool { return o.object.GetGenerateName() == v }, func() { o.object.SetGenerateName(v) })
}

// GetUID implements metav1.Object.
func (o *CachingObject) GetUID() types.UID {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetUID()
}

// SetUID implements metav1.Object.
func (o *CachingObject) SetUID(v types.UID) {
	o.conditionalSet(func() bool { return o.object.GetUID() == v }, func() { o.object.SetUID(v) })
}

// GetResourceVersion implements metav1.Object.
func (o *CachingObject) GetResourceVersion() string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetResourceVersion()
}

// SetResourceVersion implements metav1.Object.
func (o *CachingObject) SetResourceVersion(v string) {
	o.conditionalSet(func() bool { return o.object.GetResourceVersion() == v }, func() { o.object.SetResourceVersion(v) })
}

// GetGeneration implements metav1.Object.
func (o *CachingObject) GetGeneration() int64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetGeneration()
}

// SetGeneration implements metav1.Object.
func (o *CachingObject) SetGeneration(v int64) {
	o.conditionalSet(func() bool { return o.object.GetGeneration() == v }, func() { o.object.SetGeneration(v) })
}

// GetSelfLink implements metav1.Object.
func (o *CachingObject) GetSelfLink() string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetSelfLink()
}

// SetSelfLink implements metav1.Object.
func (o *CachingObject) SetSelfLink(v string) {
	o.conditionalSet(func() bool { return o.object.GetSelfLink() == v }, func() { o.object.SetSelfLink(v) })
}

// GetCreationTimestamp implements metav1.Object.
func (o *CachingObject) GetCreationTimestamp() metav1.Time {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetCreationTimestamp()
}

// SetCreationTimestamp implements metav1.Object.
func (o *CachingObject) SetCreationTimestamp(v metav1.Time) {
	o.conditionalSet(func() bool { return o.object.GetCreationTimestamp() == v }, func() { o.object.SetCreationTimestamp(v) })
}

// GetDeletionTimestamp implements metav1.Object.
func (o *CachingObject) GetDeletionTimestamp() *metav1.Time {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetDeletionTimestamp()
}

// SetDeletionTimestamp implements metav1.Object.
func (o *CachingObject) SetDeletionTimestamp(v *metav1.Time) {
	o.conditionalSet(func() bool { return o.object.GetDeletionTimestamp() == v }, func() { o.object.SetDeletionTimestamp(v) })
}

// GetDeletionGracePeriodSeconds implements metav1.Object.
func (o *CachingObject) GetDeletionGracePeriodSeconds() *int64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetDeletionGracePeriodSeconds()
}

// SetDeletionGracePeriodSeconds implements metav1.Object.
func (o *CachingObject) SetDeletionGracePeriodSeconds(v *int64) {
	o.conditionalSet(func() bool { return o.object.GetDeletionGracePeriodSeconds() == v }, func() { o.object.SetDeletionGracePeriodSeconds(v) })
}

// GetLabels implements metav1.Object.
func (o *CachingObject) GetLabels() map[string]string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetLabels()
}

// SetLabels implements metav1.Object.
func (o *CachingObject) SetLabels(v map[string]string) {
	o.conditionalSet(func() bool { return reflect.DeepEqual(o.object.GetLabels(), v) }, func() { o.object.SetLabels(v) })
}

// GetAnnotations implements metav1.Object.
func (o *CachingObject) GetAnnotations() map[string]string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetAnnotations()
}

// SetAnnotations implements metav1.Object.
func (o *CachingObject) SetAnnotations(v map[string]string) {
	o.conditionalSet(func() bool { return reflect.DeepEqual(o.object.GetAnnotations(), v) }, func() { o.object.SetAnnotations(v) })
}

// GetFinalizers implements metav1.Object.
func (o *CachingObject) GetFinalizers() []string {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetFinalizers()
}

// SetFinalizers implements metav1.Object.
func (o *CachingObject) SetFinalizers(v []string) {
	o.conditionalSet(func() bool { return reflect.DeepEqual(o.object.GetFinalizers(), v) }, func() { o.object.SetFinalizers(v) })
}

// GetOwnerReferences implements metav1.Object.
func (o *CachingObject) GetOwnerReferences() []metav1.OwnerReference {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetOwnerReferences()
}

// SetOwnerReferences implements metav1.Object.
func (o *CachingObject) SetOwnerReferences(v []metav1.OwnerReference) {
	o.conditionalSet(func() bool { return reflect.DeepEqual(o.object.GetOwnerReferences(), v) }, func() { o.object.SetOwnerReferences(v) })
}

// GetManagedFields implements metav1.Object.
func (o *CachingObject) GetManagedFields() []metav1.ManagedFieldsEntry {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.object.GetManagedFields()
}

// SetManagedFields implements metav1.Object.
func (o *CachingObject) SetManagedFields(v []metav1.ManagedFieldsEntry) {
	o.conditionalSet(func() bool { return reflect.DeepEqual(o.object.GetManagedFields(), v) }, func() { o.object.SetManagedFields(v) })
}
