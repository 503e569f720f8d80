package watch_test

import (
	"context"
	"flag"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiwatch "k8s.io/apimachinery/pkg/watch"

	"github.com/listwatch/listwatch/internal/etcdprocess"
	"github.com/listwatch/listwatch/internal/storagebackend"
	"github.com/listwatch/listwatch/internal/storagebackend/watchsuite"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
	"github.com/listwatch/listwatch/store"
	"github.com/listwatch/listwatch/watch"
)

var (
	withEtcd = flag.Bool("etcd", false, "also run the conformance cases against "+etcdprocess.Binary)
	short    = flag.Bool("skip-slow", false, "skip the cases that wait for real time (so does -short)")
)

func playCase(t *testing.T, c storagetest.Case, b *storagebackend.Backend) {
	t.Helper()
	playCaseIn(t, c, b, watchsuite.Env(b.Client, nil))
}

func playCaseIn(t *testing.T, c storagetest.Case, b *storagebackend.Backend, env storagetest.Env) {
	t.Helper()
	got, err := c.Play(context.Background(), env)
	if err != nil {
		t.Errorf("%s: %v\ntranscript so far:\n%s", b.Name, err, strings.Join(got, "\n"))
		return
	}
	if diff := cmp.Diff(c.Want, got); diff != "" {
		t.Errorf("%s: transcript mismatch (-want +got):\n%s", b.Name, diff)
	}
}

// playEach plays every case, in parallel, each on a fresh in-process server, in the environment env
// returns for it (env may change the server's client first).
func playEach(t *testing.T, env func(t *testing.T, b *storagebackend.Backend) storagetest.Env) {
	for _, c := range storagetest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if c.Slow && (*short || testing.Short()) {
				t.Skip("slow: waits real time (a lease's expiry, a 3 s watch deadline)")
			}
			t.Parallel()
			b := storagebackend.StartInProcess(t, store.Options{})
			playCaseIn(t, c, b, env(t, b))
		})
	}
}

// TestConformance plays every storagetest case against a fresh in-process store served over gRPC.
func TestConformance(t *testing.T) {
	playEach(t, func(_ *testing.T, b *storagebackend.Backend) storagetest.Env { return watchsuite.Env(b.Client, nil) })
}

// TestConformanceSerialDecode plays every case with ConcurrentWatchObjectDecode off.
func TestConformanceSerialDecode(t *testing.T) {
	playEach(t, func(_ *testing.T, b *storagebackend.Backend) storagetest.Env {
		return watchsuite.Env(b.Client, func(f *watch.Features) { f.DisableConcurrentWatchObjectDecode = true })
	})
}

// TestConformanceRangeStream plays every case with a client whose RangeStream RPC is served as etcd
// v3.7 serves it, so that initial lists and unfiltered lists stream.
func TestConformanceRangeStream(t *testing.T) {
	var total atomic.Int64
	t.Run("cases", func(t *testing.T) {
		playEach(t, func(t *testing.T, b *storagebackend.Backend) storagetest.Env {
			kv, streams := watch.NewRangeStreamKV(b.Client, nil)
			b.Client.KV = kv
			t.Cleanup(func() { total.Add(streams.Load()) })
			return watchsuite.Env(b.Client, nil)
		})
	})
	if total.Load() == 0 {
		t.Errorf("no case streamed a list")
	}
}

// TestConformanceWithoutRangeStream plays every case with a client whose server lacks the RangeStream
// RPC, as etcd before v3.7: each storage asks once, is answered Unimplemented and pages from then on.
func TestConformanceWithoutRangeStream(t *testing.T) {
	var total atomic.Int64
	t.Run("cases", func(t *testing.T) {
		playEach(t, func(t *testing.T, b *storagebackend.Backend) storagetest.Env {
			kv, attempts := watch.NewNoRangeStreamKV(b.Client)
			b.Client.KV = kv
			t.Cleanup(func() { total.Add(attempts.Load()) })
			return watchsuite.Env(b.Client, nil)
		})
	})
	if total.Load() == 0 {
		t.Errorf("no case tried to stream a list")
	}
}

// TestConformanceEtcd plays the cases against real etcd processes (with -etcd): one shared server for
// the cases that allow it, a fresh one for each Fresh case.
func TestConformanceEtcd(t *testing.T) {
	if !*withEtcd {
		t.Skip("run with -etcd")
	}
	shared, err := storagebackend.StartEtcd()
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	for _, c := range storagetest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if c.Slow && (*short || testing.Short()) {
				t.Skip("slow: waits real time (a lease's expiry, a 3 s watch deadline)")
			}
			b := shared
			if c.Fresh {
				fresh, err := storagebackend.StartEtcd()
				if err != nil {
					t.Fatal(err)
				}
				defer fresh.Close()
				b = fresh
			}
			playCase(t, c, b)
		})
	}
}

// filteredStore is an etcd3 storage whose watches pass through filter, to make it misbehave.
type filteredStore struct {
	*watch.Store
	filter apiwatch.FilterFunc
}

func (s filteredStore) Watch(ctx context.Context, key string, opts storage.ListOptions) (apiwatch.Interface, error) {
	w, err := s.Store.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	return apiwatch.Filter(w, s.filter), nil
}

func caseNamed(t *testing.T, name string) storagetest.Case {
	t.Helper()
	for _, c := range storagetest.Cases() {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no case %s", name)
	return storagetest.Case{}
}

// TestPlayFailsOnDeviation checks the suite's harness (storagetest's first invariant): a case played against a faithful storage yields its Want; against a
// storage whose watch turns MODIFIED into ADDED the transcript differs, and against one whose watch
// delivers nothing Play fails once Env.Timeout has passed instead of passing silently.
func TestPlayFailsOnDeviation(t *testing.T) {
	c := caseNamed(t, "WatchFromNonZero")
	for _, tc := range []struct {
		name     string
		filter   apiwatch.FilterFunc
		wantDiff string // a line the transcript must have instead of Want's
		wantErr  string
	}{
		{name: "faithful"},
		{name: "wrong event type", filter: func(e apiwatch.Event) (apiwatch.Event, bool) {
			if e.Type == apiwatch.Modified {
				e.Type = apiwatch.Added
			}
			return e, true
		}, wantDiff: "w ADDED test-ns/foo rv=+2 annotations=version=2"},
		{name: "no events", filter: func(apiwatch.Event) (apiwatch.Event, bool) { return apiwatch.Event{}, false },
			wantErr: "WatchFromNonZero: w: no event within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := storagebackend.StartInProcess(t, store.Options{})
			env := watchsuite.Env(b.Client, nil)
			env.Timeout = time.Second
			if tc.filter != nil {
				env.NewStorage = func(cfg storagetest.Config) (storage.Interface, error) {
					s, err := watch.New(b.Client, watchsuite.Config(cfg))
					return filteredStore{Store: s, filter: tc.filter}, err
				}
			}
			got, err := c.Play(context.Background(), env)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Play: %v, want an error containing %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatalf("Play: %v", err)
			case tc.wantDiff == "":
				if diff := cmp.Diff(c.Want, got); diff != "" {
					t.Errorf("transcript mismatch (-want +got):\n%s", diff)
				}
			default:
				if cmp.Equal(c.Want, got) || !strings.Contains(strings.Join(got, "\n"), tc.wantDiff) {
					t.Errorf("transcript %q, want one with %q", got, tc.wantDiff)
				}
			}
		})
	}
}
