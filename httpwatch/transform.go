package httpwatch

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/util/jsonpath"

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

// upstreamType is obj's Go type as upstream's messages print it (%T): a built-in kind's object is
// of its internal type (*core.ConfigMap, *apps.DeploymentList; events.k8s.io's events are core's),
// a custom resource's unstructured, as here.
func (h *resourceHandler) upstreamType(obj runtime.Object) string {
	_, single := obj.(*unstructured.Unstructured)
	_, list := obj.(*unstructured.UnstructuredList)
	if !h.res.BuiltIn || !single && !list {
		return fmt.Sprintf("%T", obj)
	}
	return "*" + h.internalType(list)
}

// internalType is the name of the built-in kind's internal Go type in kube-apiserver (core.ConfigMap,
// apps.DeploymentList): events.k8s.io's events are core's.
func (h *resourceHandler) internalType(list bool) string {
	pkg := "core"
	if h.res.Group == "apps" {
		pkg = "apps"
	}
	if list {
		return pkg + "." + h.res.Kind + "List"
	}
	return pkg + "." + h.res.Kind
}

// transform converts a response object as negotiated.
//
// Mirrors handlers.doTransformObject.
func (h *resourceHandler) transform(obj runtime.Object, n negotiated) (runtime.Object, error) {
	target := n.convert
	switch target.Kind {
	case asPartialObjectMetadata:
		if meta.IsListType(obj) {
			return nil, notAcceptableMessage(fmt.Sprintf("you requested PartialObjectMetadata, but the requested object is a list (%s)", h.upstreamType(obj)))
		}
		return asPartial(obj, target.GroupVersion())
	case asPartialObjectMetadataList:
		_, isList := obj.(*unstructured.UnstructuredList)
		if _, single := obj.(*unstructured.Unstructured); !isList && (!single || h.res.BuiltIn) {
			return nil, notAcceptableMessage(fmt.Sprintf("you requested PartialObjectMetadataList, but the requested object is not a list (%s)",
				h.upstreamType(obj)))
		}
		// A custom resource's object is unstructured, which upstream takes for a list
		// (metav1.ListInterface): listing its items fails with a 500, "content is not a list".
		return asPartialList(obj, target.GroupVersion())
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

// asPartialList mirrors handlers.asPartialObjectMetadataList for meta.k8s.io/v1: every item's
// metadata with its kind; no items is a null list, as upstream appends to a nil slice.
func asPartialList(obj runtime.Object, gv schema.GroupVersion) (runtime.Object, error) {
	li, err := meta.ListAccessor(obj)
	if err != nil {
		return nil, err
	}
	out := &metav1.PartialObjectMetadataList{}
	out.SetGroupVersionKind(gv.WithKind(asPartialObjectMetadataList))
	err = meta.EachListItem(obj, func(item runtime.Object) error {
		m, err := meta.Accessor(item)
		if err != nil {
			return err
		}
		p := meta.AsPartialObjectMetadata(m)
		p.SetGroupVersionKind(gv.WithKind(asPartialObjectMetadata))
		out.Items = append(out.Items, *p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out.ResourceVersion = li.GetResourceVersion()
	out.Continue = li.GetContinue()
	out.RemainingItemCount = li.GetRemainingItemCount()
	return out, nil
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

// printerColumns are the columns of a built-in kind's printer, after Name.
func (h *resourceHandler) printerColumns() []Column {
	if st := h.res.strategy; st != nil && st.columns != nil {
		return st.columns
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

// asTable mirrors handlers.asTable over the resource's table convertor (apiextensions'
// tableconvertor for JSONPath columns, the printers of the built-in kinds, rest.DefaultTableConvertor
// for the rest): one row per object; the row's object is its metadata (includeObject=Metadata, the
// default), the whole object (Object) or nothing (None).
func (h *resourceHandler) asTable(obj runtime.Object, opts *metav1.TableOptions, gv schema.GroupVersion) (runtime.Object, error) {
	return h.asTableOf(obj, opts, gv, h.convertTable, h.res.GroupVersionKind())
}

// tableConvertor makes the Table of an object or list, before its rows' objects are chosen.
type tableConvertor func(obj runtime.Object, opts *metav1.TableOptions) (*metav1.Table, error)

// convertTable is the resource's tableConvertor: its JSONPath columns, else its printer's.
func (h *resourceHandler) convertTable(obj runtime.Object, opts *metav1.TableOptions) (*metav1.Table, error) {
	if h.res.table != nil {
		return h.res.table.convert(obj, opts, h.server.clock.Now())
	}
	return h.printTable(obj, opts)
}

// asTableOf is asTable by convert for objects of kind.
func (h *resourceHandler) asTableOf(obj runtime.Object, opts *metav1.TableOptions, gv schema.GroupVersion, convert tableConvertor,
	kind schema.GroupVersionKind) (runtime.Object, error) {
	if co, ok := obj.(runtime.CacheableObject); ok {
		obj = co.GetObject()
	}
	table, err := convert(obj, opts)
	if err != nil {
		return nil, err
	}
	table.SetGroupVersionKind(gv.WithKind(asTable))
	for i := range table.Rows {
		row := &table.Rows[i]
		u, err := asUnstructured(row.Object.Object)
		if err != nil {
			return nil, err
		}
		hasEndAnnotation := u.GetAnnotations()[InitialEventsEndAnnotation] == "true"
		switch {
		case opts.IncludeObject == metav1.IncludeObject:
			full := u.DeepCopy()
			full.SetGroupVersionKind(kind)
			row.Object.Object = full
		case opts.IncludeObject == metav1.IncludeMetadata, hasEndAnnotation, opts.IncludeObject == "":
			p, err := asPartial(u, gv)
			if err != nil {
				return nil, err
			}
			row.Object.Object = p
		case opts.IncludeObject == metav1.IncludeNone:
			row.Object.Object = nil
		default:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("unrecognized includeObject value: %q", opts.IncludeObject))
		}
	}
	return table, nil
}

// printTable is a built-in kind's Table by its printer's columns: Name (unless the printer has
// none) then the columns, one row per object, each row's object the object itself.
func (h *resourceHandler) printTable(obj runtime.Object, opts *metav1.TableOptions) (*metav1.Table, error) {
	var name *metav1.TableColumnDefinition
	if h.res.strategy == nil || !h.res.strategy.noNameColumn {
		name = &metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: nameDescription}
	}
	return h.printTableBy(obj, opts, name, h.printerColumns())
}

// printTableBy is a Table by a printer's columns: name (unless nil), then cols.
func (h *resourceHandler) printTableBy(obj runtime.Object, opts *metav1.TableOptions, name *metav1.TableColumnDefinition, cols []Column) (*metav1.Table, error) {
	table := &metav1.Table{}
	nameFirst := name != nil
	if !opts.NoHeaders {
		if nameFirst {
			table.ColumnDefinitions = append(table.ColumnDefinitions, *name)
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
		row := metav1.TableRow{Object: runtime.RawExtension{Object: u}}
		if nameFirst {
			row.Cells = append(row.Cells, u.GetName())
		}
		for _, c := range cols {
			row.Cells = append(row.Cells, c.value(u.Object, now))
		}
		table.Rows = append(table.Rows, row)
	}
	return table, nil
}

// columnTable converts to Tables by JSONPath columns (a CRD's additionalPrinterColumns) with
// apiextensions' tableconvertor, the cells evaluated by client-go's jsonpath as upstream does.
// A date cell is aged by the server's clock (the convertor uses time.Now), so that a test's fake
// clock decides it.
type columnTable struct {
	conv rest.TableConvertor
	// dates are the date columns' paths by cell index (Name is 0).
	dates map[int]*jsonpath.JSONPath
}

// defaultCustomColumns is the column of a CRD version without additionalPrinterColumns.
//
// Mirrors serveDefaultColumnsIfEmpty (apiextensions-apiserver pkg/apis/apiextensions/helpers.go).
func defaultCustomColumns() []Column {
	return []Column{{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp",
		Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}}
}

// newColumnTable is the table convertor of cols, as the CRD handler makes it; a column whose
// JSONPath does not parse is an error.
func newColumnTable(cols []Column) (*columnTable, error) {
	t := &columnTable{dates: map[int]*jsonpath.JSONPath{}}
	defs := make([]apiextensionsv1.CustomResourceColumnDefinition, 0, len(cols))
	for i, c := range cols {
		if c.value != nil {
			return nil, fmt.Errorf("column %q is computed, not a JSONPath column", c.Name)
		}
		defs = append(defs, apiextensionsv1.CustomResourceColumnDefinition{Name: c.Name, Type: c.Type, Format: c.Format,
			Description: c.Description, Priority: c.Priority, JSONPath: c.JSONPath})
		if c.Type == "date" {
			p := jsonpath.New(c.Name)
			if err := p.Parse(fmt.Sprintf("{%s}", c.JSONPath)); err != nil {
				return nil, fmt.Errorf("unrecognized column definition %q", c.JSONPath)
			}
			p.AllowMissingKeys(true)
			t.dates[i+1] = p
		}
	}
	conv, err := tableconvertor.New(defs)
	if err != nil {
		return nil, err
	}
	t.conv = conv
	return t, nil
}

// convert is the convertor's Table of obj with the date cells aged at now.
func (t *columnTable) convert(obj runtime.Object, opts *metav1.TableOptions, now time.Time) (*metav1.Table, error) {
	table, err := t.conv.ConvertToTable(context.Background(), obj, opts)
	if err != nil {
		return nil, err
	}
	for i := range table.Rows {
		row := &table.Rows[i]
		u, ok := row.Object.Object.(runtime.Unstructured)
		if !ok {
			continue
		}
		for col, p := range t.dates {
			if col < len(row.Cells) {
				row.Cells[col] = dateCell(p, u.UnstructuredContent(), now)
			}
		}
	}
	return table, nil
}

// dateCell is a date column's cell: the time from the value to now, "<invalid>" for a value that
// is no time, "<unknown>" for the zero time, nil without a string there.
//
// Mirrors cellForJSONValue's date case (apiextensions-apiserver tableconvertor.go) with
// metatable.ConvertToHumanReadableDateType, at the server's now.
func dateCell(p *jsonpath.JSONPath, obj map[string]any, now time.Time) any {
	results, err := p.FindResults(obj)
	if err != nil || len(results) == 0 || len(results[0]) == 0 {
		return nil
	}
	s, ok := results[0][0].Interface().(string)
	if !ok {
		return nil
	}
	var ts metav1.Time
	if err := ts.UnmarshalQueryParameter(s); err != nil {
		return "<invalid>"
	}
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(ts.Time))
}
