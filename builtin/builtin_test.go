package builtin

import (
	"strings"
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

// TestDefinitions checks the OpenAPI definitions derived from the Go types: every kind and list
// names its group-version-kind, references resolve, patch strategies and list types come from the
// struct tags and the structured-merge-diff schema, and special types have their own schemas.
func TestDefinitions(t *testing.T) {
	for _, v3 := range []bool{false, true} {
		defs, err := Definitions(v3)
		if err != nil {
			t.Fatal(err)
		}
		for _, gvk := range Kinds {
			name, err := DefinitionName(gvk)
			if err != nil {
				t.Fatal(err)
			}
			d, ok := defs[name]
			if !ok {
				t.Fatalf("no definition %s", name)
			}
			if _, ok := d.Extensions["x-kubernetes-group-version-kind"]; !ok {
				t.Errorf("%s has no x-kubernetes-group-version-kind", name)
			}
		}
		prefix := "#/definitions/"
		if v3 {
			prefix = "#/components/schemas/"
		}
		for name, d := range defs {
			for field, p := range d.Properties {
				ref := p.Ref.String()
				if len(p.AllOf) == 1 {
					ref = p.AllOf[0].Ref.String()
				}
				if ref != "" {
					if _, ok := defs[strings.TrimPrefix(ref, prefix)]; !ok || !strings.HasPrefix(ref, prefix) {
						t.Errorf("%s.%s refers to %s, which is not defined", name, field, ref)
					}
				}
			}
		}
		containers := defs["io.k8s.api.core.v1.PodSpec"].Properties["containers"]
		if containers.Extensions["x-kubernetes-patch-merge-key"] != "name" || containers.Extensions["x-kubernetes-patch-strategy"] != "merge" ||
			containers.Extensions["x-kubernetes-list-type"] != "map" {
			t.Errorf("containers %v", containers.Extensions)
		}
		if tm := defs["io.k8s.apimachinery.pkg.apis.meta.v1.Time"]; len(tm.Type) != 1 || tm.Type[0] != "string" || tm.Format != "date-time" {
			t.Errorf("Time %+v", tm.SchemaProps)
		}
		ios := defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
		if v3 && len(ios.OneOf) != 2 || !v3 && ios.Format != "int-or-string" {
			t.Errorf("IntOrString (v3 %v) %+v", v3, ios.SchemaProps)
		}
		if defs["io.k8s.api.core.v1.ConfigMap"].Properties["data"].Description == "" {
			t.Error("no description of ConfigMap.data")
		}
	}
	if _, err := DefinitionName(Kinds[0].GroupVersion().WithKind("Nothing")); err == nil {
		t.Error("a definition name for an unknown kind")
	}
}
