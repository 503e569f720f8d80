package interop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc/status"

	"github.com/listwatch/listwatch/interop/internal/etcdtest"
)

// maintenanceOps writes the same history on a side: puts, a txn of two puts, a delete, a lease.
func maintenanceOps(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	ctx := context.Background()
	for i, kv := range [][2]string{{"a", "1"}, {"b", "1"}, {"a", "2"}, {"c", "1"}} {
		if _, err := cli.Put(ctx, kv[0], kv[1]); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut("d", "1"), clientv3.OpPut("e", "1")).Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "a", "3"); err != nil {
		t.Fatal(err)
	}
}

// errText is an error's gRPC code and message, or "" for none.
func errText(err error) string {
	if err == nil {
		return ""
	}
	s, _ := status.FromError(err)
	return fmt.Sprintf("%v: %s", s.Code(), rpctypes.ErrorDesc(err))
}

// TestDifferentialMaintenance runs the maintenance calls against embedded etcd 3.7.3 and listwatch
// after the same history and compares them: HashKV's errors, compact and hash revisions and, as
// the history keeps every txn's revisions whole, its values too (listwatch hashes etcd's encoding);
// equal hashes where etcd's are equal across revisions; Alarm's answers; MoveLeader's; Defragment;
// and Status's relations (in-use size at most the size, equal after defragment, the quota).
func TestDifferentialMaintenance(t *testing.T) {
	ref, other := startEtcd(t, "etcd"), startListwatch(t, "listwatch")
	ctx := context.Background()
	for _, s := range []*side{ref, other} {
		maintenanceOps(t, s.cli)
	}
	ep := func(s *side) string { return s.cli.Endpoints()[0] }
	type hashAnswer struct {
		hash             uint32
		compact, hashRev int64
		err              string
	}
	hashes := func(s *side) map[int64]hashAnswer {
		out := map[int64]hashAnswer{}
		for rev := int64(-1); rev <= 10; rev++ {
			r, err := s.cli.HashKV(ctx, ep(s), rev)
			a := hashAnswer{err: errText(err)}
			if err == nil {
				a = hashAnswer{hash: r.Hash, compact: r.CompactRevision, hashRev: r.HashRevision}
			}
			out[rev] = a
		}
		return out
	}
	compare := func(when string) {
		t.Helper()
		want, got := hashes(ref), hashes(other)
		for rev := int64(-1); rev <= 10; rev++ {
			if want[rev] != got[rev] {
				t.Errorf("%s: HashKV(%d): etcd %+v, listwatch %+v", when, rev, want[rev], got[rev])
			}
		}
	}
	compare("before compaction")
	for _, s := range []*side{ref, other} {
		if _, err := s.cli.Compact(ctx, 4, clientv3.WithCompactPhysical()); err != nil {
			t.Fatal(err)
		}
	}
	compare("after compaction at 4")

	for _, s := range []*side{ref, other} {
		before, err := s.cli.Status(ctx, ep(s))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.cli.Defragment(ctx, ep(s)); err != nil {
			t.Fatalf("%s: defragment: %v", s.name, err)
		}
		after, err := s.cli.Status(ctx, ep(s))
		if err != nil {
			t.Fatal(err)
		}
		if before.DbSizeInUse > before.DbSize || after.DbSize > before.DbSize || after.DbSizeQuota != 2<<30 {
			t.Errorf("%s: status before defragment %d/%d, after %d/%d, quota %d", s.name, before.DbSizeInUse, before.DbSize, after.DbSizeInUse, after.DbSize, after.DbSizeQuota)
		}
	}

	alarmSeq := func(s *side) []string {
		m := pb.NewMaintenanceClient(s.cli.ActiveConnection())
		st, err := s.cli.Status(ctx, ep(s))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, req := range []*pb.AlarmRequest{
			{Action: pb.AlarmRequest_GET},
			{Action: pb.AlarmRequest_ACTIVATE, MemberID: st.Leader, Alarm: pb.AlarmType_NONE},
			{Action: pb.AlarmRequest_ACTIVATE, MemberID: st.Leader, Alarm: pb.AlarmType_NOSPACE},
			{Action: pb.AlarmRequest_ACTIVATE, MemberID: st.Leader, Alarm: pb.AlarmType_NOSPACE},
			{Action: pb.AlarmRequest_GET, Alarm: pb.AlarmType_NOSPACE},
			{Action: pb.AlarmRequest_GET, Alarm: pb.AlarmType_CORRUPT},
			{Action: pb.AlarmRequest_DEACTIVATE, MemberID: st.Leader, Alarm: pb.AlarmType_CORRUPT},
			{Action: pb.AlarmRequest_DEACTIVATE, MemberID: st.Leader, Alarm: pb.AlarmType_NOSPACE},
			{Action: pb.AlarmRequest_GET},
		} {
			resp, err := m.Alarm(ctx, req)
			line := errText(err)
			if err == nil {
				for _, a := range resp.Alarms {
					line += fmt.Sprintf("[%v self=%v]", a.Alarm, a.MemberID == st.Leader)
				}
			}
			out = append(out, line)
			if req.Action == pb.AlarmRequest_ACTIVATE && req.Alarm == pb.AlarmType_NOSPACE {
				_, perr := s.cli.Put(ctx, "x", "y")
				_, derr := s.cli.Delete(ctx, "nothing")
				out = append(out, "put: "+errText(perr)+" delete: "+errText(derr))
			}
		}
		_, err = s.cli.MoveLeader(ctx, st.Leader)
		out = append(out, "move to self: "+errText(err))
		_, err = s.cli.MoveLeader(ctx, st.Leader+1)
		out = append(out, "move elsewhere: "+errText(err))
		return out
	}
	want, got := alarmSeq(ref), alarmSeq(other)
	if fmt.Sprint(want) != fmt.Sprint(got) {
		t.Errorf("alarm and move-leader answers:\netcd      %q\nlistwatch %q", want, got)
	}
}

// TestSnapshotRestoredByEtcdutl saves listwatch's snapshot stream to a file, restores it with
// etcdutl's snapshot package at v3.7.3, starts an embedded etcd on the restored directory and checks
// that it serves the same keys, revision and compaction.
func TestSnapshotRestoredByEtcdutl(t *testing.T) {
	lw := startListwatch(t, "listwatch")
	maintenanceOps(t, lw.cli)
	ctx := context.Background()
	if _, err := lw.cli.Compact(ctx, 3); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	snapPath := filepath.Join(dir, "snap.db")
	rc, err := lw.cli.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(snapPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peer := "http://" + l.Addr().String()
	l.Close()
	data := filepath.Join(dir, "etcd")
	err = snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath: snapPath, Name: "default", OutputDataDir: data, PeerURLs: []string{peer},
		InitialCluster: "default=" + peer, InitialClusterToken: "etcd-cluster",
	})
	if err != nil {
		t.Fatalf("etcdutl restore: %v", err)
	}
	peerURL, _ := url.Parse(peer)
	cli, stop, err := etcdtest.Start(data, func(c *embed.Config) {
		c.ListenPeerUrls = []url.URL{*peerURL}
		c.AdvertisePeerUrls = []url.URL{*peerURL}
		c.InitialCluster = "default=" + peer
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	want, err := lw.cli.Get(ctx, "", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	got, err := cli.Get(ctx, "", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	// etcdtest.Start's own first read is a Get of "health", which writes nothing
	if fmt.Sprint(got.Kvs) != fmt.Sprint(want.Kvs) || got.Header.Revision != want.Header.Revision {
		t.Fatalf("restored etcd at %d serves %v\nlistwatch at %d serves %v", got.Header.Revision, got.Kvs, want.Header.Revision, want.Kvs)
	}
	if _, err := cli.Get(ctx, "a", clientv3.WithRev(2)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("read below the compaction on the restored etcd: %v", err)
	}
}
