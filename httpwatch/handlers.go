package httpwatch

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	kjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/storage"
)

// The request handlers of a resource, as k8s.io/apiserver pkg/endpoints/handlers (get.go, create.go,
// update.go, delete.go, rest.go): they parse and validate the request, call the registry
// (registry.go) and write its answer or its error.

// resourceHandler serves the requests of one resource: the REST handlers of pkg/endpoints/handlers
// over the generic registry (pkg/registry/generic/registry/store.go) with a strategy for unstructured
// objects.
type resourceHandler struct {
	server  *Server
	res     Resource
	storage dryRunnableStorage
}

func (h *resourceHandler) serve(w http.ResponseWriter, req *http.Request, v verb, namespace, name string) {
	switch v {
	case verbList:
		h.serveList(w, req, namespace, "", false)
	case verbWatch:
		h.serveList(w, req, namespace, name, true)
	case verbGet:
		h.serveGet(w, req, namespace, name)
	case verbCreate:
		h.serveCreate(w, req, namespace)
	case verbUpdate:
		h.serveUpdate(w, req, namespace, name)
	case verbDelete:
		h.serveDelete(w, req, namespace, name)
	}
}

// expectedNamespace mirrors rest.ExpectedNamespaceForScope.
func (h *resourceHandler) expectedNamespace(namespace string) string {
	if h.res.Namespaced {
		return namespace
	}
	return ""
}

// ensureNamespace mirrors rest.EnsureObjectNamespaceMatchesRequestNamespace.
func ensureNamespace(requestNamespace string, obj metav1.Object) error {
	objNamespace := obj.GetNamespace()
	switch {
	case objNamespace == requestNamespace:
		return nil
	case objNamespace == metav1.NamespaceNone:
		obj.SetNamespace(requestNamespace)
		return nil
	case requestNamespace == metav1.NamespaceNone:
		obj.SetNamespace(metav1.NamespaceNone)
		return nil
	default:
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
}

// serveList answers GET on a collection: a list, or a watch for watch=true and the /watch/ paths.
//
// Mirrors handlers.ListResource.
func (h *resourceHandler) serveList(w http.ResponseWriter, req *http.Request, namespace, name string, forceWatch bool) {
	if !negotiateOutput(req.Header.Get("Accept")) {
		h.server.writeError(w, req, notAcceptable(false))
		return
	}
	opts, err := h.listOptions(req.URL.Query(), name)
	if err != nil {
		h.server.writeError(w, req, err)
		return
	}
	if opts.Watch || forceWatch {
		h.serveWatch(w, req, namespace, &opts)
		return
	}
	list, err := h.list(req.Context(), namespace, &opts)
	if err != nil {
		h.server.writeError(w, req, err)
		return
	}
	h.server.writeObject(w, req, http.StatusOK, list)
}

// ParseListOptions parses the query of a list or watch request for a resource as the apiserver does:
// the parameter codec of meta.k8s.io/v1, the WatchList defaulting (watch=true with resourceVersion ""
// or "0" and neither sendInitialEvents nor resourceVersionMatch becomes a watch-list), the
// metainternalversion validation, the resource's field labels and, when name is not empty (the
// /watch/.../<name> path), a metadata.name selector for it. A bad parameter is a 400 BadRequest, a bad
// combination a 422 Invalid on ListOptions, both as *apierrors.StatusError.
//
// Mirrors handlers.listOpts.
func ParseListOptions(res Resource, query url.Values, name string, features Features) (metainternalversion.ListOptions, error) {
	h := &resourceHandler{res: res, server: &Server{features: features}}
	return h.listOptions(query, name)
}

func (h *resourceHandler) listOptions(query map[string][]string, name string) (metainternalversion.ListOptions, error) {
	opts := metainternalversion.ListOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(query, metav1.SchemeGroupVersion, &opts); err != nil {
		return opts, apierrors.NewBadRequest(err.Error())
	}
	watchList := !h.server.features.DisableWatchList
	metainternalversion.SetListOptionsDefaults(&opts, watchList)
	if errs := metainternalversionvalidation.ValidateListOptions(&opts, watchList); len(errs) > 0 {
		return opts, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	if opts.FieldSelector != nil {
		var err error
		if opts.FieldSelector, err = opts.FieldSelector.Transform(h.res.convertFieldLabel); err != nil {
			return opts, apierrors.NewBadRequest(err.Error())
		}
	}
	if name != "" {
		if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
			selectedName, ok := opts.FieldSelector.RequiresExactMatch("metadata.name")
			if !ok || name != selectedName {
				return opts, apierrors.NewBadRequest("fieldSelector metadata.name doesn't match requested name")
			}
		} else {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name)
		}
	}
	return opts, nil
}

// serveGet mirrors handlers.GetResource and registry.Store.Get.
func (h *resourceHandler) serveGet(w http.ResponseWriter, req *http.Request, namespace, name string) {
	if !negotiateOutput(req.Header.Get("Accept")) {
		h.server.writeError(w, req, notAcceptable(false))
		return
	}
	options := metav1.GetOptions{}
	if values := req.URL.Query(); len(values) > 0 {
		if exports := values["export"]; len(exports) > 0 {
			export := true
			if err := runtime.Convert_Slice_string_To_bool(&exports, &export, nil); err != nil {
				h.server.writeError(w, req, apierrors.NewBadRequest(fmt.Sprintf("the export parameter cannot be parsed: %v", err)))
				return
			}
			if export {
				h.server.writeError(w, req, apierrors.NewBadRequest("the export parameter, deprecated since v1.14, is no longer supported"))
				return
			}
		}
		if err := metainternalversionscheme.ParameterCodec.DecodeParameters(values, metav1.SchemeGroupVersion, &options); err != nil {
			h.server.writeError(w, req, apierrors.NewBadRequest(err.Error()))
			return
		}
	}
	key, err := h.key(namespace, name)
	if err != nil {
		h.server.writeError(w, req, err)
		return
	}
	obj := &unstructured.Unstructured{}
	if err := h.storage.Get(req.Context(), key, storage.GetOptions{ResourceVersion: options.ResourceVersion}, obj); err != nil {
		h.server.writeError(w, req, storage.InterpretGetError(err, h.gr(), name))
		return
	}
	h.server.writeObject(w, req, http.StatusOK, obj)
}

// readBody mirrors handlers.limitedReadBody.
func (h *resourceHandler) readBody(req *http.Request) ([]byte, error) {
	defer req.Body.Close()
	lr := &io.LimitedReader{R: req.Body, N: h.server.maxBodyBytes + 1}
	data, err := io.ReadAll(lr)
	if err != nil {
		return nil, err
	}
	if lr.N <= 0 {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", h.server.maxBodyBytes))
	}
	return data, nil
}

// decodeObject decodes a create or update body into an object of the resource, answering bad input
// as the apiserver does: a body that is not a JSON object, has no kind (custom resources) or the
// wrong kind (built-ins), or malformed metadata is a 400 from transformDecodeError; another group
// version is a 400 naming it.
//
// Mirrors the decode steps of handlers.createHandler and UpdateResource.
func (h *resourceHandler) decodeObject(body []byte) (*unstructured.Unstructured, error) {
	expected := h.res.GroupVersionKind()
	actual, err := serializerjson.DefaultMetaFactory.Interpret(body)
	if err != nil {
		return nil, h.transformDecodeError(err, nil, body)
	}
	if h.res.BuiltIn {
		// A typed decoder fills in what the body leaves out from the endpoint's kind.
		if actual.Kind == "" {
			actual.Kind = expected.Kind
		}
		if actual.Version == "" && actual.Group == "" {
			actual.Group, actual.Version = expected.Group, expected.Version
		}
	}
	content := map[string]any{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &content); err != nil {
		return nil, h.transformDecodeError(err, actual, body)
	}
	if actual.Kind == "" {
		return nil, h.transformDecodeError(runtime.NewMissingKindErr(string(body)), actual, body)
	}
	// Metadata must have ObjectMeta's shape, as a typed decode or the custom resource coercion insist.
	var shape struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &shape); err != nil {
		return nil, h.transformDecodeError(err, actual, body)
	}
	if h.res.BuiltIn && actual.Kind != expected.Kind {
		return nil, h.transformDecodeError(fmt.Errorf("no kind %q is registered for version %q", actual.Kind, actual.GroupVersion().String()), actual, body)
	}
	obj := &unstructured.Unstructured{Object: content}
	obj.SetGroupVersionKind(*actual)
	if actual.GroupVersion() != expected.GroupVersion() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", actual.GroupVersion(), expected.GroupVersion()))
	}
	return obj, nil
}

// transformDecodeError mirrors handlers.transformDecodeError.
func (h *resourceHandler) transformDecodeError(baseErr error, gvk *schema.GroupVersionKind, body []byte) error {
	if gvk != nil && len(gvk.Kind) > 0 {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, h.res.Kind, baseErr))
	}
	return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v (%s)", h.res.Kind, baseErr, summarizeData(body, 30)))
}

// summarizeData mirrors handlers.summarizeData.
func summarizeData(data []byte, maxLength int) string {
	switch {
	case len(data) == 0:
		return "<empty>"
	case data[0] == '{':
		if len(data) > maxLength {
			return string(data[:maxLength]) + " ..."
		}
		return string(data)
	default:
		if len(data) > maxLength {
			return hex.EncodeToString(data[:maxLength]) + " ..."
		}
		return hex.EncodeToString(data)
	}
}

// isDryRun reports whether options ask for a dry run; validation has limited the values to "All".
func isDryRun(dryRun []string) bool { return len(dryRun) > 0 }

// serveCreate mirrors handlers.createHandler (CreateResource).
func (h *resourceHandler) serveCreate(w http.ResponseWriter, req *http.Request, namespace string) {
	ctx, cancel := context.WithTimeout(req.Context(), requestTimeoutUpperBound)
	defer cancel()
	if !negotiateOutput(req.Header.Get("Accept")) {
		h.server.writeError(w, req, notAcceptable(false))
		return
	}
	if err := checkInputContentType(req.Header.Get("Content-Type")); err != nil {
		h.server.writeError(w, req, err)
		return
	}
	body, err := h.readBody(req)
	if err != nil {
		h.server.writeError(w, req, err)
		return
	}
	options := &metav1.CreateOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(req.URL.Query(), metav1.SchemeGroupVersion, options); err != nil {
		h.server.writeError(w, req, apierrors.NewBadRequest(err.Error()))
		return
	}
	if errs := metav1validation.ValidateCreateOptions(options); len(errs) > 0 {
		h.server.writeError(w, req, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "CreateOptions"}, "", errs))
		return
	}
	obj, err := h.decodeObject(body)
	if err != nil {
		h.server.writeError(w, req, err)
		return
	}
	wipeObjectMetaSystemFields(obj)
	if err := ensureNamespace(namespace, obj); err != nil {
		h.server.writeError(w, req, err)
		return
	}
	result, err := h.create(ctx, namespace, obj, isDryRun(options.DryRun))
	if err != nil {
		h.server.writeError(w, req, err)
		return
	}
	h.server.writeObject(w, req, http.StatusCreated, result)
}

// serveUpdate mirrors handlers.UpdateResource.
func (h *resourceHandler) serveUpdate(w http.ResponseWriter, req *http.Request, namespace, name string) {
	ctx, cancel := context.WithTimeout(req.Context(), requestTimeoutUpperBound)
	defer cancel()
	if !negotiateOutput(req.Header.Get("Accept")) {
		h.server.writeError(w, req, notAcceptable(false))
		return
	}
	body, err := h.readBody(req)
	if err != nil {
		h.server.writeError(w, req, err)
		return
	}
	options := &metav1.UpdateOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(req.URL.Query(), metav1.SchemeGroupVersion, options); err != nil {
		h.server.writeError(w, req, apierrors.NewBadRequest(err.Error()))
		return
	}
	if errs := metav1validation.ValidateUpdateOptions(options); len(errs) > 0 {
		h.server.writeError(w, req, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "UpdateOptions"}, "", errs))
		return
	}
	if err := checkInputContentType(req.Header.Get("Content-Type")); err != nil {
		h.server.writeError(w, req, err)
		return
	}
	obj, err := h.decodeObject(body)
	if err != nil {
		h.server.writeError(w, req, err)
		return
	}
	if err := ensureNamespace(namespace, obj); err != nil {
		h.server.writeError(w, req, err)
		return
	}
	if err := checkName(obj, name); err != nil {
		h.server.writeError(w, req, err)
		return
	}
	result, err := h.update(ctx, namespace, name, obj, isDryRun(options.DryRun))
	if err != nil {
		h.server.writeError(w, req, err)
		return
	}
	h.server.writeObject(w, req, http.StatusOK, result)
}

// checkName mirrors handlers.checkName.
func checkName(obj *unstructured.Unstructured, name string) error {
	objName := obj.GetName()
	if objName == "" {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s based on URL) was undeterminable: name must be provided", name))
	}
	if objName != name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", objName, name))
	}
	return nil
}

// serveDelete mirrors handlers.DeleteResource.
func (h *resourceHandler) serveDelete(w http.ResponseWriter, req *http.Request, namespace, name string) {
	ctx, cancel := context.WithTimeout(req.Context(), requestTimeoutUpperBound)
	defer cancel()
	if !negotiateOutput(req.Header.Get("Accept")) {
		h.server.writeError(w, req, notAcceptable(false))
		return
	}
	options := &metav1.DeleteOptions{}
	body, err := h.readBody(req)
	if err != nil {
		h.server.writeError(w, req, err)
		return
	}
	if len(body) > 0 {
		if err := checkInputContentType(req.Header.Get("Content-Type")); err != nil {
			h.server.writeError(w, req, err)
			return
		}
		// Per-group DeleteOptions are accepted as well as meta.k8s.io/v1 ones.
		defaultGVK := metav1.SchemeGroupVersion.WithKind("DeleteOptions")
		obj, _, err := deleteOptionsDecoder.Decode(body, &defaultGVK, options)
		if err != nil {
			h.server.writeError(w, req, apierrors.NewBadRequest(err.Error()))
			return
		}
		if obj != options {
			h.server.writeError(w, req, apierrors.NewBadRequest("decoded object cannot be converted to DeleteOptions"))
			return
		}
	} else if err := metainternalversionscheme.ParameterCodec.DecodeParameters(req.URL.Query(), metav1.SchemeGroupVersion, options); err != nil {
		h.server.writeError(w, req, apierrors.NewBadRequest(err.Error()))
		return
	}
	if errs := metav1validation.ValidateDeleteOptions(options); len(errs) > 0 {
		h.server.writeError(w, req, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs))
		return
	}
	if options.IgnoreStoreReadErrorWithClusterBreakingPotential != nil && *options.IgnoreStoreReadErrorWithClusterBreakingPotential {
		// The apiserver authorizes an unsafe delete first; a server without an authorizer refuses it.
		h.server.writeError(w, req, apierrors.NewInternalError(errors.New("no authorizer provided, unable to authorize unsafe delete")))
		return
	}
	result, deleted, err := h.delete(ctx, namespace, name, options)
	if err != nil {
		h.server.writeError(w, req, err)
		return
	}
	status := http.StatusOK
	//nolint:staticcheck // OrphanDependents is deprecated but still read, as upstream.
	if !deleted && options.OrphanDependents != nil && !*options.OrphanDependents {
		status = http.StatusAccepted
	}
	h.server.writeObject(w, req, status, result)
}

var deleteOptionsDecoder = func() runtime.Decoder {
	codecs := metainternalversionscheme.Codecs
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	return codecs.DecoderToVersion(info.Serializer, metav1.SchemeGroupVersion)
}()
