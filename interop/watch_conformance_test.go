package interop

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/listwatch/listwatch/internal/storagebackend/watchsuite"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/interop/internal/etcdtest"
	"github.com/listwatch/listwatch/storage/storagetest"
	"github.com/listwatch/listwatch/watch"
)

// The watch conformance cases (package storagetest) are played on a real embedded etcd v3.7 and on
// listwatch's store served by etcdgrpc, in both watch decode modes. A case passes when each
// implementation's transcript equals the case's Want, which makes the two transcripts identical; a
// difference between the implementations is also shown as a diff of one against the other, since
// that is what points at the side to blame.
//
// Each implementation gets one server per decode mode for the cases that may share one, played one
// at a time (the transcripts count revisions from the case's start, and Sync relies on progress
// requests that a concurrent case's watches would hold back), and a server of its own for each Fresh
// case. A case plays on etcd and on listwatch at the same time: they share nothing.
//
// The RangeStream RPC is counted on both clients: etcd v3.7 and etcdgrpc both serve it, so initial
// lists and unfiltered lists must really stream on both, with no RPC answered Unimplemented, and
// listwatch must stream as etcd does: as many RPCs, cut into as many chunks. The full run checks
// it, so that the streaming path is not covered only on paper.

// confCaseTimeout bounds one case on one implementation; the slowest case waits about 2 s for a lease.
const confCaseTimeout = 2 * time.Minute

// confRangeStreams counts the RangeStream RPCs of the clients of one implementation.
type confRangeStreams struct {
	calls         atomic.Int64 // RPCs started
	chunks        atomic.Int64 // responses received
	unimplemented atomic.Int64 // RPCs answered codes.Unimplemented
}

// intercept is a grpc.StreamClientInterceptor that counts RangeStream RPCs and their answers.
func (rs *confRangeStreams) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if method != pb.KV_RangeStream_FullMethodName {
		return cs, err
	}
	rs.calls.Add(1)
	if err != nil {
		rs.count(err)
		return cs, err
	}
	return &confCountingStream{ClientStream: cs, rs: rs}, nil
}

func (rs *confRangeStreams) count(err error) {
	if status.Code(err) == codes.Unimplemented {
		rs.unimplemented.Add(1)
	}
}

type confCountingStream struct {
	grpc.ClientStream
	rs *confRangeStreams
}

func (s *confCountingStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		s.rs.chunks.Add(1)
	} else {
		s.rs.count(err)
	}
	return err
}

// confServer is one server of one implementation with the client the cases use.
type confServer struct {
	impl   string // "etcd" or "listwatch"
	client *clientv3.Client
}

// env returns the environment a case plays in; serial turns ConcurrentWatchObjectDecode off.
func (s *confServer) env(serial bool) storagetest.Env {
	if serial {
		return watchsuite.Env(s.client, func(f *watch.Features) { f.DisableConcurrentWatchObjectDecode = true })
	}
	return watchsuite.Env(s.client, nil)
}

// startConfEtcd starts an embedded etcd and connects a counting client to it; both stop at cleanup.
func startConfEtcd(t *testing.T, rs *confRangeStreams) *confServer {
	t.Helper()
	own, stop, err := etcdtest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	testutil.CloseAtCleanup(t, "stopping etcd", stop)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   own.Endpoints(),
		DialTimeout: 30 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainStreamInterceptor(rs.intercept)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("closing etcd client: %v", err)
		}
	})
	return &confServer{impl: "etcd", client: cli}
}

// startConfListwatch serves a fresh store through etcdgrpc's in-process client, counting its
// RangeStream RPCs, with the lease TTL floor and member ID the embedded etcd has; it stops at cleanup.
func startConfListwatch(t *testing.T, rs *confRangeStreams) *confServer {
	t.Helper()
	cli := etcdtest.Listwatch(t, 0, func(cfg *clientv3.Config) {
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainStreamInterceptor(rs.intercept))
	})
	return &confServer{impl: "listwatch", client: cli}
}

// confTally is what the conformance run compared.
type confTally struct {
	pairs  atomic.Int64 // cases played on both implementations
	equal  atomic.Int64 // of which both transcripts were equal
	events atomic.Int64 // watch events in the transcripts compared (one implementation's count)
	lines  atomic.Int64 // transcript lines compared (one implementation's count)

}

// confEventTypes are the words after a watch's name that make a transcript line an event.
var confEventTypes = map[string]bool{"ADDED": true, "MODIFIED": true, "DELETED": true, "BOOKMARK": true, "ERROR": true}

func confCountEvents(transcript []string) int {
	n := 0
	for _, line := range transcript {
		if f := strings.Fields(line); len(f) > 1 && confEventTypes[f[1]] {
			n++
		}
	}
	return n
}

// etcdPrevKVLost is what the etcd3 storage says of a watch event etcd sent without the prev_kv it
// was asked for: etcd's watch stream looks the previous value up after the event and sends the event
// without it when that read fails (etcd-io/etcd#13131), which a busy embedded etcd did once in
// DeleteTriggerWatch with no compaction anywhere.
const etcdPrevKVLost = "etcd event received with PrevKv=nil"

// replayPrevKVLoss plays c again, on a fresh embedded etcd, up to three times while etcd's
// transcript differs from c.Want only by losing a prev_kv (etcdPrevKVLost), and returns the last
// play: a loss that comes back every time still fails the case.
func replayPrevKVLoss(t *testing.T, c storagetest.Case, serial bool, got []string, err error) ([]string, error) {
	t.Helper()
	for try := 0; try < 3 && err == nil && !slices.Equal(got, c.Want) && strings.Contains(strings.Join(got, "\n"), etcdPrevKVLost); try++ {
		t.Logf("etcd sent an event without its prev_kv (etcd-io/etcd#13131); playing %s again on a fresh etcd", c.Name)
		ctx, cancel := context.WithTimeout(t.Context(), confCaseTimeout)
		got, err = c.Play(ctx, startConfEtcd(t, &confRangeStreams{}).env(serial))
		cancel()
	}
	return got, err
}

// playConfPair plays c on both servers at once and checks both transcripts against c.Want and
// against each other.
func playConfPair(t *testing.T, c storagetest.Case, etcd, lw *confServer, serial bool, tally *confTally) {
	t.Helper()
	servers := [2]*confServer{etcd, lw}
	var got [2][]string
	var errs [2]error
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), confCaseTimeout)
			defer cancel()
			got[i], errs[i] = c.Play(ctx, s.env(serial))
		})
	}
	wg.Wait()
	got[0], errs[0] = replayPrevKVLoss(t, c, serial, got[0], errs[0])
	for i, s := range servers {
		if errs[i] != nil {
			t.Errorf("%s: case could not be played: %v\ntranscript so far:\n%s", s.impl, errs[i], strings.Join(got[i], "\n"))
			continue
		}
		if diff := cmp.Diff(c.Want, got[i]); diff != "" {
			t.Errorf("%s: transcript differs from Want (-want +%s):\n%s", s.impl, s.impl, diff)
		}
	}
	if diff := cmp.Diff(got[0], got[1]); diff != "" {
		t.Errorf("etcd and listwatch transcripts differ (-etcd +listwatch):\n%s", diff)
	} else if errs[0] == nil && errs[1] == nil {
		tally.equal.Add(1)
	}
	tally.pairs.Add(1)
	tally.events.Add(int64(confCountEvents(got[0])))
	tally.lines.Add(int64(len(got[0])))
}

// TestWatchConformanceEtcdVsListwatch plays every storagetest case on embedded etcd v3.7 and on
// listwatch, with concurrent and with serial watch object decoding, and requires every transcript to
// equal the case's Want.
func TestWatchConformanceEtcdVsListwatch(t *testing.T) {
	cases := storagetest.Cases()
	var shared, fresh []storagetest.Case
	for _, c := range cases {
		if c.Fresh {
			fresh = append(fresh, c)
		} else {
			shared = append(shared, c)
		}
	}
	var tally confTally
	var etcdStreams, lwStreams confRangeStreams
	modes := []struct {
		name   string
		serial bool
	}{{"concurrent-decode", false}, {"serial-decode", true}}
	t.Run("modes", func(t *testing.T) {
		for _, mode := range modes {
			t.Run(mode.name, func(t *testing.T) {
				t.Parallel()
				t.Run("shared", func(t *testing.T) {
					t.Parallel()
					etcd, lw := startConfEtcd(t, &etcdStreams), startConfListwatch(t, &lwStreams)
					for _, c := range shared {
						t.Run(c.Name, func(t *testing.T) { playConfPair(t, c, etcd, lw, mode.serial, &tally) })
					}
				})
				for _, c := range fresh {
					t.Run("fresh/"+c.Name, func(t *testing.T) {
						t.Parallel()
						playConfPair(t, c, startConfEtcd(t, &etcdStreams), startConfListwatch(t, &lwStreams), mode.serial, &tally)
					})
				}
			})
		}
	})
	t.Logf("%d cases (%d shared, %d fresh) x %d decode modes: %d etcd/listwatch pairs played, %d identical; "+
		"%d watch events and %d transcript lines compared per implementation",
		len(cases), len(shared), len(fresh), len(modes), tally.pairs.Load(), tally.equal.Load(), tally.events.Load(), tally.lines.Load())
	t.Logf("RangeStream: etcd %d calls, %d chunks, %d Unimplemented; listwatch %d calls, %d chunks, %d Unimplemented",
		etcdStreams.calls.Load(), etcdStreams.chunks.Load(), etcdStreams.unimplemented.Load(),
		lwStreams.calls.Load(), lwStreams.chunks.Load(), lwStreams.unimplemented.Load())

	if tally.pairs.Load() != int64(len(cases)*len(modes)) {
		return // a filtered run: the path checks below need the whole set
	}
	if etcdStreams.chunks.Load() == 0 || etcdStreams.unimplemented.Load() != 0 {
		t.Errorf("etcd did not serve the lists through RangeStream: %d calls, %d chunks, %d Unimplemented",
			etcdStreams.calls.Load(), etcdStreams.chunks.Load(), etcdStreams.unimplemented.Load())
	}
	if lwStreams.chunks.Load() == 0 || lwStreams.unimplemented.Load() != 0 {
		t.Errorf("listwatch did not serve the lists through RangeStream: %d calls, %d chunks, %d Unimplemented",
			lwStreams.calls.Load(), lwStreams.chunks.Load(), lwStreams.unimplemented.Load())
	}
	if lwStreams.calls.Load() != etcdStreams.calls.Load() || lwStreams.chunks.Load() != etcdStreams.chunks.Load() {
		t.Errorf("listwatch streamed differently from etcd: %d calls and %d chunks, etcd %d calls and %d chunks",
			lwStreams.calls.Load(), lwStreams.chunks.Load(), etcdStreams.calls.Load(), etcdStreams.chunks.Load())
	}
}
