package etcdgrpc_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

// rangeStream sends req as one RangeStream and returns its chunks in order and the error that ended
// it, nil for a clean end.
func rangeStream(ctx context.Context, kvc pb.KVClient, req *pb.RangeRequest) ([]*pb.RangeResponse, error) {
	rs, err := kvc.RangeStream(ctx, req)
	if err != nil {
		return nil, err
	}
	var chunks []*pb.RangeResponse
	for {
		resp, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return chunks, nil
		}
		if err != nil {
			return chunks, err
		}
		chunks = append(chunks, resp.RangeResponse)
	}
}

// getStream reads a stream through clientv3's GetStream, as its users do, and returns the chunks
// and the terminal error, if any.
func getStream(ctx context.Context, cli *clientv3.Client, key string, opts ...clientv3.OpOption) ([]*pb.RangeResponse, error) {
	ch, err := cli.GetStream(ctx, key, opts...)
	if err != nil {
		return nil, err
	}
	var chunks []*pb.RangeResponse
	var streamErr error
	for r := range ch {
		if err := r.Err(); err != nil {
			streamErr = err
			continue
		}
		chunks = append(chunks, r.RangeResponse)
	}
	return chunks, streamErr
}

// merged joins chunks as clientv3.GetStreamToGetResponse does.
func merged(chunks []*pb.RangeResponse) *pb.RangeResponse {
	out := &pb.RangeResponse{}
	for _, c := range chunks {
		proto.Merge(out, c)
	}
	return out
}

// diffRange compares two range answers, quickly when they are equal (cmp walks values byte by
// byte); in the diff, values longer than 32 bytes stand as their length and hash.
func diffRange(want, got *pb.RangeResponse) string {
	if proto.Equal(want, got) {
		return ""
	}
	short := func(r *pb.RangeResponse) *pb.RangeResponse {
		r = proto.Clone(r).(*pb.RangeResponse)
		for _, kv := range r.Kvs {
			if len(kv.Value) > 32 {
				kv.Value = fmt.Appendf(nil, "%d bytes, sha256 %x", len(kv.Value), sha256.Sum256(kv.Value))
			}
		}
		return r
	}
	return cmp.Diff(short(want), short(got), protocmp.Transform())
}

func chunkLens(chunks []*pb.RangeResponse) []int {
	out := make([]int, len(chunks))
	for i, c := range chunks {
		out[i] = len(c.Kvs)
	}
	return out
}

// checkChunks checks the shape etcd's rangeStream gives a stream: only the last chunk carries a
// header, More and Count, and its header has the member's identity and revision rev.
func checkChunks(t *testing.T, what string, chunks []*pb.RangeResponse, rev int64) {
	t.Helper()
	if len(chunks) == 0 {
		t.Errorf("%s: no chunks", what)
		return
	}
	for i, c := range chunks[:len(chunks)-1] {
		if c.Header != nil || c.More || c.Count != 0 {
			t.Errorf("%s: chunk %d of %d has header %v, more %v, count %d; want none before the last", what, i, len(chunks), c.Header, c.More, c.Count)
		}
		if len(c.Kvs) == 0 {
			t.Errorf("%s: chunk %d of %d is empty", what, i, len(chunks))
		}
	}
	last := chunks[len(chunks)-1]
	if last.Header == nil {
		t.Errorf("%s: last chunk has no header", what)
		return
	}
	checkHeader(t, what+" last chunk", last.Header, rev)
}

func putN(t *testing.T, st *store.Store, prefix string, n int, value []byte) {
	t.Helper()
	for i := range n {
		if _, err := st.Put(&store.PutRequest{Key: fmt.Appendf(nil, "%s%04d", prefix, i), Value: value}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRangeStreamMatchesRange checks, as etcd's TestV3RangeRequest and TestV3RangeStreamCount do,
// that the chunks of a RangeStream merged together are exactly the Range answer to the same request,
// header included, and that they come in the chunks etcd's rangeStream cuts: 10 keys first, then
// double while chunks stay small.
func TestRangeStreamMatchesRange(t *testing.T) {
	st, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	// b a c d c: create order differs from key order; then k00..k24; then d is deleted.
	for _, k := range []string{"b", "a", "c", "d", "c"} {
		if _, err := cli.Put(ctx, k, "v-"+k); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 25 {
		if _, err := cli.Put(ctx, fmt.Sprintf("k%02d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Delete(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	rev := st.Rev()
	if rev != 32 {
		t.Fatalf("revision %d after the fixture, want 32", rev)
	}
	// kr sets r to range over the k keys.
	kr := func(r *pb.RangeRequest) *pb.RangeRequest { r.Key, r.RangeEnd = []byte("k"), []byte("l"); return r }
	cases := []struct {
		name   string
		req    *pb.RangeRequest
		chunks []int
	}{
		{"all", &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z")}, []int{10, 18}},
		{"from key zero", &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}}, []int{10, 18}},
		{"[b, d)", &pb.RangeRequest{Key: []byte("b"), RangeEnd: []byte("d")}, []int{2}},
		{"out of range", &pb.RangeRequest{Key: []byte("x"), RangeEnd: []byte("z")}, []int{0}},
		{"[c, c)", &pb.RangeRequest{Key: []byte("c"), RangeEnd: []byte("c")}, []int{0}},
		{"[d, b)", &pb.RangeRequest{Key: []byte("d"), RangeEnd: []byte("b")}, []int{0}},
		{"single key", &pb.RangeRequest{Key: []byte("a")}, []int{1}},
		{"single key with limit", &pb.RangeRequest{Key: []byte("a"), Limit: 1}, []int{1}},
		{"deleted key", &pb.RangeRequest{Key: []byte("d")}, []int{0}},
		{"deleted key at an older revision", &pb.RangeRequest{Key: []byte("d"), Revision: 31}, []int{1}},
		{"revision 1", &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z"), Revision: 1}, []int{0}},
		{"revision 3", &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z"), Revision: 3}, []int{2}},
		{"revision 6", &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z"), Revision: 6}, []int{4}},
		{"revision 20 over chunks", kr(&pb.RangeRequest{Revision: 20}), []int{10, 4}},
		{"current revision given", kr(&pb.RangeRequest{Revision: 32}), []int{10, 15}},
		{"serializable", kr(&pb.RangeRequest{Serializable: true}), []int{10, 15}},
		{"keys only", kr(&pb.RangeRequest{KeysOnly: true}), []int{10, 15}},
		{"limit 1", kr(&pb.RangeRequest{Limit: 1}), []int{1}},
		{"limit 5", kr(&pb.RangeRequest{Limit: 5}), []int{5}},
		{"limit 10, the first chunk", kr(&pb.RangeRequest{Limit: 10}), []int{10}},
		{"limit 11", kr(&pb.RangeRequest{Limit: 11}), []int{10, 1}},
		{"limit 24", kr(&pb.RangeRequest{Limit: 24}), []int{10, 14}},
		{"limit 25, all", kr(&pb.RangeRequest{Limit: 25}), []int{10, 15}},
		{"limit 100", kr(&pb.RangeRequest{Limit: 100}), []int{10, 15}},
		{"limit 5 at revision 20", kr(&pb.RangeRequest{Limit: 5, Revision: 20}), []int{5}},
		{"limit 12 at revision 20", kr(&pb.RangeRequest{Limit: 12, Revision: 20}), []int{10, 2}},
		{"negative limit reads all at once", kr(&pb.RangeRequest{Limit: -1}), []int{25}},
		{"count only", &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z"), CountOnly: true}, []int{0}},
		{"count only, one key", &pb.RangeRequest{Key: []byte("b"), RangeEnd: []byte("c"), CountOnly: true}, []int{0}},
		{"count only, none", &pb.RangeRequest{Key: []byte("x"), RangeEnd: []byte("z"), CountOnly: true}, []int{0}},
		{"count only ignores limit", &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z"), CountOnly: true, Limit: 1}, []int{0}},
		{"count only at revision 20", &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z"), CountOnly: true, Revision: 20}, []int{0}},
		{"count only with keys only", &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z"), CountOnly: true, KeysOnly: true}, []int{0}},
		{"sort ascending by key", &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z"), Limit: 1,
			SortOrder: pb.RangeRequest_ASCEND, SortTarget: pb.RangeRequest_KEY}, []int{1}},
		// No sort order with another target is the default ordering for RangeStream, yet each chunk
		// is sorted by that target, ascending, as Range sorts its answer.
		{"no order, create target", &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("j"), Limit: 10,
			SortOrder: pb.RangeRequest_NONE, SortTarget: pb.RangeRequest_CREATE}, []int{3}},
		{"no order, value target", &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("j"),
			SortOrder: pb.RangeRequest_NONE, SortTarget: pb.RangeRequest_VALUE}, []int{3}},
	}
	kvc := pb.NewKVClient(cli.ActiveConnection())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want, err := kvc.Range(ctx, c.req)
			if err != nil {
				t.Fatal(err)
			}
			chunks, err := rangeStream(ctx, kvc, c.req)
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			checkChunks(t, c.name, chunks, rev)
			if got := chunkLens(chunks); !cmp.Equal(got, c.chunks) {
				t.Errorf("chunk sizes %v, want %v", got, c.chunks)
			}
			if diff := diffRange(want, merged(chunks)); diff != "" {
				t.Errorf("merged stream differs from Range (-range +stream):\n%s", diff)
			}
		})
	}
	// What the sort cases rely on: the no-order cases really reorder.
	if g, err := cli.Get(ctx, "a", clientv3.WithRange("j"), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortNone)); err != nil ||
		kvString(g.Kvs) != "b=v-b@2/2/v1 a=v-a@3/3/v1 c=v-c@4/6/v2" {
		t.Errorf("range sorted by create revision: %q, %v", kvString(g.Kvs), err)
	}
	if st.Rev() != rev {
		t.Errorf("revision %d after reads, want %d", st.Rev(), rev)
	}
}

// TestRangeStreamChunkSizes checks that chunks follow etcd's adjustChunkLimit against
// MaxRequestBytes: the limit doubles while a chunk encodes to under half of it, holds between half
// and twice, halves above twice, and never drops below one key.
func TestRangeStreamChunkSizes(t *testing.T) {
	const target = 64 << 10
	cases := []struct {
		name       string
		storeLimit int // the store's MaxRequestBytes, which bounds the values it accepts
		keys       int
		valueSize  int
		chunks     []int
	}{
		// 10 x 1 KiB is under 32 KiB: 20; still under: 40; 40 KiB sits in [32 KiB, 128 KiB].
		{"doubling then steady", target, 300, 1 << 10, []int{10, 20, 40, 40, 40, 40, 40, 40, 30}},
		// 10 x 60 KiB is over 128 KiB: 5; still over: 2; 120 KiB is in range.
		{"halving then steady", target, 21, 60 << 10, []int{10, 5, 2, 2, 2}},
		// Values over twice the target, as etcd has after a restart with a smaller
		// --max-request-bytes (its TestV3RangeStreamLargeValues): halving stops at one key.
		{"values over twice the target", 1 << 20, 20, 150 << 10, []int{10, 5, 2, 1, 1, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, cli := newClientWith(t, store.Options{MaxRequestBytes: c.storeLimit}, etcdgrpc.Options{MaxRequestBytes: target})
			ctx := testContext(t)
			putN(t, st, "big/", c.keys, make([]byte, c.valueSize))
			rev := st.Rev()
			chunks, err := getStream(ctx, cli, "big/", clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			checkChunks(t, c.name, chunks, rev)
			if got := chunkLens(chunks); !cmp.Equal(got, c.chunks) {
				t.Errorf("chunk sizes %v, want %v", got, c.chunks)
			}
			want, err := cli.Get(ctx, "big/", clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffRange((*pb.RangeResponse)(want), merged(chunks)); diff != "" {
				t.Errorf("merged stream differs from Range (-range +stream):\n%s", diff)
			}
		})
	}
}

// TestRangeStreamPinnedRevision writes between chunks, as etcd's TestV3RangeStreamWriteBetweenChunks
// does: every chunk is read at the revision of the first, so the stream is the snapshot at that
// revision and the last header holds it. With an explicit revision the chunks are read there and
// the header holds the revision the store had when the stream began.
func TestRangeStreamPinnedRevision(t *testing.T) {
	for _, explicit := range []bool{false, true} {
		t.Run(fmt.Sprintf("explicit=%v", explicit), func(t *testing.T) {
			var st *store.Store
			var began atomic.Int64
			put := func(k, v string) {
				if _, err := st.Put(&store.PutRequest{Key: []byte(k), Value: []byte(v)}); err != nil {
					t.Errorf("put %s: %v", k, err)
				}
			}
			opts := etcdgrpc.WithBeforeRangeStreamChunk(etcdgrpc.Options{}, func(_ context.Context, chunk int) {
				switch chunk {
				case 0:
					began.Store(st.Rev())
				case 1:
					put("p/0000", "changed") // already sent
					put("p/0050", "changed") // still to come
					put("p/0055x", "new")
					put("p/", "new, before every key")
					if _, err := st.DeleteRange(&store.DeleteRangeRequest{Key: []byte("p/0040")}); err != nil {
						t.Errorf("delete between chunks: %v", err)
					}
				case 2:
					put("p/9999", "new, after every key")
				}
			})
			st, cli := newClientWith(t, store.Options{}, opts)
			ctx := testContext(t)
			putN(t, st, "p/", 60, make([]byte, 1<<10))
			readRev := st.Rev()
			var streamOpts []clientv3.OpOption
			if explicit {
				// Writes after the requested revision and before the stream.
				put("p/0001", "changed")
				put("p/0061", "new")
				streamOpts = append(streamOpts, clientv3.WithRev(readRev))
			}
			chunks, err := getStream(ctx, cli, "p/", append(streamOpts, clientv3.WithPrefix())...)
			if err != nil {
				t.Fatal(err)
			}
			start := began.Load()
			if explicit && start != readRev+2 || !explicit && start != readRev {
				t.Fatalf("stream began at revision %d, reading revision %d", start, readRev)
			}
			if st.Rev() != start+6 {
				t.Fatalf("revision %d after the stream, want the 6 writes after %d", st.Rev(), start)
			}
			if got := chunkLens(chunks); !cmp.Equal(got, []int{10, 20, 30}) {
				t.Errorf("chunk sizes %v, want [10 20 30]", got)
			}
			// The last header holds the revision the stream began at, not the requested one.
			checkChunks(t, "stream", chunks, start)
			want, err := cli.Get(ctx, "p/", clientv3.WithPrefix(), clientv3.WithRev(readRev))
			if err != nil {
				t.Fatal(err)
			}
			// Range's header holds the current revision; the rest must be equal.
			want.Header.Revision = start
			got := merged(chunks)
			if diff := diffRange((*pb.RangeResponse)(want), got); diff != "" {
				t.Errorf("stream differs from the range at revision %d (-range +stream):\n%s", readRev, diff)
			}
			if len(got.Kvs) != 60 || got.Count != 60 {
				t.Errorf("%d keys, count %d; want the 60 of revision %d", len(got.Kvs), got.Count, readRev)
			}
			for _, kv := range got.Kvs {
				if kv.ModRevision > readRev {
					t.Errorf("key %s of revision %d is in a stream read at %d", kv.Key, kv.ModRevision, readRev)
				}
			}
		})
	}
}

// TestRangeStreamConcurrentWrites streams a prefix while a writer keeps changing it, waiting at
// every chunk for at least one write, and requires each stream to equal the range at its header's
// revision.
func TestRangeStreamConcurrentWrites(t *testing.T) {
	wrote := make(chan struct{}, 1)
	writerDone := make(chan struct{})
	opts := etcdgrpc.WithBeforeRangeStreamChunk(etcdgrpc.Options{}, func(_ context.Context, chunk int) {
		if chunk == 0 {
			return
		}
		select {
		case <-wrote:
		case <-writerDone:
		case <-time.After(testutil.WaitTimeout):
			t.Errorf("no write before chunk %d", chunk)
		}
	})
	st, cli := newClientWith(t, store.Options{}, opts)
	ctx := testContext(t)
	value := make([]byte, 1<<10)
	const keys = 200
	putN(t, st, "c/", keys, value)

	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		defer close(writerDone)
		for i := 0; wctx.Err() == nil; i++ {
			k := fmt.Sprintf("c/%04d", (i*37)%(keys+20))
			var err error
			if i%5 == 4 {
				_, err = cli.Delete(wctx, k)
			} else {
				_, err = cli.Put(wctx, k, fmt.Sprint(i))
			}
			if err != nil && wctx.Err() == nil {
				writeErr = err
				return
			}
			select {
			case wrote <- struct{}{}:
			default:
			}
		}
	})
	for round := range 5 {
		chunks, err := getStream(ctx, cli, "c/", clientv3.WithPrefix())
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if len(chunks) < 4 {
			t.Errorf("round %d: %d chunks, want several", round, len(chunks))
		}
		got := merged(chunks)
		rev := got.GetHeader().GetRevision()
		checkChunks(t, fmt.Sprintf("round %d", round), chunks, rev)
		want, err := cli.Get(ctx, "c/", clientv3.WithPrefix(), clientv3.WithRev(rev))
		if err != nil {
			t.Fatalf("round %d: range at %d: %v", round, rev, err)
		}
		if want.Header.Revision <= rev {
			t.Errorf("round %d: no write after the stream's revision %d", round, rev)
		}
		want.Header.Revision = rev
		if diff := diffRange((*pb.RangeResponse)(want), got); diff != "" {
			t.Errorf("round %d: stream differs from the range at revision %d (-range +stream):\n%s", round, rev, diff)
		}
	}
	stop()
	wg.Wait()
	if writeErr != nil {
		t.Fatalf("writer: %v", writeErr)
	}
}

// TestRangeStreamErrors checks each refusal: the errors Range gives for the same request where
// Range would fail, and v3rpc's Unimplemented answers for what only RangeStream refuses, checked in
// v3rpc's order. Nothing is sent before the error and nothing changes.
func TestRangeStreamErrors(t *testing.T) {
	st, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	for i := range 5 {
		if _, err := cli.Put(ctx, "foo", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Compact(ctx, 4); err != nil {
		t.Fatal(err)
	}
	rev := st.Rev()
	kvc := pb.NewKVClient(cli.ActiveConnection())

	// Where Range fails too, the stream fails with the same gRPC error, and clientv3 turns it into
	// the same rpctypes error.
	for _, c := range []struct {
		name string
		req  *pb.RangeRequest
		want error
	}{
		{"compacted revision", &pb.RangeRequest{Key: []byte("foo"), Revision: 3}, rpctypes.ErrCompacted},
		{"compacted revision, count only", &pb.RangeRequest{Key: []byte("foo"), Revision: 3, CountOnly: true}, rpctypes.ErrCompacted},
		{"future revision", &pb.RangeRequest{Key: []byte("foo"), RangeEnd: []byte("fop"), Revision: rev + 1}, rpctypes.ErrFutureRev},
		{"empty key", &pb.RangeRequest{}, rpctypes.ErrEmptyKey},
		{"invalid sort order", &pb.RangeRequest{Key: []byte("foo"), SortOrder: 7}, rpctypes.ErrInvalidSortOption},
		{"invalid sort target", &pb.RangeRequest{Key: []byte("foo"), SortTarget: 9}, rpctypes.ErrInvalidSortOption},
		{"empty key before a custom sort", &pb.RangeRequest{SortOrder: pb.RangeRequest_DESCEND}, rpctypes.ErrEmptyKey},
		{"invalid sort before revision filters", &pb.RangeRequest{Key: []byte("foo"), SortTarget: 9, MinModRevision: 2}, rpctypes.ErrInvalidSortOption},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, rangeErr := kvc.Range(ctx, c.req)
			chunks, err := rangeStream(ctx, kvc, c.req)
			if len(chunks) != 0 {
				t.Errorf("%d chunks before the error", len(chunks))
			}
			if rangeErr == nil || status.Code(err) != status.Code(rangeErr) || status.Convert(err).Message() != status.Convert(rangeErr).Message() {
				t.Errorf("stream error %v, Range error %v; want both %v", err, rangeErr, c.want)
			}
			if !errors.Is(rpctypes.Error(err), c.want) {
				t.Errorf("stream error %v, want %v", err, c.want)
			}
		})
	}
	// clientv3's GetStream surfaces the typed error, as its Get does (etcd's TestKVGetStreamCompactedError).
	ch, err := cli.GetStream(ctx, "foo", clientv3.WithRev(3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clientv3.GetStreamToGetResponse(ch); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("GetStream at a compacted revision: %v (%T), want %v", err, err, rpctypes.ErrCompacted)
	}
	if _, err := getStream(ctx, cli, ""); !errors.Is(err, rpctypes.ErrEmptyKey) {
		t.Errorf("GetStream of the empty key: %v, want %v", err, rpctypes.ErrEmptyKey)
	}

	// What Range serves and RangeStream does not: Unimplemented with v3rpc's messages.
	const sortMsg, filterMsg = "RangeStream does not support custom sort orders", "RangeStream does not support revision filters"
	for _, c := range []struct {
		name string
		req  *pb.RangeRequest
		msg  string
	}{
		{"descending by key", &pb.RangeRequest{Key: []byte("foo"), SortOrder: pb.RangeRequest_DESCEND, SortTarget: pb.RangeRequest_KEY}, sortMsg},
		{"ascending by create", &pb.RangeRequest{Key: []byte("foo"), SortOrder: pb.RangeRequest_ASCEND, SortTarget: pb.RangeRequest_CREATE}, sortMsg},
		{"descending by value", &pb.RangeRequest{Key: []byte("foo"), SortOrder: pb.RangeRequest_DESCEND, SortTarget: pb.RangeRequest_VALUE}, sortMsg},
		{"min mod revision", &pb.RangeRequest{Key: []byte("foo"), MinModRevision: 2}, filterMsg},
		{"max mod revision", &pb.RangeRequest{Key: []byte("foo"), MaxModRevision: 2}, filterMsg},
		{"min create revision", &pb.RangeRequest{Key: []byte("foo"), MinCreateRevision: 2}, filterMsg},
		{"max create revision", &pb.RangeRequest{Key: []byte("foo"), MaxCreateRevision: 2}, filterMsg},
		{"filter with count only", &pb.RangeRequest{Key: []byte("foo"), MaxCreateRevision: 2, CountOnly: true}, filterMsg},
		{"custom sort before filters", &pb.RangeRequest{Key: []byte("foo"), SortOrder: pb.RangeRequest_DESCEND, MinModRevision: 2}, sortMsg},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := kvc.Range(ctx, c.req); err != nil {
				t.Fatalf("Range serves it: %v", err)
			}
			chunks, err := rangeStream(ctx, kvc, c.req)
			if s := status.Convert(err); len(chunks) != 0 || s.Code() != codes.Unimplemented || s.Message() != c.msg {
				t.Errorf("%d chunks, error %v; want none and Unimplemented %q", len(chunks), err, c.msg)
			}
		})
	}
	if _, err := getStream(ctx, cli, "foo", clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend)); status.Code(err) != codes.Unimplemented {
		t.Errorf("GetStream with a sort: %v, want Unimplemented", err)
	}
	if st.Rev() != rev {
		t.Errorf("revision %d after refused streams, want %d", st.Rev(), rev)
	}
}

// TestRangeStreamCompactedMidStream compacts past the pinned revision after the first chunk, as
// etcd's TestV3RangeStreamPartialThenCompacted does: the keys sent stay sent and the next chunk
// fails with ErrCompacted rather than read another revision.
func TestRangeStreamCompactedMidStream(t *testing.T) {
	var st *store.Store
	opts := etcdgrpc.WithBeforeRangeStreamChunk(etcdgrpc.Options{}, func(_ context.Context, chunk int) {
		if chunk != 1 {
			return
		}
		p, err := st.Put(&store.PutRequest{Key: []byte("zz-advance-revision"), Value: []byte("x")})
		if err == nil {
			_, err = st.Compact(p.Header.Revision)
		}
		if err != nil {
			t.Errorf("compacting between chunks: %v", err)
		}
	})
	st, cli := newClientWith(t, store.Options{}, opts)
	ctx := testContext(t)
	putN(t, st, "s/", 100, make([]byte, 1<<10))
	chunks, err := getStream(ctx, cli, "s/", clientv3.WithPrefix())
	if !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("stream error %v, want %v", err, rpctypes.ErrCompacted)
	}
	if got := chunkLens(chunks); !cmp.Equal(got, []int{10}) || chunks[0].Header != nil {
		t.Fatalf("chunks before the error: %v, want one of 10 keys without a header", got)
	}
	for i, kv := range chunks[0].Kvs {
		if want := fmt.Sprintf("s/%04d", i); string(kv.Key) != want || kv.ModRevision != int64(i+2) {
			t.Errorf("key %d sent: %s@%d, want %s@%d", i, kv.Key, kv.ModRevision, want, i+2)
		}
	}
}

// TestRangeStreamCanceled cancels the client between two chunks: the handler stops before reading
// the next chunk and returns, which goleak and the server's Stop (it waits for handlers) check.
func TestRangeStreamCanceled(t *testing.T) {
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var hooked []int
	opts := etcdgrpc.WithBeforeRangeStreamChunk(etcdgrpc.Options{}, func(ctx context.Context, chunk int) {
		mu.Lock()
		hooked = append(hooked, chunk)
		first := len(hooked) == 2
		mu.Unlock()
		if first {
			cancel()
			select {
			case <-ctx.Done():
			case <-time.After(testutil.WaitTimeout):
				t.Errorf("the stream's context was not canceled")
			}
		}
	})
	st, cli := newClientWith(t, store.Options{}, opts)
	putN(t, st, "x/", 100, []byte("v"))
	_, err := getStream(cctx, cli, "x/", clientv3.WithPrefix())
	if !errors.Is(err, context.Canceled) {
		t.Errorf("stream error %v, want %v", err, context.Canceled)
	}
	// A canceled stream leaves the server serving.
	chunks, err := getStream(testContext(t), cli, "x/", clientv3.WithPrefix())
	if err != nil || len(merged(chunks).Kvs) != 100 {
		t.Errorf("stream after a canceled one: %d keys, %v", len(merged(chunks).Kvs), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !cmp.Equal(hooked, []int{0, 1, 0, 1, 2, 3}) {
		t.Errorf("chunks begun %v, want [0 1] for the canceled stream, then [0 1 2 3]", hooked)
	}
}
