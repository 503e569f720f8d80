package testutil

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"
)

// WaitTimeout bounds every wait of a test for a condition, an event or a shutdown: generous, so that
// a loaded machine running the race detector never reaches it; reaching it means something hangs,
// and is never what a test asserts. It is a minute, or the Go duration in $LISTWATCH_WAIT_TIMEOUT
// (make stress sets a longer one: a hog of twice the cores slows a whole test process tenfold and
// more).
var WaitTimeout = mustWaitTimeout(os.Getenv(WaitTimeoutVar))

// WaitTimeoutVar is the environment variable that sets WaitTimeout.
const WaitTimeoutVar = "LISTWATCH_WAIT_TIMEOUT"

// defaultWaitTimeout is WaitTimeout when WaitTimeoutVar is unset.
const defaultWaitTimeout = 60 * time.Second

// waitTimeoutFrom is the WaitTimeout that the value v of WaitTimeoutVar sets: the default when v is
// empty, an error naming the variable when v is not a positive Go duration.
func waitTimeoutFrom(v string) (time.Duration, error) {
	if v == "" {
		return defaultWaitTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive Go duration such as 5m", WaitTimeoutVar, v)
	}
	return d, nil
}

func mustWaitTimeout(v string) time.Duration {
	d, err := waitTimeoutFrom(v)
	if err != nil {
		// A test binary cannot run with a wait bound it was not given; say why at once.
		panic(err)
	}
	return d
}

// PollInterval is how often WaitFor re-checks its condition.
const PollInterval = time.Millisecond

// Poller polls a condition. The zero value polls every PollInterval for WaitTimeout and steps
// nothing.
type Poller struct {
	// Interval between polls. Default PollInterval.
	Interval time.Duration
	// Timeout after which the wait fails. Default WaitTimeout.
	Timeout time.Duration
	// Step, if not nil, runs after every poll that finds the condition false: it moves the fake
	// clocks that what is awaited may need.
	Step func()
}

// Poll polls cond until it holds, and returns an error naming what once the timeout has passed.
func (p Poller) Poll(what string, cond func() bool) error {
	interval, timeout := p.Interval, p.Timeout
	if interval <= 0 {
		interval = PollInterval
	}
	if timeout <= 0 {
		timeout = WaitTimeout
	}
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		}
		if p.Step != nil {
			p.Step()
		}
		time.Sleep(interval)
	}
	return nil
}

// TB is what WaitFor needs of a test: testing.TB has it, and so has rapid's *rapid.T.
type TB interface {
	Helper()
	Fatal(args ...any)
}

// WaitFor is Poll that fails t instead of returning an error.
func (p Poller) WaitFor(t TB, what string, cond func() bool) {
	t.Helper()
	if err := p.Poll(what, cond); err != nil {
		t.Fatal(err)
	}
}

// Poll polls cond every PollInterval until it holds, calling step (if not nil) after every poll that
// finds it false, and returns an error naming what once WaitTimeout has passed.
func Poll(what string, cond func() bool, step func()) error {
	return Poller{Step: step}.Poll(what, cond)
}

// WaitFor polls cond every PollInterval until it holds, and fails t once WaitTimeout has passed.
func WaitFor(t TB, what string, cond func() bool) {
	t.Helper()
	Poller{}.WaitFor(t, what, cond)
}

// SyncBuffer is a bytes.Buffer that one goroutine may write while another reads it, such as the
// output of a command or a process that a test inspects while it runs.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// DiscardLogger returns a logger that drops every record: for the code under test that logs what
// the test does not read.
func DiscardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// CloseAtCleanup runs stop at t's cleanup and fails t, without ending it, if stop returns an error:
// the message is what, a colon and the error. Cleanups run last registered first, so what is
// registered later (a server) stops before what it uses (a store).
func CloseAtCleanup(t testing.TB, what string, stop func() error) {
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	})
}
