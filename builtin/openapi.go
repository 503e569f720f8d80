package builtin

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// The OpenAPI definitions of the built-in kinds, as kube-apiserver publishes them in /openapi/v2
// and /openapi/v3. k8s.io/api ships no generated OpenAPI definitions, so they are derived from what
// it ships: the Go types (field names and types, OpenAPIModelName, SwaggerDoc descriptions, the
// OpenAPISchemaType of Time, Quantity and IntOrString), their patchStrategy and patchMergeKey
// tags (x-kubernetes-patch-strategy, x-kubernetes-patch-merge-key), and the structured-merge-diff
// schema of Parser (x-kubernetes-list-type, x-kubernetes-list-map-keys, x-kubernetes-map-type).
// They carry no validation beyond types: kube-apiserver's defaults and required fields come from
// markers k8s.io/api does not ship.

// Definitions returns the OpenAPI schemas of Kinds, their lists, autoscaling/v1 Scale (the scale
// subresource's kind) and every type they reach, by
// definition name (io.k8s.api.core.v1.Pod). References point at refPrefix+name
// ("#/components/schemas/" for v3, "#/definitions/" for v2); v3 gives IntOrString and Quantity
// their oneOf types. The kinds and lists carry x-kubernetes-group-version-kind.
func Definitions(v3 bool) (map[string]spec.Schema, error) {
	i := 0
	if v3 {
		i = 1
	}
	defsOnce[i].Do(func() { defs[i], defsErr[i] = buildDefinitions(v3) })
	return defs[i], defsErr[i]
}

var (
	defsOnce [2]sync.Once
	defs     [2]map[string]spec.Schema
	defsErr  [2]error
)

// DefinitionName is the OpenAPI definition name of a kind of Scheme.
func DefinitionName(gvk schema.GroupVersionKind) (string, error) {
	return Scheme().ToOpenAPIDefinitionName(gvk)
}

type defBuilder struct {
	v3        bool
	prefix    string
	defs      map[string]spec.Schema
	smd       map[string]smdschema.TypeDef
	buildErrs []error
}

func buildDefinitions(v3 bool) (map[string]spec.Schema, error) {
	p, err := Parser()
	if err != nil {
		return nil, err
	}
	b := &defBuilder{v3: v3, prefix: "#/definitions/", defs: map[string]spec.Schema{}, smd: map[string]smdschema.TypeDef{}}
	if v3 {
		b.prefix = "#/components/schemas/"
	}
	for _, td := range p.Schema.Types {
		b.smd[td.Name] = td
	}
	for _, gvk := range Kinds {
		for _, kind := range []schema.GroupVersionKind{gvk, gvk.GroupVersion().WithKind(gvk.Kind + "List")} {
			obj, err := Scheme().New(kind)
			if err != nil {
				return nil, err
			}
			name := b.named(reflect.TypeOf(obj).Elem())
			s := b.defs[name]
			s.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": kind.Group, "version": kind.Version, "kind": kind.Kind}})
			b.defs[name] = s
		}
	}
	// autoscaling/v1 Scale is what the scale subresource of custom resources answers in.
	name := b.named(reflect.TypeOf(autoscalingv1.Scale{}))
	s := b.defs[name]
	s.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": "autoscaling", "version": "v1", "kind": "Scale"}})
	b.defs[name] = s
	return b.defs, nil
}

// definitionName mirrors runtime's toOpenAPIDefinitionName, preferring the type's own
// OpenAPIModelName.
func definitionName(t reflect.Type) string {
	if namer, ok := reflect.New(t).Interface().(interface{ OpenAPIModelName() string }); ok {
		return namer.OpenAPIModelName()
	}
	parts := strings.Split(t.PkgPath()+"."+t.Name(), "/")
	if len(parts) > 0 && strings.Contains(parts[0], ".") {
		domain := strings.Split(parts[0], ".")
		for i, j := 0, len(domain)-1; i < j; i, j = i+1, j-1 {
			domain[i], domain[j] = domain[j], domain[i]
		}
		parts[0] = strings.Join(domain, ".")
	}
	return strings.Join(parts, ".")
}

var jsonMarshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()

// named adds the definition of a struct type (and of what it reaches) and returns its name.
func (b *defBuilder) named(t reflect.Type) string {
	name := definitionName(t)
	if _, done := b.defs[name]; done {
		return name
	}
	b.defs[name] = spec.Schema{} // reserve: types may refer to themselves
	b.defs[name] = b.structSchema(t, name)
	return name
}

// structSchema is the schema of a struct type named name.
func (b *defBuilder) structSchema(t reflect.Type, name string) spec.Schema {
	v := reflect.New(t).Interface()
	var s spec.Schema
	if doc, ok := v.(interface{ SwaggerDoc() map[string]string }); ok {
		s.Description = doc.SwaggerDoc()[""]
	}
	if typer, ok := v.(interface{ OpenAPISchemaType() []string }); ok {
		s.Type = typer.OpenAPISchemaType()
		if f, ok := v.(interface{ OpenAPISchemaFormat() string }); ok {
			s.Format = f.OpenAPISchemaFormat()
		}
		if oneOf, ok := v.(interface{ OpenAPIV3OneOfTypes() []string }); ok && b.v3 {
			s.Type = nil
			for _, typ := range oneOf.OpenAPIV3OneOfTypes() {
				s.OneOf = append(s.OneOf, spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{typ}}})
			}
		}
		if s.Format == "int-or-string" {
			s.AddExtension("x-kubernetes-int-or-string", true)
		}
		return s
	}
	if t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) {
		// Types with their own JSON (FieldsV1, RawExtension) are free-form objects.
		s.Type = []string{"object"}
		return s
	}
	s.Type = []string{"object"}
	td := b.smd[name]
	if td.Map != nil && td.Map.ElementRelationship == smdschema.Atomic {
		s.AddExtension("x-kubernetes-map-type", "atomic")
	}
	var docs map[string]string
	if doc, ok := v.(interface{ SwaggerDoc() map[string]string }); ok {
		docs = doc.SwaggerDoc()
	}
	b.addFields(&s, t, td, docs)
	return s
}

// addFields adds the JSON fields of struct type t (inlined embedded structs included).
func (b *defBuilder) addFields(s *spec.Schema, t reflect.Type, td smdschema.TypeDef, docs map[string]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		fieldName, opts, _ := strings.Cut(tag, ",")
		if fieldName == "-" || !f.IsExported() {
			continue
		}
		if strings.Contains(opts, "inline") || (f.Anonymous && fieldName == "") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			var inner map[string]string
			if doc, ok := reflect.New(ft).Interface().(interface{ SwaggerDoc() map[string]string }); ok {
				inner = doc.SwaggerDoc()
			}
			b.addFields(s, ft, td, inner)
			continue
		}
		if fieldName == "" {
			fieldName = f.Name
		}
		fs := b.typeSchema(f.Type)
		fs.Description = docs[fieldName]
		if strategy := f.Tag.Get("patchStrategy"); strategy != "" {
			fs.AddExtension("x-kubernetes-patch-strategy", strategy)
		}
		if key := f.Tag.Get("patchMergeKey"); key != "" {
			fs.AddExtension("x-kubernetes-patch-merge-key", key)
		}
		if td.Map != nil {
			if sf, ok := td.Map.FindField(fieldName); ok {
				b.listExtensions(&fs, sf.Type)
			}
		}
		if s.Properties == nil {
			s.Properties = map[string]spec.Schema{}
		}
		s.Properties[fieldName] = fs
	}
}

// listExtensions adds what the structured-merge-diff schema says of a list or map field.
func (b *defBuilder) listExtensions(s *spec.Schema, ref smdschema.TypeRef) {
	atom := ref.Inlined
	if ref.NamedType != nil {
		if td, ok := b.smd[*ref.NamedType]; ok && (td.List != nil || td.Map != nil) && len(s.Type) > 0 && s.Type[0] != "object" {
			atom = td.Atom
		}
	}
	switch {
	case atom.List != nil:
		switch atom.List.ElementRelationship {
		case smdschema.Atomic:
			s.AddExtension("x-kubernetes-list-type", "atomic")
		case smdschema.Associative:
			if len(atom.List.Keys) > 0 {
				s.AddExtension("x-kubernetes-list-type", "map")
				keys := make([]any, len(atom.List.Keys))
				for i, k := range atom.List.Keys {
					keys[i] = k
				}
				s.AddExtension("x-kubernetes-list-map-keys", keys)
			} else {
				s.AddExtension("x-kubernetes-list-type", "set")
			}
		}
	case atom.Map != nil && atom.Map.ElementRelationship == smdschema.Atomic && ref.NamedType == nil:
		s.AddExtension("x-kubernetes-map-type", "atomic")
	}
}

// typeSchema is the schema of a field's type: a reference for a struct, inline for the rest.
func (b *defBuilder) typeSchema(t reflect.Type) spec.Schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var s spec.Schema
	switch t.Kind() {
	case reflect.Struct:
		name := b.named(t)
		s.Ref = spec.MustCreateRef(b.prefix + name)
		if b.v3 {
			// As kube-apiserver's v3 documents, a reference sits in allOf so that it may carry a
			// description.
			s = spec.Schema{SchemaProps: spec.SchemaProps{AllOf: []spec.Schema{{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef(b.prefix + name)}}}}}
		}
	case reflect.String:
		s.Type = []string{"string"}
	case reflect.Bool:
		s.Type = []string{"boolean"}
	case reflect.Int32, reflect.Uint32, reflect.Int16, reflect.Uint16, reflect.Int8, reflect.Uint8:
		s.Type, s.Format = []string{"integer"}, "int32"
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64:
		s.Type, s.Format = []string{"integer"}, "int64"
	case reflect.Float32, reflect.Float64:
		s.Type, s.Format = []string{"number"}, "double"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			s.Type, s.Format = []string{"string"}, "byte"
			break
		}
		items := b.typeSchema(t.Elem())
		s.Type = []string{"array"}
		s.Items = &spec.SchemaOrArray{Schema: &items}
	case reflect.Map:
		elem := b.typeSchema(t.Elem())
		s.Type = []string{"object"}
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: &elem}
	case reflect.Interface:
		s.Type = []string{"object"}
	}
	return s
}
