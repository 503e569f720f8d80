package builtin

import (
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// Kinds are the built-in kinds listwatch serves, in the order discovery lists their resources'
// groups: core/v1 first, as the apiserver's legacy group.
var Kinds = []schema.GroupVersionKind{
	corev1.SchemeGroupVersion.WithKind("ConfigMap"),
	corev1.SchemeGroupVersion.WithKind("Namespace"),
	corev1.SchemeGroupVersion.WithKind("Pod"),
	corev1.SchemeGroupVersion.WithKind("Secret"),
	corev1.SchemeGroupVersion.WithKind("Service"),
	corev1.SchemeGroupVersion.WithKind("Event"),
	appsv1.SchemeGroupVersion.WithKind("Deployment"),
	eventsv1.SchemeGroupVersion.WithKind("Event"),
}

var (
	schemeOnce sync.Once
	scheme     *runtime.Scheme
	codecs     serializer.CodecFactory
)

// initScheme registers the groups of Kinds and meta.k8s.io/v1 (options, Status, Table,
// PartialObjectMetadata). It runs on first use, so that a server that never decodes a typed body
// pays nothing for it at start.
func initScheme() {
	scheme = runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, eventsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(fmt.Sprintf("builtin: registering the built-in types: %v", err)) // generated code; cannot fail
		}
	}
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	metav1.AddMetaToScheme(scheme)
	codecs = serializer.NewCodecFactory(scheme)
}

// Scheme returns the scheme of the built-in types: core/v1, apps/v1 and events.k8s.io/v1 as
// k8s.io/api defines them, and meta.k8s.io/v1.
func Scheme() *runtime.Scheme {
	schemeOnce.Do(initScheme)
	return scheme
}

// Codecs returns the serializers of Scheme: JSON, YAML and protobuf (application/vnd.kubernetes.protobuf),
// each with its watch stream framing, as the apiserver's legacy codecs.
func Codecs() serializer.CodecFactory {
	schemeOnce.Do(initScheme)
	return codecs
}

// IsBuiltIn reports whether gvk is one of Kinds.
func IsBuiltIn(gvk schema.GroupVersionKind) bool {
	for _, k := range Kinds {
		if k == gvk {
			return true
		}
	}
	return false
}

// New returns an empty typed object of a kind of Scheme (a list kind too), with its kind set.
func New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	obj, err := Scheme().New(gvk)
	if err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}

// ToTyped converts the JSON-like content of an object or a list of a kind of Scheme into its typed
// form; fields the type does not have are dropped, as a typed decode drops them.
func ToTyped(gvk schema.GroupVersionKind, content map[string]any) (runtime.Object, error) {
	obj, err := New(gvk)
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, obj); err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj, nil
}
