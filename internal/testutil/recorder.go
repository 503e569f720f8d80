package testutil

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// Recorder is a test whose failures are recorded instead of failing the test it wraps, so that a
// test can require a helper to fail, and say how: Error and Errorf add to Errors; Fatal and Fatalf
// record Fatal and end the goroutine, as testing.T's do (Record runs a function in a goroutine of
// its own for that). Everything else is the wrapped test's.
type Recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
	fatal  string
}

// Record runs fn with a Recorder over t in a goroutine of its own, waits until fn returns or ends
// by Fatal, and returns the recorder.
func Record(t testing.TB, fn func(testing.TB)) *Recorder {
	r := &Recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r
}

func (r *Recorder) Helper() {}

func (r *Recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }

func (r *Recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *Recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

func (r *Recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// Failed says whether an error or a fatal failure was recorded.
func (r *Recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errors) > 0 || r.fatal != ""
}

// Errors are the messages of Error and Errorf, in order.
func (r *Recorder) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...)
}

// FatalMessage is the message of Fatal or Fatalf, "" if there was none.
func (r *Recorder) FatalMessage() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}
