package httpwatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apioperation "k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"github.com/listwatch/listwatch/storage"
)

// The registry of a resource, as k8s.io/apiserver pkg/registry/generic/registry/store.go with the
// rest package's BeforeCreate, BeforeUpdate and BeforeDelete: the keys, the predicates, and the
// create, update and delete semantics (generated names, optimistic concurrency, finalizers, deletion
// during update) over the storage.

// optimisticLockErrorMsg mirrors registry.OptimisticLockErrorMsg.
const optimisticLockErrorMsg = "the object has been modified; please apply your changes to the latest version and try again"

// maxNameGenerationCreateAttempts mirrors the registry's: 8 tries of a generated name.
const maxNameGenerationCreateAttempts = 8

// keyRoot mirrors registry.NamespaceKeyRootFunc: the key of a collection.
func (h *resourceHandler) keyRoot(namespace string) string {
	key := h.res.ResourcePrefix()
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

// gk is the kind of obj as validation and precondition errors name it: upstream's is the internal
// object's, core's for a version converted to core's (events.k8s.io/v1 events).
func (h *resourceHandler) gk(obj *unstructured.Unstructured) schema.GroupKind {
	if st := h.res.strategy; st != nil && st.coreErrors {
		return schema.GroupKind{Kind: obj.GetKind()}
	}
	return obj.GroupVersionKind().GroupKind()
}

func (h *resourceHandler) newList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{Object: map[string]any{}}
	l.SetGroupVersionKind(h.res.GroupVersion().WithKind(h.res.ListKind))
	return l
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
	p := storage.Predicate{Label: label, Field: field, GetAttrs: h.res.GetAttrs}
	if h.res.TriggerField != "" {
		// As the pod registry's MatchPod names spec.nodeName: the watch cache may index by it.
		p.IndexFields = []string{h.res.TriggerField}
	}
	return p
}

// requestScope puts the request's namespace and name on ctx, as the apiserver's request context
// carries them to the storage: the path's namespace, else the one the field selector pins
// (registry.Store.WatchPredicate and ListPredicate), and the name the field selector pins when it is
// a path segment (request/requestinfo.go; a /watch/.../<name> path is such a selector by now).
func (h *resourceHandler) requestScope(ctx context.Context, namespace string, pred *storage.Predicate) context.Context {
	scope := storage.RequestScope{Namespace: namespace}
	if scope.Namespace == "" && h.res.Namespaced {
		if ns, ok := pred.MatchesSingleNamespace(); ok && len(apivalidation.ValidateNamespaceName(ns, false)) == 0 {
			scope.Namespace = ns
		}
	}
	if pred.Field != nil {
		if name, ok := pred.Field.RequiresExactMatch("metadata.name"); ok && len(content.IsPathSegmentName(name)) == 0 {
			scope.Name = name
		}
	}
	return storage.WithRequestScope(ctx, scope)
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
	err := h.storage.GetList(h.requestScope(ctx, namespace, &pred), key, storage.ListOptions{
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
	return h.storage.Watch(h.requestScope(ctx, namespace, &pred), key, storage.ListOptions{
		ResourceVersion:   opts.ResourceVersion,
		Predicate:         pred,
		Recursive:         recursive,
		SendInitialEvents: opts.SendInitialEvents,
	})
}

// create mirrors registry.Store.Create, createWithGenerateNameRetry and create.
func (h *resourceHandler) create(ctx context.Context, namespace string, obj *unstructured.Unstructured, dryRun bool) (runtime.Object, error) {
	if err := h.admitNamespaceLifecycle(ctx, namespace, obj.GetName()); err != nil {
		return nil, err
	}
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

// ttl is the seconds an object of the resource lives from a create or update, 0 for ever.
//
// Mirrors registry.Store.calculateTTL with the events' TTLFunc.
func (h *resourceHandler) ttl() uint64 {
	if h.res.strategy != nil && h.res.strategy.eventTTL {
		return h.server.eventTTL
	}
	return 0
}

func (h *resourceHandler) createOnce(ctx context.Context, namespace string, obj *unstructured.Unstructured, dryRun bool) (runtime.Object, error) {
	if err := h.beforeCreate(ctx, namespace, obj); err != nil {
		return nil, err
	}
	name := obj.GetName()
	key, err := h.key(namespace, name)
	if err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{}
	if err := h.storage.create(ctx, key, obj, out, h.ttl(), dryRun); err != nil {
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

// beforeCreate mirrors rest.BeforeCreate with the strategy of the resource: system fields, a
// generated name, the strategy's PrepareForCreate, and validation.
func (h *resourceHandler) beforeCreate(ctx context.Context, namespace string, obj *unstructured.Unstructured) error {
	if err := ensureNamespace(h.expectedNamespace(namespace), obj); err != nil {
		return err
	}
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	h.prepareForCreate(obj)
	h.fillObjectMetaSystemFields(obj)
	if obj.GetGenerateName() != "" && obj.GetName() == "" {
		obj.SetName(generateName(obj.GetGenerateName()))
	}
	if errs := h.validate(ctx, obj, nil, ""); len(errs) > 0 {
		return apierrors.NewInvalid(h.gk(obj), obj.GetName(), errs)
	}
	return nil
}

// prepareForCreate is the strategy's PrepareForCreate: customResourceStrategy's (generation 1, no
// status with a status subresource) or the built-in kind's.
func (h *resourceHandler) prepareForCreate(obj *unstructured.Unstructured) {
	if !h.res.BuiltIn {
		if h.res.StatusSubresource {
			delete(obj.Object, "status")
		}
		obj.SetGeneration(1)
		return
	}
	if st := h.res.strategy; st != nil {
		if st.prepareForCreate != nil {
			st.prepareForCreate(obj.Object)
		}
		if st.generation {
			obj.SetGeneration(1)
		}
		return
	}
	if h.res.StatusSubresource {
		delete(obj.Object, "status")
	}
}

// validateTypeMeta refuses a custom resource of another kind or apiVersion than its resource's.
//
// Mirrors customResourceValidator.ValidateTypeMeta.
func (h *resourceHandler) validateTypeMeta(obj *unstructured.Unstructured) field.ErrorList {
	if h.res.BuiltIn {
		return nil
	}
	var errs field.ErrorList
	if obj.GetKind() != h.res.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), obj.GetKind(), fmt.Sprintf("must be %v", h.res.Kind)))
	}
	if want := h.res.GroupVersion().String(); obj.GetAPIVersion() != want {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), obj.GetAPIVersion(), fmt.Sprintf("must be %v", want)))
	}
	return errs
}

// validate is the strategy's Validate (old nil) or ValidateUpdate of the resource or subresource,
// with rest.ValidateCreate's ObjectMeta checks: a custom resource must have its own kind and
// apiVersion and is validated by its schema, every name is a DNS subdomain.
func (h *resourceHandler) validate(ctx context.Context, obj, old *unstructured.Unstructured, subresource string) field.ErrorList {
	if errs := h.validateTypeMeta(obj); len(errs) > 0 {
		return errs
	}
	if st := h.res.strategy; old == nil && st != nil && st.validatesMeta {
		return h.validateOwnMeta(obj, nil)
	}
	nameFn := apivalidation.NameIsDNSSubdomain
	if h.res.isCoreNamespaces() {
		nameFn = apivalidation.ValidateNamespaceName
	}
	errs := apivalidation.ValidateObjectMetaAccessor(obj, h.res.Namespaced, nameFn, field.NewPath("metadata"))
	if st := h.res.strategy; st != nil && st.validate != nil {
		var oldObj map[string]any
		if old != nil {
			oldObj = old.Object
		}
		errs = append(errs, st.validate(obj.Object, oldObj)...)
	}
	if h.res.custom != nil {
		errs = h.res.custom.validate(ctx, obj, old, subresource, errs)
	}
	return errs
}

// validateOwnMeta validates a create (old nil) or update of a kind whose validation checks the
// metadata itself, where and how it does (events), with the generic checks of the metadata, whose
// name check is only the path segment's: on create they follow only when it finds nothing, on
// update they come first.
//
// Mirrors rest.ValidateCreate and rest.ValidateUpdate (k8s.io/apiserver pkg/registry/rest).
func (h *resourceHandler) validateOwnMeta(obj, old *unstructured.Unstructured) field.ErrorList {
	md := field.NewPath("metadata")
	if old == nil {
		if errs := h.res.strategy.validate(obj.Object, nil); len(errs) > 0 {
			return errs
		}
		return apivalidation.ValidateObjectMetaAccessor(obj, h.res.Namespaced, path.ValidatePathSegmentName, md)
	}
	errs := apivalidation.ValidateObjectMetaAccessor(obj, h.res.Namespaced, path.ValidatePathSegmentName, md)
	errs = append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(obj, old, md)...)
	return append(errs, h.res.strategy.validate(obj.Object, old.Object)...)
}

// validateCustomUpdate validates an update of a custom resource or its status in upstream's order,
// which checks the metadata twice (its causes repeat): the common fields, then the strategy's
// TypeMeta, ObjectMeta update, schema and CEL checks.
//
// Mirrors rest.ValidateUpdate (validateCommonFields) and customResourceValidator.ValidateUpdate and
// ValidateStatusUpdate (apiextensions-apiserver pkg/registry/customresource/validator.go).
func (h *resourceHandler) validateCustomUpdate(ctx context.Context, obj, old *unstructured.Unstructured, subresource string) field.ErrorList {
	md := field.NewPath("metadata")
	errs := apivalidation.ValidateObjectMetaAccessor(obj, h.res.Namespaced, path.ValidatePathSegmentName, md)
	errs = append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(obj, old, md)...)
	if tm := h.validateTypeMeta(obj); len(tm) > 0 {
		return append(errs, tm...)
	}
	newMeta, oldMeta := &metav1.ObjectMeta{}, &metav1.ObjectMeta{}
	for _, p := range []struct {
		u *unstructured.Unstructured
		m *metav1.ObjectMeta
	}{{obj, newMeta}, {old, oldMeta}} {
		if raw, ok := p.u.Object["metadata"].(map[string]any); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, p.m); err != nil {
				return append(errs, field.Invalid(md, raw, err.Error()))
			}
		}
	}
	errs = append(errs, apivalidation.ValidateObjectMetaDeclaratively(ctx, apioperation.Update, newMeta, oldMeta, h.res.Namespaced, nil, md,
		utilfeature.DefaultFeatureGate.Enabled(features.DeclarativeValidationBeta))...)
	if h.res.custom != nil {
		errs = h.res.custom.validate(ctx, obj, old, subresource, errs)
	}
	return errs
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

// errEmptiedFinalizers signals that an update removed the last finalizer of an object being deleted.
var errEmptiedFinalizers = errors.New("emptied finalizers")

// updatedObjectFunc returns the object an update stores, given the stored one; existing is nil when
// nothing is stored (a create on update).
//
// Mirrors rest.UpdatedObjectInfo.UpdatedObject.
type updatedObjectFunc func(existing *unstructured.Unstructured) (*unstructured.Unstructured, error)

// updateRequest is one update of an object or of its subresource.
type updateRequest struct {
	namespace, name string
	subresource     string
	// objInfo computes the new object from the stored one, in each try of the update.
	objInfo updatedObjectFunc
	// preconditionUID, if set, must be the stored object's UID.
	preconditionUID types.UID
	// forceAllowCreate creates a missing object, as server-side apply does; not through a
	// subresource (as the status RESTs of upstream's registries, which drop it).
	forceAllowCreate bool
	dryRun           bool
}

// update mirrors registry.Store.Update: the new object is computed from the stored one in each try;
// a missing object is created when the strategy or the request allows it (and then created is
// true).
func (h *resourceHandler) update(ctx context.Context, u updateRequest) (result runtime.Object, created bool, err error) {
	key, err := h.key(u.namespace, u.name)
	if err != nil {
		return nil, false, err
	}
	preconditions := &storage.Preconditions{}
	if u.preconditionUID != "" {
		preconditions.UID = &u.preconditionUID
	}
	allowCreate := u.subresource == "" && (u.forceAllowCreate || h.res.strategy != nil && h.res.strategy.allowCreateOnUpdate)
	versioner := storage.APIObjectVersioner{}
	out := &unstructured.Unstructured{}
	var deleteObj *unstructured.Unstructured
	// Only a resource that may be created by an update reads a missing object as empty; for the
	// others a missing object is a 404 before preconditions are checked.
	err = h.storage.guaranteedUpdate(ctx, key, out, allowCreate, preconditions, func(existing runtime.Object, res storage.ResponseMeta) (runtime.Object, *uint64, error) {
		existingResourceVersion, err := versioner.ObjectResourceVersion(existing)
		if err != nil {
			return nil, nil, err
		}
		old, err := asUnstructured(existing)
		if err != nil {
			return nil, nil, err
		}
		if existingResourceVersion == 0 {
			if !allowCreate {
				return nil, nil, apierrors.NewNotFound(h.gr(), u.name)
			}
			old = nil
		}
		newObj, err := u.objInfo(old)
		if err != nil {
			return nil, nil, err
		}
		newResourceVersion, err := versioner.ObjectResourceVersion(newObj)
		if err != nil {
			return nil, nil, err
		}
		if existingResourceVersion == 0 {
			created = true
			// A create on update is a create to admission, as upstream's patcher and update handler
			// run it.
			if err := h.admitNamespaceLifecycle(ctx, u.namespace, u.name); err != nil {
				return nil, nil, err
			}
			if err := h.beforeCreate(ctx, u.namespace, newObj); err != nil {
				return nil, nil, err
			}
			ttl := h.ttl()
			return newObj, &ttl, nil
		}
		created = false
		if newResourceVersion == 0 && h.res.AllowUnconditionalUpdate {
			if err := versioner.UpdateObject(newObj, res.ResourceVersion); err != nil {
				return nil, nil, err
			}
		} else {
			if newResourceVersion == 0 {
				qualifiedKind := schema.GroupKind{Group: h.res.Group, Kind: h.res.Resource}
				errs := field.ErrorList{field.Invalid(field.NewPath("metadata").Child("resourceVersion"), newResourceVersion, "must be specified for an update")}
				return nil, nil, apierrors.NewInvalid(qualifiedKind, u.name, errs)
			}
			if newResourceVersion != existingResourceVersion {
				return nil, nil, apierrors.NewConflict(h.gr(), u.name, errors.New(optimisticLockErrorMsg))
			}
		}
		if err := h.beforeUpdate(ctx, u.namespace, u.subresource, newObj, old); err != nil {
			return nil, nil, err
		}
		if h.shouldDeleteDuringUpdate(newObj, old) {
			deleteObj = newObj
			return nil, nil, errEmptiedFinalizers
		}
		// The storage reports no remaining TTL, so an object with one is given it anew.
		if ttl := h.ttl(); int64(ttl) != res.TTL {
			return newObj, &ttl, nil
		}
		return newObj, nil, nil
	}, u.dryRun)
	if err != nil {
		if err == errEmptiedFinalizers {
			result, err := h.deleteWithoutFinalizers(ctx, u.name, key, deleteObj, preconditions, u.dryRun)
			return result, false, err
		}
		if created {
			return nil, false, storage.InterpretCreateError(err, h.gr(), u.name)
		}
		return nil, false, storage.InterpretUpdateError(err, h.gr(), u.name)
	}
	return out, created, nil
}

// beforeUpdate mirrors rest.BeforeUpdate with the strategy of the resource or subresource.
func (h *resourceHandler) beforeUpdate(ctx context.Context, namespace, subresource string, obj, old *unstructured.Unstructured) error {
	if err := ensureNamespace(h.expectedNamespace(namespace), obj); err != nil {
		return err
	}
	h.prepareForUpdate(subresource, obj, old)
	if obj.GetUID() == "" {
		obj.SetUID(old.GetUID())
	}
	if ct := old.GetCreationTimestamp(); !ct.IsZero() {
		obj.SetCreationTimestamp(ct)
	}
	if dt := old.GetDeletionTimestamp(); dt != nil && !dt.IsZero() {
		obj.SetDeletionTimestamp(dt)
	} else {
		obj.SetDeletionTimestamp(nil)
	}
	if old.GetDeletionGracePeriodSeconds() != nil && obj.GetDeletionGracePeriodSeconds() == nil {
		obj.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	}
	var errs field.ErrorList
	if st := h.res.strategy; st != nil && st.validatesMeta {
		errs = h.validateOwnMeta(obj, old)
	} else if h.res.BuiltIn {
		errs = h.validate(ctx, obj, old, subresource)
		errs = append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(obj, old, field.NewPath("metadata"))...)
	} else {
		errs = h.validateCustomUpdate(ctx, obj, old, subresource)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(h.gk(obj), obj.GetName(), errs)
	}
	return nil
}

// prepareForUpdate is the PrepareForUpdate of the strategy of the resource or subresource:
//   - an update of the resource keeps the stored status when there is a status subresource, and
//     (custom resources, and built-in kinds that count generations) starts a new generation when
//     anything but metadata and status changed; a namespace keeps its spec.finalizers;
//   - an update of the status keeps everything but the status (custom resources: every other field
//     of the stored object but managedFields; built-in kinds: every field but metadata, and the
//     metadata fields of the strategy's statusResets);
//   - a namespace's finalize keeps its status.
//
// Mirrors customResourceStrategy and statusStrategy PrepareForUpdate (apiextensions-apiserver) and
// the built-in strategies (podStrategy, podStatusStrategy, deploymentStrategy, namespaceStrategy,
// namespaceFinalizeStrategy...).
func (h *resourceHandler) prepareForUpdate(subresource string, obj, old *unstructured.Unstructured) {
	switch subresource {
	case "status":
		if !h.res.BuiltIn {
			status, hasStatus := obj.Object["status"]
			managedFields := obj.GetManagedFields()
			rv := obj.GetResourceVersion()
			obj.Object = old.DeepCopy().Object
			obj.SetManagedFields(managedFields)
			obj.SetResourceVersion(rv)
			if hasStatus {
				obj.Object["status"] = status
			} else {
				delete(obj.Object, "status")
			}
			return
		}
		for k := range obj.Object {
			if k != "metadata" && k != "status" && k != "apiVersion" && k != "kind" {
				delete(obj.Object, k)
			}
		}
		for k, v := range old.Object {
			if k != "metadata" && k != "status" && k != "apiVersion" && k != "kind" {
				obj.Object[k] = runtime.DeepCopyJSONValue(v)
			}
		}
		if h.res.strategy != nil {
			for _, f := range h.res.strategy.statusResets {
				copyNestedField(obj, old, "metadata", f)
			}
		}
		obj.SetGeneration(old.GetGeneration())
		return
	case "finalize":
		copyNestedField(obj, old, "status")
		obj.SetGeneration(old.GetGeneration())
		return
	}
	if h.res.StatusSubresource {
		copyNestedField(obj, old, "status")
	}
	if h.res.isCoreNamespaces() {
		finalizers, found, _ := unstructured.NestedFieldCopy(old.Object, "spec", "finalizers")
		if found {
			unstructured.SetNestedField(obj.Object, finalizers, "spec", "finalizers")
		} else {
			unstructured.RemoveNestedField(obj.Object, "spec", "finalizers")
		}
	}
	obj.SetGeneration(old.GetGeneration())
	switch {
	case !h.res.BuiltIn:
		if !equalIgnoring(obj, old, h.res.StatusSubresource) {
			obj.SetGeneration(old.GetGeneration() + 1)
		}
	case h.res.strategy != nil && h.res.strategy.generation:
		annotationsChanged := h.res.strategy.annotationsGeneration &&
			!apiequality.Semantic.DeepEqual(obj.GetAnnotations(), old.GetAnnotations())
		if annotationsChanged || !apiequality.Semantic.DeepEqual(obj.Object["spec"], old.Object["spec"]) {
			obj.SetGeneration(old.GetGeneration() + 1)
		}
	}
}

// copyNestedField sets obj's field at path to old's (a deep copy), or removes it when old has none.
func copyNestedField(obj, old *unstructured.Unstructured, path ...string) {
	if v, ok, _ := unstructured.NestedFieldCopy(old.Object, path...); ok {
		_ = unstructured.SetNestedField(obj.Object, v, path...) // the path's parents (metadata) are maps
	} else {
		unstructured.RemoveNestedField(obj.Object, path...)
	}
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

// equalIgnoring compares two objects but for metadata and, with a status subresource, status.
func equalIgnoring(a, b *unstructured.Unstructured, status bool) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		m := make(map[string]any, len(u.Object))
		for k, v := range u.Object {
			if k != "metadata" && (!status || k != "status") {
				m[k] = v
			}
		}
		return m
	}
	return apiequality.Semantic.DeepEqual(strip(a), strip(b))
}

// shouldDeleteDuringUpdate mirrors registry.ShouldDeleteDuringUpdate, and for namespaces
// ShouldDeleteNamespaceDuringUpdate, which waits for spec.finalizers too.
func (h *resourceHandler) shouldDeleteDuringUpdate(obj, existing *unstructured.Unstructured) bool {
	if len(obj.GetFinalizers()) > 0 || existing.GetDeletionTimestamp() == nil {
		return false
	}
	if h.res.isCoreNamespaces() {
		if finalizers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "finalizers"); len(finalizers) > 0 {
			return false
		}
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

// errAlreadyDeleting signals that a graceful deletion is already pending.
var errAlreadyDeleting = errors.New("abort delete: already deleting")

// errDeleteNow abandons the update of a deletion: nothing holds the object any longer.
var errDeleteNow = errors.New("abort delete: delete now")

// delete mirrors registry.Store.Delete: an object with finalizers, or given the orphan or
// foregroundDeletion finalizer by the delete's propagation (propagation.go), is marked as being
// deleted; a kind that deletes gracefully (pods) is marked with a
// deletionTimestamp its grace period ahead, unless the period is 0; any other object is deleted.
// A namespace is marked Terminating and deleted only once its spec.finalizers are empty (the
// namespace REST's Delete).
func (h *resourceHandler) delete(ctx context.Context, namespace, name string, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	key, err := h.key(namespace, name)
	if err != nil {
		return nil, false, err
	}
	obj := &unstructured.Unstructured{}
	if err := h.storage.Get(ctx, key, storage.GetOptions{}, obj); err != nil {
		return nil, false, storage.InterpretDeleteError(err, h.gr(), name)
	}
	if err := h.admitNamespaceDeletion(name); err != nil {
		return nil, false, err
	}
	var preconditions storage.Preconditions
	if options.Preconditions != nil {
		preconditions.UID = options.Preconditions.UID
		preconditions.ResourceVersion = options.Preconditions.ResourceVersion
	}
	dryRun := isDryRun(options.DryRun)
	if h.res.isCoreNamespaces() {
		return h.deleteNamespace(ctx, name, key, obj, options, &preconditions, dryRun)
	}
	graceful, pendingGraceful, err := h.beforeDelete(obj, options)
	if err != nil {
		return nil, false, err
	}
	if pendingGraceful {
		return h.finalizeDelete(obj), false, nil
	}
	updateFinalizers, _ := h.deletionFinalizersForGarbageCollection(obj, options)
	if graceful || len(obj.GetFinalizers()) != 0 || updateFinalizers {
		out, deleteNow, err := h.updateForGracefulDeletionAndFinalizers(ctx, name, key, options, &preconditions, dryRun)
		if err != nil || !deleteNow {
			return out, false, err
		}
		if preconditions.ResourceVersion != nil {
			rv := out.(*unstructured.Unstructured).GetResourceVersion()
			preconditions.ResourceVersion = &rv
		}
		if dryRun {
			return out, true, nil
		}
	}
	out := &unstructured.Unstructured{}
	if err := h.storage.delete(ctx, key, out, &preconditions, storage.ValidateAllObjectFunc, dryRun); err != nil {
		return nil, false, storage.InterpretDeleteError(err, h.gr(), name)
	}
	return h.finalizeDelete(out), true, nil
}

// beforeDelete mirrors rest.BeforeDelete: the preconditions are checked early against the object
// read; a kind with a grace period gets its deletionTimestamp and deletionGracePeriodSeconds set
// (graceful), or, already being deleted, may only have its grace period shortened (else the
// deletion is pending).
func (h *resourceHandler) beforeDelete(obj *unstructured.Unstructured, options *metav1.DeleteOptions) (graceful, gracefulPending bool, err error) {
	if options.Preconditions != nil {
		gk := h.gk(obj)
		gr := schema.GroupResource{Group: gk.Group, Resource: gk.Kind}
		if uid := options.Preconditions.UID; uid != nil && *uid != obj.GetUID() {
			return false, false, apierrors.NewConflict(gr, obj.GetName(), fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *uid, obj.GetUID()))
		}
		if rv := options.Preconditions.ResourceVersion; rv != nil && *rv != obj.GetResourceVersion() {
			return false, false, apierrors.NewConflict(gr, obj.GetName(), fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *rv, obj.GetResourceVersion()))
		}
	}
	if p := options.GracePeriodSeconds; p != nil && *p < 0 {
		one := int64(1)
		options.GracePeriodSeconds = &one
	}
	if p := obj.GetDeletionGracePeriodSeconds(); p != nil && *p < 0 {
		one := int64(1)
		obj.SetDeletionGracePeriodSeconds(&one)
	}
	st := h.res.strategy
	if st == nil || st.gracePeriod == nil {
		return false, false, nil
	}
	now := h.server.clock.Now()
	if dt := obj.GetDeletionTimestamp(); dt != nil {
		current := obj.GetDeletionGracePeriodSeconds()
		if current == nil || *current == 0 {
			return false, false, nil
		}
		if options.GracePeriodSeconds != nil {
			period := *options.GracePeriodSeconds
			if period >= *current {
				return false, true, nil
			}
			newTimestamp := dt.Add(-time.Duration(*current) * time.Second).Add(time.Duration(period) * time.Second)
			if newTimestamp.Before(now) {
				newTimestamp = now
				if period != 0 {
					period = 1
				}
			}
			t := metav1.NewTime(newTimestamp)
			obj.SetDeletionTimestamp(&t)
			obj.SetDeletionGracePeriodSeconds(&period)
			return true, false, nil
		}
		options.GracePeriodSeconds = current
		return false, true, nil
	}
	period, ok := st.gracePeriod(obj.Object, options)
	if !ok {
		return false, false, nil
	}
	options.GracePeriodSeconds = &period
	t := metav1.NewTime(now.Add(time.Duration(period) * time.Second))
	obj.SetDeletionTimestamp(&t)
	obj.SetDeletionGracePeriodSeconds(&period)
	if obj.GetGeneration() > 0 {
		obj.SetGeneration(obj.GetGeneration() + 1)
	}
	return true, false, nil
}

// updateForGracefulDeletionAndFinalizers mirrors registry.Store.updateForGracefulDeletionAndFinalizers:
// the stored object is marked as being deleted; deleteNow says it may be deleted at once (no
// finalizers and no grace period left).
func (h *resourceHandler) updateForGracefulDeletionAndFinalizers(ctx context.Context, name, key string, options *metav1.DeleteOptions,
	preconditions *storage.Preconditions, dryRun bool) (out runtime.Object, deleteNow bool, err error) {
	var lastGraceful int64
	pendingFinalizers := false
	updated := &unstructured.Unstructured{}
	err = h.storage.guaranteedUpdate(ctx, key, updated, false, preconditions, storage.SimpleUpdate(func(existing runtime.Object) (runtime.Object, error) {
		u, err := asUnstructured(existing)
		if err != nil {
			return nil, err
		}
		graceful, pendingGraceful, err := h.beforeDelete(u, options)
		if err != nil {
			return nil, err
		}
		if pendingGraceful {
			return nil, errAlreadyDeleting
		}
		if update, finalizers := h.deletionFinalizersForGarbageCollection(u, options); update {
			u.SetFinalizers(finalizers)
		}
		pendingFinalizers = len(u.GetFinalizers()) != 0
		lastGraceful = 0
		if !graceful {
			if !pendingFinalizers {
				// The finalizers the options removed are not written: the object is deleted as stored.
				return nil, errDeleteNow
			}
			h.markAsDeleting(u)
			return u, nil
		}
		lastGraceful = *options.GracePeriodSeconds
		return u, nil
	}), dryRun)
	switch {
	case err == nil:
		// Marked and kept: the answer is the object as marked.
		if pendingFinalizers || lastGraceful > 0 {
			return updated, false, nil
		}
		return updated, true, nil
	case err == errDeleteNow:
		// As upstream, the output of the abandoned update, empty but for its kind (the store's
		// NewFunc), is the object passed on: a resourceVersion precondition becomes its (empty)
		// one, and a dryRun answers with it.
		empty := &unstructured.Unstructured{}
		empty.SetGroupVersionKind(h.res.GroupVersionKind())
		return empty, true, nil
	case err == errAlreadyDeleting:
		current := &unstructured.Unstructured{}
		if err := h.storage.Get(ctx, key, storage.GetOptions{}, current); err != nil {
			return nil, false, storage.InterpretGetError(err, h.gr(), name)
		}
		return h.finalizeDelete(current), false, nil
	default:
		return nil, false, storage.InterpretUpdateError(err, h.gr(), name)
	}
}

// deleteNamespace mirrors the namespace REST's Delete: the first delete marks the namespace with a
// deletionTimestamp and phase Terminating; it is deleted only once spec.finalizers is empty.
func (h *resourceHandler) deleteNamespace(ctx context.Context, name, key string, obj *unstructured.Unstructured, options *metav1.DeleteOptions,
	preconditions *storage.Preconditions, dryRun bool) (runtime.Object, bool, error) {
	if _, _, err := h.beforeDelete(obj, options); err != nil {
		return nil, false, err
	}
	if obj.GetDeletionTimestamp() == nil {
		updated := &unstructured.Unstructured{}
		err := h.storage.guaranteedUpdate(ctx, key, updated, false, preconditions, storage.SimpleUpdate(func(existing runtime.Object) (runtime.Object, error) {
			u, err := asUnstructured(existing)
			if err != nil {
				return nil, err
			}
			if u.GetDeletionTimestamp() == nil {
				t := metav1.NewTime(h.server.clock.Now())
				u.SetDeletionTimestamp(&t)
			}
			if err := unstructured.SetNestedField(u.Object, "Terminating", "status", "phase"); err != nil {
				return nil, err
			}
			return u, nil
		}), dryRun)
		if err != nil {
			return nil, false, storage.InterpretUpdateError(err, h.gr(), name)
		}
		obj = updated
	}
	if finalizers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "finalizers"); len(finalizers) > 0 || len(obj.GetFinalizers()) > 0 {
		return obj, false, nil
	}
	out := &unstructured.Unstructured{}
	if err := h.storage.delete(ctx, key, out, preconditions, storage.ValidateAllObjectFunc, dryRun); err != nil {
		return nil, false, storage.InterpretDeleteError(err, h.gr(), name)
	}
	return h.finalizeDelete(out), true, nil
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

// deleteCollection mirrors registry.Store.DeleteCollection with one worker (the apiserver's
// --delete-collection-workers default): the objects the options select are listed page by page and
// each is deleted as by delete; objects already gone are skipped. It answers with the list of the
// objects it found under the first page's metadata: with a limit, that one page as listed, its
// continue token and remainingItemCount included.
func (h *resourceHandler) deleteCollection(ctx context.Context, namespace string, options *metav1.DeleteOptions, listOptions *metainternalversion.ListOptions) (runtime.Object, error) {
	const deleteCollectionPageSize = 10000
	opts := listOptions.DeepCopy()
	hasLimit := opts.Limit > 0
	if opts.Limit == 0 {
		opts.Limit = deleteCollectionPageSize
	}
	var all *unstructured.UnstructuredList
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		page, err := h.list(ctx, namespace, opts)
		if err != nil {
			return nil, err
		}
		if all == nil {
			all = page
		} else {
			all.Items = append(all.Items, page.Items...)
		}
		for i := range page.Items {
			item := &page.Items[i]
			if _, _, err := h.delete(ctx, item.GetNamespace(), item.GetName(), options.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
		}
		if hasLimit || page.GetContinue() == "" {
			break
		}
		opts.Continue = page.GetContinue()
		opts.ResourceVersion = ""
		opts.ResourceVersionMatch = ""
	}
	return all, nil
}
