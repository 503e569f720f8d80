package httpwatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/scale"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/listwatch/listwatch/builtin"
)

// The scale subresource of custom resources, as apiextensions-apiserver serves it
// (pkg/registry/customresource etcd.go ScaleREST and validator.go, the CRD handler's serveScale):
// an autoscaling/v1 Scale read from the paths the CRD names; a write through it changes the spec
// replicas alone and is an update of the custom resource, validated and stored like any.

// scaleGVK is the kind the scale subresource answers in.
var scaleGVK = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

// scaleEndpoint serves Scales as the resource's objects: the scale request scope is a copy of the
// resource's; a custom resource's answers are in its standard serializers (JSON, YAML), a built-in
// kind's in the legacy codecs (protobuf too).
func (h *resourceHandler) scaleEndpoint() endpoint {
	if h.res.Scale.typed {
		return typedEndpoint
	}
	return customEndpoint
}

// scaleCodecs are the codecs of client-go's scale converter, which the CRD handler's scale request
// scope decodes with.
var scaleCodecs = sync.OnceValue(func() serializer.CodecFactory { return scale.NewScaleConverter().Codecs() })

// invalidSpecReplicas marks a custom resource without spec replicas in the Scale an update starts
// from (the smallest int32, as upstream).
const invalidSpecReplicas = math.MinInt32

// scalePath splits a scale path into field names, without its leading period.
//
// Mirrors splitReplicasPath (apiextensions-apiserver pkg/registry/customresource/etcd.go).
func scalePath(p string) []string {
	return strings.Split(strings.TrimPrefix(p, "."), ".")
}

// check refuses scale paths apiextensions' CRD validation refuses: spec replicas under .spec,
// status replicas under .status, the label selector under either, each a simple JSON path.
func (s *ScaleSubresource) check() error {
	scale := &apiextensionsinternal.CustomResourceSubresourceScale{SpecReplicasPath: s.SpecReplicasPath, StatusReplicasPath: s.StatusReplicasPath}
	if s.LabelSelectorPath != "" {
		scale.LabelSelectorPath = &s.LabelSelectorPath
	}
	subresources := &apiextensionsinternal.CustomResourceSubresources{Scale: scale}
	return apiextensionsvalidation.ValidateCustomResourceDefinitionSubresources(subresources, field.NewPath("subresources")).ToAggregate()
}

// scaleOf is the Scale of a custom resource, and whether it has spec replicas.
//
// Mirrors scaleFromCustomResource (apiextensions-apiserver pkg/registry/customresource/etcd.go).
func (s *ScaleSubresource) scaleOf(cr *unstructured.Unstructured) (*autoscalingv1.Scale, bool, error) {
	spec, found, err := unstructured.NestedInt64(cr.Object, scalePath(s.SpecReplicasPath)...)
	if err != nil {
		return nil, false, err
	}
	status, _, err := unstructured.NestedInt64(cr.Object, scalePath(s.StatusReplicasPath)...)
	if err != nil {
		return nil, false, err
	}
	selector, err := s.selectorOf(cr)
	if err != nil {
		return nil, false, err
	}
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: scaleGVK.GroupVersion().String(), Kind: scaleGVK.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: cr.GetName(), Namespace: cr.GetNamespace(), UID: cr.GetUID(),
			ResourceVersion: cr.GetResourceVersion(), CreationTimestamp: cr.GetCreationTimestamp()},
		Spec:   autoscalingv1.ScaleSpec{Replicas: int32(spec)},
		Status: autoscalingv1.ScaleStatus{Replicas: int32(status), Selector: selector},
	}, found, nil
}

// selectorOf is the Scale's status.selector: a custom resource's string at LabelSelectorPath, a
// built-in kind's metav1.LabelSelector there in its string form.
//
// Mirrors scaleFromDeployment's selector (k8s.io/kubernetes pkg/registry/apps/deployment/storage).
func (s *ScaleSubresource) selectorOf(obj *unstructured.Unstructured) (string, error) {
	if s.LabelSelectorPath == "" {
		return "", nil
	}
	if !s.typed {
		selector, _, err := unstructured.NestedString(obj.Object, scalePath(s.LabelSelectorPath)...)
		return selector, err
	}
	return labelSelectorAt(obj.Object, scalePath(s.LabelSelectorPath)...)
}

// validate checks the replicas (spec: spec and status; else status alone) and the label selector
// of a custom resource: non-negative int32s and a string.
//
// Mirrors customResourceValidator.ValidateScaleSpec and ValidateScaleStatus (apiextensions-apiserver
// pkg/registry/customresource/validator.go).
func (s *ScaleSubresource) validate(obj *unstructured.Unstructured, spec bool) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	if spec {
		errs = append(errs, validateReplicas(obj, s.SpecReplicasPath)...)
	}
	errs = append(errs, validateReplicas(obj, s.StatusReplicasPath)...)
	if s.LabelSelectorPath != "" {
		selector, _, err := unstructured.NestedString(obj.Object, scalePath(s.LabelSelectorPath)...)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(s.LabelSelectorPath), selector, err.Error()))
		}
	}
	return errs
}

// validateReplicas refuses replicas at path that are not a non-negative int32.
func validateReplicas(obj *unstructured.Unstructured, path string) field.ErrorList {
	replicas, _, err := unstructured.NestedInt64(obj.Object, scalePath(path)...)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(field.NewPath(path), replicas, err.Error())}
	case replicas < 0:
		return field.ErrorList{field.Invalid(field.NewPath(path), replicas, "should be a non-negative integer")}
	case replicas > math.MaxInt32:
		return field.ErrorList{field.Invalid(field.NewPath(path), replicas, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32))}
	}
	return nil
}

// scaleMappings are where the Scale's spec.replicas is in the custom resource, for the managed
// fields moved between them.
func (h *resourceHandler) scaleMappings() managedfields.ResourcePathMappings {
	path := fieldpath.Path{}
	for _, name := range scalePath(h.res.Scale.SpecReplicasPath) {
		path = append(path, fieldpath.PathElement{FieldName: &name})
	}
	return managedfields.ResourcePathMappings{h.res.GroupVersion().String(): path}
}

// scaleGet is the Scale a GET of the scale subresource answers with: the stored object's, a 500
// when it has no spec replicas.
//
// Mirrors ScaleREST.Get (apiextensions-apiserver pkg/registry/customresource/etcd.go).
func (h *resourceHandler) scaleGet(obj *unstructured.Unstructured) (runtime.Object, error) {
	s, found, err := h.res.Scale.scaleOf(obj)
	if err != nil && h.res.Scale.typed {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err != nil {
		return nil, err
	}
	if !found && !h.res.Scale.typed {
		return nil, apierrors.NewInternalError(fmt.Errorf("the spec replicas field %q does not exist", h.res.Scale.SpecReplicasPath))
	}
	return s, nil
}

// scaleResult is the Scale of the custom resource an update through the scale subresource stored.
func (h *resourceHandler) scaleResult(result runtime.Object) (runtime.Object, error) {
	cr, err := asUnstructured(result)
	if err != nil {
		return nil, err
	}
	s, _, err := h.res.Scale.scaleOf(cr)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return s, nil
}

// scaleUpdate turns an update of the Scale (update computes the new Scale, as unstructured, from
// the stored object's) into an update of the custom resource: its spec replicas set, the Scale's
// resourceVersion its precondition, the managers of the Scale's replicas those of the resource's.
//
// Mirrors scaleUpdatedObjectInfo.UpdatedObject (apiextensions-apiserver
// pkg/registry/customresource/etcd.go).
func (h *resourceHandler) scaleUpdate(update updatedObjectFunc) updatedObjectFunc {
	return func(existing *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		cr := existing.DeepCopy()
		mf := managedfields.NewScaleHandler(cr.GetManagedFields(), h.res.GroupVersion(), h.scaleMappings())
		old, found, err := h.res.Scale.scaleOf(cr)
		if err != nil {
			return nil, err
		}
		if !found && !h.res.Scale.typed {
			old.Spec.Replicas = invalidSpecReplicas
		}
		if old.ManagedFields, err = mf.ToSubresource(); err != nil {
			return nil, err
		}
		oldObj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(old)
		if err != nil {
			return nil, err
		}
		newObj, err := update(&unstructured.Unstructured{Object: oldObj})
		if err != nil {
			return nil, err
		}
		s := &autoscalingv1.Scale{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(newObj.Object, s); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("wrong object passed to Scale update: %v", err))
		}
		if err := h.checkScale(s, cr); err != nil {
			return nil, err
		}
		if err := unstructured.SetNestedField(cr.Object, int64(s.Spec.Replicas), scalePath(h.res.Scale.SpecReplicasPath)...); err != nil {
			return nil, err
		}
		if s.ResourceVersion != "" {
			cr.SetResourceVersion(s.ResourceVersion)
		}
		entries, err := mf.ToParent(s.ManagedFields)
		if err != nil {
			return nil, err
		}
		cr.SetManagedFields(entries)
		return cr, nil
	}
}

// checkScale refuses a new Scale as the resource's ScaleREST does: a built-in kind's by
// validateTypedScale, a custom resource's without spec replicas.
func (h *resourceHandler) checkScale(s *autoscalingv1.Scale, obj *unstructured.Unstructured) error {
	if h.res.Scale.typed {
		return h.validateTypedScale(s, obj)
	}
	if s.Spec.Replicas == invalidSpecReplicas {
		return apierrors.NewBadRequest(fmt.Sprintf("the spec replicas field %q cannot be empty", h.res.Scale.SpecReplicasPath))
	}
	return nil
}

// validateTypedScale refuses a built-in kind's new Scale as its ScaleREST does: invalid
// managedFields or negative replicas (422; the rest of its metadata is ignored), a UID other than the object's (409).
//
// Mirrors scaleUpdatedObjectInfo.UpdatedObject's checks (k8s.io/kubernetes
// pkg/registry/apps/deployment/storage) with autoscaling's ValidateScale.
func (h *resourceHandler) validateTypedScale(s *autoscalingv1.Scale, obj *unstructured.Unstructured) error {
	errs := metav1validation.ValidateManagedFields(s.ManagedFields, field.NewPath("metadata", "managedFields"))
	if s.Spec.Replicas < 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "replicas"), s.Spec.Replicas, "must be greater than or equal to 0"))
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: scaleGVK.Group, Kind: scaleGVK.Kind}, obj.GetName(), errs)
	}
	if s.UID != "" && s.UID != obj.GetUID() {
		gr := schema.GroupResource{Group: h.res.Group, Resource: h.res.Resource + "/scale"}
		return apierrors.NewConflict(gr, obj.GetName(), fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", s.UID, obj.GetUID()))
	}
	return nil
}

// decodeScale decodes the body of a PUT of the scale subresource: an autoscaling/v1 Scale in JSON,
// YAML or protobuf; unknown and duplicate fields are reported as fieldValidation asks.
//
// Mirrors handlers.UpdateResource's decoding with the scale request scope's serializer.
func (h *resourceHandler) decodeScale(w http.ResponseWriter, body []byte, f *format, validation string) (*unstructured.Unstructured, error) {
	info, ok := runtime.SerializerInfoForMediaType(scaleCodecs().SupportedMediaTypes(), f.mediaType)
	if !ok {
		return nil, unsupportedMediaType(h.scaleEndpoint().mediaTypes(false))
	}
	decoder := info.Serializer
	if isStrict(validation) && info.StrictSerializer != nil {
		decoder = info.StrictSerializer
	}
	obj, gvk, err := scaleCodecs().DecoderToVersion(decoder, scaleGVK.GroupVersion()).Decode(body, &scaleGVK, &autoscalingv1.Scale{})
	if err != nil {
		se, isStrictErr := runtime.AsStrictDecodingError(err)
		if (!isStrictErr || obj == nil) && h.res.Scale.typed {
			return nil, typedScaleDecodeError(err, gvk, body)
		}
		if !isStrictErr || obj == nil || validation != metav1.FieldValidationWarn {
			return nil, errScaleDecode
		}
		for _, e := range se.Errors() {
			addWarning(w, e.Error())
		}
	}
	if gvk.GroupVersion() != scaleGVK.GroupVersion() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gvk.GroupVersion(), scaleGVK.GroupVersion()))
	}
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: out}
	u.SetGroupVersionKind(scaleGVK)
	return u, nil
}

// errScaleDecode is every decoding error of a Scale body: upstream's handler names the kind the
// body should have been by the custom resource's typer, which has no Scale, so its error is that.
var errScaleDecode = func() error {
	_, _, err := runtime.NewScheme().ObjectKinds(&autoscalingv1.Scale{})
	return apierrors.NewBadRequest(err.Error())
}()

// typedScaleDecodeError is a built-in kind's error for a Scale body that does not decode: a body
// of another kind the legacy scheme knows decodes, then does not convert to a Scale.
//
// Mirrors handlers.transformDecodeError over the legacy scheme.
func typedScaleDecodeError(err error, gvk *schema.GroupVersionKind, body []byte) error {
	if gvk != nil && gvk.Kind != "" && *gvk != scaleGVK {
		if obj, newErr := builtin.New(*gvk); newErr == nil {
			err = fmt.Errorf("converting (%s) to (autoscaling.Scale): unknown conversion", reflect.TypeOf(obj).Elem())
		}
	}
	if gvk != nil && gvk.Kind != "" {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, scaleGVK.Kind, err))
	}
	return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v (%s)", scaleGVK.Kind, err, summarizeData(body, 30)))
}

// serveScaleWrite is serveWrite for the scale subresource: answers and errors are a Scale's.
func (h *resourceHandler) serveScaleWrite(w http.ResponseWriter, req *http.Request, write func(ctx context.Context) (int, runtime.Object, error)) {
	ctx, cancel := context.WithTimeout(req.Context(), requestTimeoutUpperBound)
	defer cancel()
	if _, err := h.scaleEndpoint().negotiateOutput(req, false); err != nil {
		h.server.writeErrorFor(w, req, h.scaleEndpoint(), err)
		return
	}
	code, obj, err := write(ctx)
	if err == nil {
		obj, err = h.scaleResult(obj)
	}
	if err != nil {
		h.server.writeErrorFor(w, req, h.scaleEndpoint(), err)
		return
	}
	h.server.writeObjectFor(w, req, h.scaleEndpoint(), code, obj, h.scaleTransform)
}

// scaleJSON is a Scale's JSON as the scale request scope's codec writes it: its fields in the
// order of the Go type's, as a JSON patch applies to it.
func scaleJSON(u *unstructured.Unstructured) ([]byte, error) {
	s := &autoscalingv1.Scale{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s); err != nil {
		return nil, err
	}
	return json.Marshal(s)
}

// scaleCheck decodes a patched Scale as the patchers do with the scale request scope's codec: an
// error is a 422 on the patch; unknown and duplicate fields (fieldValidation Strict or Warn) join
// the patch's own strict errors.
//
// Mirrors jsonPatcher.applyPatchToCurrentObject's decoding.
func (p *patcher) scaleCheck(patched []byte, strictErrs []error) (*unstructured.Unstructured, error) {
	invalid := func(err error) error {
		return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), string(patched), err.Error())})
	}
	info, _ := runtime.SerializerInfoForMediaType(scaleCodecs().SupportedMediaTypes(), runtime.ContentTypeJSON)
	decoder := info.Serializer
	if isStrict(p.validation) {
		decoder = info.StrictSerializer
	}
	s := &autoscalingv1.Scale{}
	if err := runtime.DecodeInto(scaleCodecs().DecoderToVersion(decoder, scaleGVK.GroupVersion()), patched, s); err != nil {
		se, ok := runtime.AsStrictDecodingError(err)
		if !ok {
			return nil, invalid(err)
		}
		strictErrs = append(strictErrs, se.Errors()...)
	}
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: out}
	u.SetGroupVersionKind(scaleGVK)
	return p.strictResult(u, string(patched), strictErrs)
}

// errScaleApplyUnowned is upstream's answer to an apply of a Scale whose replicas no manager owns:
// its field manager then records the live Scale as an update from nothing, converting an
// unstructured Scale with the custom resource's converter, which refuses autoscaling/v1.
var errScaleApplyUnowned = errors.New("failed to create manager for existing fields: failed to convert live object (/; autoscaling/v1, Kind=Scale) to proper version: request to convert CR to an invalid group/version: autoscaling/v1")

// scaleColumns are the columns of a Scale's Table.
//
// Mirrors getScaleColumnsForVersion (apiextensions-apiserver pkg/apiserver/helpers.go).
func scaleColumns() []Column {
	return append([]Column{
		{Name: "Desired", Type: "integer", Description: "Number of desired replicas", JSONPath: ".spec.replicas"},
		{Name: "Available", Type: "integer", Description: "Number of actual replicas", JSONPath: ".status.replicas"},
	}, defaultCustomColumns()...)
}

// scaleTransform converts a Scale as the Accept header asks: a Table by the scale columns, or
// what the resource's transform makes of any object.
func (h *resourceHandler) scaleTransform(obj runtime.Object, n negotiated) (runtime.Object, error) {
	if n.convert.Kind != asTable {
		return h.transform(obj, n)
	}
	opts, err := h.tableOptions(n)
	if err != nil {
		return nil, err
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	convert := func(obj runtime.Object, opts *metav1.TableOptions) (*metav1.Table, error) {
		return h.res.scaleTable.convert(obj, opts, h.server.clock.Now())
	}
	if h.res.Scale.typed {
		convert = func(obj runtime.Object, opts *metav1.TableOptions) (*metav1.Table, error) {
			return h.printTableBy(obj, opts, &typedScaleName, typedScaleColumns)
		}
	}
	return h.asTableOf(&unstructured.Unstructured{Object: u}, opts, n.convert.GroupVersion(), convert, scaleGVK)
}

// typedScaleName and typedScaleColumns are the printers' columns of a built-in kind's Scale: its
// Name column has no format.
//
// Mirrors scaleColumnDefinitions and printScale (k8s.io/kubernetes pkg/printers/internalversion).
var (
	typedScaleName    = metav1.TableColumnDefinition{Name: "Name", Type: "string", Description: nameDescription}
	typedScaleColumns = []Column{
		{Name: "Desired", Type: "integer", Description: autoscalingv1.ScaleSpec{}.SwaggerDoc()["replicas"],
			value: func(obj map[string]any, _ time.Time) any { return integer(obj, "spec", "replicas") }},
		{Name: "Available", Type: "integer", Description: autoscalingv1.ScaleStatus{}.SwaggerDoc()["replicas"],
			value: func(obj map[string]any, _ time.Time) any { return integer(obj, "status", "replicas") }},
		ageColumn,
	}
)
