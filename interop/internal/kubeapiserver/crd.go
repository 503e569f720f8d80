package kubeapiserver

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/listwatch/listwatch/httpwatch"
)

// CRDFor returns the CustomResourceDefinition that makes an apiextensions-apiserver serve r as
// listwatch's httpwatch serves it: the same group, version, names and scope, and r's selectable
// fields. r must be a custom resource (a group, BuiltIn false).
//
// httpwatch keeps no schema, so neither does the CRD: the root preserves unknown fields. A selectable
// field needs a typed schema path upstream, so each is declared a string (httpwatch matches strings,
// booleans and numbers alike by their text; the apiserver will refuse a non-string there).
func CRDFor(r httpwatch.Resource) (*apiextensionsv1.CustomResourceDefinition, error) {
	if r.BuiltIn || r.Group == "" {
		return nil, fmt.Errorf("%w: resource %q is not a custom resource", ErrInvalidOptions, r.Resource)
	}
	if r.Resource == "" || r.Version == "" || r.Kind == "" {
		return nil, fmt.Errorf("%w: resource %q needs a resource name, a version and a kind", ErrInvalidOptions, r.Resource)
	}
	scope := apiextensionsv1.ClusterScoped
	if r.Namespaced {
		scope = apiextensionsv1.NamespaceScoped
	}
	listKind := r.ListKind
	if listKind == "" {
		listKind = r.Kind + "List"
	}
	singular := r.SingularName
	if singular == "" {
		singular = strings.ToLower(r.Kind)
	}
	preserve := true
	root := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}
	var selectable []apiextensionsv1.SelectableField
	for _, f := range r.SelectableFields {
		if len(f.Path) == 0 {
			return nil, fmt.Errorf("%w: resource %q: selectable field %q has no path", ErrInvalidOptions, r.Resource, f.Label)
		}
		if f.Label != strings.Join(f.Path, ".") {
			// Upstream names a CRD's field label after its JSON path.
			return nil, fmt.Errorf("%w: resource %q: selectable field %q is not at path .%s", ErrInvalidOptions, r.Resource, f.Label, f.Label)
		}
		declareString(&root, f.Path)
		selectable = append(selectable, apiextensionsv1.SelectableField{JSONPath: "." + f.Label})
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: r.Resource + "." + r.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: r.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: r.Resource, Singular: singular, Kind: r.Kind, ListKind: listKind,
				ShortNames: append([]string(nil), r.ShortNames...),
			},
			Scope: scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: r.Version, Served: true, Storage: true,
				Schema:           &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &root},
				SelectableFields: selectable,
			}},
		},
	}, nil
}

// declareString adds path to the schema as a string, each object on the way keeping unknown fields.
func declareString(s *apiextensionsv1.JSONSchemaProps, path []string) {
	if s.Properties == nil {
		s.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
	}
	child := s.Properties[path[0]]
	if len(path) == 1 {
		child.Type = "string"
	} else {
		if child.Type == "" {
			preserve := true
			child.Type = "object"
			child.XPreserveUnknownFields = &preserve
		}
		declareString(&child, path[1:])
	}
	s.Properties[path[0]] = child
}

// WidgetsCRD is the CRD of httpwatch.Widgets(): widgets.example.com/v1, namespaced, the custom
// resource `listwatch serve` serves, so that both servers serve the same resource.
func WidgetsCRD() *apiextensionsv1.CustomResourceDefinition {
	crd, err := CRDFor(httpwatch.Widgets())
	if err != nil {
		// httpwatch.Widgets is a fixed custom resource; CRDFor refuses only built-in ones.
		panic(err)
	}
	return crd
}
