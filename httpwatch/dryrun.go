package httpwatch

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/listwatch/listwatch/storage"
)

// dryRunnableStorage runs writes for real or only checks them.
//
// Mirrors registry/generic/registry/dryrun.go DryRunnableStorage.
type dryRunnableStorage struct {
	storage.Interface
}

func (s dryRunnableStorage) create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64, dryRun bool) error {
	if dryRun {
		if err := s.Interface.Get(ctx, key, storage.GetOptions{}, out); err == nil {
			return storage.NewKeyExistsError(key, 0)
		}
		return copyInto(obj, out)
	}
	return s.Interface.Create(ctx, key, obj, out, ttl)
}

func (s dryRunnableStorage) guaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, dryRun bool) error {
	if !dryRun {
		return s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, nil)
	}
	v, err := conversion.EnforcePtr(destination)
	if err != nil {
		return err
	}
	current := reflect.New(v.Type()).Interface().(runtime.Object)
	if err := s.Interface.Get(ctx, key, storage.GetOptions{IgnoreNotFound: ignoreNotFound}, current); err != nil {
		return err
	}
	if err := preconditions.Check(key, current); err != nil {
		return err
	}
	rev, err := s.Interface.Versioner().ObjectResourceVersion(current)
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
		return s.Interface.Delete(ctx, key, out, preconditions, validateDeletion, nil, storage.DeleteOptions{})
	}
	if err := s.Interface.Get(ctx, key, storage.GetOptions{}, out); err != nil {
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
