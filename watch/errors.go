package watch

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/listwatch/listwatch/storage"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The messages of the etcd3 store's compaction errors.
const (
	msgWatchExpired    = "The resourceVersion for the provided watch is too old."
	msgListExpired     = "The resourceVersion for the provided list is too old."
	msgContinueExpired = "The provided continue parameter is too old " +
		"to display a consistent list result. You can start a new list without " +
		"the continue parameter."
	msgInconsistentContinue = "The provided continue parameter is too old " +
		"to display a consistent list result. You can start a new list without " +
		"the continue parameter, or use the continue token in this response to " +
		"retrieve the remainder of the results. Continuing with the provided " +
		"token results in an inconsistent list - objects that were created, " +
		"modified, or deleted between the time the first chunk was returned " +
		"and now may show up in the list."
)

// interpretWatchError maps a watch failure to the API error its ERROR event carries.
//
// Mirrors etcd3/errors.go interpretWatchError.
func interpretWatchError(err error) error {
	if errors.Is(err, rpctypes.ErrCompacted) {
		return apierrors.NewResourceExpired(msgWatchExpired)
	}
	var deleted *corruptObjectDeletedError
	if errors.As(err, &deleted) {
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusInternalServerError,
			Reason:  metav1.StatusReasonStoreReadError,
			Message: deleted.Error(),
		}}
	}
	return err
}

// interpretListError maps a list failure; a compaction while paging hands out a fresh continue token.
//
// Mirrors etcd3/errors.go interpretListError.
func interpretListError(err error, paging bool, continueKey, keyPrefix string) error {
	if errors.Is(err, rpctypes.ErrCompacted) {
		if paging {
			return handleCompactedErrorForPaging(continueKey, keyPrefix)
		}
		return apierrors.NewResourceExpired(msgListExpired)
	}
	return err
}

// handleCompactedErrorForPaging mirrors etcd3/errors.go handleCompactedErrorForPaging.
func handleCompactedErrorForPaging(continueKey, keyPrefix string) error {
	// RV -1 asks the next page to be read at the latest revision; 0 would be an invalid token.
	token, err := storage.EncodeContinue(continueKey, keyPrefix, -1)
	if err != nil {
		return apierrors.NewResourceExpired(msgContinueExpired)
	}
	se := apierrors.NewResourceExpired(msgInconsistentContinue)
	se.ErrStatus.ListMeta.Continue = token
	return se
}

// corruptObjectError marks a value that cannot be transformed or decoded.
type corruptObjectError struct {
	err      error
	errType  int
	revision int64
}

const (
	untransformable int = iota + 1
	undecodable
)

func (e *corruptObjectError) Unwrap() error { return e.err }

func (e *corruptObjectError) Error() string {
	msg := "data from the storage is not transformable"
	if e.errType == undecodable {
		msg = "object not decodable"
	}
	return fmt.Sprintf("%s revision=%d: %v", msg, e.revision, e.err)
}

// corruptObjectDeletedError is a DELETED event whose previous value is corrupt.
type corruptObjectDeletedError struct{ err error }

func (e *corruptObjectDeletedError) Error() string {
	return fmt.Sprintf("saw a DELETED event, but object data is corrupt - %v", e.err)
}

func (e *corruptObjectDeletedError) Unwrap() error { return e.err }
