package httpwatch

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/watch"
)

// Storage is what the handlers need from the storage of one resource, with the signatures and the
// storage-style errors of k8s.io/apiserver's storage.Interface. *watch.Storage (the etcd3 mirror)
// satisfies it, and so does the watch cache, which serves reads from memory and passes writes on.
type Storage interface {
	Get(ctx context.Context, key string, opts watch.GetOptions, out runtime.Object) error
	GetList(ctx context.Context, key string, opts watch.ListOptions, listObj runtime.Object) error
	Watch(ctx context.Context, key string, opts watch.ListOptions) (apiwatch.Interface, error)
	Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error
	GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
		preconditions *watch.Preconditions, tryUpdate watch.UpdateFunc, cachedExistingObject runtime.Object) error
	Delete(ctx context.Context, key string, out runtime.Object, preconditions *watch.Preconditions,
		validateDeletion watch.ValidateObjectFunc, cachedExistingObject runtime.Object, opts watch.DeleteOptions) error
}

var _ Storage = (*watch.Storage)(nil)

// dryRunnableStorage runs writes for real or only checks them.
//
// Mirrors registry/generic/registry/dryrun.go DryRunnableStorage.
type dryRunnableStorage struct {
	Storage
}

func (s dryRunnableStorage) create(ctx context.Context, key string, obj, out runtime.Object, dryRun bool) error {
	if dryRun {
		if err := s.Storage.Get(ctx, key, watch.GetOptions{}, out); err == nil {
			return watch.NewKeyExistsError(key, 0)
		}
		return copyInto(obj, out)
	}
	return s.Storage.Create(ctx, key, obj, out, 0)
}

func (s dryRunnableStorage) guaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *watch.Preconditions, tryUpdate watch.UpdateFunc, dryRun bool) error {
	if !dryRun {
		return s.Storage.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, nil)
	}
	v, err := conversion.EnforcePtr(destination)
	if err != nil {
		return err
	}
	current := reflect.New(v.Type()).Interface().(runtime.Object)
	if err := s.Storage.Get(ctx, key, watch.GetOptions{IgnoreNotFound: ignoreNotFound}, current); err != nil {
		return err
	}
	if err := preconditions.Check(key, current); err != nil {
		return err
	}
	rev, err := (watch.APIObjectVersioner{}).ObjectResourceVersion(current)
	if err != nil {
		return err
	}
	updated, _, err := tryUpdate(current, watch.ResponseMeta{ResourceVersion: rev})
	if err != nil {
		return err
	}
	return copyInto(updated, destination)
}

func (s dryRunnableStorage) delete(ctx context.Context, key string, out runtime.Object, preconditions *watch.Preconditions,
	validateDeletion watch.ValidateObjectFunc, dryRun bool) error {
	if !dryRun {
		return s.Storage.Delete(ctx, key, out, preconditions, validateDeletion, nil, watch.DeleteOptions{})
	}
	if err := s.Storage.Get(ctx, key, watch.GetOptions{}, out); err != nil {
		return err
	}
	if err := preconditions.Check(key, out); err != nil {
		return err
	}
	return validateDeletion(ctx, out)
}

// copyInto mirrors DryRunnableStorage.copyInto.
func copyInto(in, out runtime.Object) error {
	src := reflect.ValueOf(in.DeepCopyObject())
	dst, err := conversion.EnforcePtr(out)
	if err != nil {
		return err
	}
	dst.Set(reflect.Indirect(src))
	return nil
}
