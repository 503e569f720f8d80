package etcdgrpc_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/etcdsnap"
	"github.com/listwatch/listwatch/store"
)

// TestQuotaAlarmAndRecovery follows etcd's NOSPACE cycle: a put that would take the database to the
// quota raises NOSPACE and fails with "database space exceeded"; while the alarm is on, puts, txns
// that put and lease grants fail, deletes and compactions go through; after compaction and defrag
// the alarm is disarmed and writes work again.
func TestQuotaAlarmAndRecovery(t *testing.T) {
	const quota = store.BaseDBBytes + 20*1024
	st, cli := newClientWith(t, store.Options{}, etcdgrpc.Options{QuotaBackendBytes: quota})
	ctx := testContext(t)
	val := strings.Repeat("v", 1000)
	var err error
	n := 0
	for ; n < 100; n++ {
		if _, err = cli.Put(ctx, "k", val); err != nil {
			break
		}
	}
	if !errors.Is(err, rpctypes.ErrNoSpace) || n == 0 {
		t.Fatalf("after %d puts: %v, want ErrNoSpace", n, err)
	}
	al, err := cli.AlarmList(ctx)
	if err != nil || len(al.Alarms) != 1 || al.Alarms[0].Alarm != pb.AlarmType_NOSPACE || al.Alarms[0].MemberID != defaultMemberID {
		t.Fatalf("alarm list = %+v, %v; want NOSPACE of the member", al, err)
	}
	if s, err := cli.Status(ctx, "bufconn"); err != nil || len(s.Errors) != 1 || !strings.Contains(s.Errors[0], "NOSPACE") || s.DbSizeQuota != quota {
		t.Fatalf("status = %+v, %v; want the alarm in Errors", s, err)
	}
	for what, f := range map[string]func() error{
		"small put": func() error { _, err := cli.Put(ctx, "x", ""); return err },
		"txn put":   func() error { _, err := cli.Txn(ctx).Then(clientv3.OpPut("x", "")).Commit(); return err },
		"grant":     func() error { _, err := cli.Grant(ctx, 10); return err },
	} {
		if err := f(); !errors.Is(err, rpctypes.ErrNoSpace) {
			t.Errorf("%s with NOSPACE on: %v, want ErrNoSpace", what, err)
		}
	}
	if _, err := cli.Txn(ctx).Then(clientv3.OpGet("k")).Commit(); err != nil {
		t.Errorf("read-only txn with NOSPACE on: %v", err)
	}
	if _, err := cli.Delete(ctx, "nothing"); err != nil {
		t.Errorf("delete with NOSPACE on: %v", err)
	}
	if _, err := cli.Compact(ctx, st.Rev()); err != nil {
		t.Fatal(err)
	}
	before, _ := cli.Status(ctx, "bufconn")
	if _, err := cli.Defragment(ctx, "bufconn"); err != nil {
		t.Fatal(err)
	}
	after, _ := cli.Status(ctx, "bufconn")
	if after.DbSize != after.DbSizeInUse || after.DbSize >= before.DbSize || before.DbSizeInUse != after.DbSizeInUse {
		t.Fatalf("sizes before defrag %d/%d, after %d/%d", before.DbSize, before.DbSizeInUse, after.DbSize, after.DbSizeInUse)
	}
	// still capped until disarmed
	if _, err := cli.Put(ctx, "x", ""); !errors.Is(err, rpctypes.ErrNoSpace) {
		t.Fatalf("put before disarm: %v, want ErrNoSpace", err)
	}
	dis, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: defaultMemberID, Alarm: pb.AlarmType_NOSPACE})
	if err != nil || len(dis.Alarms) != 1 {
		t.Fatalf("disarm = %+v, %v", dis, err)
	}
	if _, err := cli.Put(ctx, "x", "back"); err != nil {
		t.Fatalf("put after recovery: %v", err)
	}
}

func TestAlarmActions(t *testing.T) {
	_, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	m := pb.NewMaintenanceClient(cli.ActiveConnection())
	act := func(a pb.AlarmRequest_AlarmAction, id uint64, at pb.AlarmType) []*pb.AlarmMember {
		t.Helper()
		resp, err := m.Alarm(ctx, &pb.AlarmRequest{Action: a, MemberID: id, Alarm: at})
		if err != nil {
			t.Fatal(err)
		}
		checkHeader(t, "alarm", resp.Header, 1)
		return resp.Alarms
	}
	if got := act(pb.AlarmRequest_ACTIVATE, 7, pb.AlarmType_NONE); len(got) != 0 {
		t.Errorf("activating NONE answered %v", got)
	}
	if got := act(pb.AlarmRequest_ACTIVATE, 7, pb.AlarmType_CORRUPT); len(got) != 1 || got[0].MemberID != 7 {
		t.Errorf("activate CORRUPT answered %v", got)
	}
	if _, err := cli.Put(ctx, "a", "1"); !errors.Is(err, rpctypes.ErrCorrupt) {
		t.Errorf("put with CORRUPT on: %v, want ErrCorrupt", err)
	}
	if _, err := cli.Get(ctx, "a"); err != nil {
		t.Errorf("range with CORRUPT on: %v", err)
	}
	act(pb.AlarmRequest_ACTIVATE, 8, pb.AlarmType_NOSPACE)
	if got := act(pb.AlarmRequest_GET, 0, pb.AlarmType_NOSPACE); len(got) != 1 || got[0].MemberID != 8 {
		t.Errorf("GET NOSPACE = %v", got)
	}
	if got := act(pb.AlarmRequest_GET, 0, pb.AlarmType_NONE); len(got) != 2 {
		t.Errorf("GET all = %v", got)
	}
	if got := act(pb.AlarmRequest_DEACTIVATE, 9, pb.AlarmType_CORRUPT); len(got) != 0 {
		t.Errorf("deactivating an alarm that is off answered %v", got)
	}
	act(pb.AlarmRequest_DEACTIVATE, 7, pb.AlarmType_CORRUPT)
	act(pb.AlarmRequest_DEACTIVATE, 8, pb.AlarmType_NOSPACE)
	if _, err := cli.Put(ctx, "a", "1"); err != nil {
		t.Errorf("put after every alarm is off: %v", err)
	}
}

func TestHashKVAndMoveLeader(t *testing.T) {
	st, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	for _, k := range []string{"a", "b", "a"} {
		mustPut(t, cli, k, "v")
	}
	if _, err := cli.Compact(ctx, 3); err != nil {
		t.Fatal(err)
	}
	mustPut(t, cli, "c", "v")
	resp, err := cli.HashKV(ctx, "bufconn", 4)
	want, cur, _ := st.HashKV(4)
	if err != nil || resp.Hash != want.Hash || resp.CompactRevision != 3 || resp.HashRevision != 4 || cur != 5 {
		t.Fatalf("HashKV(4) = %+v, %v; want %+v", resp, err, want)
	}
	checkHeader(t, "hashkv", resp.Header, 5)
	if _, err := cli.HashKV(ctx, "bufconn", 2); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("HashKV below the compaction: %v", err)
	}
	if _, err := cli.HashKV(ctx, "bufconn", 6); !errors.Is(err, rpctypes.ErrFutureRev) {
		t.Errorf("HashKV above the revision: %v", err)
	}
	h, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Hash(ctx, &pb.HashRequest{})
	if err != nil || h.Header.Revision != 5 {
		t.Fatalf("Hash = %+v, %v", h, err)
	}
	if _, err := cli.MoveLeader(ctx, defaultMemberID); err != nil {
		t.Errorf("MoveLeader to itself: %v", err)
	}
	if _, err := cli.MoveLeader(ctx, 12345); !errors.Is(err, rpctypes.ErrBadLeaderTransferee) {
		t.Errorf("MoveLeader elsewhere: %v, want ErrBadLeaderTransferee", err)
	}
}

func TestSnapshotStream(t *testing.T) {
	dir := t.TempDir()
	_, cli := newClientWith(t, store.Options{}, etcdgrpc.Options{SnapshotDir: dir})
	ctx := testContext(t)
	for i := range 50 {
		mustPut(t, cli, string(rune('a'+i%26))+"key", strings.Repeat("x", 2000))
	}
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	b := buf.Bytes()
	n := len(b) - sha256.Size
	if sum := sha256.Sum256(b[:n]); n%512 != 0 || !bytes.Equal(sum[:], b[n:]) {
		t.Fatalf("snapshot of %d bytes does not end in its SHA-256", len(b))
	}
	path := filepath.Join(t.TempDir(), "snap.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	snap, err := etcdsnap.Load(path)
	if err != nil || snap.Revision != 51 || len(snap.Records) != 50 {
		t.Fatalf("loaded %+v, %v", snap, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("snapshot left %v behind", left)
	}
}
