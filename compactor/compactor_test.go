package compactor_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/compactor"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeStore is a revision the test sets and the compactions asked of it.
type fakeStore struct {
	mu        sync.Mutex
	rev       int64
	compacted []int64
}

func (f *fakeStore) Rev() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev
}

func (f *fakeStore) set(rev int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rev = rev
}

func (f *fakeStore) Compact(rev int64) (*store.CompactResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compacted = append(f.compacted, rev)
	return &store.CompactResponse{}, nil
}

func (f *fakeStore) got() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.compacted...)
}

// advance waits until the compactor waits on the clock, then steps it by d and waits until it
// waits again, so each step's work is done when advance returns.
func advance(t *testing.T, fc *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	testutil.WaitFor(t, "the compactor to wait", fc.HasWaiters)
	fc.Step(d)
	testutil.WaitFor(t, "the compactor to wait again", fc.HasWaiters)
}

// start runs a compactor of mode and retention on a fake clock and a fake store at rev; the test's
// cleanup stops it.
func start(t *testing.T, mode, retention string, rev int64) (*clocktesting.FakeClock, *fakeStore) {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	fs := &fakeStore{rev: rev}
	c, err := compactor.New(mode, retention, fc, fs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return fc, fs
}

func TestPeriodic(t *testing.T) {
	fc, fs := start(t, compactor.ModePeriodic, "10m", 1)
	testutil.WaitFor(t, "the first sample", fc.HasWaiters)
	// the revision is sampled every minute; write 100 revisions a minute
	for i := 1; i <= 9; i++ {
		fs.set(int64(1 + 100*i))
		advance(t, fc, time.Minute)
	}
	if got := fs.got(); len(got) != 0 {
		t.Fatalf("compacted before a period passed: %v", got)
	}
	fs.set(1001)
	advance(t, fc, time.Minute) // 10 minutes: compact to the sample of 10 minutes ago
	if got := fs.got(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("after 10 minutes: compactions %v, want [1]", got)
	}
	for i := 11; i <= 20; i++ {
		fs.set(int64(1 + 100*i))
		advance(t, fc, time.Minute)
	}
	// then every 10 minutes, to the oldest of the 11 samples kept: the one taken at minute 9
	if got := fs.got(); len(got) != 2 || got[1] != 901 {
		t.Fatalf("after 20 minutes: compactions %v, want [1 901]", got)
	}
}

func TestRevision(t *testing.T) {
	fc, fs := start(t, compactor.ModeRevision, "1000", 500)
	advance(t, fc, compactor.RevisionInterval) // 500-1000 <= 0: nothing
	fs.set(1500)
	advance(t, fc, compactor.RevisionInterval)
	advance(t, fc, compactor.RevisionInterval) // the same revision again: skipped
	fs.set(2600)
	advance(t, fc, compactor.RevisionInterval)
	if got := fs.got(); len(got) != 2 || got[0] != 500 || got[1] != 1600 {
		t.Fatalf("compactions %v, want [500 1600]", got)
	}
}

func TestNewRejectsBadSettings(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	for _, c := range [][2]string{{"periodic", "soon"}, {"periodic", "-5m"}, {"revision", "1h"}, {"revision", "-3"}, {"hourly", "1"}} {
		if got, err := compactor.New(c[0], c[1], fc, &fakeStore{}); !errors.Is(err, compactor.ErrBadRetention) || got != nil {
			t.Errorf("New(%q, %q) = %v, %v; want ErrBadRetention", c[0], c[1], got, err)
		}
	}
	for _, c := range [][2]string{{"periodic", "0"}, {"revision", "0"}, {"periodic", ""}} {
		if got, err := compactor.New(c[0], c[1], fc, &fakeStore{}); err != nil || got != nil {
			t.Errorf("New(%q, %q) = %v, %v; want disabled", c[0], c[1], got, err)
		}
	}
	var none *compactor.Compactor
	none.Stop()
}
