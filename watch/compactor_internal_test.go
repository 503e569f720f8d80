package watch

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/internal/storagebackend"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

// otherClient is a second client of b's store: another apiserver sharing the etcd.
func otherClient(t *testing.T, st *store.Store) *clientv3.Client {
	t.Helper()
	cli, stop, err := etcdgrpc.NewClient(st, etcdgrpc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.CloseAtCleanup(t, "stopping the other client", stop)
	return cli
}

// compactAsApiserver compacts at rev by the apiserver's protocol (etcd3/compact.go Compact): announce
// rev in compact_rev_key, then compact.
func compactAsApiserver(t *testing.T, cli *clientv3.Client, rev int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := cli.Put(ctx, compactRevKey, strconv.FormatInt(rev, 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
}

// logRecorder keeps the error values of the records logged to it.
type logRecorder struct {
	mu   sync.Mutex
	errs []error
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok {
			l.mu.Lock()
			l.errs = append(l.errs, err)
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

// count is how many logged errors match target.
func (l *logRecorder) count(target error) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, err := range l.errs {
		if errors.Is(err, target) {
			n++
		}
	}
	return n
}

// untilCompactRevision steps clk past the watch's retry until s knows rev as compacted.
func untilCompactRevision(t *testing.T, s *Store, clk *testingclock.FakeClock, rev int64) {
	t.Helper()
	testutil.WaitFor(t, "the store to see the compaction at "+strconv.FormatInt(rev, 10), func() bool {
		clk.Step(compactWatchRetry)
		return s.CompactRevision() == rev
	})
}

// TestCompactRevisionSeesOtherClients: a compaction another client announces in compact_rev_key,
// before the Store starts and while it runs, is the Store's CompactRevision, as upstream's compactor
// watch loop makes it (etcd3/compact.go runWatchLoop); an older announcement does not lower it, and
// Compact through the Store still counts.
func TestCompactRevisionSeesOtherClients(t *testing.T) {
	b := storagebackend.StartInProcess(t, store.Options{})
	other := otherClient(t, b.Store)
	ctx := context.Background()
	for i := range 6 {
		if _, err := other.Put(ctx, "/registry/pods/ns/p", strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	compactAsApiserver(t, other, 3)
	clk := testingclock.NewFakeClock(time.Now())
	s := newStorageOn(t, b, Config{Clock: clk})
	if got := s.CompactRevision(); got != 0 {
		t.Fatalf("CompactRevision before the first read = %d, want 0 (the read waits %v)", got, compactWatchRetry)
	}
	untilCompactRevision(t, s, clk, 3)

	compactAsApiserver(t, other, 5)
	testutil.WaitFor(t, "the watch to see the compaction at 5", func() bool { return s.CompactRevision() == 5 })

	if _, err := other.Put(ctx, compactRevKey, "4"); err != nil {
		t.Fatal(err)
	}
	rev, err := s.GetCurrentResourceVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, int64(rev)); err != nil {
		t.Fatal(err)
	}
	if got := s.CompactRevision(); got != int64(rev) {
		t.Fatalf("CompactRevision after Compact(%d) = %d", rev, got)
	}
	s.Close()
	s.Close()
}

// TestCompactRevisionMalformed: a compact_rev_key value that is not a revision, at the first read or
// in the watch, is logged as ErrMalformedCompactRevision and skipped; the revision known stays, and
// the next well-formed value is seen.
func TestCompactRevisionMalformed(t *testing.T) {
	b := storagebackend.StartInProcess(t, store.Options{})
	other := otherClient(t, b.Store)
	ctx := context.Background()
	if _, err := other.Put(ctx, compactRevKey, "not-a-revision"); err != nil {
		t.Fatal(err)
	}
	logs := &logRecorder{}
	clk := testingclock.NewFakeClock(time.Now())
	s := newStorageOn(t, b, Config{Clock: clk, Logger: slog.New(logs)})
	testutil.WaitFor(t, "the malformed value at the first read to be reported", func() bool {
		clk.Step(compactWatchRetry)
		return logs.count(ErrMalformedCompactRevision) > 0
	})
	if got := s.CompactRevision(); got != 0 {
		t.Fatalf("CompactRevision after a malformed value = %d, want 0", got)
	}

	compactAsApiserver(t, other, 2)
	untilCompactRevision(t, s, clk, 2)

	reported := logs.count(ErrMalformedCompactRevision)
	if _, err := other.Put(ctx, compactRevKey, "-x"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the malformed value in the watch to be reported", func() bool {
		return logs.count(ErrMalformedCompactRevision) > reported
	})
	if got := s.CompactRevision(); got != 2 {
		t.Fatalf("CompactRevision after a malformed value = %d, want 2", got)
	}
	compactAsApiserver(t, other, 4)
	testutil.WaitFor(t, "the watch to see the compaction at 4", func() bool { return s.CompactRevision() == 4 })
}

// TestCompactRevisionWithoutSnapshots: with ListFromCacheSnapshot off (Features.
// DisableListFromCacheSnapshot), as upstream's NewCompactor without its runWatchLoop, the Store does
// not follow compact_rev_key: a compaction another client announces stays unseen while a Store with
// the default features on the same clock sees it; a compaction through Compact is still known.
// Failure mode: the announcement seen, i.e. the watch loop running with the gate off.
func TestCompactRevisionWithoutSnapshots(t *testing.T) {
	b := storagebackend.StartInProcess(t, store.Options{})
	other := otherClient(t, b.Store)
	ctx := context.Background()
	for i := range 4 {
		if _, err := other.Put(ctx, "/registry/pods/ns/p", strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	clk := testingclock.NewFakeClock(time.Now())
	off := newStorageOn(t, b, Config{Clock: clk, Features: Features{DisableListFromCacheSnapshot: true}})
	select {
	case <-off.compaction.done:
	default:
		t.Fatal("the watch of compact_rev_key runs without snapshots")
	}
	on := newStorageOn(t, b, Config{Clock: clk})
	compactAsApiserver(t, other, 3)
	untilCompactRevision(t, on, clk, 3)
	if got := off.CompactRevision(); got != 0 {
		t.Fatalf("CompactRevision without snapshots after another client's compaction = %d, want 0", got)
	}
	rev, err := off.GetCurrentResourceVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Compact(ctx, int64(rev)); err != nil {
		t.Fatal(err)
	}
	if got := off.CompactRevision(); got != int64(rev) {
		t.Fatalf("CompactRevision after Compact(%d) = %d", rev, got)
	}
	off.Close()
	off.Close()
}
