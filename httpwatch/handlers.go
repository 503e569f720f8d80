package httpwatch

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

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
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/listwatch/listwatch/builtin"
	"github.com/listwatch/listwatch/storage"
)

// The request handlers of a resource, as k8s.io/apiserver pkg/endpoints/handlers (get.go, create.go,
// update.go, delete.go, patch.go, rest.go): they parse and validate the request, call the registry
// (registry.go) and write its answer or its error.

// resourceHandler serves the requests of one resource: the REST handlers of pkg/endpoints/handlers
// over the generic registry (pkg/registry/generic/registry/store.go) with a strategy for unstructured
// objects.
type resourceHandler struct {
	server  *Server
	res     Resource
	storage dryRunnableStorage
	// ep is what the resource's endpoints answer in.
	ep endpoint
	// watchEvents counts what the resource's watches send; nil without metrics.
	watchEvents *watchEventRecorder

	// The field managers of the resource and its subresources, made on first use.
	managersOnce sync.Once
	managers     map[string]*managedfields.FieldManager
	managersErr  error
}

// request is what the router found in a resource request's path.
type request struct {
	verb        verb
	namespace   string
	name        string
	subresource string
}

func (h *resourceHandler) serve(w http.ResponseWriter, req *http.Request, r request) {
	switch r.verb {
	case verbList:
		h.serveList(w, req, r.namespace, "", false)
	case verbWatch:
		h.serveList(w, req, r.namespace, r.name, true)
	case verbGet:
		h.serveGet(w, req, r)
	case verbCreate:
		h.serveCreate(w, req, r.namespace)
	case verbUpdate:
		h.serveUpdate(w, req, r)
	case verbPatch:
		h.servePatch(w, req, r)
	case verbDelete:
		h.serveDelete(w, req, r.namespace, r.name)
	case verbDeleteCollection:
		h.serveDeleteCollection(w, req, r.namespace)
	}
}

func (h *resourceHandler) writeError(w http.ResponseWriter, req *http.Request, err error) {
	h.server.writeErrorFor(w, req, h.ep, err)
}

func (h *resourceHandler) writeObject(w http.ResponseWriter, req *http.Request, code int, obj runtime.Object) {
	h.server.writeObjectFor(w, req, h.ep, code, obj, h.transform)
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
	if _, err := h.ep.negotiateOutput(req, false); err != nil {
		h.writeError(w, req, err)
		return
	}
	opts, err := h.listOptions(req.URL.Query(), name)
	if err != nil {
		h.writeError(w, req, err)
		return
	}
	if opts.Watch || forceWatch {
		h.serveWatch(w, req, namespace, &opts)
		return
	}
	list, err := h.list(req.Context(), namespace, &opts)
	if err != nil {
		h.writeError(w, req, err)
		return
	}
	h.writeObject(w, req, http.StatusOK, list)
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
		return opts, invalidOptions("ListOptions", errs)
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

// serveGet mirrors handlers.GetResource and registry.Store.Get (the status subresource gets the
// whole object, as upstream's StatusREST; the scale subresource its Scale, as ScaleREST).
func (h *resourceHandler) serveGet(w http.ResponseWriter, req *http.Request, r request) {
	ep := h.ep
	if r.subresource == "scale" {
		ep = h.scaleEndpoint()
	}
	if _, err := ep.negotiateOutput(req, false); err != nil {
		h.server.writeErrorFor(w, req, ep, err)
		return
	}
	options := metav1.GetOptions{}
	if values := req.URL.Query(); len(values) > 0 {
		if exports := values["export"]; len(exports) > 0 {
			export := true
			if err := runtime.Convert_Slice_string_To_bool(&exports, &export, nil); err != nil {
				h.writeError(w, req, apierrors.NewBadRequest(fmt.Sprintf("the export parameter cannot be parsed: %v", err)))
				return
			}
			if export {
				h.writeError(w, req, apierrors.NewBadRequest("the export parameter, deprecated since v1.14, is no longer supported"))
				return
			}
		}
		if err := metainternalversionscheme.ParameterCodec.DecodeParameters(values, metav1.SchemeGroupVersion, &options); err != nil {
			h.writeError(w, req, apierrors.NewBadRequest(err.Error()))
			return
		}
	}
	key, err := h.key(r.namespace, r.name)
	if err != nil {
		h.writeError(w, req, err)
		return
	}
	obj := &unstructured.Unstructured{}
	if err := h.storage.Get(req.Context(), key, storage.GetOptions{ResourceVersion: options.ResourceVersion}, obj); err != nil {
		h.writeError(w, req, storage.InterpretGetError(err, h.gr(), r.name))
		return
	}
	if r.subresource == "scale" {
		s, err := h.scaleGet(obj)
		if err != nil {
			h.server.writeErrorFor(w, req, ep, err)
			return
		}
		h.server.writeObjectFor(w, req, ep, http.StatusOK, s, h.scaleTransform)
		return
	}
	h.writeObject(w, req, http.StatusOK, obj)
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

// fieldValidation mirrors handlers.fieldValidation: Warn unless the request says otherwise.
func fieldValidation(directive string) string {
	if directive == "" {
		return metav1.FieldValidationWarn
	}
	return directive
}

// decodeBody decodes a create or update body, in the format its Content-Type names, into an object
// of the resource. A built-in kind goes through its Go type: a protobuf body is decoded, fields the
// type does not have are dropped, and with fieldValidation Strict they are a 400 (Warn: a warning
// header each), as the strict serializers of the apiserver report them.
//
// Mirrors the decode steps of handlers.createHandler and UpdateResource.
func (h *resourceHandler) decodeBody(w http.ResponseWriter, body []byte, f *format, validation string) (*unstructured.Unstructured, error) {
	if f == formatProtobuf && !h.res.typed() {
		// apiextensions-apiserver offers protobuf for a custom resource's body, then panics
		// decoding it (its schemaCoercingDecoder has no delegate for it): listwatch answers 415
		// where it would, after the options are checked.
		return nil, unsupportedMediaType([]string{contentTypeJSON, contentTypeYAML})
	}
	if f == formatProtobuf {
		return h.decodeProtobuf(body)
	}
	original := body
	if f == formatYAML {
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, h.transformDecodeError(err, nil, body)
		}
		body = j
	}
	if err := h.otherVersionStrictErrors(w, body, validation); err != nil {
		return nil, err
	}
	obj, err := h.decodeObject(body, original, validation == metav1.FieldValidationIgnore)
	if err != nil {
		return nil, err
	}
	if h.res.custom != nil {
		return h.decodeCustom(w, obj, body, validation)
	}
	if !h.res.typed() {
		return obj, nil
	}
	strict := isStrict(validation)
	strictErrs := duplicateFields(body, strict)
	typed, err := builtin.New(h.res.GroupVersionKind())
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, typed, strict); err != nil {
		se, ok := runtime.AsStrictDecodingError(err)
		if !ok {
			gvk := obj.GroupVersionKind()
			return nil, h.transformDecodeError(err, &gvk, body)
		}
		strictErrs = append(strictErrs, se.Errors()...)
	}
	if err := h.strictDecodingErrors(w, obj, body, validation, strictErrs); err != nil {
		return nil, err
	}
	return typedToUnstructured(typed, h.res.GroupVersionKind())
}

// typedForm is a built-in object as its Go type encodes it. A value the Go type cannot hold (a
// timestamp that is no time, which the field manager's schema takes as a string) is the plain
// error upstream's field manager gives when it converts the applied object to its version (a 500
// without a reason): applied is the applied configuration it names.
//
// Mirrors managedfields/internal/structuredmerge.go structuredMergeManager.Apply's toVersioned.
func (h *resourceHandler) typedForm(obj, applied *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := h.res.GroupVersionKind()
	typed, err := builtin.New(gvk)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
		return nil, fmt.Errorf("failed to convert new object (%s/%s; %v) to proper version: unable to convert unstructured object to %v: %v",
			applied.GetNamespace(), applied.GetName(), applied.GroupVersionKind(), gvk, err)
	}
	return typedToUnstructured(typed, gvk)
}

// strictDecodingErrors reports a body's unknown and duplicate fields as handlers.createHandler and
// UpdateResource do: with fieldValidation Strict a 400 naming them, with Warn a warning each.
func (h *resourceHandler) strictDecodingErrors(w http.ResponseWriter, obj *unstructured.Unstructured, body []byte, validation string, strictErrs []error) error {
	if len(strictErrs) == 0 {
		return nil
	}
	if validation == metav1.FieldValidationStrict {
		gvk := obj.GroupVersionKind()
		return h.transformDecodeError(runtime.NewStrictDecodingError(strictErrs), &gvk, body)
	}
	for _, e := range strictErrs {
		addWarning(w, e.Error())
	}
	return nil
}

// isStrict says whether a fieldValidation directive asks for unknown and duplicate fields (Strict
// and Warn; Ignore does not).
func isStrict(validation string) bool {
	return validation == metav1.FieldValidationStrict || validation == metav1.FieldValidationWarn
}

// duplicateFields are the errors strict JSON decoding finds in body besides unknown fields: its
// duplicate fields; none unless strict.
func duplicateFields(body []byte, strict bool) []error {
	if !strict {
		return nil
	}
	var content map[string]any
	errs, err := kjson.UnmarshalStrict(body, &content)
	if err != nil {
		return nil
	}
	return errs
}

// decodeCustom passes a decoded custom resource through its schema: unknown fields pruned (and with
// fieldValidation Strict a 400 naming them with the duplicate ones, with Warn a warning each),
// metadata coerced, defaults applied.
//
// Mirrors schemaCoercingDecoder.Decode and the unstructuredDefaulter of the CRD handler's codec
// (apiextensions-apiserver customresource_handler.go), as handlers.createHandler reports its
// strict decoding errors.
func (h *resourceHandler) decodeCustom(w http.ResponseWriter, obj *unstructured.Unstructured, body []byte, validation string) (*unstructured.Unstructured, error) {
	strict := isStrict(validation)
	strictErrs := duplicateFields(body, strict)
	unknown, err := h.res.custom.coerce(obj, strict)
	if err != nil {
		gvk := obj.GroupVersionKind()
		return nil, h.transformDecodeError(err, &gvk, body)
	}
	for _, path := range unknown {
		strictErrs = append(strictErrs, fmt.Errorf(`unknown field "%s"`, path))
	}
	h.res.custom.applyDefaults(obj)
	if err := h.strictDecodingErrors(w, obj, body, validation, strictErrs); err != nil {
		return nil, err
	}
	return obj, nil
}

// typedToUnstructured is the JSON-like content of a typed object, with its kind.
func typedToUnstructured(obj runtime.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// typedZero is the zero value of the built-in kind gvk as an unstructured object (an event's
// `"involvedObject": {}`, `"eventTime": null`).
func typedZero(gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	typed, err := builtin.New(gvk)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return typedToUnstructured(typed, gvk)
}

// decodeProtobuf decodes a protobuf body of a built-in kind.
func (h *resourceHandler) decodeProtobuf(body []byte) (*unstructured.Unstructured, error) {
	expected := h.res.GroupVersionKind()
	into, err := builtin.New(expected)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	obj, gvk, err := protobufCodec().Decode(body, &expected, into)
	if err != nil {
		return nil, h.transformDecodeError(err, gvk, body)
	}
	if err := h.foreignKindError(*gvk); err != nil {
		return nil, h.transformDecodeError(err, gvk, body)
	}
	if gvk.GroupVersion() != expected.GroupVersion() {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gvk.GroupVersion(), expected.GroupVersion()))
	}
	return typedToUnstructured(obj, expected)
}

// addWarning adds a warning header as the apiserver's warning recorder writes it: code 299, agent
// "-".
func addWarning(w http.ResponseWriter, msg string) {
	w.Header().Add("Warning", "299 - "+strconv.Quote(msg))
}

// addWarningOnce is addWarning unless the answer already carries the warning, as the apiserver's
// warning recorder keeps one of each.
func addWarningOnce(w http.ResponseWriter, msg string) {
	if !slices.Contains(w.Header().Values("Warning"), "299 - "+strconv.Quote(msg)) {
		addWarning(w, msg)
	}
}

// decodeObject decodes a JSON create or update body into an object of the resource, answering bad
// input as the apiserver does: a body that is not a JSON object, has no kind (custom resources) or
// the wrong kind (built-ins), or malformed metadata is a 400 from transformDecodeError; another group
// version is a 400 naming it. lenient is the decoder without strictness (fieldValidation Ignore).
func (h *resourceHandler) decodeObject(body, original []byte, lenient bool) (*unstructured.Unstructured, error) {
	obj, actual, err := h.decodeRaw(body, original)
	if _, isStatus := err.(apierrors.APIStatus); err != nil && !isStatus {
		if lenient && !h.res.BuiltIn && actual != nil && runtime.IsMissingKind(err) {
			// The apiserver's lenient decoder reads an object without kind through Unstructured's
			// own decoder: its error quotes the body as JSON and comes with the kind and version
			// the serializer filled in from the endpoint's.
			gvk := gvkWithDefaults(*actual, h.res.GroupVersionKind())
			return nil, h.transformDecodeError(runtime.NewMissingKindErr(string(body)), &gvk, original)
		}
		return nil, h.transformDecodeError(err, actual, original)
	}
	return obj, err
}

// gvkWithDefaults mirrors serializer/json's gvkWithDefaults: what the body leaves out of its group,
// version and kind, taken from the endpoint's.
func gvkWithDefaults(actual, defaults schema.GroupVersionKind) schema.GroupVersionKind {
	if actual.Kind == "" {
		actual.Kind = defaults.Kind
	}
	if actual.Version == "" && actual.Group == "" {
		actual.Group, actual.Version = defaults.Group, defaults.Version
	}
	if actual.Version == "" && actual.Group == defaults.Group {
		actual.Version = defaults.Version
	}
	return actual
}

// decodeRaw is decodeObject with the decoder's own errors, as a patch reports them; the kind it
// read comes with them. original is the body as sent (YAML before its conversion), which a missing
// kind's error quotes.
func (h *resourceHandler) decodeRaw(body, original []byte) (*unstructured.Unstructured, *schema.GroupVersionKind, error) {
	expected := h.res.GroupVersionKind()
	actual, err := serializerjson.DefaultMetaFactory.Interpret(body)
	if err != nil {
		return nil, nil, err
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
		return nil, actual, err
	}
	if actual.Kind == "" {
		return nil, actual, runtime.NewMissingKindErr(string(original))
	}
	// Metadata must have ObjectMeta's shape, as a typed decode or the custom resource coercion insist.
	var shape struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &shape); err != nil {
		return nil, actual, err
	}
	if h.res.BuiltIn {
		if err := h.foreignKindError(*actual); err != nil {
			return nil, actual, err
		}
	}
	obj := &unstructured.Unstructured{Object: content}
	obj.SetGroupVersionKind(*actual)
	// A body at another version is refused, of a custom resource with several versions too: the
	// handlers check the decoded object's version before any conversion.
	if actual.GroupVersion() != expected.GroupVersion() {
		// The object comes with the error: a patch checks its name first.
		return obj, actual, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", actual.GroupVersion(), expected.GroupVersion()))
	}
	return obj, actual, nil
}

// legacySchemeName is the name of kube-apiserver's scheme (pkg/api/legacyscheme: named after
// where apimachinery's runtime.NewScheme is called), which its decoding errors quote.
const legacySchemeName = "pkg/runtime/scheme.go:111"

// foreignKindError is the error of kube-apiserver's codec decoding a body of kind gvk for a
// built-in kind's endpoint: a kind its scheme does not have in that version (client-go's scheme
// has the same external kinds) is not registered; another kind decodes and does not convert to
// the endpoint's internal type; nil for the endpoint's kind, which the caller refuses in another
// API version.
func (h *resourceHandler) foreignKindError(gvk schema.GroupVersionKind) error {
	switch {
	case !kubescheme.Scheme.Recognizes(gvk):
		return fmt.Errorf("no kind %q is registered for version %q in scheme %q", gvk.Kind, gvk.GroupVersion().String(), legacySchemeName)
	case gvk.Kind != h.res.Kind:
		return fmt.Errorf("converting (%s.%s) to (%s): unknown conversion", gvk.Version, gvk.Kind, h.internalType(false))
	}
	return nil
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

// managerOrUserAgent mirrors handlers.managerOrUserAgent: the field manager, or the user agent up to
// its first "/", printable characters only, at most 128 bytes.
func managerOrUserAgent(manager, userAgent string) string {
	if manager != "" {
		return manager
	}
	m, _, _ := strings.Cut(userAgent, "/")
	var b strings.Builder
	for _, r := range m {
		if !strconv.IsPrint(r) {
			continue
		}
		if b.Len()+len(string(r)) > metav1validation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// decodeOptions decodes a write's query parameters into options and validates them, as the
// handlers do before a create, update or patch: a bad parameter is a 400 BadRequest, an invalid
// combination a 422 Invalid on kind.
func decodeOptions(query url.Values, options runtime.Object, kind string, validate func() field.ErrorList) error {
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(query, metav1.SchemeGroupVersion, options); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if errs := validate(); len(errs) > 0 {
		return invalidOptions(kind, errs)
	}
	return nil
}

// invalidOptions is the 422 Invalid the apiserver answers for options of kind (ListOptions,
// CreateOptions, ...) that fail their validation.
func invalidOptions(kind string, errs field.ErrorList) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
}

// serveWrite serves a write: once the answer's encoding is negotiated (a 406 before anything else),
// write runs within the apiserver's request timeout, and its object is written with its status code,
// or its error as the apiserver's Status. Every write handler of upstream's has this frame.
func (h *resourceHandler) serveWrite(w http.ResponseWriter, req *http.Request, write func(ctx context.Context) (int, runtime.Object, error)) {
	ctx, cancel := context.WithTimeout(req.Context(), requestTimeoutUpperBound)
	defer cancel()
	if _, err := h.ep.negotiateOutput(req, false); err != nil {
		h.writeError(w, req, err)
		return
	}
	code, obj, err := write(ctx)
	if err != nil {
		h.writeError(w, req, err)
		return
	}
	h.writeObject(w, req, code, obj)
}

// readBodyAndOptions reads the request's body, then decodes the query's options of kind into options
// and validates them, in the order upstream's write handlers do.
func (h *resourceHandler) readBodyAndOptions(req *http.Request, options runtime.Object, kind string, validate func() field.ErrorList) ([]byte, error) {
	body, err := h.readBody(req)
	if err != nil {
		return nil, err
	}
	if err := decodeOptions(req.URL.Query(), options, kind, validate); err != nil {
		return nil, err
	}
	return body, nil
}

// createdOrOK is the status code of an update: 201 when it created the object.
func createdOrOK(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// serveCreate mirrors handlers.createHandler (CreateResource).
func (h *resourceHandler) serveCreate(w http.ResponseWriter, req *http.Request, namespace string) {
	h.serveWrite(w, req, func(ctx context.Context) (int, runtime.Object, error) {
		f, err := h.ep.inputFormat(req.Header.Get("Content-Type"))
		if err != nil {
			return 0, nil, err
		}
		options := &metav1.CreateOptions{}
		body, err := h.readBodyAndOptions(req, options, "CreateOptions", func() field.ErrorList { return metav1validation.ValidateCreateOptions(options) })
		if err != nil {
			return 0, nil, err
		}
		obj, err := h.decodeBody(w, body, f, fieldValidation(options.FieldValidation))
		if err != nil {
			return 0, nil, err
		}
		wipeObjectMetaSystemFields(obj)
		if err := ensureNamespace(namespace, obj); err != nil {
			return 0, nil, err
		}
		dedupOwnerReferences(w, obj, false)
		if obj, err = h.trackCreate(obj, managerOrUserAgent(options.FieldManager, req.UserAgent())); err != nil {
			return 0, nil, err
		}
		result, err := h.create(ctx, namespace, obj, isDryRun(options.DryRun))
		return http.StatusCreated, result, err
	})
}

// serveUpdate mirrors handlers.UpdateResource, for the resource and its status, scale and finalize
// subresources.
func (h *resourceHandler) serveUpdate(w http.ResponseWriter, req *http.Request, r request) {
	if err := requireName(r.name); err != nil {
		h.writeError(w, req, err)
		return
	}
	serveWrite, ep, decode := h.serveWrite, h.ep, h.decodeBody
	if r.subresource == "scale" {
		serveWrite, ep, decode = h.serveScaleWrite, h.scaleEndpoint(), h.decodeScale
	}
	serveWrite(w, req, func(ctx context.Context) (int, runtime.Object, error) {
		options := &metav1.UpdateOptions{}
		body, err := h.readBodyAndOptions(req, options, "UpdateOptions", func() field.ErrorList { return metav1validation.ValidateUpdateOptions(options) })
		if err != nil {
			return 0, nil, err
		}
		f, err := ep.inputFormat(req.Header.Get("Content-Type"))
		if err != nil {
			return 0, nil, err
		}
		obj, err := decode(w, body, f, fieldValidation(options.FieldValidation))
		if err != nil {
			return 0, nil, err
		}
		if err := ensureNamespace(r.namespace, obj); err != nil {
			return 0, nil, err
		}
		if err := checkName(obj, r.name); err != nil {
			return 0, nil, err
		}
		dedupOwnerReferences(w, obj, false)
		manager := managerOrUserAgent(options.FieldManager, req.UserAgent())
		var objInfo updatedObjectFunc = func(existing *unstructured.Unstructured) (*unstructured.Unstructured, error) {
			newObj := obj.DeepCopy()
			if existing == nil {
				return h.trackCreate(newObj, manager)
			}
			return h.trackUpdate(r.subresource, existing, newObj, manager)
		}
		if r.subresource == "scale" {
			objInfo = h.scaleUpdate(objInfo)
		}
		result, created, err := h.update(ctx, updateRequest{
			namespace: r.namespace, name: r.name, subresource: r.subresource,
			preconditionUID: obj.GetUID(),
			dryRun:          isDryRun(options.DryRun),
			objInfo:         objInfo,
		})
		return createdOrOK(created), result, err
	})
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

// deleteOptions reads the DeleteOptions of a DELETE: from the body when there is one, else from
// the query.
//
// Mirrors the option parsing of handlers.DeleteResource and DeleteCollection.
func (h *resourceHandler) deleteOptions(req *http.Request, body []byte) (*metav1.DeleteOptions, error) {
	options := &metav1.DeleteOptions{}
	if len(body) > 0 {
		if _, err := metaEndpoint.inputFormat(req.Header.Get("Content-Type")); err != nil {
			return nil, err
		}
		if ct := req.Header.Get("Content-Type"); strings.HasPrefix(ct, contentTypeYAML) {
			j, err := yaml.YAMLToJSON(body)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			body = j
		}
		// Per-group DeleteOptions are accepted as well as meta.k8s.io/v1 ones.
		defaultGVK := metav1.SchemeGroupVersion.WithKind("DeleteOptions")
		var obj runtime.Object
		var err error
		if ct := req.Header.Get("Content-Type"); strings.HasPrefix(ct, contentTypeProtobuf) {
			obj, _, err = protobufCodec().Decode(body, &defaultGVK, options)
		} else {
			obj, _, err = deleteOptionsDecoder.Decode(body, &defaultGVK, options)
		}
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if obj != options {
			return nil, apierrors.NewBadRequest("decoded object cannot be converted to DeleteOptions")
		}
	} else if err := metainternalversionscheme.ParameterCodec.DecodeParameters(req.URL.Query(), metav1.SchemeGroupVersion, options); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if errs := metav1validation.ValidateDeleteOptions(options); len(errs) > 0 {
		return nil, invalidOptions("DeleteOptions", errs)
	}
	if options.IgnoreStoreReadErrorWithClusterBreakingPotential != nil && *options.IgnoreStoreReadErrorWithClusterBreakingPotential {
		// The apiserver authorizes an unsafe delete first; a server without an authorizer refuses it.
		return nil, apierrors.NewInternalError(errors.New("no authorizer provided, unable to authorize unsafe delete"))
	}
	return options, nil
}

// serveDelete mirrors handlers.DeleteResource.
func (h *resourceHandler) serveDelete(w http.ResponseWriter, req *http.Request, namespace, name string) {
	h.serveWrite(w, req, func(ctx context.Context) (int, runtime.Object, error) {
		body, err := h.readBody(req)
		if err != nil {
			return 0, nil, err
		}
		options, err := h.deleteOptions(req, body)
		if err != nil {
			return 0, nil, err
		}
		result, deleted, err := h.delete(ctx, namespace, name, options)
		status := http.StatusOK
		//nolint:staticcheck // OrphanDependents is deprecated but still read, as upstream.
		if !deleted && options.OrphanDependents != nil && !*options.OrphanDependents {
			status = http.StatusAccepted
		}
		return status, result, err
	})
}

// serveDeleteCollection mirrors handlers.DeleteCollection: the list options come from the query,
// the DeleteOptions from the body (or the query), and the answer is the list of what was deleted.
func (h *resourceHandler) serveDeleteCollection(w http.ResponseWriter, req *http.Request, namespace string) {
	h.serveWrite(w, req, func(ctx context.Context) (int, runtime.Object, error) {
		listOptions, err := h.listOptions(req.URL.Query(), "")
		if err != nil {
			return 0, nil, err
		}
		body, err := h.readBody(req)
		if err != nil {
			return 0, nil, err
		}
		options, err := h.deleteOptions(req, body)
		if err != nil {
			return 0, nil, err
		}
		result, err := h.deleteCollection(ctx, namespace, options, &listOptions)
		return http.StatusOK, result, err
	})
}

var deleteOptionsDecoder = func() runtime.Decoder {
	codecs := metainternalversionscheme.Codecs
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	return codecs.DecoderToVersion(info.Serializer, metav1.SchemeGroupVersion)
}()

// hasSubresource reports whether the resource serves the subresource.
func (h *resourceHandler) hasSubresource(sub string) bool {
	switch sub {
	case "status":
		return h.res.StatusSubresource
	case "finalize":
		return h.res.isCoreNamespaces()
	case "scale":
		return h.res.Scale != nil
	}
	return false
}

// Create creates an object of a served resource, named by its GroupResource ("configmaps",
// "deployments.apps"), as a POST of it would, without HTTP: the object goes through its kind's Go
// type (a built-in kind) or its schema (a custom resource: pruned and defaulted), the strategy,
// validation and managedFields (recorded for manager); the
// namespace is the object's. It returns the object as stored, or the API error a POST would get.
func (s *Server) Create(ctx context.Context, gr schema.GroupResource, obj *unstructured.Unstructured, manager string) (*unstructured.Unstructured, error) {
	var h *resourceHandler
	for _, handlers := range s.resources {
		for _, candidate := range handlers {
			// Of a resource's versions, the one obj names, if any.
			if candidate.res.GroupResource() == gr && (h == nil || candidate.res.GroupVersion().String() == obj.GetAPIVersion()) {
				h = candidate
			}
		}
	}
	if h == nil {
		return nil, apierrors.NewNotFound(gr, obj.GetName())
	}
	obj = obj.DeepCopy()
	if obj.GetKind() == "" {
		obj.SetGroupVersionKind(h.res.GroupVersionKind())
	}
	if h.res.typed() {
		typed, err := builtin.ToTyped(h.res.GroupVersionKind(), obj.Object)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if obj, err = typedToUnstructured(typed, h.res.GroupVersionKind()); err != nil {
			return nil, err
		}
	}
	if c := h.res.custom; c != nil {
		// As a body is decoded: pruned, metadata coerced, defaulted (unknown fields ignored).
		if _, err := c.coerce(obj, false); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		c.applyDefaults(obj)
	}
	wipeObjectMetaSystemFields(obj)
	obj, err := h.trackCreate(obj, manager)
	if err != nil {
		return nil, err
	}
	out, err := h.create(ctx, obj.GetNamespace(), obj, false)
	if err != nil {
		return nil, err
	}
	return asUnstructured(out)
}

// requireName refuses a write to a path without a name (a custom resource's PUT or PATCH of its
// collection).
//
// Mirrors handlers.ContextBasedNaming.Name.
func requireName(name string) error {
	if name == "" {
		return apierrors.NewBadRequest("name must be provided")
	}
	return nil
}
