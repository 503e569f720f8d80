package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// cleanupTimeout bounds the cleanup at the end of a run: the revokes and the delete of the prefix
// (etcd), the deletes and the wait for the namespace to go (--kube).
const cleanupTimeout = 30 * time.Second

// cleanupRevokers is how many leases the cleanup revokes at once.
const cleanupRevokers = 8

// leaseTracker remembers every lease granted through a client (the probes', the scenarios', the
// workload's), so that the cleanup revokes those and no other client's.
type leaseTracker struct {
	mu  sync.Mutex
	ids []int64
}

// intercept is a grpc.UnaryClientInterceptor that notes the ID of each granted lease.
func (lt *leaseTracker) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if g, ok := reply.(*pb.LeaseGrantResponse); ok && err == nil && g.ID != 0 {
		lt.mu.Lock()
		lt.ids = append(lt.ids, g.ID)
		lt.mu.Unlock()
	}
	return err
}

func (lt *leaseTracker) granted() []int64 {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return append([]int64(nil), lt.ids...)
}

// cleanupEtcd revokes the leases the run granted and deletes its prefix, and says so on w; a lease
// already gone (expired, or revoked by the run) is not an error. It returns what it could not undo.
func cleanupEtcd(ctx context.Context, cli *clientv3.Client, prefix string, leases []int64, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	ids := make(chan int64)
	var (
		mu      sync.Mutex
		revoked int
		errs    []error
		wg      sync.WaitGroup
	)
	for range min(cleanupRevokers, len(leases)) {
		wg.Go(func() {
			for id := range ids {
				_, err := cli.Revoke(ctx, clientv3.LeaseID(id))
				mu.Lock()
				switch {
				case err == nil:
					revoked++
				case !errors.Is(err, rpctypes.ErrLeaseNotFound):
					errs = append(errs, fmt.Errorf("revoke lease %x: %w", id, err))
				}
				mu.Unlock()
			}
		})
	}
	for _, id := range leases {
		ids <- id
	}
	close(ids)
	wg.Wait()
	resp, err := cli.Delete(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		errs = append(errs, fmt.Errorf("delete %s: %w", prefix, err))
	}
	deleted := int64(0)
	if resp != nil {
		deleted = resp.Deleted
	}
	fmt.Fprintf(w, "cleanup: revoked %d of the run's %d leases (the others had expired or were revoked), deleted %d keys under %s\n",
		revoked, len(leases), deleted, prefix)
	if len(errs) > 0 {
		return fmt.Errorf("cleanup left something behind (run with --keep to keep it on purpose): %w", errors.Join(errs...))
	}
	return nil
}
