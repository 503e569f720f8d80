package interop

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"sort"

	"github.com/google/go-cmp/cmp"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
)

// What the comparison ignores, and nothing else:
//
//   - ResponseHeader.cluster_id, member_id and raft_term: identities of the member, not of the data;
//     normProto clears them wherever a header appears, nested txn responses included.
//   - Lease IDs: each server picks its own. Every lease ID a side granted is rewritten to the
//     workload's handle for it (leaseHandleBase+handle) before comparing, in every field that holds a
//     lease ID (KeyValue.lease, Lease*Response.ID, LeaseStatus.ID). IDs no side granted (bogus ones
//     the workload makes up, and explicit IDs) are compared as they are.
//   - LeaseTimeToLiveResponse.TTL, the remaining seconds, which depends on when each server
//     answered: equal within maxTTLSkew seconds.
//   - The order of LeaseTimeToLiveResponse.keys and LeaseLeasesResponse.leases: etcd builds the first
//     from a map and sorts the second by expiry time, which depends on the clock; both are sorted
//     before comparing.
//
// Responses are compared as protobuf messages with protocmp, so an unset message and an empty one
// differ, as they do on the wire.
var cmpOptions = cmp.Options{
	protocmp.Transform(),
	protocmp.FilterField(&pb.LeaseTimeToLiveResponse{}, "TTL", cmp.Comparer(func(a, b int64) bool {
		d := a - b
		return -maxTTLSkew <= d && d <= maxTTLSkew
	})),
}

// maxTTLSkew is how far two remaining-TTL answers may differ: both servers count down the same
// granted TTL from grants a few milliseconds apart, rounding up to whole seconds.
const maxTTLSkew = 2

// normProto returns a copy of m with every lease ID mapped by s.normLease and every header's
// member identity cleared.
func (s *side) normProto(m proto.Message) proto.Message {
	if m == nil {
		return nil
	}
	c := proto.Clone(m)
	s.normLeases(c.ProtoReflect())
	return c
}

// leaseFields are the int64 fields that hold lease IDs in the messages the workload compares.
var leaseFields = map[protoreflect.FullName]bool{
	"mvccpb.KeyValue.lease":                   true,
	"etcdserverpb.LeaseGrantResponse.ID":      true,
	"etcdserverpb.LeaseKeepAliveResponse.ID":  true,
	"etcdserverpb.LeaseTimeToLiveResponse.ID": true,
	"etcdserverpb.LeaseStatus.ID":             true,
}

func (s *side) normLeases(m protoreflect.Message) {
	if h, ok := m.Interface().(*pb.ResponseHeader); ok {
		h.ClusterId, h.MemberId, h.RaftTerm = 0, 0, 0
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				s.normLeases(l.Get(i).Message())
			}
		case fd.Kind() == protoreflect.MessageKind && !fd.IsMap():
			s.normLeases(v.Message())
		case fd.Kind() == protoreflect.Int64Kind && !fd.IsList() && leaseFields[fd.FullName()]:
			m.Set(fd, protoreflect.ValueOfInt64(s.normLease(v.Int())))
		}
		return true
	})
}

func (s *side) normEvents(evs []*clientv3.Event) []*mvccpb.Event {
	out := make([]*mvccpb.Event, len(evs))
	for i, ev := range evs {
		out[i] = s.normProto(ev).(*mvccpb.Event)
	}
	return out
}

func (s *side) normTimeToLive(r *clientv3.LeaseTimeToLiveResponse) *pb.LeaseTimeToLiveResponse {
	keys := append([][]byte(nil), r.Keys...)
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i], keys[j]) < 0 })
	return s.normProto(&pb.LeaseTimeToLiveResponse{
		Header: r.ResponseHeader, ID: int64(r.ID), TTL: r.TTL, GrantedTTL: r.GrantedTTL, Keys: keys,
	}).(*pb.LeaseTimeToLiveResponse)
}

// normLeaseList maps and sorts a lease list, leaving out the leases the workload granted with a TTL
// short enough to expire during the run: whether they are still listed depends on timing.
func (s *side) normLeaseList(r *clientv3.LeaseLeasesResponse, ephemeral map[int]bool) *pb.LeaseLeasesResponse {
	out := &pb.LeaseLeasesResponse{Header: r.ResponseHeader}
	for _, l := range r.Leases {
		if h, ok := s.handles[int64(l.ID)]; ok && ephemeral[h] {
			continue
		}
		out.Leases = append(out.Leases, &pb.LeaseStatus{ID: s.normLease(int64(l.ID))})
	}
	sort.Slice(out.Leases, func(i, j int) bool { return out.Leases[i].ID < out.Leases[j].ID })
	return s.normProto(out).(*pb.LeaseLeasesResponse) // IDs are mapped already; this clears the header
}

// equalOutcome compares two outcomes: proto.Equal where both answers are messages (exact, after
// normalization), except for TimeToLive answers, which go through cmp.Equal with cmpOptions for
// their TTL tolerance.
func equalOutcome(a, b outcome) bool {
	if a.Code != b.Code || a.Err != b.Err {
		return false
	}
	ma, okA := a.Resp.(proto.Message)
	mb, okB := b.Resp.(proto.Message)
	if !okA || !okB {
		return cmp.Equal(a, b, cmpOptions)
	}
	if _, ttl := ma.(*pb.LeaseTimeToLiveResponse); ttl {
		return cmp.Equal(ma, mb, cmpOptions)
	}
	return proto.Equal(ma, mb)
}

// diffOutcome is the go-cmp diff of two outcomes, long values shortened.
func diffOutcome(a, b outcome) string {
	if m, ok := a.Resp.(proto.Message); ok {
		a.Resp = shorten(m)
	}
	if m, ok := b.Resp.(proto.Message); ok {
		b.Resp = shorten(m)
	}
	return cmp.Diff(a, b, cmpOptions)
}

// shortValue is the longest bytes field a diff shows in full.
const shortValue = 64

// shorten returns a copy of m, for display only, in which every bytes field longer than shortValue
// is replaced by its length and checksum: go-cmp diffs megabyte values byte by byte, which is slow
// and unreadable.
func shorten(m proto.Message) proto.Message {
	if m == nil {
		return nil
	}
	c := proto.Clone(m)
	var walk func(protoreflect.Message)
	walk = func(m protoreflect.Message) {
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
				for i := 0; i < v.List().Len(); i++ {
					walk(v.List().Get(i).Message())
				}
			case fd.Kind() == protoreflect.MessageKind && !fd.IsMap():
				walk(v.Message())
			case fd.Kind() == protoreflect.BytesKind && !fd.IsList() && len(v.Bytes()) > shortValue:
				b := v.Bytes()
				sum := fmt.Sprintf("%q... (%d bytes, crc32 %08x)", b[:16], len(b), crc32.ChecksumIEEE(b))
				m.Set(fd, protoreflect.ValueOfBytes([]byte(sum)))
			}
			return true
		})
	}
	walk(c.ProtoReflect())
	return c
}

func shortenEvents(evs []*mvccpb.Event) []*mvccpb.Event {
	out := make([]*mvccpb.Event, len(evs))
	for i, ev := range evs {
		out[i] = shorten(ev).(*mvccpb.Event)
	}
	return out
}

// diffEvents compares two event lists; on a difference it returns a go-cmp diff of the lengths and
// of a few events around the first differing position (a full diff of thousands of events is slow
// and unreadable).
func diffEvents(a, b []*mvccpb.Event) string {
	i := 0
	for i < len(a) && i < len(b) && proto.Equal(a[i], b[i]) {
		i++
	}
	if i == len(a) && i == len(b) {
		return ""
	}
	lo, hi := max(0, i-2), i+3
	window := func(evs []*mvccpb.Event) []*mvccpb.Event {
		return shortenEvents(evs[min(lo, len(evs)):min(hi, len(evs))])
	}
	return fmt.Sprintf("%d vs %d events; first difference at event %d; events [%d,%d):\n%s",
		len(a), len(b), i, lo, hi, cmp.Diff(window(a), window(b), cmpOptions))
}
