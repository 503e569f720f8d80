package workload

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/listwatch/listwatch/check/etcd"
)

// StatusFindings says what the endpoints' Status answers show that etcd's would not: a header
// revision of 0 (etcd gives the store's revision).
func StatusFindings(eps []Endpoint) []string {
	var out []string
	for _, ep := range eps {
		if ep.Revision == 0 {
			out = append(out, fmt.Sprintf("Status of %s: header revision 0 (etcd gives the store's revision)", ep.Endpoint))
		}
	}
	return out
}

// ForeignKeys says how many keys the store holds outside prefix before a run (written by the store
// itself, like kine's, or by other clients), as notes: a check needs no fresh store, and these do
// not fail it. A store that cannot count them gets a note saying so.
func ForeignKeys(ctx context.Context, c *clientv3.Client, prefix string) []string {
	resp, err := pb.NewKVClient(c.ActiveConnection()).Range(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, CountOnly: true})
	switch {
	case err != nil:
		return []string{fmt.Sprintf("could not count the keys the store holds: %s", rpctypes.ErrorDesc(err))}
	case resp.Count > 0:
		return []string{fmt.Sprintf("the store holds %d keys at revision %d before the run, outside %s (written by the store itself or by others): the run does not touch them",
			resp.Count, resp.Header.GetRevision(), prefix)}
	}
	return nil
}

// Gated reports whether the apiserver, gating RequestProgress, sends none to target: an etcd
// whose version has the etcd-progress-ahead bug or its fix's regression, etcd-progress-unsynced
// (before 3.4.31 and 3.5.13).
// k8s.io/apiserver pkg/storage/feature/feature_support_checker.go endpointSupportsRequestWatchProgress
func Gated(target etcd.Target) bool {
	return target.Product == "etcd" && (etcd.BugNamed("etcd-progress-ahead").Affects(target.Version) ||
		etcd.BugNamed("etcd-progress-unsynced").Affects(target.Version))
}
