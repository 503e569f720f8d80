package watch_test

import (
	"context"
	"flag"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/listwatch/listwatch/internal/etcdprocess"
	"github.com/listwatch/listwatch/storage"
	"github.com/listwatch/listwatch/storage/storagetest"
	"github.com/listwatch/listwatch/storage/storagetest/backend"
	"github.com/listwatch/listwatch/store"
	"github.com/listwatch/listwatch/watch"
)

var (
	withEtcd = flag.Bool("etcd", false, "also run the conformance cases against "+etcdprocess.Binary)
	short    = flag.Bool("skip-slow", false, "skip the cases that wait for real time")
)

// newInProcess returns a fresh in-process server; the test closes it.
func newInProcess(t testing.TB, opts store.Options) *backend.Backend {
	t.Helper()
	b, err := backend.NewInProcess(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close backend: %v", err)
		}
	})
	return b
}

func playCase(t *testing.T, c storagetest.Case, b *backend.Backend) {
	t.Helper()
	playCaseIn(t, c, b, storagetest.Env{Client: b.Client})
}

func playCaseIn(t *testing.T, c storagetest.Case, b *backend.Backend, env storagetest.Env) {
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

// TestConformance plays every storagetest case against a fresh in-process store served over gRPC.
func TestConformance(t *testing.T) {
	for _, c := range storagetest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if c.Slow && *short {
				t.Skip("slow")
			}
			t.Parallel()
			playCase(t, c, newInProcess(t, store.Options{}))
		})
	}
}

// TestConformanceSerialDecode plays every case with ConcurrentWatchObjectDecode off.
func TestConformanceSerialDecode(t *testing.T) {
	for _, c := range storagetest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if c.Slow && *short {
				t.Skip("slow")
			}
			t.Parallel()
			b := newInProcess(t, store.Options{})
			playCaseIn(t, c, b, storagetest.Env{Client: b.Client, NewStorage: func(cfg watch.Config) (storage.Interface, error) {
				cfg.Features.DisableConcurrentWatchObjectDecode = true
				return watch.New(b.Client, cfg)
			}})
		})
	}
}

// TestConformanceRangeStream plays every case with a client whose RangeStream RPC is served as etcd
// v3.7 serves it, so that initial lists and unfiltered lists stream.
func TestConformanceRangeStream(t *testing.T) {
	var total atomic.Int64
	t.Run("cases", func(t *testing.T) {
		for _, c := range storagetest.Cases() {
			t.Run(c.Name, func(t *testing.T) {
				if c.Slow && *short {
					t.Skip("slow")
				}
				t.Parallel()
				b := newInProcess(t, store.Options{})
				kv, streams := watch.NewRangeStreamKV(b.Client, nil)
				b.Client.KV = kv
				playCase(t, c, b)
				total.Add(streams.Load())
			})
		}
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
		for _, c := range storagetest.Cases() {
			t.Run(c.Name, func(t *testing.T) {
				if c.Slow && *short {
					t.Skip("slow")
				}
				t.Parallel()
				b := newInProcess(t, store.Options{})
				kv, attempts := watch.NewNoRangeStreamKV(b.Client)
				b.Client.KV = kv
				playCase(t, c, b)
				total.Add(attempts.Load())
			})
		}
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
	shared, err := backend.StartEtcd()
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	for _, c := range storagetest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			if c.Slow && *short {
				t.Skip("slow")
			}
			b := shared
			if c.Fresh {
				fresh, err := backend.StartEtcd()
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
