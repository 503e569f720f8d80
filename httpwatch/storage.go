package httpwatch

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/etcd3"
	"github.com/listwatch/listwatch/storage"
)

// Storage is what the handlers need from the storage of one resource, with the signatures and the
// storage-style errors of k8s.io/apiserver's storage.Interface. *etcd3.Store (the etcd3 mirror)
// satisfies it, and so does the watch cache, which serves reads from memory and passes writes on.
type Storage interface {
	Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error
	GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error
	Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error
	GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
		preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error
	Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
		validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error
}

var _ Storage = (*etcd3.Store)(nil)

// dryRunnableStorage runs writes for real or only checks them.
//
// Mirrors registry/generic/registry/dryrun.go DryRunnableStorage.
type dryRunnableStorage struct {
	Storage
}

func (s dryRunnableStorage) create(ctx context.Context, key string, obj, out runtime.Object, dryRun bool) error {
	if dryRun {
		if err := s.Storage.Get(ctx, key, storage.GetOptions{}, out); err == nil {
			return storage.NewKeyExistsError(key, 0)
		}
		return copyInto(obj, out)
	}
	return s.Storage.Create(ctx, key, obj, out, 0)
}

func (s dryRunnableStorage) guaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, dryRun bool) error {
	if !dryRun {
		return s.Storage.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, nil)
	}
	v, err := conversion.EnforcePtr(destination)
	if err != nil {
		return err
	}
	current := reflect.New(v.Type()).Interface().(runtime.Object)
	if err := s.Storage.Get(ctx, key, storage.GetOptions{IgnoreNotFound: ignoreNotFound}, current); err != nil {
		return err
	}
	if err := preconditions.Check(key, current); err != nil {
		return err
	}
	rev, err := (storage.APIObjectVersioner{}).ObjectResourceVersion(current)
	if err != nil {
		return err
	}
	updated, _, err := tryUpdate(current, storage.ResponseMeta{ResourceVersion: rev})
	if err != nil {
		return err
	}
	return copyInto(updated, destination)
}

func (s dryRunnableStorage) delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, dryRun bool) error {
	if !dryRun {
		return s.Storage.Delete(ctx, key, out, preconditions, validateDeletion, nil, storage.DeleteOptions{})
	}
	if err := s.Storage.Get(ctx, key, storage.GetOptions{}, out); err != nil {
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
