package httpwatch

import (
	"context"
	"encoding/json"
	"fmt"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// A custom resource's schema at work, by apiextensions-apiserver's own packages: the structural
// schema prunes unknown fields, coerces metadata (the root's and embedded resources') and applies
// defaults as a body is decoded; the OpenAPI validator, the metadata of embedded resources, list
// types and CEL rules validate the object in the strategy.

// customResource is what apiextensions-apiserver derives from a CRD version to serve its objects.
// Without a schema (Resource.Schema nil) only the root's metadata is coerced: every other field is
// kept and nothing is validated beyond ObjectMeta, as for a CRD that preserves unknown fields.
type customResource struct {
	gk schema.GroupKind
	// structural is the structural schema with its defaults pruned; nil without a schema.
	structural *structuralschema.Structural
	// validator validates whole objects, statusValidator the status of a status update (nil when
	// the schema has no status property).
	validator, statusValidator apiservervalidation.SchemaValidator
	// cel holds the compiled x-kubernetes-validations rules; nil when there are none.
	cel *cel.Validator
	// scale is the scale subresource's paths, whose values every write validates; nil without one.
	scale *ScaleSubresource
}

// newCustomResource builds r's schema machinery as the CRD handler does for a served version.
//
// Mirrors crdHandler.getOrCreateServingInfoFor (apiextensions-apiserver customresource_handler.go)
// and customresource.NewStrategy.
func newCustomResource(r Resource) (*customResource, error) {
	c := &customResource{gk: r.GroupVersionKind().GroupKind(), scale: r.Scale}
	if r.Schema == nil {
		return c, nil
	}
	props, err := internalSchema(r.Schema)
	if err != nil {
		return nil, err
	}
	s, err := structuralschema.NewStructural(props)
	if err != nil {
		return nil, fmt.Errorf("the schema is not structural: %v", err)
	}
	if errs := structuralschema.ValidateStructural(field.NewPath("openAPIV3Schema"), s); len(errs) > 0 {
		return nil, fmt.Errorf("the schema is not structural: %v", errs.ToAggregate())
	}
	// The structural schema shares defaults with props; pruning them works on a copy.
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, fmt.Errorf("pruning the schema's defaults: %v", err)
	}
	c.structural = s
	if c.validator, _, err = apiservervalidation.NewSchemaValidator(props); err != nil {
		return nil, err
	}
	if status, ok := props.Properties["status"]; ok && r.StatusSubresource {
		if c.statusValidator, _, err = apiservervalidation.NewSchemaValidator(&status); err != nil {
			return nil, err
		}
	}
	c.cel = cel.NewValidator(s, true, celconfig.PerCallLimit)
	return c, nil
}

// v1Schema is an OpenAPI v3 schema as a CRD carries it (its JSON is the CRD's openAPIV3Schema).
func v1Schema(s *spec.Schema) (*apiextensionsv1.JSONSchemaProps, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	v1 := &apiextensionsv1.JSONSchemaProps{}
	if err := json.Unmarshal(data, v1); err != nil {
		return nil, fmt.Errorf("the schema is not a CRD's openAPIV3Schema: %v", err)
	}
	return v1, nil
}

// internalSchema is an OpenAPI v3 schema as the internal apiextensions type.
func internalSchema(s *spec.Schema) (*apiextensionsinternal.JSONSchemaProps, error) {
	v1, err := v1Schema(s)
	if err != nil {
		return nil, err
	}
	out := &apiextensionsinternal.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// definition is the CustomResourceDefinition that serves r as its one version: names, scope,
// status and scale subresources and schema (apiextensions' OpenAPI builder reads these).
func (r Resource) definition() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = r.Resource + "." + r.Group
	crd.Spec.Group = r.Group
	crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: r.Resource, Singular: r.SingularName,
		Kind: r.Kind, ListKind: r.ListKind, ShortNames: r.ShortNames, Categories: r.Categories}
	crd.Spec.Scope = apiextensionsv1.ClusterScoped
	if r.Namespaced {
		crd.Spec.Scope = apiextensionsv1.NamespaceScoped
	}
	v := apiextensionsv1.CustomResourceDefinitionVersion{Name: r.Version, Served: true, Storage: true}
	if r.Schema != nil {
		s, err := v1Schema(r.Schema)
		if err != nil {
			return nil, err
		}
		v.Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: s}
	}
	if r.StatusSubresource || r.Scale != nil {
		v.Subresources = &apiextensionsv1.CustomResourceSubresources{}
	}
	if r.StatusSubresource {
		v.Subresources.Status = &apiextensionsv1.CustomResourceSubresourceStatus{}
	}
	if r.Scale != nil {
		v.Subresources.Scale = &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: r.Scale.SpecReplicasPath, StatusReplicasPath: r.Scale.StatusReplicasPath}
		if r.Scale.LabelSelectorPath != "" {
			v.Subresources.Scale.LabelSelectorPath = &r.Scale.LabelSelectorPath
		}
	}
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{v}
	return crd, nil
}

// coerce prunes the fields the schema does not know, drops non-nullable nulls without defaults and
// coerces the metadata of the object and of its embedded resources; it returns the paths of the
// unknown fields when track is set (strict field validation). Invalid metadata is an error, as in
// a request body.
func (c *customResource) coerce(u *unstructured.Unstructured, track bool) ([]string, error) {
	return coerceObject(u, c.gk, func(string) *structuralschema.Structural { return c.structural }, coerceOptions{track: track})
}

// coerceApplied is coerce for the object server-side apply made, which keeps its nulls: the
// apiserver validates that object as the field manager left it (a non-nullable null is then the
// schema's type error), where a decoded body's nulls were dropped first.
func (c *customResource) coerceApplied(u *unstructured.Unstructured) error {
	_, err := coerceObject(u, c.gk, func(string) *structuralschema.Structural { return c.structural }, coerceOptions{keepNulls: true})
	return err
}

// coerceOptions are coerceObject's: track returns the unknown fields' paths; stored is an object
// read from storage, whose invalid metadata is dropped and missing generation is 1; keepNulls keeps
// the non-nullable nulls without defaults (an applied object's).
type coerceOptions struct{ track, stored, keepNulls bool }

// coerceObject is coerce by the structural schema of the object's version (none: only the root's
// metadata is coerced).
//
// Mirrors unstructuredSchemaCoercer.apply (apiextensions-apiserver customresource_handler.go).
func coerceObject(u *unstructured.Unstructured, gk schema.GroupKind, structuralOf func(version string) *structuralschema.Structural, opts coerceOptions) ([]string, error) {
	track, stored := opts.track, opts.stored
	kind, foundKind, err := unstructured.NestedString(u.Object, "kind")
	if err != nil {
		return nil, err
	}
	apiVersion, foundAPIVersion, err := unstructured.NestedString(u.Object, "apiVersion")
	if err != nil {
		return nil, err
	}
	objectMeta, foundObjectMeta, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object,
		schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: track, DropMalformedFields: stored})
	if err != nil {
		return nil, err
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	if s := structuralOf(gv.Version); gv.Group == gk.Group && kind == gk.Kind && s != nil {
		unknown = append(unknown, structuralpruning.PruneWithOptions(u.Object, s, true,
			structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: track})...)
		if !opts.keepNulls {
			structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, s)
		}
		ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, u.Object, s, false,
			schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: track, DropInvalidFields: stored})
		if ferr != nil {
			return nil, ferr
		}
		unknown = append(unknown, paths...)
		if stored && objectMeta != nil && objectMeta.Generation == 0 {
			objectMeta.Generation = 1
		}
	}
	if foundKind {
		u.SetKind(kind)
	}
	if foundAPIVersion {
		u.SetAPIVersion(apiVersion)
	}
	if foundObjectMeta {
		if err := schemaobjectmeta.SetObjectMeta(u.Object, objectMeta); err != nil {
			return nil, err
		}
	}
	return unknown, nil
}

// applyDefaults sets the schema's defaults in an object of the resource's kind.
//
// Mirrors unstructuredDefaulter.Default (apiextensions-apiserver customresource_handler.go).
func (c *customResource) applyDefaults(u *unstructured.Unstructured) {
	if c.structural == nil || u.GroupVersionKind().GroupKind() != c.gk {
		return
	}
	structuraldefaulting.Default(u.Object, c.structural)
}

// validate is the schema's part of the strategy's validation of a new object (old nil), an update
// of the resource or an update of its status: the OpenAPI schema (ratcheting what an update leaves
// unchanged), embedded resources' metadata, list types and CEL rules, the latter only when the
// others (and the metadata's, prior, which the result starts with) found nothing that blocks them.
//
// Mirrors customResourceStrategy.Validate and ValidateUpdate, and statusStrategy.ValidateUpdate
// (apiextensions-apiserver pkg/registry/customresource), after customResourceValidator's TypeMeta
// and ObjectMeta checks.
func (c *customResource) validate(ctx context.Context, obj, old *unstructured.Unstructured, subresource string, prior field.ErrorList) field.ErrorList {
	if c.structural == nil {
		return append(prior, c.scale.validate(obj, subresource != "status")...)
	}
	errs := prior
	var celOpts []cel.Option
	var oldObj any
	switch {
	case old == nil:
		errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj.Object, c.validator)...)
		errs = append(errs, c.scale.validate(obj, true)...)
		errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj.Object, c.structural, false)...)
		errs = append(errs, listtype.ValidateListSetsAndMaps(nil, c.structural, obj.Object)...)
	case subresource == "status":
		oldObj = old.Object
		correlated := common.NewCorrelatedObject(obj.Object, old.Object, &model.Structural{Structural: c.structural})
		celOpts = append(celOpts, cel.WithRatcheting(correlated))
		if status, ok := obj.Object["status"]; ok {
			errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(field.NewPath("status"), status, old.Object["status"],
				c.statusValidator, apiservervalidation.WithRatcheting(correlated.Key("status")))...)
		}
		errs = append(errs, c.scale.validate(obj, false)...)
		if newErrs := listtype.ValidateListSetsAndMaps(nil, c.structural, obj.Object); len(newErrs) > 0 &&
			len(listtype.ValidateListSetsAndMaps(nil, c.structural, old.Object)) == 0 {
			errs = append(errs, newErrs...)
		}
	default:
		oldObj = old.Object
		correlated := common.NewCorrelatedObject(obj.Object, old.Object, &model.Structural{Structural: c.structural})
		celOpts = append(celOpts, cel.WithRatcheting(correlated))
		errs = append(errs, apiservervalidation.ValidateCustomResourceUpdate(nil, obj.Object, old.Object, c.validator,
			apiservervalidation.WithRatcheting(correlated))...)
		errs = append(errs, c.scale.validate(obj, true)...)
		errs = append(errs, schemaobjectmeta.Validate(ctx, nil, obj.Object, c.structural, false)...)
		if len(listtype.ValidateListSetsAndMaps(nil, c.structural, old.Object)) == 0 {
			errs = append(errs, listtype.ValidateListSetsAndMaps(nil, c.structural, obj.Object)...)
		}
	}
	if c.cel != nil {
		if blocking := blockingError(errs); blocking != nil {
			return append(errs, blocking)
		}
		celErrs, _ := c.cel.Validate(ctx, nil, c.structural, obj.Object, oldObj, celconfig.RuntimeCELCostBudget, celOpts...)
		errs = append(errs, celErrs...)
	}
	return errs
}

// blockingError is the error that stands for the CEL rules left unchecked when errs has one of the
// kinds that keep them from running.
//
// Mirrors hasBlockingErr (apiextensions-apiserver pkg/registry/customresource/strategy.go).
func blockingError(errs field.ErrorList) *field.Error {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")
		}
	}
	return nil
}
