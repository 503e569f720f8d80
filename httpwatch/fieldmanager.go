package httpwatch

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	openapibuilder "k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/listwatch/listwatch/builtin"
)

// managedFields tracking and server-side apply, as the apiserver's handlers use
// k8s.io/apimachinery pkg/util/managedfields: every create, update and patch records which manager
// set which fields; an apply merges the applied configuration and refuses, with a 409 naming the
// fields and their managers, to take a field another manager owns unless forced.

// fieldManager returns the field manager of the resource ("") or of a subresource ("status").
// A built-in kind's is typed by the structured-merge-diff schema of package builtin; a custom
// resource's by the OpenAPI models of its CRD, whose metadata is ObjectMeta even without a schema
// (a schemaless resource's finalizers are a set, its ownerReferences a map by uid), as
// apiextensions-apiserver does. Both are made on first use.
//
// Mirrors handlers.RequestScope.FieldManager as the installer and the CRD handler build it.
func (h *resourceHandler) fieldManager(subresource string) (*managedfields.FieldManager, error) {
	h.managersOnce.Do(func() {
		h.managers = map[string]*managedfields.FieldManager{}
		gvk := h.res.GroupVersionKind()
		var tc managedfields.TypeConverter
		if h.res.typed() {
			var err error
			if tc, err = builtin.TypeConverter(); err != nil {
				h.managersErr = err
				return
			}
		} else if h.res.Schema != nil || !h.res.BuiltIn {
			var err error
			if tc, err = customTypeConverter(h.res); err != nil {
				h.managersErr = err
				return
			}
		} else {
			tc = managedfields.NewDeducedTypeConverter()
		}
		subresources := []string{""}
		if h.res.StatusSubresource {
			subresources = append(subresources, "status")
		}
		for _, sub := range subresources {
			resetFields := h.resetFields(sub)
			conv := unstructuredConvertor{gv: gvk.GroupVersion()}
			var fm *managedfields.FieldManager
			var err error
			switch {
			case h.res.typed():
				bconv := builtinConvertor{conv}
				fm, err = managedfields.NewDefaultFieldManager(tc, bconv, bconv, bconv, gvk, gvk.GroupVersion(), sub, resetFields)
			case h.res.multiVersion():
				crdConv := crdConvertor{conv, h.res.crd}
				fm, err = managedfields.NewDefaultCRDFieldManager(tc, crdConv, crdConv, crdConv, gvk, gvk.GroupVersion(), sub, resetFields)
			default:
				fm, err = managedfields.NewDefaultCRDFieldManager(tc, conv, conv, conv, gvk, gvk.GroupVersion(), sub, resetFields)
			}
			if err != nil {
				h.managersErr = err
				return
			}
			h.managers[sub] = fm
		}
		if h.res.Scale != nil {
			h.managers["scale"], h.managersErr = h.scaleFieldManager(tc)
		}
	})
	if h.managersErr != nil {
		return nil, h.managersErr
	}
	return h.managers[subresource], nil
}

// scaleFieldManager is the field manager of the scale subresource. A custom resource's Scales are
// typed by its models, which have autoscaling/v1 Scale among the built-in definitions, as
// upstream's CRD models have it among its static ones. A built-in kind's are deduced: package
// builtin's schema has no Scale, and a Scale (no lists, no maps of keys) has the same fields either
// way.
func (h *resourceHandler) scaleFieldManager(tc managedfields.TypeConverter) (*managedfields.FieldManager, error) {
	conv := unstructuredConvertor{gv: scaleGVK.GroupVersion()}
	if h.res.typed() {
		return managedfields.NewDefaultFieldManager(managedfields.NewDeducedTypeConverter(),
			conv, conv, conv, scaleGVK, scaleGVK.GroupVersion(), "scale", nil)
	}
	return managedfields.NewDefaultCRDFieldManager(tc, conv, conv, conv, scaleGVK, scaleGVK.GroupVersion(), "scale", nil)
}

// resetFields are the fields a write to the resource or subresource leaves alone, as the strategies'
// GetResetFields: the resource's status when it has a status subresource; for the status, every
// other top-level field (spec), for a custom resource the metadata too, for a built-in kind the
// metadata fields of its strategy's statusResets.
func (h *resourceHandler) resetFields(subresource string) map[fieldpath.APIVersion]fieldpath.Filter {
	if !h.res.StatusSubresource {
		return nil
	}
	gv := fieldpath.APIVersion(h.res.GroupVersion().String())
	switch subresource {
	case "":
		return map[fieldpath.APIVersion]fieldpath.Filter{gv: fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status")))}
	case "status":
		set := fieldpath.NewSet(fieldpath.MakePathOrDie("spec"))
		if !h.res.BuiltIn {
			set.Insert(fieldpath.MakePathOrDie("metadata"))
		}
		if h.res.strategy != nil {
			for _, f := range h.res.strategy.statusResets {
				set.Insert(fieldpath.MakePathOrDie("metadata", f))
			}
		}
		return map[fieldpath.APIVersion]fieldpath.Filter{gv: fieldpath.NewExcludeSetFilter(set)}
	}
	return nil
}

// trackCreate records the creating manager's fields in obj's managedFields.
func (h *resourceHandler) trackCreate(obj *unstructured.Unstructured, manager string) (*unstructured.Unstructured, error) {
	fm, err := h.fieldManager("")
	if err != nil {
		return nil, err
	}
	live, err := h.emptyLive()
	if err != nil {
		return nil, err
	}
	return asUnstructuredObject(fm.UpdateNoErrors(live, obj, manager))
}

// emptyLive is the live object a create is compared with: an empty object, for a built-in kind its
// typed zero value (whose zero fields, such as an event's reportingComponent "", are then no
// change of the creating manager's), as the create handler's is the scheme's new object.
func (h *resourceHandler) emptyLive() (*unstructured.Unstructured, error) {
	gvk := h.res.GroupVersionKind()
	if !h.res.typed() {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(gvk)
		return live, nil
	}
	return typedZero(gvk)
}

// trackUpdate records the updating manager's fields in the new object's managedFields.
func (h *resourceHandler) trackUpdate(subresource string, live, obj *unstructured.Unstructured, manager string) (*unstructured.Unstructured, error) {
	fm, err := h.fieldManager(subresource)
	if err != nil {
		return nil, err
	}
	if fm == nil {
		// A subresource without its own managers (finalize) is tracked as the resource.
		if fm, err = h.fieldManager(""); err != nil {
			return nil, err
		}
	}
	return asUnstructuredObject(fm.UpdateNoErrors(live, obj, manager))
}

// apply merges an applied configuration into the live object (an empty one when creating).
func (h *resourceHandler) apply(subresource string, live, patch *unstructured.Unstructured, manager string, force bool) (*unstructured.Unstructured, error) {
	fm, err := h.fieldManager(subresource)
	if err != nil {
		return nil, err
	}
	if fm == nil {
		return nil, fmt.Errorf("no field manager for subresource %q", subresource)
	}
	out, err := fm.Apply(live, patch, manager, force)
	if err != nil {
		return nil, err
	}
	return asUnstructuredObject(out)
}

func asUnstructuredObject(obj runtime.Object) (*unstructured.Unstructured, error) {
	u, err := asUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return u, nil
}

// unstructuredConvertor is the converter, defaulter and creater of a single-version resource whose
// objects are unstructured: conversion to its own version is the identity, there are no defaults.
//
// Mirrors what apiextensions-apiserver gives the field manager of a CRD with one version.
type unstructuredConvertor struct{ gv schema.GroupVersion }

func (c unstructuredConvertor) Convert(in, out, context any) error {
	return fmt.Errorf("unstructuredConvertor: Convert is not supported")
}

func (c unstructuredConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	gvk := in.GetObjectKind().GroupVersionKind()
	if _, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk}); !ok && gvk.GroupVersion() != c.gv {
		return nil, fmt.Errorf("%v cannot be converted to %v: one version is served", gvk, target)
	}
	return in, nil
}

func (c unstructuredConvertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

func (c unstructuredConvertor) Default(runtime.Object) {}

func (c unstructuredConvertor) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	return u, nil
}

// builtinConvertor is the converter of a built-in kind's field manager: unstructuredConvertor's,
// but any other version (another group's, such as an event's managers that wrote at the other
// version of events) is missing, so that a write drops the managers that wrote at it, as the
// apiserver's field manager drops them: its scheme cannot convert to that version or its type
// converter, built from the OpenAPI models of the served versions of the group's resources alone,
// has no type for it.
type builtinConvertor struct{ unstructuredConvertor }

func (c builtinConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	gvk := in.GetObjectKind().GroupVersionKind()
	if to, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk}); !ok || to.GroupVersion() != c.gv {
		return nil, runtime.NewNotRegisteredGVKErrForTarget("listwatch", gvk, target)
	}
	return c.unstructuredConvertor.ConvertToVersion(in, target)
}

// customTypeConverter is the type converter of a custom resource with a schema: the OpenAPI v3
// models apiextensions' builder makes of its CRD, merged with the built-in definitions they refer
// to (ObjectMeta...).
//
// Mirrors buildOpenAPIModelsForApply (apiextensions-apiserver customresource_handler.go).
func customTypeConverter(r Resource) (managedfields.TypeConverter, error) {
	base, err := builtin.Definitions(true)
	if err != nil {
		return nil, err
	}
	static := make(map[string]*spec.Schema, len(base))
	for k := range base {
		s := base[k]
		static[k] = &s
	}
	crd, err := r.definition()
	if err != nil {
		return nil, err
	}
	if r.multiVersion() {
		// Every version's models: managedFields name the versions their managers wrote at.
		crd = r.crd.definition.DeepCopy()
	}
	if v := &crd.Spec.Versions[0]; v.Schema == nil && !r.multiVersion() {
		// Without a schema the object keeps whatever it holds, as a CRD whose root preserves
		// unknown fields.
		preserve := true
		v.Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", XPreserveUnknownFields: &preserve}}
	}
	specs := []*spec3.OpenAPI{{Version: "3.0.0", Components: &spec3.Components{Schemas: static}}}
	for _, v := range crd.Spec.Versions {
		built, err := openapibuilder.BuildOpenAPIV3(crd, v.Name, openapibuilder.Options{})
		if err != nil {
			return nil, err
		}
		specs = append(specs, built)
	}
	merged, err := openapibuilder.MergeSpecsV3(specs...)
	if err != nil {
		return nil, err
	}
	return managedfields.NewTypeConverter(merged.Components.Schemas, false)
}

// crdConvertor is the converter, defaulter and creater of a version of a definition with several:
// apiextensions' converter between them, the defaults of the object's own version.
//
// Mirrors the request scope's Convertor, Defaulter and Creater (apiextensions-apiserver
// customresource_handler.go), which the CRD handler gives its field managers.
type crdConvertor struct {
	unstructuredConvertor
	vs *crdVersions
}

func (c crdConvertor) Convert(in, out, context any) error {
	return c.vs.converter.Convert(in, out, context)
}

func (c crdConvertor) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	return c.vs.converter.ConvertToVersion(in, target)
}

func (c crdConvertor) Default(obj runtime.Object) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		c.vs.defaults(u)
	}
}
