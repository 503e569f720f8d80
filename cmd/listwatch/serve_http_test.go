package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/httpwatch/watchclient"
	"github.com/listwatch/listwatch/internal/testutil"
)

// httpDo sends a request to the served Kubernetes API and returns the status and body.
func httpDo(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// TestServeHTTP runs `serve` with both APIs on free loopback ports: objects written over HTTP are
// listed and watched, a key written through the etcd API shows up in the HTTP watch (one store
// behind both), and shutdown ends the open watch cleanly.
func TestServeHTTP(t *testing.T) {
	srv := startServe(t, []string{"--etcd-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--shutdown-timeout", "5s"}, newLines())
	base := await(t, srv.stdout.ch, "listwatch: serving the Kubernetes API on ")
	etcdAddr := await(t, srv.stdout.ch, "listwatch: serving the etcd API on ")
	if !strings.HasPrefix(base, "http://127.0.0.1:") || strings.HasSuffix(base, ":0") {
		t.Fatalf("printed address %q", base)
	}
	const cms = "/api/v1/namespaces/default/configmaps"
	code, body := httpDo(t, "POST", base+cms, `{"metadata":{"name":"a"},"data":{"k":"v"}}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	code, body = httpDo(t, "GET", base+cms, "")
	var list struct {
		Metadata struct{ ResourceVersion string }
		Items    []json.RawMessage
	}
	if code != 200 || json.Unmarshal(body, &list) != nil || len(list.Items) != 1 {
		t.Fatalf("list: %d %s", code, body)
	}

	wctx, wcancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer wcancel()
	req, _ := http.NewRequestWithContext(wctx, "GET", base+cms+"?watch=true&resourceVersion="+list.Metadata.ResourceVersion, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("watch: %d %v", resp.StatusCode, resp.Header)
	}
	frames := make(chan watchclient.Frame, 10)
	ended := make(chan error, 1)
	go func() {
		defer close(frames)
		dec := watchclient.NewDecoder(bufio.NewReader(resp.Body))
		for {
			f, err := dec.Decode()
			if err != nil {
				ended <- err
				return
			}
			frames <- f
		}
	}()
	next := func() watchclient.Frame {
		t.Helper()
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatalf("watch ended: %v", <-ended)
			}
			return f
		case <-time.After(testutil.WaitTimeout):
			t.Fatal("no watch event")
		}
		return watchclient.Frame{}
	}

	code, body = httpDo(t, "PUT", base+cms+"/a", `{"metadata":{"name":"a"},"data":{"k":"v2"}}`)
	if code != 200 {
		t.Fatalf("update: %d %s", code, body)
	}
	if f := next(); f.Type != watch.Modified || !bytes.Contains(f.Object, []byte(`"k":"v2"`)) {
		t.Errorf("after the update: %s %s", f.Type, f.Object)
	}
	// The same store through the etcd API.
	cli := dialTCP(t, etcdAddr)
	defer cli.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer rcancel()
	if _, err := cli.Put(rctx, "/registry/configmaps/default/b", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","namespace":"default"}}`); err != nil {
		t.Fatal(err)
	}
	if f := next(); f.Type != watch.Added || !bytes.Contains(f.Object, []byte(`"name":"b"`)) {
		t.Errorf("after the etcd put: %s %s", f.Type, f.Object)
	}

	// Shutdown with the watch open: it ends without an error, and serve returns cleanly.
	srv.cancel()
	select {
	case err := <-ended:
		if err != io.EOF {
			t.Errorf("watch ended with %v at shutdown, want a clean end", err)
		}
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("the watch did not end at shutdown")
	}
	srv.wait(t)
	lis, err := net.Listen("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatalf("HTTP port still taken after shutdown: %v", err)
	}
	lis.Close()
}

func TestServeHTTPFlags(t *testing.T) {
	for _, c := range []struct {
		args    []string
		code    int
		wantErr string
	}{
		{[]string{"serve", "-h"}, 0, "-http-listen address"},
		{[]string{"serve", "--http-listen", "0.0.0.0:0"}, 2, "--http-listen 0.0.0.0:0 would listen on 0.0.0.0, which is not loopback"},
		{[]string{"serve", "--http-listen", ":8080"}, 2, "would listen on every interface"},
		{[]string{"serve", "--http-listen", "nohostport"}, 2, `--http-listen "nohostport": address nohostport: missing port in address`},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), c.args, &stdout, &stderr); code != c.code || !strings.Contains(stderr.String(), c.wantErr) {
			t.Errorf("listwatch %q: exit %d, stderr %q; want exit %d with %q", c.args, code, stderr.String(), c.code, c.wantErr)
		}
	}
	// A taken HTTP port fails the command, leaving the etcd port free again.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"serve", "--etcd-listen", "127.0.0.1:0", "--http-listen", taken.Addr().String()}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "address already in use") || stdout.Len() != 0 {
		t.Errorf("serve on a taken HTTP port: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// TestServeCRD runs `serve --crd FILE --system-namespaces`: the file's custom resources are served
// beside the built-in ones and the system namespaces exist, and NamespaceLifecycle is whole (a
// create in a missing namespace is 404, default may not be deleted); a missing or invalid file is
// a usage error naming it.
func TestServeCRD(t *testing.T) {
	dir := t.TempDir()
	crd := filepath.Join(dir, "things.yaml")
	if err := os.WriteFile(crd, []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.org
spec:
  group: example.org
  names: {plural: things, kind: Thing}
  scope: Namespaced
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, []string{"--etcd-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--crd", crd, "--system-namespaces"}, newLines())
	base := await(t, srv.stdout.ch, "listwatch: serving the Kubernetes API on ")
	await(t, srv.stdout.ch, "listwatch: serving the etcd API on ")
	if code, body := httpDo(t, "POST", base+"/apis/example.org/v1/namespaces/default/things", `{"apiVersion":"example.org/v1","kind":"Thing","metadata":{"name":"t"}}`); code != http.StatusCreated {
		t.Errorf("create a thing: %d %s", code, body)
	}
	if code, body := httpDo(t, "GET", base+"/api/v1/namespaces/kube-system", ""); code != 200 {
		t.Errorf("kube-system: %d %s", code, body)
	}
	if code, body := httpDo(t, "POST", base+"/apis/example.org/v1/namespaces/nowhere/things", `{"apiVersion":"example.org/v1","kind":"Thing","metadata":{"name":"t"}}`); code != http.StatusNotFound ||
		!strings.Contains(string(body), `namespaces \"nowhere\" not found`) {
		t.Errorf("create in a missing namespace: %d %s", code, body)
	}
	if code, body := httpDo(t, "DELETE", base+"/api/v1/namespaces/default", ""); code != http.StatusForbidden {
		t.Errorf("delete default: %d %s", code, body)
	}
	srv.stop(t)

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: ConfigMap\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, want string }{
		{filepath.Join(dir, "missing.yaml"), "--crd: open "},
		{bad, "--crd " + bad + ": httpwatch: invalid CustomResourceDefinition"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"serve", "--etcd-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--crd", c.file}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("--crd %s: exit %d, stderr %q; want exit 2 with %q", c.file, code, stderr.String(), c.want)
		}
	}
}
