package httpwatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	kjson "sigs.k8s.io/json"

	"github.com/listwatch/listwatch/storage"
)

// optimisticLockErrorMsg mirrors registry.OptimisticLockErrorMsg.
const optimisticLockErrorMsg = "the object has been modified; please apply your changes to the latest version and try again"

// maxNameGenerationCreateAttempts mirrors the registry's: 8 tries of a generated name.
const maxNameGenerationCreateAttempts = 8

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

// keyRoot mirrors registry.NamespaceKeyRootFunc: the key of a collection.
func (h *resourceHandler) keyRoot(namespace string) string {
	key := h.res.keyPrefix()
	if h.res.Namespaced && namespace != "" {
		key += "/" + namespace
	}
	return key
}

// key mirrors registry.NamespaceKeyFunc and NoNamespaceKeyFunc: the key of one object.
func (h *resourceHandler) key(namespace, name string) (string, error) {
	if h.res.Namespaced && namespace == "" {
		return "", apierrors.NewBadRequest("Namespace parameter required.")
	}
	if name == "" {
		return "", apierrors.NewBadRequest("Name parameter required.")
	}
	if msgs := content.IsPathSegmentName(name); len(msgs) != 0 {
		return "", apierrors.NewBadRequest(fmt.Sprintf("Name parameter invalid: %q: %s", name, strings.Join(msgs, ";")))
	}
	return h.keyRoot(namespace) + "/" + name, nil
}

func (h *resourceHandler) gr() schema.GroupResource { return h.res.GroupResource() }

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

func (h *resourceHandler) newList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{Object: map[string]any{}}
	l.SetGroupVersionKind(h.res.GroupVersion().WithKind(h.res.ListKind))
	return l
}

// ---- list and watch ----

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

// predicate mirrors registry.Store.List/Watch building a SelectionPredicate from the options.
func (h *resourceHandler) predicate(opts *metainternalversion.ListOptions) storage.Predicate {
	label := labels.Everything()
	if opts.LabelSelector != nil {
		label = opts.LabelSelector
	}
	field := fields.Everything()
	if opts.FieldSelector != nil {
		field = opts.FieldSelector
	}
	return storage.Predicate{Label: label, Field: field, GetAttrs: h.res.GetAttrs}
}

// scope returns the key to read: a namespace named only by the field selector narrows a cluster-wide
// request, and a metadata.name selector turns it into a read of one key.
//
// Mirrors registry.Store.ListPredicate and WatchPredicate.
func (h *resourceHandler) scope(namespace string, pred *storage.Predicate) (key string, recursive bool) {
	if namespace == "" && h.res.Namespaced {
		if ns, ok := pred.MatchesSingleNamespace(); ok && len(apivalidation.ValidateNamespaceName(ns, false)) == 0 {
			namespace = ns
		}
	}
	if name, ok := pred.MatchesSingle(); ok {
		if k, err := h.key(namespace, name); err == nil {
			return k, false
		}
	}
	return h.keyRoot(namespace), true
}

// list mirrors registry.Store.List.
func (h *resourceHandler) list(ctx context.Context, namespace string, opts *metainternalversion.ListOptions) (*unstructured.UnstructuredList, error) {
	pred := h.predicate(opts)
	pred.Limit = opts.Limit
	pred.Continue = opts.Continue
	key, recursive := h.scope(namespace, &pred)
	list := h.newList()
	err := h.storage.GetList(ctx, key, storage.ListOptions{
		ResourceVersion:      opts.ResourceVersion,
		ResourceVersionMatch: opts.ResourceVersionMatch,
		Predicate:            pred,
		Recursive:            recursive,
	}, list)
	if err != nil {
		return nil, storage.InterpretListError(err, h.gr())
	}
	if h.res.BuiltIn {
		// A typed list omits an empty continue token (ListMeta's omitempty) ...
		if list.GetContinue() == "" {
			unstructured.RemoveNestedField(list.Object, "metadata", "continue")
		}
		// ... and its items carry no apiVersion and kind; the maps may be the cache's, so copy.
		for i := range list.Items {
			item := make(map[string]any, len(list.Items[i].Object))
			for k, v := range list.Items[i].Object {
				if k != "apiVersion" && k != "kind" {
					item[k] = v
				}
			}
			list.Items[i].Object = item
		}
	}
	return list, nil
}

// watch mirrors registry.Store.Watch: resourceVersion and sendInitialEvents go down, the
// resourceVersionMatch does not.
func (h *resourceHandler) watch(ctx context.Context, namespace string, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	pred := h.predicate(opts)
	pred.AllowWatchBookmarks = opts.AllowWatchBookmarks
	key, recursive := h.scope(namespace, &pred)
	return h.storage.Watch(ctx, key, storage.ListOptions{
		ResourceVersion:   opts.ResourceVersion,
		Predicate:         pred,
		Recursive:         recursive,
		SendInitialEvents: opts.SendInitialEvents,
	})
}

// ---- get ----

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

// ---- request bodies ----

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

// ---- create ----

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

// create mirrors registry.Store.Create, createWithGenerateNameRetry and create.
func (h *resourceHandler) create(ctx context.Context, namespace string, obj *unstructured.Unstructured, dryRun bool) (runtime.Object, error) {
	if obj.GetGenerateName() != "" && obj.GetName() == "" {
		var result runtime.Object
		var err error
		for range maxNameGenerationCreateAttempts {
			result, err = h.createOnce(ctx, namespace, obj.DeepCopy(), dryRun)
			if err == nil || !apierrors.IsAlreadyExists(err) {
				return result, err
			}
		}
		return result, err
	}
	return h.createOnce(ctx, namespace, obj, dryRun)
}

func (h *resourceHandler) createOnce(ctx context.Context, namespace string, obj *unstructured.Unstructured, dryRun bool) (runtime.Object, error) {
	h.fillObjectMetaSystemFields(obj)
	if obj.GetGenerateName() != "" && obj.GetName() == "" {
		obj.SetName(generateName(obj.GetGenerateName()))
	}
	if err := h.beforeCreate(namespace, obj); err != nil {
		return nil, err
	}
	name := obj.GetName()
	key, err := h.key(namespace, name)
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{}
	if err := h.storage.create(ctx, key, obj, out, dryRun); err != nil {
		err = storage.InterpretCreateError(err, h.gr(), name)
		err = h.checkGeneratedNameError(err, obj)
		if !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		existing := &unstructured.Unstructured{}
		if errGet := h.storage.Get(ctx, key, storage.GetOptions{}, existing); errGet != nil {
			return nil, err
		}
		if existing.GetDeletionTimestamp() != nil {
			var se *apierrors.StatusError
			if errors.As(err, &se) {
				se.ErrStatus.Message = "object is being deleted: " + se.ErrStatus.Message
			}
		}
		return nil, err
	}
	return out, nil
}

// beforeCreate mirrors rest.BeforeCreate with the strategy of the resource.
func (h *resourceHandler) beforeCreate(namespace string, obj *unstructured.Unstructured) error {
	if err := ensureNamespace(h.expectedNamespace(namespace), obj); err != nil {
		return err
	}
	if !h.res.BuiltIn {
		// customResourceStrategy.PrepareForCreate
		obj.SetGeneration(1)
	}
	if errs := h.validate(obj); len(errs) > 0 {
		return apierrors.NewInvalid(obj.GroupVersionKind().GroupKind(), obj.GetName(), errs)
	}
	return nil
}

// validate is the strategy's Validate followed by rest.ValidateCreate's ObjectMeta checks: a custom
// resource must have its own kind and apiVersion, every name is a DNS subdomain.
func (h *resourceHandler) validate(obj *unstructured.Unstructured) field.ErrorList {
	if !h.res.BuiltIn {
		// customResourceValidator.ValidateTypeMeta
		var errs field.ErrorList
		if obj.GetKind() != h.res.Kind {
			errs = append(errs, field.Invalid(field.NewPath("kind"), obj.GetKind(), fmt.Sprintf("must be %v", h.res.Kind)))
		}
		if want := h.res.GroupVersion().String(); obj.GetAPIVersion() != want {
			errs = append(errs, field.Invalid(field.NewPath("apiVersion"), obj.GetAPIVersion(), fmt.Sprintf("must be %v", want)))
		}
		if len(errs) > 0 {
			return errs
		}
	}
	return apivalidation.ValidateObjectMetaAccessor(obj, h.res.Namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
}

// checkGeneratedNameError mirrors rest.CheckGeneratedNameError.
func (h *resourceHandler) checkGeneratedNameError(err error, obj *unstructured.Unstructured) error {
	if !apierrors.IsAlreadyExists(err) || obj.GetGenerateName() == "" {
		return err
	}
	return apierrors.NewGenerateNameConflict(schema.GroupResource{Group: obj.GroupVersionKind().Group, Resource: h.res.Resource}, obj.GetName(), 1)
}

// wipeObjectMetaSystemFields mirrors rest.WipeObjectMetaSystemFields.
func wipeObjectMetaSystemFields(obj metav1.Object) {
	obj.SetCreationTimestamp(metav1.Time{})
	obj.SetUID("")
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	obj.SetSelfLink("")
}

// fillObjectMetaSystemFields mirrors rest.FillObjectMetaSystemFields.
func (h *resourceHandler) fillObjectMetaSystemFields(obj metav1.Object) {
	obj.SetCreationTimestamp(metav1.NewTime(h.server.clock.Now()))
	obj.SetUID(newUID())
}

// newUID returns a random (version 4) UUID, as uuid.NewUUID does.
func newUID() types.UID {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on supported platforms; fall back to a unique-enough value.
		copy(b[:], utilrand.String(16))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return types.UID(h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32])
}

// generateName mirrors names.SimpleNameGenerator: the base, cut to leave room, and five random
// characters.
func generateName(base string) string {
	const maxNameLength, randomLength = 63, 5
	if len(base) > maxNameLength-randomLength {
		base = base[:maxNameLength-randomLength]
	}
	return base + utilrand.String(randomLength)
}

// ---- update ----

// errEmptiedFinalizers signals that an update removed the last finalizer of an object being deleted.
var errEmptiedFinalizers = errors.New("emptied finalizers")

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

// update mirrors registry.Store.Update for a strategy that never creates on update.
func (h *resourceHandler) update(ctx context.Context, namespace, name string, obj *unstructured.Unstructured, dryRun bool) (runtime.Object, error) {
	key, err := h.key(namespace, name)
	if err != nil {
		return nil, err
	}
	preconditions := &storage.Preconditions{}
	if uid := obj.GetUID(); uid != "" {
		preconditions.UID = &uid
	}
	versioner := storage.APIObjectVersioner{}
	out := &unstructured.Unstructured{}
	var deleteObj *unstructured.Unstructured
	err = h.storage.guaranteedUpdate(ctx, key, out, false, preconditions, func(existing runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
		existingResourceVersion, err := versioner.ObjectResourceVersion(existing)
		if err != nil {
			return nil, nil, err
		}
		if existingResourceVersion == 0 {
			return nil, nil, apierrors.NewNotFound(h.gr(), name)
		}
		newObj := obj.DeepCopy()
		newResourceVersion, err := versioner.ObjectResourceVersion(newObj)
		if err != nil {
			return nil, nil, err
		}
		if newResourceVersion == 0 && h.res.AllowUnconditionalUpdate {
			if err := versioner.UpdateObject(newObj, res.ResourceVersion); err != nil {
				return nil, nil, err
			}
		} else {
			if newResourceVersion == 0 {
				qualifiedKind := schema.GroupKind{Group: h.res.Group, Kind: h.res.Resource}
				errs := field.ErrorList{field.Invalid(field.NewPath("metadata").Child("resourceVersion"), newResourceVersion, "must be specified for an update")}
				return nil, nil, apierrors.NewInvalid(qualifiedKind, name, errs)
			}
			if newResourceVersion != existingResourceVersion {
				return nil, nil, apierrors.NewConflict(h.gr(), name, errors.New(optimisticLockErrorMsg))
			}
		}
		old, err := asUnstructured(existing)
		if err != nil {
			return nil, nil, err
		}
		if err := h.beforeUpdate(namespace, newObj, old); err != nil {
			return nil, nil, err
		}
		if shouldDeleteDuringUpdate(newObj, old) {
			deleteObj = newObj
			return nil, nil, errEmptiedFinalizers
		}
		return newObj, nil, nil
	}, dryRun)
	if err != nil {
		if err == errEmptiedFinalizers {
			return h.deleteWithoutFinalizers(ctx, name, key, deleteObj, preconditions, dryRun)
		}
		return nil, storage.InterpretUpdateError(err, h.gr(), name)
	}
	return out, nil
}

// beforeUpdate mirrors rest.BeforeUpdate with the strategy of the resource.
func (h *resourceHandler) beforeUpdate(namespace string, obj, old *unstructured.Unstructured) error {
	if err := ensureNamespace(h.expectedNamespace(namespace), obj); err != nil {
		return err
	}
	obj.SetGeneration(old.GetGeneration())
	if !h.res.BuiltIn && !equalIgnoringMetadata(obj, old) {
		// customResourceStrategy.PrepareForUpdate: any change outside metadata is a new generation.
		obj.SetGeneration(old.GetGeneration() + 1)
	}
	if obj.GetUID() == "" {
		obj.SetUID(old.GetUID())
	}
	if ct := old.GetCreationTimestamp(); !ct.IsZero() {
		obj.SetCreationTimestamp(ct)
	}
	if dt := old.GetDeletionTimestamp(); dt != nil && !dt.IsZero() {
		obj.SetDeletionTimestamp(dt)
	}
	if old.GetDeletionGracePeriodSeconds() != nil && obj.GetDeletionGracePeriodSeconds() == nil {
		obj.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	}
	errs := h.validate(obj)
	errs = append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(obj, old, field.NewPath("metadata"))...)
	if len(errs) > 0 {
		return apierrors.NewInvalid(obj.GroupVersionKind().GroupKind(), obj.GetName(), errs)
	}
	return nil
}

// asUnstructured returns the object the storage handed to an update function as unstructured: a
// storage over another codec, or a cache wrapper, must not make the handler panic.
func asUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	switch t := obj.(type) {
	case *unstructured.Unstructured:
		return t, nil
	case runtime.CacheableObject:
		return asUnstructured(t.GetObject())
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("unexpected object of type %T from storage: %w", obj, err))
	}
	return &unstructured.Unstructured{Object: content}, nil
}

func equalIgnoringMetadata(a, b *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		m := make(map[string]any, len(u.Object))
		for k, v := range u.Object {
			if k != "metadata" {
				m[k] = v
			}
		}
		return m
	}
	return apiequality.Semantic.DeepEqual(strip(a), strip(b))
}

// shouldDeleteDuringUpdate mirrors registry.ShouldDeleteDuringUpdate.
func shouldDeleteDuringUpdate(obj, existing *unstructured.Unstructured) bool {
	if len(obj.GetFinalizers()) > 0 || existing.GetDeletionTimestamp() == nil {
		return false
	}
	grace := existing.GetDeletionGracePeriodSeconds()
	return grace == nil || *grace == 0
}

// deleteWithoutFinalizers mirrors registry.Store.deleteWithoutFinalizers: the update that removed the
// last finalizer deletes the object, and answers with the object as updated.
func (h *resourceHandler) deleteWithoutFinalizers(ctx context.Context, name, key string, obj *unstructured.Unstructured,
	preconditions *storage.Preconditions, dryRun bool) (runtime.Object, error) {
	out := &unstructured.Unstructured{}
	if err := h.storage.delete(ctx, key, out, preconditions, storage.ValidateAllObjectFunc, dryRun); err != nil {
		if storage.IsNotFound(err) {
			return obj, nil
		}
		return nil, storage.InterpretDeleteError(err, h.gr(), name)
	}
	return obj, nil
}

// ---- delete ----

// errDeleteNow signals that an object without finalizers can be deleted at once.
var errDeleteNow = errors.New("delete now")

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

// delete mirrors registry.Store.Delete for a strategy without graceful deletion and a server without a
// garbage collector: an object with finalizers is marked as being deleted, any other is deleted.
func (h *resourceHandler) delete(ctx context.Context, namespace, name string, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	key, err := h.key(namespace, name)
	if err != nil {
		return nil, false, err
	}
	obj := &unstructured.Unstructured{}
	if err := h.storage.Get(ctx, key, storage.GetOptions{}, obj); err != nil {
		return nil, false, storage.InterpretDeleteError(err, h.gr(), name)
	}
	var preconditions storage.Preconditions
	if options.Preconditions != nil {
		preconditions.UID = options.Preconditions.UID
		preconditions.ResourceVersion = options.Preconditions.ResourceVersion
	}
	if err := beforeDelete(obj, options); err != nil {
		return nil, false, err
	}
	dryRun := isDryRun(options.DryRun)
	if len(obj.GetFinalizers()) != 0 {
		out, err := h.updateForFinalizers(ctx, name, key, options, &preconditions, dryRun)
		switch {
		case err == errDeleteNow:
		case err != nil:
			return nil, false, err
		default:
			return out, false, nil
		}
	}
	out := &unstructured.Unstructured{}
	if err := h.storage.delete(ctx, key, out, &preconditions, storage.ValidateAllObjectFunc, dryRun); err != nil {
		return nil, false, storage.InterpretDeleteError(err, h.gr(), name)
	}
	return h.finalizeDelete(out), true, nil
}

// beforeDelete mirrors rest.BeforeDelete for a strategy without graceful deletion: the preconditions
// are checked early against the object read.
func beforeDelete(obj *unstructured.Unstructured, options *metav1.DeleteOptions) error {
	if options.Preconditions == nil {
		return nil
	}
	gvk := obj.GroupVersionKind()
	gr := schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}
	if uid := options.Preconditions.UID; uid != nil && *uid != obj.GetUID() {
		return apierrors.NewConflict(gr, obj.GetName(), fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *uid, obj.GetUID()))
	}
	if rv := options.Preconditions.ResourceVersion; rv != nil && *rv != obj.GetResourceVersion() {
		return apierrors.NewConflict(gr, obj.GetName(), fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *rv, obj.GetResourceVersion()))
	}
	return nil
}

// updateForFinalizers mirrors registry.Store.updateForGracefulDeletionAndFinalizers without graceful
// deletion: an object that still has finalizers gets its deletionTimestamp and a zero grace period.
func (h *resourceHandler) updateForFinalizers(ctx context.Context, name, key string, options *metav1.DeleteOptions,
	preconditions *storage.Preconditions, dryRun bool) (runtime.Object, error) {
	out := &unstructured.Unstructured{}
	err := h.storage.guaranteedUpdate(ctx, key, out, false, preconditions, storage.SimpleUpdate(func(existing runtime.Object) (runtime.Object, error) {
		u, err := asUnstructured(existing)
		if err != nil {
			return nil, err
		}
		if err := beforeDelete(u, options); err != nil {
			return nil, err
		}
		if len(u.GetFinalizers()) == 0 {
			return nil, errDeleteNow
		}
		h.markAsDeleting(u)
		return u, nil
	}), dryRun)
	switch {
	case err == nil:
		return out, nil
	case err == errDeleteNow:
		return nil, err
	default:
		return nil, storage.InterpretUpdateError(err, h.gr(), name)
	}
}

// markAsDeleting mirrors registry.markAsDeleting.
func (h *resourceHandler) markAsDeleting(obj *unstructured.Unstructured) {
	now := h.server.clock.Now()
	if obj.GetDeletionTimestamp() == nil && obj.GetGeneration() > 0 {
		obj.SetGeneration(obj.GetGeneration() + 1)
	}
	if existing := obj.GetDeletionTimestamp(); existing == nil || existing.After(now) {
		t := metav1.NewTime(now)
		obj.SetDeletionTimestamp(&t)
	}
	var zero int64
	obj.SetDeletionGracePeriodSeconds(&zero)
}

// finalizeDelete mirrors registry.Store.finalizeDelete: the deleted object, or a Success Status naming
// it (with the resource, not the kind, in details.kind, as upstream).
func (h *resourceHandler) finalizeDelete(obj *unstructured.Unstructured) runtime.Object {
	if h.res.ReturnDeletedObject {
		return obj
	}
	return &metav1.Status{
		Status: metav1.StatusSuccess,
		Details: &metav1.StatusDetails{
			Name:  obj.GetName(),
			Group: h.res.Group,
			Kind:  h.res.Resource,
			UID:   obj.GetUID(),
		},
	}
}
