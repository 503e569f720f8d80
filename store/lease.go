package store

import (
	"context"
	"math"
	"sort"
	"time"

	"github.com/listwatch/listwatch/etcdrules"
)

type lease struct {
	id     int64
	ttl    int64 // granted TTL in seconds, after raising to the minimum
	expiry time.Time
	keys   map[string]struct{}
	// revoked is closed once the lease and its keys are gone (lessor.go Lease.revokec)
	revoked chan struct{}
}

// remaining is lease.go Remaining: time until expiry on the store's clock.
func (l *lease) remaining(now time.Time) time.Duration { return l.expiry.Sub(now) }

type leases struct {
	byID map[int64]*lease
	// ids follows etcd's idutil.Generator: the member ID in the top 16 bits, then milliseconds and a counter
	idPrefix uint64
	idSuffix uint64
}

func newLeases(memberID uint64, now time.Time) leases {
	const tsLen, cntLen = 40, 8
	millis := uint64(now.UnixMilli())
	return leases{
		byID:     make(map[int64]*lease),
		idPrefix: (memberID & 0xffff) << (tsLen + cntLen),
		idSuffix: (millis & (1<<tsLen - 1)) << cntLen,
	}
}

func (ls *leases) nextID() int64 {
	for {
		ls.idSuffix++
		id := int64((ls.idPrefix | ls.idSuffix&(1<<48-1)) & math.MaxInt64)
		if id != 0 && ls.byID[id] == nil {
			return id
		}
	}
}

func (ls *leases) get(id int64) *lease { return ls.byID[id] }

func (ls *leases) attach(id int64, key string) {
	if l := ls.byID[id]; l != nil {
		l.keys[key] = struct{}{}
	}
}

func (ls *leases) detach(id int64, key string) {
	if l := ls.byID[id]; l != nil {
		delete(l.keys, key)
	}
}

// LeaseGrant creates a lease; ID 0 lets the store choose one. TTLs under the minimum are raised to it.
// Granting changes no revision. It follows etcdserver LeaseGrant and lease/lessor.go Grant.
func (s *Store) LeaseGrant(id, ttl int64) (*LeaseGrantResponse, error) {
	if err := etcdrules.CheckLeaseGrant(ttl); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if id == 0 {
		id = s.leases.nextID()
	}
	if s.leases.get(id) != nil {
		return nil, ErrLeaseExists
	}
	if ttl < s.opts.MinLeaseTTL {
		ttl = s.opts.MinLeaseTTL
	}
	l := &lease{id: id, ttl: ttl, keys: make(map[string]struct{}), revoked: make(chan struct{})}
	l.expiry = s.opts.Clock.Now().Add(time.Duration(ttl) * time.Second)
	s.leases.byID[id] = l
	s.stats.leaseGranted.Add(1)
	return &LeaseGrantResponse{Header: Header{Revision: s.currentRev}, ID: id, TTL: ttl}, nil
}

// LeaseRevoke deletes a lease and every key attached to it, in one revision, keys in sorted order.
// A lease with no keys changes no revision.
func (s *Store) LeaseRevoke(id int64) (*LeaseRevokeResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	l := s.leases.get(id)
	if l == nil {
		return nil, ErrLeaseNotFound
	}
	s.revokeLocked(l)
	return &LeaseRevokeResponse{Header: Header{Revision: s.currentRev}}, nil
}

// revokeLocked is lessor.go Revoke: one write txn deleting the lease's keys in sorted order.
func (s *Store) revokeLocked(l *lease) {
	keys := make([]string, 0, len(l.keys))
	for k := range l.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tw := s.beginWrite()
	for _, k := range keys {
		if ki := s.idx.get(k); ki != nil && ki.live() != nil {
			tw.delete(ki)
		}
	}
	delete(s.leases.byID, l.id)
	s.stats.leaseRevoked.Add(1)
	tw.end()
	close(l.revoked)
}

// LeaseKeepAlive renews a lease to its full TTL and returns that TTL. An expired lease is never
// renewed: the call waits until the lease's revocation (the store's periodic work, or LeaseRevoke)
// has deleted its keys and then answers ErrLeaseNotFound, so that a caller told its lease is gone
// never still sees its keys. It returns ctx.Err() if ctx ends first and ErrClosed if the store
// closes. It follows lease/lessor.go Renew.
func (s *Store) LeaseKeepAlive(ctx context.Context, id int64) (*LeaseKeepAliveResponse, error) {
	now := s.opts.Clock.Now()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	l := s.leases.get(id)
	if l == nil {
		s.mu.Unlock()
		return nil, ErrLeaseNotFound
	}
	if l.remaining(now) > 0 {
		l.expiry = now.Add(time.Duration(l.ttl) * time.Second)
		s.stats.leaseRenews.Add(1)
		resp := &LeaseKeepAliveResponse{Header: Header{Revision: s.currentRev}, ID: id, TTL: l.ttl}
		s.mu.Unlock()
		return resp, nil
	}
	s.mu.Unlock()
	select {
	case <-l.revoked:
		return nil, ErrLeaseNotFound
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.stop:
		return nil, ErrClosed
	}
}

// LeaseTimeToLive reports a lease's remaining TTL in whole seconds (truncated, as etcd does), its
// granted TTL and, if keys is set, its keys in sorted order. Unlike LeaseKeepAlive it does not wait
// for the revocation of an expired lease: until then the lease is reported, with a remaining TTL of
// zero or less (etcdserver/v3_server.go leaseTimeToLive).
func (s *Store) LeaseTimeToLive(id int64, keys bool) (*LeaseTimeToLiveResponse, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	l := s.leases.get(id)
	if l == nil {
		return nil, ErrLeaseNotFound
	}
	resp := &LeaseTimeToLiveResponse{
		Header:     Header{Revision: s.currentRev},
		ID:         id,
		TTL:        int64(l.remaining(s.opts.Clock.Now()).Seconds()),
		GrantedTTL: l.ttl,
	}
	if keys {
		ks := make([]string, 0, len(l.keys))
		for k := range l.keys {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		resp.Keys = make([][]byte, len(ks))
		for i, k := range ks {
			resp.Keys[i] = []byte(k)
		}
	}
	return resp, nil
}

// LeaseLeases lists every lease, soonest expiry first (lessor.go Leases).
func (s *Store) LeaseLeases() (*LeaseLeasesResponse, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	ls := s.sortedByExpiryLocked()
	resp := &LeaseLeasesResponse{Header: Header{Revision: s.currentRev}, Leases: make([]int64, len(ls))}
	for i, l := range ls {
		resp.Leases[i] = l.id
	}
	return resp, nil
}

func (s *Store) sortedByExpiryLocked() []*lease {
	ls := make([]*lease, 0, len(s.leases.byID))
	for _, l := range s.leases.byID {
		ls = append(ls, l)
	}
	sort.Slice(ls, func(i, j int) bool {
		if !ls[i].expiry.Equal(ls[j].expiry) {
			return ls[i].expiry.Before(ls[j].expiry)
		}
		return ls[i].id < ls[j].id
	})
	return ls
}

// revokeExpired revokes up to leaseRevokePerPass expired leases, soonest expiry first, each in its
// own revision and its own step (lessor.go revokeExpiredLeases; etcd revokes each
// expired lease with its own request), and schedules the next lease check.
func (s *Store) revokeExpired(now time.Time) {
	s.mu.RLock()
	var due []*lease
	for _, l := range s.sortedByExpiryLocked() {
		if len(due) == leaseRevokePerPass || l.remaining(now) > 0 {
			break
		}
		due = append(due, l)
	}
	s.mu.RUnlock()
	for _, l := range due {
		s.step(func() {
			// LeaseRevoke may have been first
			if s.leases.get(l.id) == l {
				s.stats.leaseExpired.Add(1)
				s.revokeLocked(l)
			}
		})
	}
	s.mu.Lock()
	s.nextLease = now.Add(s.opts.LeaseCheckInterval)
	s.mu.Unlock()
}
