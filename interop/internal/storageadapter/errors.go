package storageadapter

import (
	"errors"

	k8sstorage "k8s.io/apiserver/pkg/storage"

	"github.com/listwatch/listwatch/storage"
)

// ToUpstreamError converts an error of listwatch's storage into the one k8s.io/apiserver's storage
// returns for the same failure, so that upstream's checks (storage.IsNotFound and the other Is*
// functions, which look at the error itself, not at what it wraps) see the same thing:
//
//   - a *storage.StorageError, at the top or wrapped, becomes the *StorageError of the same code, key
//     and resourceVersion, with the same inner message;
//   - an InvalidError and an InternalError become upstream's, with the same field errors and reason;
//   - ErrResourceVersionSetOnCreate becomes upstream's sentinel of that name;
//   - anything else (API status errors, context errors, key errors) is returned as it is.
func ToUpstreamError(err error) error {
	if err == nil {
		return nil
	}
	var se *storage.StorageError
	if errors.As(err, &se) {
		inner := errors.Unwrap(se)
		switch se.Code {
		case storage.ErrCodeKeyNotFound:
			return k8sstorage.NewKeyNotFoundError(se.Key, se.ResourceVersion)
		case storage.ErrCodeKeyExists:
			return k8sstorage.NewKeyExistsError(se.Key, se.ResourceVersion)
		case storage.ErrCodeResourceVersionConflicts:
			return k8sstorage.NewResourceVersionConflictsError(se.Key, se.ResourceVersion)
		case storage.ErrCodeUnreachable:
			return k8sstorage.NewUnreachableError(se.Key, se.ResourceVersion)
		case storage.ErrCodeTimeout:
			return k8sstorage.NewTimeoutError(se.Key, message(inner))
		case storage.ErrCodeInvalidObj:
			return k8sstorage.NewInvalidObjError(se.Key, message(inner))
		case storage.ErrCodeCorruptObj:
			return k8sstorage.NewCorruptObjError(se.Key, inner)
		}
		return err
	}
	var ie storage.InvalidError
	if errors.As(err, &ie) {
		return k8sstorage.NewInvalidError(ie.Errs)
	}
	var in storage.InternalError
	if errors.As(err, &in) {
		if inner := errors.Unwrap(in); inner != nil {
			return k8sstorage.NewInternalError(inner)
		}
		return k8sstorage.NewInternalError(errors.New(in.Reason))
	}
	if errors.Is(err, storage.ErrResourceVersionSetOnCreate) {
		return k8sstorage.ErrResourceVersionSetOnCreate
	}
	return err
}

// ToListwatchError is ToUpstreamError the other way, for the errors upstream's callers return from
// the callbacks they hand the storage (an update or a deletion validation), so that listwatch's
// storage recognises them as its own.
func ToListwatchError(err error) error {
	if err == nil {
		return nil
	}
	if se, ok := err.(*k8sstorage.StorageError); ok {
		inner := errors.Unwrap(se)
		switch se.Code {
		case k8sstorage.ErrCodeKeyNotFound:
			return storage.NewKeyNotFoundError(se.Key, se.ResourceVersion)
		case k8sstorage.ErrCodeKeyExists:
			return storage.NewKeyExistsError(se.Key, se.ResourceVersion)
		case k8sstorage.ErrCodeResourceVersionConflicts:
			return storage.NewResourceVersionConflictsError(se.Key, se.ResourceVersion)
		case k8sstorage.ErrCodeUnreachable:
			return &storage.StorageError{Code: storage.ErrCodeUnreachable, Key: se.Key, ResourceVersion: se.ResourceVersion}
		case k8sstorage.ErrCodeTimeout:
			return storage.NewTimeoutError(se.Key, message(inner))
		case k8sstorage.ErrCodeInvalidObj:
			return storage.NewInvalidObjError(se.Key, message(inner))
		case k8sstorage.ErrCodeCorruptObj:
			return storage.NewCorruptObjError(se.Key, inner)
		}
		return err
	}
	if ie, ok := err.(k8sstorage.InvalidError); ok {
		return storage.NewInvalidError(ie.Errs)
	}
	if in, ok := err.(k8sstorage.InternalError); ok {
		if inner := errors.Unwrap(in); inner != nil {
			return storage.NewInternalError(inner)
		}
		return storage.NewInternalError(errors.New(in.Reason))
	}
	if errors.Is(err, k8sstorage.ErrResourceVersionSetOnCreate) {
		return storage.ErrResourceVersionSetOnCreate
	}
	return err
}

// message is the text of a StorageError's inner error; "<nil>" as the error's own text prints it.
func message(inner error) string {
	if inner == nil {
		return "<nil>"
	}
	return inner.Error()
}
