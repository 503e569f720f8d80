package kubeapiserver

import (
	"net"
	"sync"
)

// idleListener is the listener handed to the upstream server as its secure port. It never accepts a
// connection: the server's handler is served in plain HTTP on the real loopback listener instead (see
// Start). It exists because GenericAPIServer.RunWithContext drives the whole shutdown sequence
// (draining, storage destruction, the mux-complete and drained signals other parts wait on) around
// the secure server it starts, and starts none without a listener; with a listener that never
// accepts, no certificate is needed and no TLS handshake is ever made.
//
// closed is closed when the upstream server closes its listener, which its RunServer does at the
// point of the shutdown sequence where kube-apiserver stops accepting new requests; Start stops the
// plain server at that same point.
type idleListener struct {
	addr   net.Addr
	once   sync.Once
	closed chan struct{}
}

func newIdleListener(addr net.Addr) *idleListener {
	return &idleListener{addr: addr, closed: make(chan struct{})}
}

// Accept blocks until the listener is closed, then fails as a closed listener does.
func (l *idleListener) Accept() (net.Conn, error) {
	<-l.closed
	return nil, net.ErrClosed
}

// Close is idempotent: upstream's http.Server and Server.Stop may both close it.
func (l *idleListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr is the real loopback listener's address, which the upstream server logs and derives its
// external address from.
func (l *idleListener) Addr() net.Addr { return l.addr }
