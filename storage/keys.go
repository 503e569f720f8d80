package storage

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// keyError is a key rejected by PrepareKey; it matches ErrEmptyKey or ErrInvalidKey.
type keyError struct {
	kind error
	msg  string
}

func (e *keyError) Error() string        { return e.msg }
func (e *keyError) Is(target error) bool { return target == e.kind }

// PrepareKey validates a storage key against the resource prefix and, for a recursive request, makes it
// end in "/" so that "/pods/a" never matches "/pods/ab". "" and "/" are empty keys; "." and ".." path
// segments are invalid keys, as is a key outside resourcePrefix.
//
// Mirrors storage/interfaces.go PrepareKey.
func PrepareKey(resourcePrefix, key string, recursive bool) (string, error) {
	if key == ".." || strings.HasPrefix(key, "../") || strings.HasSuffix(key, "/..") || strings.Contains(key, "/../") ||
		key == "." || strings.HasPrefix(key, "./") || strings.HasSuffix(key, "/.") || strings.Contains(key, "/./") {
		return "", &keyError{ErrInvalidKey, fmt.Sprintf("invalid key: %q", key)}
	}
	if key == "" || key == "/" {
		return "", &keyError{ErrEmptyKey, fmt.Sprintf("empty key: %q", key)}
	}
	if recursive && !strings.HasSuffix(key, "/") {
		key += "/"
	}
	if !strings.HasPrefix(key, resourcePrefix) {
		return "", &keyError{ErrInvalidKey, fmt.Sprintf("invalid key: %q lacks resource prefix: %q", key, resourcePrefix)}
	}
	return key, nil
}

// NamespaceKeyFunc returns prefix+namespace+"/"+name for obj; prefix must end in "/".
//
// Mirrors storage/util.go NamespaceKeyFunc.
func NamespaceKeyFunc(prefix string, obj runtime.Object) (string, error) {
	m, err := checkedKeyObject(prefix, obj)
	if err != nil {
		return "", err
	}
	return prefix + m.GetNamespace() + "/" + m.GetName(), nil
}

// NoNamespaceKeyFunc returns prefix+name for a cluster-scoped obj; prefix must end in "/".
//
// Mirrors storage/util.go NoNamespaceKeyFunc.
func NoNamespaceKeyFunc(prefix string, obj runtime.Object) (string, error) {
	m, err := checkedKeyObject(prefix, obj)
	if err != nil {
		return "", err
	}
	return prefix + m.GetName(), nil
}

// checkedKeyObject makes the checks both key functions make: a prefix ending in "/" and a name that
// is a valid path segment.
func checkedKeyObject(prefix string, obj runtime.Object) (metav1.Object, error) {
	if !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("prefix should have '/' suffix")
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if msgs := content.IsPathSegmentName(m.GetName()); len(msgs) != 0 {
		return nil, fmt.Errorf("invalid name: %v", msgs)
	}
	return m, nil
}
