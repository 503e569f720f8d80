package httpwatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
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

// errEmptiedFinalizers signals that an update removed the last finalizer of an object being deleted.
var errEmptiedFinalizers = errors.New("emptied finalizers")

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

// errDeleteNow signals that an object without finalizers can be deleted at once.
var errDeleteNow = errors.New("delete now")

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
