package storage

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Storage error codes, as storage.ErrCode*.
const (
	ErrCodeKeyNotFound int = iota + 1
	ErrCodeKeyExists
	ErrCodeResourceVersionConflicts
	ErrCodeInvalidObj
	ErrCodeUnreachable
	ErrCodeTimeout
	ErrCodeCorruptObj
)

var errCodeToMessage = map[int]string{
	ErrCodeKeyNotFound:              "key not found",
	ErrCodeKeyExists:                "key exists",
	ErrCodeResourceVersionConflicts: "resource version conflicts",
	ErrCodeInvalidObj:               "invalid object",
	ErrCodeUnreachable:              "server unreachable",
	ErrCodeTimeout:                  "request timeout",
	ErrCodeCorruptObj:               "corrupt object",
}

// Sentinels matched with errors.Is. A *StorageError matches the sentinel of its Code; a key error
// matches ErrEmptyKey or ErrInvalidKey.
var (
	ErrKeyNotFound              = errors.New(errCodeToMessage[ErrCodeKeyNotFound])
	ErrKeyExists                = errors.New(errCodeToMessage[ErrCodeKeyExists])
	ErrResourceVersionConflicts = errors.New(errCodeToMessage[ErrCodeResourceVersionConflicts])
	ErrInvalidObj               = errors.New(errCodeToMessage[ErrCodeInvalidObj])
	ErrUnreachable              = errors.New(errCodeToMessage[ErrCodeUnreachable])
	ErrTimeout                  = errors.New(errCodeToMessage[ErrCodeTimeout])
	ErrCorruptObj               = errors.New(errCodeToMessage[ErrCodeCorruptObj])

	// ErrResourceVersionSetOnCreate is storage.ErrResourceVersionSetOnCreate.
	ErrResourceVersionSetOnCreate = errors.New("resourceVersion should not be set on objects to be created")
	// ErrRecursiveKey is returned by Watch for a recursive watch on a key without a trailing "/".
	ErrRecursiveKey = errors.New(`recursive key needs to end with "/"`)
	// ErrEmptyKey and ErrInvalidKey are the key validation failures of storage.PrepareKey.
	ErrEmptyKey   = errors.New("empty key")
	ErrInvalidKey = errors.New("invalid key")
)

var codeSentinel = map[int]error{
	ErrCodeKeyNotFound:              ErrKeyNotFound,
	ErrCodeKeyExists:                ErrKeyExists,
	ErrCodeResourceVersionConflicts: ErrResourceVersionConflicts,
	ErrCodeInvalidObj:               ErrInvalidObj,
	ErrCodeUnreachable:              ErrUnreachable,
	ErrCodeTimeout:                  ErrTimeout,
	ErrCodeCorruptObj:               ErrCorruptObj,
}

// StorageError is a failure of a storage operation on one key, as storage.StorageError.
type StorageError struct {
	Code            int
	Key             string
	ResourceVersion int64
	err             error
}

// Error has storage.StorageError's wording.
func (e *StorageError) Error() string {
	return fmt.Sprintf("StorageError: %s, Code: %d, Key: %s, ResourceVersion: %d, AdditionalErrorMsg: %v",
		errCodeToMessage[e.Code], e.Code, e.Key, e.ResourceVersion, e.err)
}

// Unwrap returns the inner error.
func (e *StorageError) Unwrap() error { return e.err }

// Is matches the sentinel of the error's code.
func (e *StorageError) Is(target error) bool { return codeSentinel[e.Code] == target }

// NewKeyNotFoundError mirrors storage.NewKeyNotFoundError.
func NewKeyNotFoundError(key string, rv int64) *StorageError {
	return &StorageError{Code: ErrCodeKeyNotFound, Key: key, ResourceVersion: rv}
}

// NewKeyExistsError mirrors storage.NewKeyExistsError.
func NewKeyExistsError(key string, rv int64) *StorageError {
	return &StorageError{Code: ErrCodeKeyExists, Key: key, ResourceVersion: rv}
}

// NewResourceVersionConflictsError mirrors storage.NewResourceVersionConflictsError.
func NewResourceVersionConflictsError(key string, rv int64) *StorageError {
	return &StorageError{Code: ErrCodeResourceVersionConflicts, Key: key, ResourceVersion: rv}
}

// NewTimeoutError mirrors storage.NewTimeoutError.
func NewTimeoutError(key, msg string) *StorageError {
	return &StorageError{Code: ErrCodeTimeout, Key: key, err: errors.New(msg)}
}

// NewInvalidObjError mirrors storage.NewInvalidObjError.
func NewInvalidObjError(key, msg string) *StorageError {
	return &StorageError{Code: ErrCodeInvalidObj, Key: key, err: errors.New(msg)}
}

// NewCorruptObjError mirrors storage.NewCorruptObjError.
func NewCorruptObjError(key string, err error) *StorageError {
	return &StorageError{Code: ErrCodeCorruptObj, Key: key, err: err}
}

func isErrCode(err error, code int) bool {
	var se *StorageError
	return errors.As(err, &se) && se.Code == code
}

// IsNotFound reports a KeyNotFound storage error.
func IsNotFound(err error) bool { return isErrCode(err, ErrCodeKeyNotFound) }

// IsExist reports a KeyExists storage error.
func IsExist(err error) bool { return isErrCode(err, ErrCodeKeyExists) }

// IsConflict reports a ResourceVersionConflicts storage error.
func IsConflict(err error) bool { return isErrCode(err, ErrCodeResourceVersionConflicts) }

// IsInvalidObj reports an InvalidObj storage error (a failed precondition).
func IsInvalidObj(err error) bool { return isErrCode(err, ErrCodeInvalidObj) }

// IsUnreachable reports an Unreachable storage error.
func IsUnreachable(err error) bool { return isErrCode(err, ErrCodeUnreachable) }

// IsRequestTimeout reports a Timeout storage error.
func IsRequestTimeout(err error) bool { return isErrCode(err, ErrCodeTimeout) }

// IsCorruptObject reports a CorruptObj storage error.
func IsCorruptObject(err error) bool { return isErrCode(err, ErrCodeCorruptObj) }

// InvalidError is an invalid argument detected by the storage, as storage.InvalidError.
type InvalidError struct {
	Errs field.ErrorList
}

func (e InvalidError) Error() string { return e.Errs.ToAggregate().Error() }

// NewInvalidError mirrors storage.NewInvalidError.
func NewInvalidError(errs field.ErrorList) InvalidError { return InvalidError{errs} }

// IsInvalidError reports an InvalidError.
func IsInvalidError(err error) bool {
	var ie InvalidError
	return errors.As(err, &ie)
}

// InternalError is a failure inside the storage layer rather than etcd, as storage.InternalError.
type InternalError struct {
	Reason string
	err    error
}

func (e InternalError) Error() string { return e.Reason }

// Unwrap returns the inner error.
func (e InternalError) Unwrap() error { return e.err }

// NewInternalError mirrors storage.NewInternalError.
func NewInternalError(err error) InternalError { return InternalError{Reason: err.Error(), err: err} }

// IsInternalError reports an InternalError.
func IsInternalError(err error) bool {
	var ie InternalError
	return errors.As(err, &ie)
}

// NewTooLargeResourceVersionError is the 504 Timeout for a resourceVersion newer than the storage has.
//
// Mirrors storage/errors.go NewTooLargeResourceVersionError.
func NewTooLargeResourceVersionError(minimumResourceVersion, currentRevision uint64, retrySeconds int) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", minimumResourceVersion, currentRevision), retrySeconds)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type:    metav1.CauseTypeResourceVersionTooLarge,
		Message: "Too large resource version",
	}}
	return err
}

// IsTooLargeResourceVersion reports the error of NewTooLargeResourceVersionError.
func IsTooLargeResourceVersion(err error) bool {
	return apierrors.IsTimeout(err) && apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
}

// The InterpretXxxError functions turn storage errors into the API errors a REST handler returns, as
// k8s.io/apiserver/pkg/storage/errors does.

// InterpretGetError mirrors storage/errors.InterpretGetError.
func InterpretGetError(err error, gr schema.GroupResource, name string) error {
	switch {
	case IsNotFound(err):
		return apierrors.NewNotFound(gr, name)
	case IsUnreachable(err):
		return apierrors.NewServerTimeout(gr, "get", 2)
	case IsInternalError(err), IsCorruptObject(err):
		return apierrors.NewInternalError(err)
	}
	return err
}

// InterpretListError mirrors storage/errors.InterpretListError.
func InterpretListError(err error, gr schema.GroupResource) error {
	switch {
	case IsNotFound(err):
		return apierrors.NewNotFound(gr, "")
	case IsUnreachable(err), IsRequestTimeout(err):
		return apierrors.NewServerTimeout(gr, "list", 2)
	case IsInternalError(err), IsCorruptObject(err):
		return apierrors.NewInternalError(err)
	}
	return err
}

// InterpretCreateError mirrors storage/errors.InterpretCreateError.
func InterpretCreateError(err error, gr schema.GroupResource, name string) error {
	switch {
	case IsExist(err):
		return apierrors.NewAlreadyExists(gr, name)
	case IsUnreachable(err):
		return apierrors.NewServerTimeout(gr, "create", 2)
	case IsInternalError(err), IsCorruptObject(err):
		return apierrors.NewInternalError(err)
	}
	return err
}

// InterpretUpdateError mirrors storage/errors.InterpretUpdateError.
func InterpretUpdateError(err error, gr schema.GroupResource, name string) error {
	switch {
	case IsConflict(err), IsExist(err), IsInvalidObj(err):
		return apierrors.NewConflict(gr, name, err)
	case IsUnreachable(err):
		return apierrors.NewServerTimeout(gr, "update", 2)
	case IsNotFound(err):
		return apierrors.NewNotFound(gr, name)
	case IsInternalError(err), IsCorruptObject(err):
		return apierrors.NewInternalError(err)
	}
	return err
}

// InterpretDeleteError mirrors storage/errors.InterpretDeleteError.
func InterpretDeleteError(err error, gr schema.GroupResource, name string) error {
	switch {
	case IsNotFound(err):
		return apierrors.NewNotFound(gr, name)
	case IsUnreachable(err):
		return apierrors.NewServerTimeout(gr, "delete", 2)
	case IsConflict(err), IsExist(err), IsInvalidObj(err):
		return apierrors.NewConflict(gr, name, err)
	case IsInternalError(err), IsCorruptObject(err):
		return apierrors.NewInternalError(err)
	}
	return err
}

// InterpretWatchError mirrors storage/errors.InterpretWatchError: errors Watch returns directly.
func InterpretWatchError(err error, gr schema.GroupResource, name string) error {
	var ie InvalidError
	switch {
	case errors.As(err, &ie):
		return apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: gr.Resource}, name, ie.Errs)
	case IsInternalError(err), IsCorruptObject(err):
		return apierrors.NewInternalError(err)
	}
	return err
}
