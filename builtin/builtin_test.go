package builtin

import (
	"testing"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTypeConverter converts an object of every built-in kind to its structured-merge-diff value
// and back, typed and unstructured, and refuses a field of the wrong type.
func TestTypeConverter(t *testing.T) {
	tc, err := TypeConverter()
	if err != nil {
		t.Fatal(err)
	}
	for _, gvk := range Kinds {
		t.Run(gvk.Kind, func(t *testing.T) {
			content := map[string]any{
				"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
				"metadata": map[string]any{"name": "x", "labels": map[string]any{"a": "b"}},
			}
			typedObj, err := ToTyped(gvk, content)
			if err != nil {
				t.Fatal(err)
			}
			for _, obj := range []runtime.Object{typedObj, &unstructured.Unstructured{Object: content}} {
				tv, err := tc.ObjectToTyped(obj)
				if err != nil {
					t.Fatalf("%T: %v", obj, err)
				}
				back, err := tc.TypedToObject(tv)
				if err != nil {
					t.Fatal(err)
				}
				u := back.(*unstructured.Unstructured)
				if u.GetName() != "x" || u.GetLabels()["a"] != "b" || u.GetKind() != gvk.Kind {
					t.Fatalf("round trip lost the object: %v", u.Object)
				}
			}
			bad := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
				"metadata": map[string]any{"name": int64(3)},
			}}
			if _, err := tc.ObjectToTyped(bad); err == nil {
				t.Fatal("a number as metadata.name converted without error")
			}
		})
	}
}

// TestToTyped checks that an unknown kind is an error and that ToTyped keeps known fields.
func TestToTyped(t *testing.T) {
	obj, err := ToTyped(Kinds[0], map[string]any{"metadata": map[string]any{"name": "n"}, "data": map[string]any{"k": "v"}, "unknown": true})
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.GetObjectKind().GroupVersionKind(); got != Kinds[0] {
		t.Fatalf("kind %v", got)
	}
	if _, err := New(Kinds[0].GroupVersion().WithKind("NoSuchKind")); err == nil {
		t.Fatal("New of an unknown kind succeeded")
	}
	if !IsBuiltIn(Kinds[5]) || IsBuiltIn(Kinds[0].GroupVersion().WithKind("Widget")) {
		t.Fatal("IsBuiltIn")
	}
}
