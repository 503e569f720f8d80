package workload

import (
	"context"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Feature is a part of etcd's API a workload may use.
type Feature uint64

// The features ProbeCapabilities tries and a workload can do without.
const (
	FeatDeleteRPC Feature = 1 << iota
	FeatDeleteRange
	FeatTxn
	FeatMultiOpTxn
	FeatNestedTxn
	FeatCompareVersion
	FeatCompareCreate
	FeatCompareMod
	FeatCompareValue
	FeatCompareLease
	FeatSort
	FeatRevisionFilters
	FeatSerializable
	FeatCountOnly
	FeatKeysOnly
	FeatLimitOnKey
	FeatPastRevision
	FeatPutPrevKV
	FeatIgnoreValue
	FeatIgnoreLease
	FeatLeases
	FeatCompaction
	FeatWatchFromPast
	FeatWatchFilters
	FeatFragment
	FeatProgressNotify
	FeatRequestProgress
	FeatClientWatchID
	FeatKeyVersions
	FeatConditionalDelete
	numFeatures = iota
)

var featureNames = [numFeatures]string{
	"delete", "delete of a range", "txn (any compares and branches)", "txn of several ops", "nested txn",
	"compare on version", "compare on create revision", "compare on mod revision", "compare on value", "compare on lease",
	"range sorted", "range with revision filters", "serializable range", "count-only range of a key", "keys-only range",
	"limit on a one-key range", "range at a past revision",
	"put with prev_kv", "put with ignore_value", "put with ignore_lease",
	"leases (grant, keepalive, revoke)", "compaction",
	"watch from a past revision", "watch filters", "watch fragment", "watch progress_notify", "RequestProgress", "client-chosen watch IDs",
	"key versions", "the apiserver's conditional delete",
}

// String names the feature as the capability table shows it.
func (f Feature) String() string {
	for i := range numFeatures {
		if f == 1<<i {
			return featureNames[i]
		}
	}
	return fmt.Sprintf("feature(%#x)", uint64(f))
}

// Features is a set of features.
type Features uint64

// Has reports whether f is in the set.
func (s Features) Has(f Feature) bool { return uint64(s)&uint64(f) != 0 }

// With is the set with f added.
func (s Features) With(f Feature) Features { return s | Features(f) }

// List lists the set in the order of the constants.
func (s Features) List() []Feature {
	var out []Feature
	for i := range numFeatures {
		if f := Feature(1) << i; s.Has(f) {
			out = append(out, f)
		}
	}
	return out
}

// String lists the names of the set.
func (s Features) String() string {
	var names []string
	for _, f := range s.List() {
		names = append(names, f.String())
	}
	return strings.Join(names, ", ")
}

// Endpoint is what the status of one endpoint said.
type Endpoint struct {
	Endpoint string
	// Version is the etcd version the endpoint reports.
	Version string
	// Revision is the header revision of its answer: the store's revision (kine gives 0).
	Revision int64
	// MemberID is the member that answered (0 from a store that is not an etcd member).
	MemberID uint64
}

// Status asks every endpoint of c for its status, in order, and returns what they said. It fails,
// naming the endpoint, if one does not answer.
func Status(ctx context.Context, c *clientv3.Client) ([]Endpoint, error) {
	var eps []Endpoint
	for _, ep := range slices.Sorted(slices.Values(c.Endpoints())) {
		resp, err := c.Status(ctx, ep)
		if err != nil {
			return nil, fmt.Errorf("status of endpoint %s: %w", ep, err)
		}
		eps = append(eps, Endpoint{Endpoint: ep, Version: resp.Version, Revision: resp.Header.GetRevision(),
			MemberID: resp.Header.GetMemberId()})
	}
	return eps, nil
}
