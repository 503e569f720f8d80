package workload

import (
	"context"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/version"
)

// Quirks are behaviours of etcd versions that break a guarantee history.Check holds etcd to, and
// that etcd has fixed since. A workload told of one does not provoke it: the history would fail,
// rightly, but for a bug already known and fixed upstream.
type Quirks struct {
	// ProgressAhead: a requested progress notification may be sent ahead of events still to be
	// sent (etcd issues 15220 and 17507, fixed in 3.4.31 and 3.5.13). The workload then sends no
	// RequestProgress, as the apiserver sends none to such an etcd.
	ProgressAhead bool
	// CompactedTombstone: a compaction at a revision that deletes keys drops those deletes, so a
	// watch that reads that revision from history never gets them (etcd issues 18089 and 19179,
	// fixed in 3.4.36, 3.5.18 and 3.6.0). The workload then compacts only at revisions made of
	// puts alone.
	CompactedTombstone bool
}

// Names lists the quirks set, by field name.
func (q Quirks) Names() []string {
	var names []string
	if q.ProgressAhead {
		names = append(names, "ProgressAhead")
	}
	if q.CompactedTombstone {
		names = append(names, "CompactedTombstone")
	}
	return names
}

func (q Quirks) union(o Quirks) Quirks {
	return Quirks{ProgressAhead: q.ProgressAhead || o.ProgressAhead,
		CompactedTombstone: q.CompactedTombstone || o.CompactedTombstone}
}

var (
	v3_4_31 = version.MustParseSemantic("3.4.31")
	v3_4_36 = version.MustParseSemantic("3.4.36")
	v3_5_0  = version.MustParseSemantic("3.5.0")
	v3_5_13 = version.MustParseSemantic("3.5.13")
	v3_5_18 = version.MustParseSemantic("3.5.18")
)

// QuirksOf returns the quirks of etcd version v. A version that does not parse has them all, as
// the apiserver takes such a version not to support RequestProgress.
func QuirksOf(v string) Quirks {
	ver, err := version.ParseSemantic(v)
	if err != nil {
		return Quirks{ProgressAhead: true, CompactedTombstone: true}
	}
	// k8s.io/apiserver pkg/storage/feature/feature_support_checker.go endpointSupportsRequestWatchProgress
	progressAhead := ver.LessThan(v3_4_31) || ver.AtLeast(v3_5_0) && ver.LessThan(v3_5_13)
	compactedTombstone := ver.LessThan(v3_4_36) || ver.AtLeast(v3_5_0) && ver.LessThan(v3_5_18)
	return Quirks{ProgressAhead: progressAhead, CompactedTombstone: compactedTombstone}
}

// Endpoint is what Probe learned of one endpoint.
type Endpoint struct {
	Endpoint string
	// Version is the etcd version the endpoint reports.
	Version string
	// Revision is the store's revision when it answered.
	Revision int64
}

// Probe asks every endpoint of c for its status, in order, and returns what they said with the
// union of their versions' quirks. It fails, naming the endpoint, if one does not answer.
func Probe(ctx context.Context, c *clientv3.Client) ([]Endpoint, Quirks, error) {
	var eps []Endpoint
	var q Quirks
	for _, ep := range slices.Sorted(slices.Values(c.Endpoints())) {
		resp, err := c.Status(ctx, ep)
		if err != nil {
			return nil, Quirks{}, fmt.Errorf("status of endpoint %s: %w", ep, err)
		}
		eps = append(eps, Endpoint{Endpoint: ep, Version: resp.Version, Revision: resp.Header.GetRevision()})
		q = q.union(QuirksOf(resp.Version))
	}
	return eps, q, nil
}
