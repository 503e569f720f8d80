package storage

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// AnnotateInitialEventsEndBookmark marks a bookmark as the end of a watch's initial events; the watch
// cache marks its own with it too.
//
// Mirrors storage.AnnotateInitialEventsEndBookmark.
func AnnotateInitialEventsEndBookmark(obj runtime.Object) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	a := m.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[metav1.InitialEventsAnnotationKey] = "true"
	m.SetAnnotations(a)
	return nil
}
