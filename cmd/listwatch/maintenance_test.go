package main

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/listwatch/listwatch/internal/etcdprocess"
	"github.com/listwatch/listwatch/internal/testutil"
)

func lookEtcdctl(t *testing.T) string {
	path, err := exec.LookPath("etcdctl")
	if err != nil {
		t.Skip("etcdctl is not on PATH: install Debian's etcd-client to run the maintenance end-to-end tests")
	}
	return path
}

// httpGet is httpDo's GET, its body as a string.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	code, body := httpDo(t, "GET", url, "")
	return code, string(body)
}

// TestServeMaintenanceWithEtcdctl runs etcdctl's maintenance commands against serve, and etcd's HTTP
// endpoints on the etcd port, including the NOSPACE cycle under a small quota.
func TestServeMaintenanceWithEtcdctl(t *testing.T) {
	path := lookEtcdctl(t)
	p := startListwatch(t, "serve", "--etcd-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--shutdown-timeout", "1s",
		"--quota-backend-bytes", "40000", "--auto-compaction-mode", "revision", "--auto-compaction-retention", "1000")
	e := etcdctl{t: t, path: path, addr: p.addr}
	e.ok("OK\n", "put", "a", "1")
	e.match(`127\.0\.0\.1:\d+, [0-9a-f]+, 3\.7\.3, 2\d kB, true, false, 2, 1, 1, \n`, "endpoint", "status")
	e.match(`127\.0\.0\.1:\d+, \d+\n`, "endpoint", "hashkv")
	e.match(`Finished defragmenting etcd member.*\n`, "defrag")
	e.ok("", "alarm", "list")
	code, body := httpGet(t, "http://"+p.addr+"/health")
	if code != 200 || body != `{"health":"true","reason":""}` {
		t.Errorf("/health = %d %s", code, body)
	}
	var v map[string]string
	if code, body = httpGet(t, "http://"+p.addr+"/version"); code != 200 || json.Unmarshal([]byte(body), &v) != nil || v["etcdserver"] != "3.7.3" {
		t.Errorf("/version = %d %s", code, body)
	}
	if code, body = httpGet(t, "http://"+p.addr+"/metrics"); code != 200 || !strings.Contains(body, "\netcd_mvcc_put_total 1\n") ||
		!strings.Contains(body, "etcd_debugging_mvcc_current_revision 2") || !strings.Contains(body, `grpc_server_handled_total{grpc_code="OK",grpc_method="Put"`) {
		t.Errorf("/metrics = %d, missing etcd's metrics:\n%.2000s", code, body)
	}
	// fill the quota: NOSPACE, /health false, then compact, defrag, disarm
	val := strings.Repeat("x", 5000)
	for i := 0; ; i++ {
		_, errOut, code := e.run("", "put", "big", val)
		if code != 0 {
			if !strings.Contains(errOut, "database space exceeded") {
				t.Fatalf("put %d failed with %q", i, errOut)
			}
			break
		}
	}
	e.match(`memberID:\d+ alarm:NOSPACE \n`, "alarm", "list")
	if code, body = httpGet(t, "http://"+p.addr+"/health"); code != 503 || !strings.Contains(body, "ALARM NOSPACE") {
		t.Errorf("/health with NOSPACE = %d %s", code, body)
	}
	if code, _ = httpGet(t, "http://"+p.addr+"/health?exclude=NOSPACE"); code != 200 {
		t.Errorf("/health?exclude=NOSPACE = %d", code)
	}
	rev := e.match(`(?s).*"revision":(\d+).*`, "get", "a", "-w", "json")[1]
	e.match(`compacted revision \d+\n`, "compact", rev)
	e.match(`Finished defragmenting.*\n`, "defrag")
	e.match(`memberID:\d+ alarm:NOSPACE \n`, "alarm", "disarm")
	e.ok("OK\n", "put", "after", "1")
}

// TestServeSnapshotRestoredByEtcd saves a snapshot of serve with etcdctl, restores it with etcd 3.4's
// etcdctl snapshot restore, starts a real etcd on the restored directory and checks it serves the
// same keys at the same revision; then serve --from-snapshot loads a snapshot saved from that etcd.
func TestServeSnapshotRestoredByEtcd(t *testing.T) {
	path := lookEtcdctl(t)
	if _, err := os.Stat(etcdprocess.Binary); err != nil {
		t.Skip("etcd is not installed")
	}
	p := startListwatch(t, "serve", "--etcd-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--shutdown-timeout", "1s")
	e := etcdctl{t: t, path: path, addr: p.addr}
	for _, kv := range [][2]string{{"k1", "v1"}, {"k2", "v2"}, {"k1", "v3"}} {
		e.ok("OK\n", "put", kv[0], kv[1])
	}
	e.ok("1\n", "del", "k2") // revision 5
	e.match(`compacted revision 3\n`, "compact", "3")
	dir := t.TempDir()
	snap := filepath.Join(dir, "serve.db")
	e.match(`(?s)Snapshot saved at.*`, "snapshot", "save", snap)
	want := e.match(`(?s)^(.*)$`, "get", "", "--from-key", "-w", "json")[1]

	ports := freeAddrs(t, 2)
	data := filepath.Join(dir, "etcd")
	cluster := "r0=http://" + ports[1]
	e.match(`(?s).*`, "snapshot", "restore", snap, "--data-dir", data, "--name", "r0",
		"--initial-cluster", cluster, "--initial-advertise-peer-urls", "http://"+ports[1])
	etcd := exec.Command(etcdprocess.Binary, "--data-dir", data, "--name", "r0", "--listen-client-urls", "http://"+ports[0],
		"--advertise-client-urls", "http://"+ports[0], "--listen-peer-urls", "http://"+ports[1],
		"--initial-advertise-peer-urls", "http://"+ports[1], "--initial-cluster", cluster, "--logger", "zap", "--log-level", "error")
	var etcdOut testutil.SyncBuffer
	etcd.Stdout, etcd.Stderr = &etcdOut, &etcdOut
	if err := etcd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { etcd.Process.Kill(); etcd.Wait() }()
	real := etcdctl{t: t, path: path, addr: ports[0]}
	testutil.WaitFor(t, "the restored etcd to serve", func() bool {
		_, _, code := real.run("", "endpoint", "health")
		return code == 0
	})
	got := real.match(`(?s)^(.*)$`, "get", "", "--from-key", "-w", "json")[1]
	if strip(got) != strip(want) {
		t.Fatalf("restored etcd serves\n%s\nwant (from serve)\n%s\netcd's output:\n%s", got, want, etcdOut.String())
	}
	real.fails(1, "Error: etcdserver: mvcc: required revision has been compacted", "get", "k1", "--rev=2")

	// and back: a snapshot of the real etcd, loaded by serve
	fromEtcd := filepath.Join(dir, "etcd.db")
	real.ok("OK\n", "put", "k9", "from-etcd")
	real.match(`(?s)Snapshot saved at.*`, "snapshot", "save", fromEtcd)
	wantEtcd := real.match(`(?s)^(.*)$`, "get", "", "--from-key", "-w", "json")[1]
	q := startListwatch(t, "serve", "--etcd-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--shutdown-timeout", "1s", "--from-snapshot", fromEtcd)
	loaded := etcdctl{t: t, path: path, addr: q.addr}
	if got := loaded.match(`(?s)^(.*)$`, "get", "", "--from-key", "-w", "json")[1]; strip(got) != strip(wantEtcd) {
		t.Fatalf("serve --from-snapshot serves\n%s\nwant (from etcd)\n%s", got, wantEtcd)
	}
	loaded.ok("k1\nv1\n", "get", "k1", "--rev=3")
}

// strip drops the header (cluster and member IDs differ between servers), keeping the revision.
func strip(getJSON string) string {
	var r struct {
		Header struct {
			Revision int64 `json:"revision"`
		} `json:"header"`
		Kvs   any `json:"kvs"`
		Count any `json:"count"`
	}
	if err := json.Unmarshal([]byte(getJSON), &r); err != nil {
		return "unparsable: " + getJSON
	}
	b, _ := json.Marshal(r)
	return string(b)
}

func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// TestServeRefusesBadMaintenanceFlags: etcd's compaction flags and --from-snapshot are checked before
// anything listens; a bad one is a usage error naming the flag.
func TestServeRefusesBadMaintenanceFlags(t *testing.T) {
	junk := filepath.Join(t.TempDir(), "junk.db")
	if err := os.WriteFile(junk, []byte(strings.Repeat("junk", 2000)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--auto-compaction-mode", "hourly", "--auto-compaction-retention", "1"}, `--auto-compaction-mode "hourly"`},
		{[]string{"--auto-compaction-retention", "soon"}, `--auto-compaction-retention "soon"`},
		{[]string{"--auto-compaction-mode", "revision", "--auto-compaction-retention", "1h"}, `--auto-compaction-retention "1h"`},
		{[]string{"--from-snapshot", junk}, "--from-snapshot: not an etcd snapshot"},
		{[]string{"--from-snapshot", junk + ".missing"}, "--from-snapshot: open"},
	} {
		var stdout, stderr strings.Builder
		args := append([]string{"--etcd-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, c.args...)
		err := runServe(t.Context(), args, &stdout, &stderr)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("serve %q = %v, want a usage error containing %q", c.args, err, c.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("serve %q printed %q", c.args, stdout.String())
		}
	}
}
