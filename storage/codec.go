package storage

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Codec turns stored bytes into objects and back. A typed codec (a scheme's runtime.Codec) plugs in
// through RuntimeCodec.
type Codec interface {
	// Decode decodes data into into when it is non-nil and returns it; with a nil into it returns a new
	// object of the codec's choosing.
	Decode(data []byte, into runtime.Object) (runtime.Object, error)
	// Encode returns the bytes to store for obj.
	Encode(obj runtime.Object) ([]byte, error)
}

// RuntimeCodec adapts an apimachinery runtime.Codec to a Codec.
func RuntimeCodec(c runtime.Codec) Codec { return runtimeCodec{c} }

type runtimeCodec struct{ c runtime.Codec }

func (r runtimeCodec) Decode(data []byte, into runtime.Object) (runtime.Object, error) {
	obj, _, err := r.c.Decode(data, nil, into)
	return obj, err
}

func (r runtimeCodec) Encode(obj runtime.Object) ([]byte, error) { return runtime.Encode(r.c, obj) }

// UnstructuredJSON is the default Codec: JSON to and from *unstructured.Unstructured (a list when the
// data has items). Objects must carry apiVersion and kind, as the apiserver's unstructured scheme demands.
var UnstructuredJSON Codec = RuntimeCodec(unstructured.UnstructuredJSONScheme)

// Versioner reads and writes the resourceVersion of objects and lists, as storage.Versioner. The
// resourceVersion is the etcd mod revision, formatted in decimal.
type Versioner interface {
	// UpdateObject sets obj's resourceVersion; 0 clears it.
	UpdateObject(obj runtime.Object, resourceVersion uint64) error
	// UpdateList sets a list's resourceVersion, continue token and remaining item count.
	UpdateList(obj runtime.Object, resourceVersion uint64, continueValue string, remainingItemCount *int64) error
	// PrepareObjectForStorage clears the fields that are never stored (resourceVersion, selfLink).
	PrepareObjectForStorage(obj runtime.Object) error
	// ObjectResourceVersion parses obj's resourceVersion; "" is 0.
	ObjectResourceVersion(obj runtime.Object) (uint64, error)
	// ParseResourceVersion parses a client's resourceVersion: "" and "0" are 0, a non-integer is an
	// InvalidError on field resourceVersion.
	ParseResourceVersion(resourceVersion string) (uint64, error)
}

// APIObjectVersioner is the Versioner for objects with ObjectMeta and lists with ListMeta.
//
// Mirrors storage/api_object_versioner.go APIObjectVersioner.
type APIObjectVersioner struct{}

var _ Versioner = APIObjectVersioner{}

// UpdateObject implements Versioner.
func (APIObjectVersioner) UpdateObject(obj runtime.Object, resourceVersion uint64) error {
	a, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	v := ""
	if resourceVersion != 0 {
		v = strconv.FormatUint(resourceVersion, 10)
	}
	a.SetResourceVersion(v)
	return nil
}

// UpdateList implements Versioner. A list always has a revision: 0 is an error.
func (APIObjectVersioner) UpdateList(obj runtime.Object, resourceVersion uint64, continueValue string, remainingItemCount *int64) error {
	if resourceVersion == 0 {
		return fmt.Errorf("illegal resource version from storage: %d", resourceVersion)
	}
	l, err := meta.ListAccessor(obj)
	if err != nil || l == nil {
		return err
	}
	l.SetResourceVersion(strconv.FormatUint(resourceVersion, 10))
	l.SetContinue(continueValue)
	l.SetRemainingItemCount(remainingItemCount)
	return nil
}

// PrepareObjectForStorage implements Versioner.
func (APIObjectVersioner) PrepareObjectForStorage(obj runtime.Object) error {
	a, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	a.SetResourceVersion("")
	a.SetSelfLink("")
	return nil
}

// ObjectResourceVersion implements Versioner.
func (APIObjectVersioner) ObjectResourceVersion(obj runtime.Object) (uint64, error) {
	a, err := meta.Accessor(obj)
	if err != nil {
		return 0, err
	}
	v := a.GetResourceVersion()
	if v == "" {
		return 0, nil
	}
	return strconv.ParseUint(v, 10, 64)
}

// ParseResourceVersion implements Versioner.
func (APIObjectVersioner) ParseResourceVersion(resourceVersion string) (uint64, error) {
	if resourceVersion == "" || resourceVersion == "0" {
		return 0, nil
	}
	v, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		return 0, NewInvalidError(field.ErrorList{
			field.Invalid(field.NewPath("resourceVersion"), resourceVersion, err.Error()),
		})
	}
	return v, nil
}

// Transformer converts values between their stored form and the codec's bytes (encryption at rest),
// as value.Transformer with the storage key as the authenticated data.
type Transformer interface {
	// TransformFromStorage returns the codec bytes of a stored value; stale reports that the value
	// should be rewritten with the current transformation.
	TransformFromStorage(ctx context.Context, data []byte, key string) (out []byte, stale bool, err error)
	// TransformToStorage returns the value to store for the codec bytes.
	TransformToStorage(ctx context.Context, data []byte, key string) ([]byte, error)
}

// IdentityTransformer stores the codec bytes as they are. It is the default Transformer.
type IdentityTransformer struct{}

// TransformFromStorage implements Transformer.
func (IdentityTransformer) TransformFromStorage(_ context.Context, data []byte, _ string) ([]byte, bool, error) {
	return data, false, nil
}

// TransformToStorage implements Transformer.
func (IdentityTransformer) TransformToStorage(_ context.Context, data []byte, _ string) ([]byte, error) {
	return data, nil
}
