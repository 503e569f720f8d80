package watch

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"
)

// leaseManager hands out etcd leases for objects with a TTL, reusing the previous lease while its
// expiry is close enough to the requested one, since lease grants are expensive for etcd.
//
// Mirrors etcd3/lease_manager.go leaseManager.
type leaseManager struct {
	client *clientv3.Client
	clock  clock.PassiveClock

	mu                      sync.Mutex
	prevLeaseID             clientv3.LeaseID
	prevLeaseExpirationTime time.Time
	reuseDurationSeconds    int64
	reuseDurationPercent    float64
	maxAttachedObjectCount  int64
	attachedObjectCount     int64
}

func newLeaseManager(client *clientv3.Client, clk clock.PassiveClock, reuseDurationSeconds int64, reuseDurationPercent float64, maxObjectCount int64) *leaseManager {
	return &leaseManager{
		client:                 client,
		clock:                  clk,
		reuseDurationSeconds:   reuseDurationSeconds,
		reuseDurationPercent:   reuseDurationPercent,
		maxAttachedObjectCount: maxObjectCount,
	}
}

// GetLease returns a lease that expires between ttl and ttl+reuse seconds from now.
//
// Mirrors etcd3/lease_manager.go leaseManager.GetLease.
func (l *leaseManager) GetLease(ctx context.Context, ttl int64) (clientv3.LeaseID, error) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	reuse := l.reuseDurationSecondsLocked(ttl)
	valid := now.Add(time.Duration(ttl) * time.Second).Before(l.prevLeaseExpirationTime)
	sufficient := now.Add(time.Duration(ttl+reuse) * time.Second).After(l.prevLeaseExpirationTime)
	// Every request counts against the lease, whether its write succeeds or not.
	l.attachedObjectCount++
	if valid && sufficient && l.attachedObjectCount <= l.maxAttachedObjectCount {
		return l.prevLeaseID, nil
	}
	ttl += reuse
	lcr, err := l.client.Grant(ctx, ttl)
	if err != nil {
		return 0, err
	}
	l.prevLeaseID = lcr.ID
	l.prevLeaseExpirationTime = now.Add(time.Duration(ttl) * time.Second)
	l.attachedObjectCount = 1
	return lcr.ID, nil
}

func (l *leaseManager) reuseDurationSecondsLocked(ttl int64) int64 {
	return min(int64(l.reuseDurationPercent*float64(ttl)), l.reuseDurationSeconds)
}
