package httpwatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/listwatch/listwatch/builtin"
)

// PATCH, as k8s.io/apiserver pkg/endpoints/handlers/patch.go: JSON patch and JSON merge patch of
// the object's JSON, strategic merge patch of a built-in kind (its Go type's patch strategies, as
// k8s.io/apimachinery strategicpatch reads them), and server-side apply (apply-patch+yaml) through
// the field manager. Each try of the update applies the patch to the stored object anew.

// maxJSONPatchOperations mirrors handlers.maxJSONPatchOperations.
const maxJSONPatchOperations = 10000

// patchTypes are the patch media types the resource accepts, in upstream's order; strategic merge
// patch only for built-in kinds, as the CRD handler leaves it out.
func (h *resourceHandler) patchTypes() []string {
	if h.res.typed() {
		return []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.StrategicMergePatchType), string(types.ApplyYAMLPatchType)}
	}
	return []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.ApplyYAMLPatchType)}
}

// servePatch mirrors handlers.PatchResource.
func (h *resourceHandler) servePatch(w http.ResponseWriter, req *http.Request, r request) {
	contentType := req.Header.Get("Content-Type")
	if i := strings.Index(contentType, ";"); i > 0 {
		contentType = contentType[:i]
	}
	patchType := types.PatchType(contentType)
	supported := h.patchTypes()
	if !contains(supported, contentType) {
		h.writeError(w, req, unsupportedMediaType(supported))
		return
	}
	if err := requireName(r.name); err != nil {
		h.writeError(w, req, err)
		return
	}
	serveWrite := h.serveWrite
	if r.subresource == "scale" {
		serveWrite = h.serveScaleWrite
	}
	serveWrite(w, req, func(ctx context.Context) (int, runtime.Object, error) {
		options := &metav1.PatchOptions{}
		patchBytes, err := h.readBodyAndOptions(req, options, "PatchOptions", func() field.ErrorList { return metav1validation.ValidatePatchOptions(options, patchType) })
		if err != nil {
			return 0, nil, err
		}
		if _, err := validateAndTranscodePatch(patchBytes, patchType); err != nil {
			return 0, nil, err
		}
		p := &patcher{
			h: h, w: w, patchType: patchType, patchBytes: patchBytes, options: options,
			validation: fieldValidation(options.FieldValidation),
			manager:    managerOrUserAgent(options.FieldManager, req.UserAgent()),
			namespace:  r.namespace, name: r.name, subresource: r.subresource,
		}
		objInfo := p.applyPatch
		if r.subresource == "scale" {
			objInfo = h.scaleUpdate(p.applyPatch)
		}
		result, created, err := h.update(ctx, updateRequest{
			namespace: r.namespace, name: r.name, subresource: r.subresource,
			objInfo:          objInfo,
			forceAllowCreate: patchType == types.ApplyYAMLPatchType,
			dryRun:           isDryRun(options.DryRun),
		})
		return createdOrOK(created), result, err
	})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// validateAndTranscodePatch mirrors handlers.validateAndTranscodePatch: an apply patch must be YAML
// (or JSON), any other patch JSON.
func validateAndTranscodePatch(patchBytes []byte, patchType types.PatchType) ([]byte, error) {
	if patchType == types.ApplyYAMLPatchType {
		j, err := yaml.YAMLToJSON(patchBytes)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("error encoding patch: %v", err))
		}
		return j, nil
	}
	if !json.Valid(patchBytes) {
		return nil, apierrors.NewBadRequest("invalid JSON patch")
	}
	return patchBytes, nil
}

// patcher applies one patch request to the stored object.
//
// Mirrors handlers.patcher with its jsonPatcher, smpPatcher and applyPatcher mechanisms.
type patcher struct {
	h                            *resourceHandler
	w                            http.ResponseWriter
	patchType                    types.PatchType
	patchBytes                   []byte
	options                      *metav1.PatchOptions
	validation                   string
	manager                      string
	namespace, name, subresource string
}

// applyPatch mirrors patcher.applyPatch: the patched object, or for a missing object a NotFound
// (JSON, merge and strategic patches) or the applied object (apply); the patched object may not
// change its name or namespace.
func (p *patcher) applyPatch(current *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var obj *unstructured.Unstructured
	var err error
	if current == nil {
		if p.patchType != types.ApplyYAMLPatchType {
			return nil, apierrors.NewNotFound(p.h.gr(), p.name)
		}
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(p.h.res.GroupVersionKind())
		obj, err = p.applyConfiguration(live)
		if err != nil {
			return nil, err
		}
		if uid := obj.GetUID(); uid != "" {
			return nil, apierrors.NewConflict(p.h.gr(), p.name, fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", uid))
		}
	} else {
		current = current.DeepCopy()
		switch p.patchType {
		case types.ApplyYAMLPatchType:
			obj, err = p.applyConfiguration(current)
		case types.StrategicMergePatchType:
			obj, err = p.strategicMerge(current)
		default:
			obj, err = p.jsonPatch(current)
		}
		if err != nil {
			return nil, err
		}
		if p.patchType != types.ApplyYAMLPatchType {
			if obj, err = p.h.trackUpdate(p.subresource, current, obj, p.manager); err != nil {
				return nil, err
			}
		}
	}
	if err := ensureNamespace(p.h.expectedNamespace(p.namespace), obj); err != nil {
		return nil, err
	}
	if err := checkName(obj, p.name); err != nil {
		return nil, err
	}
	dedupOwnerReferences(p.w, obj, true)
	return obj, nil
}

// jsonPatch mirrors jsonPatcher.applyPatchToCurrentObject and applyJSPatch.
func (p *patcher) jsonPatch(current *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	marshal := current.MarshalJSON
	if p.subresource == "scale" {
		marshal = func() ([]byte, error) { return scaleJSON(current) }
	}
	currentJSON, err := marshal()
	if err != nil {
		return nil, err
	}
	strict := p.validation == metav1.FieldValidationStrict || p.validation == metav1.FieldValidationWarn
	var strictErrs []error
	var patchedJSON []byte
	switch p.patchType {
	case types.JSONPatchType:
		if strict {
			var ops []jsonPatchOp
			errs, err := kjson.UnmarshalStrict(p.patchBytes, &ops)
			if err != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", jsonPatchDecodeError(err)))
			}
			for _, e := range errs {
				strictErrs = append(strictErrs, fmt.Errorf("json patch %v", e))
			}
		}
		patchObj, err := jsonpatch.DecodePatch(p.patchBytes)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if len(patchObj) > maxJSONPatchOperations {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(patchObj)))
		}
		if patchedJSON, err = patchObj.Apply(currentJSON); err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
	case types.MergePatchType:
		if strict {
			v := map[string]any{}
			errs, err := kjson.UnmarshalStrict(p.patchBytes, &v)
			if err != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
			}
			strictErrs = append(strictErrs, errs...)
		}
		patchedJSON, err = jsonpatch.MergePatch(currentJSON, p.patchBytes)
		if err == jsonpatch.ErrBadJSONPatch {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown Content-Type header for patch: %v", p.patchType)
	}
	if p.subresource == "scale" {
		return p.scaleCheck(patchedJSON, strictErrs)
	}
	obj, _, err := p.h.decodeRaw(patchedJSON, patchedJSON)
	if err != nil && obj != nil && !p.h.res.BuiltIn {
		// Upstream decodes a patched custom resource of another group or version as it is, and
		// its patcher checks the namespace and name before anything refuses it.
		if err := ensureNamespace(p.h.expectedNamespace(p.namespace), obj); err != nil {
			return nil, err
		}
		if err := checkName(obj, p.name); err != nil {
			return nil, err
		}
	}
	if err != nil {
		return nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), string(patchedJSON), err.Error())})
	}
	return p.typedCheck(obj, string(patchedJSON), strictErrs)
}

// typedCheck passes a patched built-in object through its Go type, as the patchers decode it: a
// field of the wrong type is a 422 on the patch; unknown fields are dropped and, with
// fieldValidation Strict, a 422 too (Warn: warnings).
func (p *patcher) typedCheck(obj *unstructured.Unstructured, patched string, strictErrs []error) (*unstructured.Unstructured, error) {
	if c := p.h.res.custom; c != nil {
		// The patched custom resource decodes through its schema as a body does
		// (schemaCoercingDecoder): unknown fields are strict errors of the patch.
		unknown, err := c.coerce(obj, isStrict(p.validation))
		if err != nil {
			return nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), patched, err.Error())})
		}
		for _, path := range unknown {
			strictErrs = append(strictErrs, fmt.Errorf(`unknown field "%s"`, path))
		}
		c.applyDefaults(obj)
	}
	if !p.h.res.typed() {
		return p.strictResult(obj, patched, strictErrs)
	}
	typed, err := builtin.New(p.h.res.GroupVersionKind())
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	strict := p.validation == metav1.FieldValidationStrict || p.validation == metav1.FieldValidationWarn
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, typed, strict); err != nil {
		se, ok := runtime.AsStrictDecodingError(err)
		if !ok {
			return nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), patched, err.Error())})
		}
		strictErrs = append(strictErrs, se.Errors()...)
	}
	out, err := typedToUnstructured(typed, p.h.res.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	return p.strictResult(out, patched, strictErrs)
}

func (p *patcher) strictResult(obj *unstructured.Unstructured, patched string, strictErrs []error) (*unstructured.Unstructured, error) {
	if len(strictErrs) == 0 {
		return obj, nil
	}
	if p.validation == metav1.FieldValidationWarn {
		for _, e := range strictErrs {
			addWarningOnce(p.w, e.Error())
		}
		return obj, nil
	}
	if p.validation == metav1.FieldValidationIgnore {
		return obj, nil
	}
	return nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), patched, runtime.NewStrictDecodingError(strictErrs).Error())})
}

// strategicMerge mirrors smpPatcher.applyPatchToCurrentObject and strategicPatchObject: the patch
// is merged into the object by the patch strategies of its Go type.
func (p *patcher) strategicMerge(current *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var schemaObj runtime.Object = &autoscalingv1.Scale{}
	var err error
	if p.subresource != "scale" {
		if schemaObj, err = builtin.New(p.h.res.GroupVersionKind()); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	patchMap := map[string]any{}
	var strictErrs []error
	if p.validation == metav1.FieldValidationWarn || p.validation == metav1.FieldValidationStrict {
		if strictErrs, err = kjson.UnmarshalStrict(p.patchBytes, &patchMap); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	} else if err := kjson.UnmarshalCaseSensitivePreserveInts(p.patchBytes, &patchMap); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	// The merge works in place: it gets a copy, so that the live object stays as stored.
	patched, err := strategicpatch.StrategicMergeMapPatch(current.DeepCopy().Object, patchMap, schemaObj)
	if err != nil {
		return nil, interpretStrategicMergePatchError(err)
	}
	if p.subresource == "scale" {
		data, err := json.Marshal(patched)
		if err != nil {
			return nil, err
		}
		return p.scaleCheck(data, strictErrs)
	}
	obj := &unstructured.Unstructured{Object: patched}
	return p.typedCheck(obj, fmt.Sprintf("%+v", patchMap), strictErrs)
}

// interpretStrategicMergePatchError mirrors handlers.interpretStrategicMergePatchError.
func interpretStrategicMergePatchError(err error) error {
	switch err {
	case mergepatch.ErrBadJSONDoc, mergepatch.ErrBadPatchFormatForPrimitiveList, mergepatch.ErrBadPatchFormatForRetainKeys, mergepatch.ErrBadPatchFormatForSetElementOrderList, mergepatch.ErrUnsupportedStrategicMergePatchFormat:
		return apierrors.NewBadRequest(err.Error())
	case mergepatch.ErrNoListOfLists, mergepatch.ErrPatchContentNotMatchRetainKeys:
		return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
	default:
		return err
	}
}

// applyConfiguration mirrors applyPatcher.applyPatchToCurrentObject: the YAML applied
// configuration is merged by the field manager; conflicts are its 409.
func (p *patcher) applyConfiguration(live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	force := p.options.Force != nil && *p.options.Force
	patchObj := &unstructured.Unstructured{Object: map[string]any{}}
	// apimachinery's yaml keeps whole numbers int64, as the applied object's fields are.
	if err := utilyaml.Unmarshal(p.patchBytes, &patchObj.Object); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
	}
	if p.subresource == "scale" && !p.h.res.BuiltIn && len(live.GetManagedFields()) == 0 {
		return nil, errScaleApplyUnowned
	}
	obj, err := p.h.apply(p.subresource, live, patchObj, p.options.FieldManager, force)
	if err != nil {
		return nil, err
	}
	if p.h.res.typed() && p.subresource != "scale" {
		// Upstream's field manager answers with the kind's typed object, whose fields at their zero
		// value show as its Go type encodes them (an event's "eventTime": null, "source": {}).
		if obj, err = p.h.typedForm(obj, patchObj); err != nil {
			return nil, err
		}
	}
	if c := p.h.res.custom; c != nil {
		// Upstream stores the applied object as it is and prunes and defaults it whenever it is read
		// from storage; here that is done once, before it is stored. Its nulls are kept: upstream
		// validates them.
		if err := c.coerceApplied(obj); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		c.applyDefaults(obj)
	}
	if p.validation == metav1.FieldValidationStrict || p.validation == metav1.FieldValidationWarn {
		if err := utilyaml.UnmarshalStrict(p.patchBytes, &map[string]any{}); err != nil {
			if p.validation == metav1.FieldValidationStrict {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding patch: %v", err))
			}
			addWarningOnce(p.w, err.Error())
		}
	}
	return obj, nil
}

// jsonPatchOp is one operation of a JSON patch, as strict decoding checks its fields.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	From  string `json:"from"`
	Value any    `json:"value"`
}

// jsonPatchDecodeError is err with the Go type it names spelled as upstream's (a patch that is not
// a list of operations names []handlers.jsonPatchOp, the type of handlers/patch.go).
func jsonPatchDecodeError(err error) error {
	return errors.New(strings.ReplaceAll(err.Error(), reflect.TypeFor[jsonPatchOp]().String(), "handlers.jsonPatchOp"))
}
