package etcdgrpc

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/listwatch/listwatch/store"
)

// grpcErrors pairs each store sentinel with the gRPC error etcd sends for the same condition.
var grpcErrors = []struct {
	store error
	grpc  error
}{
	{store.ErrEmptyKey, rpctypes.ErrGRPCEmptyKey},
	{store.ErrKeyNotFound, rpctypes.ErrGRPCKeyNotFound},
	{store.ErrValueProvided, rpctypes.ErrGRPCValueProvided},
	{store.ErrLeaseProvided, rpctypes.ErrGRPCLeaseProvided},
	{store.ErrTooManyOps, rpctypes.ErrGRPCTooManyOps},
	{store.ErrDuplicateKey, rpctypes.ErrGRPCDuplicateKey},
	{store.ErrInvalidSortOption, rpctypes.ErrGRPCInvalidSortOption},
	{store.ErrCompacted, rpctypes.ErrGRPCCompacted},
	{store.ErrFutureRev, rpctypes.ErrGRPCFutureRev},
	{store.ErrRequestTooLarge, rpctypes.ErrGRPCRequestTooLarge},
	{store.ErrLeaseNotFound, rpctypes.ErrGRPCLeaseNotFound},
	{store.ErrLeaseExists, rpctypes.ErrGRPCLeaseExist},
	{store.ErrLeaseTTLTooLarge, rpctypes.ErrGRPCLeaseTTLTooLarge},
	// A closed store is a stopped server to the client: Unavailable, so clientv3 retries elsewhere.
	{store.ErrClosed, rpctypes.ErrGRPCStopped},
	{store.ErrStreamClosed, rpctypes.ErrGRPCStopped},
	{store.ErrInvalidRequestOp, status.Error(codes.InvalidArgument, store.ErrInvalidRequestOp.Error())},
}

// toGRPCError follows v3rpc/util.go togRPCError: context errors pass through for gRPC to code them,
// known errors become etcd's gRPC errors, anything else is Unknown with its message.
func toGRPCError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	for _, e := range grpcErrors {
		if errors.Is(err, e.store) {
			return e.grpc
		}
	}
	return status.Error(codes.Unknown, err.Error())
}
