package httpwatch

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
)

// The conversions a client asks for in its Accept header, as handlers/response.go
// doTransformObject: Table (kubectl get), PartialObjectMetadata and PartialObjectMetadataList
// (metadata-only clients).

// transform converts a response object as negotiated.
//
// Mirrors handlers.doTransformObject.
func (h *resourceHandler) transform(obj runtime.Object, n negotiated) (runtime.Object, error) {
	target := n.convert
	switch target.Kind {
	case asPartialObjectMetadata:
		if meta.IsListType(obj) {
			return nil, notAcceptableMessage(fmt.Sprintf("you requested PartialObjectMetadata, but the requested object is a list (%T)", obj))
		}
		return asPartial(obj, target.GroupVersion())
	case asPartialObjectMetadataList:
		list, ok := obj.(*unstructured.UnstructuredList)
		if !ok {
			return nil, notAcceptableMessage(fmt.Sprintf("you requested PartialObjectMetadataList, but the requested object is not a list (%T)", obj))
		}
		out := &metav1.PartialObjectMetadataList{}
		out.SetGroupVersionKind(target.GroupVersion().WithKind(asPartialObjectMetadataList))
		out.ResourceVersion = list.GetResourceVersion()
		out.Continue = list.GetContinue()
		out.RemainingItemCount = list.GetRemainingItemCount()
		out.Items = make([]metav1.PartialObjectMetadata, 0, len(list.Items))
		for i := range list.Items {
			p := meta.AsPartialObjectMetadata(&list.Items[i])
			out.Items = append(out.Items, *p)
		}
		return out, nil
	case asTable:
		opts, err := h.tableOptions(n)
		if err != nil {
			return nil, err
		}
		return h.asTable(obj, opts, target.GroupVersion())
	}
	return nil, notAcceptableMessage(fmt.Sprintf("no conversion to %s", target))
}

// tableOptions mirrors handlers.optionsForTransform for a Table.
func (h *resourceHandler) tableOptions(n negotiated) (*metav1.TableOptions, error) {
	opts := &metav1.TableOptions{}
	if n.query == nil {
		return opts, nil
	}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(n.query, metav1.SchemeGroupVersion, opts); err != nil {
		return nil, err
	}
	switch errs := metav1validation.ValidateTableOptions(opts); len(errs) {
	case 0:
		return opts, nil
	case 1:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs[0].Error()))
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs))
	}
}

func asPartial(obj runtime.Object, gv schema.GroupVersion) (runtime.Object, error) {
	if co, ok := obj.(runtime.CacheableObject); ok {
		obj = co.GetObject()
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	p := meta.AsPartialObjectMetadata(m)
	p.SetGroupVersionKind(gv.WithKind(asPartialObjectMetadata))
	return p, nil
}

// columns are the resource's Table columns after Name.
func (h *resourceHandler) columns() []Column {
	switch {
	case h.res.Columns != nil:
		return h.res.Columns
	case !h.res.BuiltIn:
		// apiextensions-apiserver's default when a CRD has no additionalPrinterColumns.
		return []Column{{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp",
			Description: "CreationTimestamp is a timestamp representing the server time when this object was created."}}
	case h.res.strategy != nil && h.res.strategy.columns != nil:
		return h.res.strategy.columns
	}
	// rest.DefaultTableConvertor: the creation time itself, in RFC 3339.
	return []Column{{Name: "Created At", Type: "date",
		Description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
		value: func(obj map[string]any, _ time.Time) any {
			s, _, _ := unstructured.NestedString(obj, "metadata", "creationTimestamp")
			return s
		}}}
}

// nameDescription is metav1.ObjectMeta's documentation of name, the Name column's description.
const nameDescription = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"

// asTable mirrors handlers.asTable over the resource's table convertor (the printers of the built-in
// kinds, apiextensions' tableconvertor for custom resources, rest.DefaultTableConvertor for the
// rest): one row per object, Name then the columns; the row's object is its metadata
// (includeObject=Metadata, the default), the whole object (Object) or nothing (None).
func (h *resourceHandler) asTable(obj runtime.Object, opts *metav1.TableOptions, gv schema.GroupVersion) (runtime.Object, error) {
	table := &metav1.Table{}
	table.SetGroupVersionKind(gv.WithKind(asTable))
	cols := h.columns()
	nameFirst := h.res.strategy == nil || !h.res.strategy.noNameColumn
	if !opts.NoHeaders {
		if nameFirst {
			table.ColumnDefinitions = append(table.ColumnDefinitions, metav1.TableColumnDefinition{
				Name: "Name", Type: "string", Format: "name", Description: nameDescription})
		}
		for _, c := range cols {
			table.ColumnDefinitions = append(table.ColumnDefinitions, metav1.TableColumnDefinition{
				Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description, Priority: c.Priority,
			})
		}
	}
	var items []*unstructured.Unstructured
	switch t := obj.(type) {
	case *unstructured.UnstructuredList:
		table.ResourceVersion = t.GetResourceVersion()
		table.Continue = t.GetContinue()
		table.RemainingItemCount = t.GetRemainingItemCount()
		for i := range t.Items {
			items = append(items, &t.Items[i])
		}
	default:
		u, err := asUnstructured(obj)
		if err != nil {
			return nil, err
		}
		table.ResourceVersion = u.GetResourceVersion()
		items = append(items, u)
	}
	now := h.server.clock.Now()
	table.Rows = make([]metav1.TableRow, 0, len(items))
	for _, u := range items {
		row := metav1.TableRow{}
		if nameFirst {
			row.Cells = append(row.Cells, u.GetName())
		}
		for _, c := range cols {
			row.Cells = append(row.Cells, cellValue(c, u.Object, now))
		}
		hasEndAnnotation := u.GetAnnotations()[InitialEventsEndAnnotation] == "true"
		switch {
		case opts.IncludeObject == metav1.IncludeObject:
			full := u.DeepCopy()
			full.SetGroupVersionKind(h.res.GroupVersionKind())
			row.Object.Object = full
		case opts.IncludeObject == metav1.IncludeMetadata, hasEndAnnotation, opts.IncludeObject == "":
			p, err := asPartial(u, gv)
			if err != nil {
				return nil, err
			}
			row.Object.Object = p
		case opts.IncludeObject == metav1.IncludeNone:
		default:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("unrecognized includeObject value: %q", opts.IncludeObject))
		}
		table.Rows = append(table.Rows, row)
	}
	return table, nil
}

// cellValue is a column's cell for an object: the built-in printer's value, or the value at the
// column's JSONPath, as apiextensions' tableconvertor renders it (nil when missing).
func cellValue(c Column, obj map[string]any, now time.Time) any {
	if c.value != nil {
		return c.value(obj, now)
	}
	v, ok := lookupPath(obj, c.JSONPath)
	if !ok {
		return nil
	}
	switch c.Type {
	case "integer":
		switch t := v.(type) {
		case int64:
			return t
		case float64:
			return int64(t)
		}
	case "number":
		switch t := v.(type) {
		case int64:
			return float64(t)
		case float64:
			return t
		}
	case "boolean":
		if b, ok := v.(bool); ok {
			return b
		}
	case "date":
		// As apiextensions' cellForJSONValue: the time since, by the server's clock.
		if s, ok := v.(string); ok {
			var t metav1.Time
			if err := t.UnmarshalQueryParameter(s); err != nil {
				return "<invalid>"
			}
			if t.IsZero() {
				return "<unknown>"
			}
			return duration.HumanDuration(now.Sub(t.Time))
		}
		return nil
	}
	switch t := v.(type) {
	case string:
		return t
	case map[string]any, []any:
		return fmt.Sprint(t)
	default:
		return fmt.Sprint(t)
	}
}

// lookupPath finds the value at a simple JSONPath: dot-separated fields, each optionally followed by
// [index], with or without the braces and leading $.
func lookupPath(obj map[string]any, path string) (any, bool) {
	path = strings.TrimSpace(path)
	path = strings.TrimSuffix(strings.TrimPrefix(path, "{"), "}")
	path = strings.TrimPrefix(path, "$")
	var cur any = obj
	for _, part := range strings.Split(strings.Trim(path, "."), ".") {
		if part == "" {
			continue
		}
		name, index, hasIndex := part, "", false
		if i := strings.Index(part, "["); i >= 0 && strings.HasSuffix(part, "]") {
			name, index, hasIndex = part[:i], part[i+1:len(part)-1], true
		}
		if name != "" {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[name]; !ok {
				return nil, false
			}
		}
		if hasIndex {
			l, ok := cur.([]any)
			if !ok {
				return nil, false
			}
			i, err := strconv.Atoi(index)
			if err != nil {
				return nil, false
			}
			if i < 0 {
				i += len(l)
			}
			if i < 0 || i >= len(l) {
				return nil, false
			}
			cur = l[i]
		}
	}
	return cur, true
}
