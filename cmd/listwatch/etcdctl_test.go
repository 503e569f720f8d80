package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/listwatch/listwatch/internal/testutil"
)

// listwatchProcess is `listwatch serve` running as a child process: the test binary re-run as the
// command (see TestMain).
type listwatchProcess struct {
	cmd     *exec.Cmd
	addr    string // the etcd API's host:port
	httpURL string // the Kubernetes API's base URL
	stdout  chan string
	scanned <-chan struct{}
	stderr  bytes.Buffer
}

func startListwatch(t *testing.T, args ...string) *listwatchProcess {
	t.Helper()
	p := &listwatchProcess{stdout: make(chan string, 1000)}
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = append(os.Environ(), runAsListwatch+"=1")
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.scanned = scan(out, p.stdout)
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.scanned
			p.cmd.Wait()
		}
	})
	// serve prints the Kubernetes API's line first and the etcd API's last (runServe).
	p.httpURL = await(t, p.stdout, "listwatch: serving the Kubernetes API on ")
	p.addr = await(t, p.stdout, "listwatch: serving the etcd API on ")
	return p
}

// stop sends sig and waits for the process to exit, returning its exit status and remaining output.
func (p *listwatchProcess) stop(t *testing.T, sig os.Signal) (int, []string) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	var rest []string
	timeout := time.After(testutil.WaitTimeout)
	for done := false; !done; {
		select {
		case l, ok := <-p.stdout:
			if !ok {
				done = true
				break
			}
			rest = append(rest, l)
		case <-timeout:
			t.Fatalf("listwatch did not exit after %v; output so far %q", sig, rest)
		}
	}
	<-p.scanned
	err := p.cmd.Wait()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	return p.cmd.ProcessState.ExitCode(), rest
}

// etcdctl runs Debian's etcdctl (v3 API) against addr.
type etcdctl struct {
	t    *testing.T
	path string
	addr string
}

func (e etcdctl) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, e.path, append([]string{"--endpoints=" + e.addr, "--dial-timeout=10s", "--command-timeout=30s"}, args...)...)
	cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
	return cmd
}

// run runs etcdctl to completion and returns its stdout, stderr and exit status.
func (e etcdctl) run(stdin string, args ...string) (string, string, int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	cmd := e.command(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, isExit := err.(*exec.ExitError); err != nil && !isExit {
		e.t.Fatalf("etcdctl %q: %v", args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// ok runs etcdctl, which must succeed with exactly the given output.
func (e etcdctl) ok(want string, args ...string) {
	e.t.Helper()
	e.okStdin("", want, args...)
}

func (e etcdctl) okStdin(stdin, want string, args ...string) {
	e.t.Helper()
	out, errOut, code := e.run(stdin, args...)
	if code != 0 || out != want {
		e.t.Errorf("etcdctl %s: exit %d\nstdout %q\nwant   %q\nstderr %q", strings.Join(args, " "), code, out, want, errOut)
	}
}

// match runs etcdctl, which must succeed with output matching re; it returns the submatches.
func (e etcdctl) match(re string, args ...string) []string {
	e.t.Helper()
	out, errOut, code := e.run("", args...)
	m := regexp.MustCompile("^" + re + "$").FindStringSubmatch(out)
	if code != 0 || m == nil {
		e.t.Fatalf("etcdctl %s: exit %d, stdout %q does not match %q; stderr %q", strings.Join(args, " "), code, out, re, errOut)
	}
	return m
}

// fails runs etcdctl, which must exit with code and print wantErr (whole lines) on stderr.
func (e etcdctl) fails(code int, wantErr string, args ...string) {
	e.t.Helper()
	out, errOut, got := e.run("", args...)
	if got != code || !strings.Contains("\n"+errOut, "\n"+wantErr) {
		e.t.Errorf("etcdctl %s: exit %d, stdout %q, stderr %q; want exit %d and %q", strings.Join(args, " "), got, out, errOut, code, wantErr)
	}
}

// background starts a long-running etcdctl (watch) whose stdout lines arrive on the channel; the
// returned function kills it and waits for it.
func (e etcdctl) background(args ...string) (<-chan string, func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := e.command(ctx, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	ch := make(chan string, 1000)
	scanned := scan(out, ch)
	return ch, func() {
		cancel()
		<-scanned
		cmd.Wait()
	}
}

// expectLines reads exactly want from ch, in order.
func expectLines(t *testing.T, ch <-chan string, want []string) {
	t.Helper()
	timeout := time.After(testutil.WaitTimeout)
	for i, w := range want {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("output ended at line %d; want %q", i, want[i:])
			}
			if l != w {
				t.Fatalf("line %d = %q, want %q (expected %q)", i, l, w, want)
			}
		case <-timeout:
			t.Fatalf("no line %d; want %q", i, want[i:])
		}
	}
}

// TestEtcdctl drives `listwatch serve` with Debian's etcdctl 3.4 and checks etcdctl prints what it
// prints against a real single-member etcd.
func TestEtcdctl(t *testing.T) {
	path, err := exec.LookPath("etcdctl")
	if err != nil {
		t.Skip("etcdctl is not on PATH: install Debian's etcd-client (apt-get install etcd-client) to run the etcdctl end-to-end test")
	}
	p := startListwatch(t, "serve", "--etcd-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--name", "e2e", "--shutdown-timeout", "1s")
	e := etcdctl{t: t, path: path, addr: p.addr}

	e.ok("OK\n", "put", "foo/a", "1") // 2
	e.ok("OK\n", "put", "foo/b", "2") // 3
	e.ok("OK\n", "put", "foo/a", "3") // 4
	e.ok("foo/a\n3\nfoo/b\n2\n", "get", "--prefix", "foo/")
	e.ok("foo/a\n1\n", "get", "foo/a", "--rev=2")
	e.fails(1, "Error: etcdserver: mvcc: required revision is a future revision", "get", "foo/a", "--rev=99")
	e.ok("1\n", "del", "foo/b")                                                                                                // 5
	e.okStdin("value(\"foo/a\") = \"3\"\n\nput foo/c ok\n\nput foo/c bad\n\n", "SUCCESS\n\nOK\n", "txn")                       // 6
	e.okStdin("value(\"foo/a\") = \"9\"\n\nput foo/x no\n\nget foo/c\nput foo/d x\n\n", "FAILURE\n\nfoo/c\nok\n\nOK\n", "txn") // 7

	t.Run("watch from a past revision with prev-kv", func(t *testing.T) {
		ch, stop := e.background("watch", "--rev=2", "--prefix", "foo/", "--prev-kv")
		defer stop()
		expectLines(t, ch, []string{
			"PUT", "foo/a", "1",
			"PUT", "foo/b", "2",
			"PUT", "foo/a", "1", "foo/a", "3", // prev_kv first
			"DELETE", "foo/b", "2", "foo/b", "",
			"PUT", "foo/c", "ok",
			"PUT", "foo/d", "x",
		})
		e.ok("OK\n", "put", "foo/e", "live") // 8
		expectLines(t, ch, []string{"PUT", "foo/e", "live"})
	})

	e.ok("compacted revision 4\n", "compaction", "4")
	e.ok("foo/a\n3\n", "get", "foo/a", "--rev=4")
	e.fails(1, "Error: etcdserver: mvcc: required revision has been compacted", "get", "foo/a", "--rev=3")
	// etcdctl reports the compaction answer of the watch and exits with its ExitBadConnection status.
	e.fails(5, "watch was canceled (etcdserver: mvcc: required revision has been compacted)\nError: watch is canceled by the server\n",
		"watch", "--rev=2", "--prefix", "foo/")

	lease := e.match(`lease ([0-9a-f]{16}) granted with TTL\(60s\)\n`, "lease", "grant", "60")[1]
	e.ok("OK\n", "put", "foo/l", "x", "--lease="+lease)
	e.match(fmt.Sprintf(`lease %s granted with TTL\(60s\), remaining\((59|60)s\), attached keys\(\[foo/l\]\)\n`, lease), "lease", "timetolive", lease, "--keys")
	e.ok("found 1 leases\n"+lease+"\n", "lease", "list")
	e.ok("lease "+lease+" keepalived with TTL(60)\n", "lease", "keep-alive", "--once", lease)
	e.ok("lease "+lease+" revoked\n", "lease", "revoke", lease)
	e.ok("", "get", "foo/l")
	e.ok("lease "+lease+" already expired\n", "lease", "timetolive", lease)
	e.fails(1, "Error: etcdserver: requested lease not found", "put", "foo/m", "y", "--lease=1234")
	e.fails(1, "Error: failed to revoke lease (etcdserver: requested lease not found)", "lease", "revoke", lease)

	e.ok("8e9e05c52164694d, started, e2e, http://localhost:2380, http://"+p.addr+", false\n", "member", "list")
	e.match(regexp.QuoteMeta(p.addr)+`, 8e9e05c52164694d, 3\.7\.3, \d+ kB, true, false, 2, (\d+), (\d+), \n`, "endpoint", "status")
	// etcdctl 3.4 prints health to stderr.
	if out, errOut, code := e.run("", "endpoint", "health"); code != 0 || out != "" ||
		!regexp.MustCompile("^"+regexp.QuoteMeta(p.addr)+` is healthy: successfully committed proposal: took = \S+\n$`).MatchString(errOut) {
		t.Errorf("etcdctl endpoint health: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	// SIGTERM with a watch open: the graceful stop gives up after --shutdown-timeout and the process
	// exits cleanly.
	rev := e.match(`\{"header":\{.*"revision":(\d+),.*\}\}\n`, "put", "foo/", "seen", "-w", "json")[1]
	ch, stopWatch := e.background("watch", "foo/", "--rev="+rev)
	defer stopWatch()
	expectLines(t, ch, []string{"PUT", "foo/", "seen"})
	code, rest := p.stop(t, syscall.SIGTERM)
	if code != 0 || strings.Join(rest, "\n") != "listwatch: shutting down\nlistwatch: stopped" {
		t.Errorf("after SIGTERM: exit %d, output %q, stderr %q", code, rest, p.stderr.String())
	}
}

// TestSIGINT: Ctrl-C stops the server cleanly too.
func TestSIGINT(t *testing.T) {
	p := startListwatch(t, "serve", "--etcd-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	code, rest := p.stop(t, syscall.SIGINT)
	if code != 0 || strings.Join(rest, "\n") != "listwatch: shutting down\nlistwatch: stopped" {
		t.Errorf("after SIGINT: exit %d, output %q, stderr %q", code, rest, p.stderr.String())
	}
}

// TestRemoteListenRefused: the real binary refuses a non-loopback address without --allow-remote.
func TestRemoteListenRefused(t *testing.T) {
	cmd := exec.Command(os.Args[0], "serve", "--etcd-listen", "0.0.0.0:0")
	cmd.Env = append(os.Environ(), runAsListwatch+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); !ok || cmd.ProcessState.ExitCode() != 2 ||
		!strings.Contains(stderr.String(), "pass --allow-remote") || stdout.Len() != 0 {
		t.Errorf("serve --etcd-listen 0.0.0.0:0: %v, stdout %q, stderr %q; want exit 2 naming --allow-remote", err, stdout.String(), stderr.String())
	}
}

// TestServeSurvivesCompactionAtPutThenDelete drives the real command through what used to crash
// it: a txn that puts a value of over a megabyte and deletes the key again in the same revision
// (a delete from the key), a compaction at that revision, and a watch from it, which made the
// store read the released value. The watch gets the DELETE alone, as from etcd, and both of the
// process's servers keep answering until it is stopped: the etcd API, and the Kubernetes API,
// whose create goes through the store and whose list is served by the watch cache.
func TestServeSurvivesCompactionAtPutThenDelete(t *testing.T) {
	p := startListwatch(t, "serve", "--etcd-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	cli := dialTCP(t, p.addr)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	big := strings.Repeat("v", 1<<20+100)
	tr, err := cli.Txn(ctx).Then(clientv3.OpPut("k", big), clientv3.OpDelete("k", clientv3.WithFromKey())).Commit()
	if err != nil {
		t.Fatal(err)
	}
	rev := tr.Header.Revision
	if _, err := cli.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	wch := cli.Watch(ctx, "k", clientv3.WithRev(rev))
	next := func() clientv3.WatchResponse {
		t.Helper()
		wr, ok := <-wch
		if !ok || wr.Err() != nil {
			t.Fatalf("watch from revision %d ended: %v; server stderr:\n%s", rev, wr.Err(), p.stderr.String())
		}
		return wr
	}
	if wr := next(); len(wr.Events) != 1 || wr.Events[0].Type != clientv3.EventTypeDelete || wr.Events[0].Kv.ModRevision != rev {
		t.Fatalf("watch from the compact revision: %v, want the DELETE alone", wr.Events)
	}
	if _, err := cli.Put(ctx, "k", "after"); err != nil {
		t.Fatalf("put after the catch-up: %v; server stderr:\n%s", err, p.stderr.String())
	}
	if wr := next(); len(wr.Events) != 1 || string(wr.Events[0].Kv.Value) != "after" {
		t.Fatalf("live event: %v", wr.Events)
	}
	if g, err := cli.Get(ctx, "k"); err != nil || len(g.Kvs) != 1 {
		t.Fatalf("get after the catch-up: %v, %v", g, err)
	}
	const cms = "/api/v1/namespaces/default/configmaps"
	if code, body := httpDo(t, "POST", p.httpURL+cms, `{"metadata":{"name":"after"}}`); code != http.StatusCreated {
		t.Fatalf("HTTP create after the catch-up: %d %s; server stderr:\n%s", code, body, p.stderr.String())
	}
	if code, body := httpDo(t, "GET", p.httpURL+cms+"/after", ""); code != http.StatusOK || !strings.Contains(string(body), `"name":"after"`) {
		t.Fatalf("HTTP get after the catch-up: %d %s", code, body)
	}
	if code, body := httpDo(t, "GET", p.httpURL+cms, ""); code != http.StatusOK || !strings.Contains(string(body), `"name":"after"`) {
		t.Fatalf("HTTP list after the catch-up: %d %s", code, body)
	}
	if code, rest := p.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("exit %d, output %q, stderr %q", code, rest, p.stderr.String())
	}
}
