package kubebin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/internal/testutil"
)

// PathVar names the kube-apiserver binary the tests run; unset, DefaultPath.
const PathVar = "LISTWATCH_KUBE_APISERVER"

// Version is the kube-apiserver `make kube-apiserver` builds.
const Version = "v1.37.2"

// Defaults of Options.
const (
	DefaultTimeout     = 2 * time.Minute
	DefaultStopTimeout = time.Minute
)

// Sentinel errors; every error of Path and Start wraps one.
var (
	// ErrNoBinary: no kube-apiserver binary where PathVar or DefaultPath says.
	ErrNoBinary = errors.New("kubebin: no kube-apiserver binary")
	// ErrInvalidOptions: the Options are unusable.
	ErrInvalidOptions = errors.New("kubebin: invalid options")
	// ErrNotReady: the process exited, or /readyz was not 200 within the timeout.
	ErrNotReady = errors.New("kubebin: kube-apiserver not ready")
)

// DefaultPath is where `make kube-apiserver` puts the binary: interop/.cache/kube-apiserver.
func DefaultPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", ".cache", "kube-apiserver")
}

// Path is the kube-apiserver binary to run: $LISTWATCH_KUBE_APISERVER, else DefaultPath. An error
// wrapping ErrNoBinary says which path it looked at and how to build one.
func Path() (string, error) {
	p, from := os.Getenv(PathVar), PathVar
	if p == "" {
		p, from = DefaultPath(), "the default path"
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("%w at %s (%s): %v; `make kube-apiserver` builds %s at %s, or set %s", ErrNoBinary, p, from,
			err, Version, filepath.Clean(DefaultPath()), PathVar)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w at %s (%s): not an executable file", ErrNoBinary, p, from)
	}
	return p, nil
}

// Options configure a kube-apiserver process. EtcdServers is required.
type Options struct {
	// Binary is the kube-apiserver to run; default Path().
	Binary string
	// EtcdServers are --etcd-servers: the client URLs of the etcd everything is stored in but the
	// resources of Overrides.
	EtcdServers []string
	// Overrides are --etcd-servers-overrides: "group/resource" ("/configmaps" for the core group)
	// to the client URLs of the etcd that resource is stored in.
	Overrides map[string][]string
	// Flags are more flags, after the ones Start sets (a later flag wins).
	Flags []string
	// Dir holds the serving certificate, the service-account key and the log; required.
	Dir string
	// Timeout bounds Start; default DefaultTimeout.
	Timeout time.Duration
}

// Server is a running kube-apiserver process.
type Server struct {
	url     string
	token   string
	log     string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd.Wait returned
	waitErr error         // set before exited is closed
}

// URL is the server's base URL, https://127.0.0.1:<port>.
func (s *Server) URL() string { return s.url }

// Log is the path of the process's output (stdout and stderr).
func (s *Server) Log() string { return s.log }

// Token is the bearer token of the server's one user, admin in group system:masters.
func (s *Server) Token() string { return s.token }

// RESTConfig is a client configuration for the server: its token, its self-signed certificate not
// verified, no client-side rate limit.
func (s *Server) RESTConfig() *rest.Config {
	return &rest.Config{Host: s.url, BearerToken: s.token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: -1}
}

// HTTPClient is a plain HTTP client for the server that sends its token (HTTP/1.1, the
// certificate not verified); the caller closes the transport's idle connections.
func (s *Server) HTTPClient() (*http.Client, *http.Transport) {
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	return &http.Client{Transport: bearer{token: s.token, base: tr}}, tr
}

// bearer sends every request with a bearer token.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(req)
}

// Args are the flags Start runs kube-apiserver with on port, with the service-account key and the
// static token file in o.Dir: the fewest that start it on etcd alone, without a controller
// manager, serving the token's user and authorizing everything (AlwaysAllow, which refuses
// anonymous access), with the ServiceAccount admission plugin off (it refuses pods whose namespace
// has no default service account, which a controller makes).
func (o Options) Args(port int) []string {
	keyFile := filepath.Join(o.Dir, "sa.key")
	args := []string{
		"--etcd-servers=" + strings.Join(o.EtcdServers, ","),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(o.Dir, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + keyFile, "--service-account-signing-key-file=" + keyFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--token-auth-file=" + filepath.Join(o.Dir, "tokens.csv"), "--authorization-mode=AlwaysAllow",
		"--disable-admission-plugins=ServiceAccount",
		"--endpoint-reconciler-type=none",
	}
	if len(o.Overrides) > 0 {
		var ov []string
		for gr, urls := range o.Overrides {
			ov = append(ov, gr+"#"+strings.Join(urls, ";"))
		}
		args = append(args, "--etcd-servers-overrides="+strings.Join(ov, ","))
	}
	return append(args, o.Flags...)
}

func (o Options) withDefaults() (Options, error) {
	if len(o.EtcdServers) == 0 {
		return o, fmt.Errorf("%w: no etcd server", ErrInvalidOptions)
	}
	if o.Dir == "" {
		return o, fmt.Errorf("%w: no directory", ErrInvalidOptions)
	}
	for gr := range o.Overrides {
		if !strings.Contains(gr, "/") {
			return o, fmt.Errorf("%w: override %q is not group/resource", ErrInvalidOptions, gr)
		}
	}
	if o.Binary == "" {
		p, err := Path()
		if err != nil {
			return o, err
		}
		o.Binary = p
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return o, nil
}

// Start runs kube-apiserver with Args and returns once its /readyz answers 200; Stop stops it. If
// the process exits first, or the timeout passes, the error wraps ErrNotReady and quotes the end
// of its log.
func Start(ctx context.Context, opts Options) (*Server, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	token, err := writeCredentials(o.Dir)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{url: "https://127.0.0.1:" + strconv.Itoa(port), token: token, log: filepath.Join(o.Dir, "kube-apiserver.log"),
		exited: make(chan struct{})}
	out, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	s.cmd = exec.Command(o.Binary, o.Args(port)...)
	s.cmd.Stdout, s.cmd.Stderr = out, out
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotReady, err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(ctx, o.Timeout); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	return s, nil
}

// waitReady polls /readyz until it is 200, the process exits or timeout passes.
func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, tr := s.HTTPClient()
	defer tr.CloseIdleConnections()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		req, err := http.NewRequestWithContext(ctx, "GET", s.url+"/readyz", nil)
		if err != nil {
			return err
		}
		if resp, err := c.Do(req); err != nil {
			last = err.Error()
		} else {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		}
		select {
		case <-s.exited:
			return fmt.Errorf("%w: it exited (%v); the end of its log:\n%s", ErrNotReady, s.waitErr, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("%w: /readyz after %v: %s; the end of its log:\n%s", ErrNotReady, timeout, last, s.logTail())
		case <-tick.C:
		}
	}
}

// logTail is the last lines of the process's log.
func (s *Server) logTail() string {
	data, err := os.ReadFile(s.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// Stop ends the process with SIGTERM (its graceful shutdown) and waits for it; after
// DefaultStopTimeout it kills it. An exit other than by the signal is returned.
func (s *Server) Stop() error {
	select {
	case <-s.exited:
		return s.exitErr()
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(DefaultStopTimeout)
	defer t.Stop()
	select {
	case <-s.exited:
		return s.exitErr()
	case <-t.C:
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("kubebin: kube-apiserver did not stop within %v of SIGTERM; killed", DefaultStopTimeout)
	}
}

func (s *Server) exitErr() error {
	var ee *exec.ExitError
	if errors.As(s.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	if s.waitErr != nil {
		return fmt.Errorf("kubebin: kube-apiserver exited: %v; the end of its log:\n%s", s.waitErr, s.logTail())
	}
	return nil
}

// writeCredentials writes into dir a fresh ECDSA P-256 key, the service accounts' signing key (its
// public half verifies their tokens), as sa.key, and the static token file tokens.csv with a fresh
// token of user admin in group system:masters, which it returns.
func writeCredentials(dir string) (string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return "", err
	}
	token := rand.Text()
	return token, os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(token+`,admin,admin,"system:masters"`+"\n"), 0o600)
}

// freePort is a loopback port free at the time of the call: kube-apiserver takes a port number,
// not a listener.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartT starts a server with Start, its files in a temporary directory of tb, and stops it at tb's
// cleanup; without a binary (Path) it skips tb with Path's reason, and another error fails tb.
func StartT(tb testing.TB, opts Options) *Server {
	tb.Helper()
	if opts.Binary == "" {
		p, err := Path()
		if err != nil {
			tb.Skip(err)
		}
		opts.Binary = p
	}
	if opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	s, err := Start(tb.Context(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	testutil.CloseAtCleanup(tb, "stopping kube-apiserver", s.Stop)
	return s
}
