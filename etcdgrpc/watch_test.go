package etcdgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/store"
)

func evString(evs []*clientv3.Event) string {
	var parts []string
	for _, ev := range evs {
		s := fmt.Sprintf("%s %s=%s@%d", ev.Type, ev.Kv.Key, ev.Kv.Value, ev.Kv.ModRevision)
		if ev.PrevKv != nil {
			s += fmt.Sprintf(" prev=%s@%d", ev.PrevKv.Value, ev.PrevKv.ModRevision)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// collect reads responses until n events arrived and returns them with the responses that carried them.
func collect(t *testing.T, wch clientv3.WatchChan, n int) ([]*clientv3.Event, []clientv3.WatchResponse) {
	t.Helper()
	var evs []*clientv3.Event
	var resps []clientv3.WatchResponse
	timeout := time.After(testutil.WaitTimeout)
	for len(evs) < n {
		select {
		case wr, ok := <-wch:
			if !ok {
				t.Fatalf("watch channel closed after %d of %d events: %s", len(evs), n, evString(evs))
			}
			if err := wr.Err(); err != nil {
				t.Fatalf("watch error after %d events: %v", len(evs), err)
			}
			evs = append(evs, wr.Events...)
			resps = append(resps, wr)
		case <-timeout:
			t.Fatalf("got %d of %d events: %s", len(evs), n, evString(evs))
		}
	}
	return evs, resps
}

func next(t *testing.T, wch clientv3.WatchChan) (clientv3.WatchResponse, bool) {
	t.Helper()
	select {
	case wr, ok := <-wch:
		return wr, ok
	case <-time.After(testutil.WaitTimeout):
		t.Fatal("no watch response")
		return clientv3.WatchResponse{}, false
	}
}

func TestWatchHistoryPrevKVAndFilters(t *testing.T) {
	_, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	mustPut(t, cli, "a", "1") // 2
	mustPut(t, cli, "a", "2") // 3
	mustPut(t, cli, "b", "1") // 4
	if _, err := cli.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	} // 5
	mustPut(t, cli, "a", "3") // 6

	cases := []struct {
		name string
		key  string
		opts []clientv3.OpOption
		want string
	}{
		{"prev_kv", "a", []clientv3.OpOption{clientv3.WithRev(2), clientv3.WithPrevKV()},
			"PUT a=1@2, PUT a=2@3 prev=1@2, DELETE a=@5 prev=2@3, PUT a=3@6"},
		{"no prev_kv", "a", []clientv3.OpOption{clientv3.WithRev(3)},
			"PUT a=2@3, DELETE a=@5, PUT a=3@6"},
		{"NOPUT", "a", []clientv3.OpOption{clientv3.WithRev(2), clientv3.WithFilterPut(), clientv3.WithPrevKV()},
			"DELETE a=@5 prev=2@3"},
		{"NODELETE", "a", []clientv3.OpOption{clientv3.WithRev(2), clientv3.WithFilterDelete()},
			"PUT a=1@2, PUT a=2@3, PUT a=3@6"},
		{"prefix", "", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(4)},
			"PUT b=1@4, DELETE a=@5, PUT a=3@6"},
		{"range", "a", []clientv3.OpOption{clientv3.WithRange("b"), clientv3.WithRev(4)},
			"DELETE a=@5, PUT a=3@6"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			n := strings.Count(c.want, ",") + 1
			evs, resps := collect(t, cli.Watch(wctx, c.key, c.opts...), n)
			if got := evString(evs); got != c.want {
				t.Errorf("events %q, want %q", got, c.want)
			}
			// A catch-up response reports the revision at which it was built: the current one.
			if h := resps[len(resps)-1].Header; h.Revision != 6 || h.MemberId != defaultMemberID || h.RaftTerm != 2 {
				t.Errorf("catch-up header %v, want revision 6 and the member's identity", &h)
			}
		})
	}
}

func mustPut(t *testing.T, cli *clientv3.Client, k, v string, opts ...clientv3.OpOption) *clientv3.PutResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	r, err := cli.Put(ctx, k, v, opts...)
	if err != nil {
		t.Fatalf("put %s: %v", k, err)
	}
	return r
}

func TestWatchCreatedNotifyAndLiveEvents(t *testing.T) {
	_, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	mustPut(t, cli, "k", "0")
	wch := cli.Watch(ctx, "k", clientv3.WithCreatedNotify())
	wr, _ := next(t, wch)
	if !wr.Created || wr.Header.Revision != 2 || len(wr.Events) != 0 {
		t.Fatalf("first response %+v, want created at revision 2", wr)
	}
	awaitRequestedProgress(t, cli, wch) // the watcher is synced from here on
	mustPut(t, cli, "k", "1")
	mustPut(t, cli, "other", "x")
	mustPut(t, cli, "k", "2")
	evs, resps := collect(t, wch, 2)
	if got := evString(evs); got != "PUT k=1@3, PUT k=2@5" {
		t.Errorf("events %q", got)
	}
	// A synced watcher gets one response per revision, headed by that revision.
	if len(resps) != 2 || resps[0].Header.Revision != 3 || resps[1].Header.Revision != 5 {
		t.Errorf("responses %+v, want one at revision 3 and one at 5", resps)
	}
}

func TestWatchCancelClosesChannel(t *testing.T) {
	_, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	wctx, cancel := context.WithCancel(ctx)
	wch := cli.Watch(wctx, "k", clientv3.WithCreatedNotify())
	if wr, _ := next(t, wch); !wr.Created {
		t.Fatalf("first response %+v, want created", wr)
	}
	cancel()
	for {
		wr, ok := next(t, wch)
		if !ok {
			break
		}
		if len(wr.Events) != 0 {
			t.Fatalf("event after cancel: %+v", wr)
		}
	}
	// The stream is still usable for other watches.
	wch2 := cli.Watch(ctx, "k")
	mustPut(t, cli, "k", "v")
	if evs, _ := collect(t, wch2, 1); evString(evs) != "PUT k=v@2" {
		t.Errorf("events after cancel of another watch: %s", evString(evs))
	}
}

func TestWatchCompacted(t *testing.T) {
	_, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	for i := range 4 {
		mustPut(t, cli, "k", fmt.Sprint(i)) // 2..5
	}
	if _, err := cli.Compact(ctx, 4); err != nil {
		t.Fatal(err)
	}
	wch := cli.Watch(ctx, "k", clientv3.WithRev(3))
	wr, ok := next(t, wch)
	if !ok || !errors.Is(wr.Err(), rpctypes.ErrCompacted) || wr.CompactRevision != 4 || !wr.Canceled {
		t.Fatalf("watch from below the compact revision: %+v (err %v), want compacted at 4", wr, wr.Err())
	}
	if wr.Header.Revision != 0 {
		t.Errorf("compaction answer header revision %d, want 0", wr.Header.Revision)
	}
	if _, ok := next(t, wch); ok {
		t.Error("watch channel still open after the compaction answer")
	}
	// From the compact revision itself the history is complete.
	evs, _ := collect(t, cli.Watch(ctx, "k", clientv3.WithRev(4)), 2)
	if got := evString(evs); got != "PUT k=2@4, PUT k=3@5" {
		t.Errorf("watch from the compact revision: %q", got)
	}
}

func TestWatchRequestProgress(t *testing.T) {
	_, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	mustPut(t, cli, "other", "x")
	wch := cli.Watch(ctx, "k", clientv3.WithCreatedNotify())
	if wr, _ := next(t, wch); !wr.Created {
		t.Fatalf("first response %+v, want created", wr)
	}
	mustPut(t, cli, "other", "y")
	wr := awaitRequestedProgress(t, cli, wch)
	if wr.Header.Revision != 3 || wr.Header.MemberId != defaultMemberID {
		t.Errorf("response to RequestProgress %+v, want progress at revision 3", wr)
	}
}

// awaitRequestedProgress asks for progress until it is answered. A stream answers only while all its
// watchers are synced; the store registers a watcher just after its created answer, so a write in
// between leaves it to be caught up by the next sync pass. Clients retry, as Kubernetes does.
func awaitRequestedProgress(t *testing.T, cli *clientv3.Client, wch clientv3.WatchChan) clientv3.WatchResponse {
	t.Helper()
	ctx := testContext(t)
	for {
		if err := cli.RequestProgress(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case wr := <-wch:
			if !wr.IsProgressNotify() {
				t.Fatalf("response %+v, want progress", wr)
			}
			return wr
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("RequestProgress never answered")
		}
	}
}

// TestWatchRequestProgressAfterBurst is etcd-io/etcd#15220's trigger over gRPC: a burst of writes to
// a synced watch's key, more than the stream's channel holds, then at once a RequestProgress on its
// stream, and again after every response while the events come. No notification may come ahead of
// them (etcd 3.4 sent its answer on the control stream, overtaking them); once they are all sent,
// one is answered.
func TestWatchRequestProgressAfterBurst(t *testing.T) {
	_, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	wch := cli.Watch(ctx, "k", clientv3.WithCreatedNotify())
	if wr, _ := next(t, wch); !wr.Created {
		t.Fatalf("first response %+v, want created", wr)
	}
	const burst = 300
	var last int64
	for i := range burst {
		last = mustPut(t, cli, "k", fmt.Sprint(i)).Header.Revision
	}
	var told, seen int64
	for told < last {
		if err := cli.RequestProgress(ctx); err != nil {
			t.Fatal(err)
		}
		var wr clientv3.WatchResponse
		select {
		case wr = <-wch:
		case <-time.After(200 * time.Millisecond): // a stream not yet synced is not answered: ask again
			continue
		case <-ctx.Done():
			t.Fatalf("events up to %d, progress %d: want both at %d", seen, told, last)
		}
		for _, ev := range wr.Events {
			if ev.Kv.ModRevision <= told {
				t.Fatalf("event at %d after a progress notification at %d", ev.Kv.ModRevision, told)
			}
			seen = ev.Kv.ModRevision
		}
		if wr.IsProgressNotify() {
			if wr.Header.Revision < seen {
				t.Fatalf("progress notification at %d after an event at %d", wr.Header.Revision, seen)
			}
			told = wr.Header.Revision
		}
	}
	if seen != last {
		t.Fatalf("progress at %d with events up to %d", told, seen)
	}
}

func TestWatchProgressNotify(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	const interval = time.Second
	st, cli := newClient(t, store.Options{Clock: clock, ManualTick: true, ProgressNotifyInterval: interval})
	ctx := testContext(t)
	wch := cli.Watch(ctx, "k", clientv3.WithProgressNotify(), clientv3.WithCreatedNotify())
	if wr, _ := next(t, wch); !wr.Created {
		t.Fatalf("first response %+v, want created", wr)
	}
	// The store sends the created answer just before it registers the watcher; the stream handles
	// the next request only once the watcher is registered, so a progress round trip on the same
	// stream ensures the tick below sees it.
	if err := cli.RequestProgress(ctx); err != nil {
		t.Fatal(err)
	}
	if wr, _ := next(t, wch); !wr.IsProgressNotify() || wr.Header.Revision != 1 {
		t.Fatalf("answer to RequestProgress %+v, want progress at revision 1", wr)
	}
	mustPut(t, cli, "other", "x")
	// Past the interval and its jitter (at most 10%).
	clock.Step(2 * interval)
	st.Tick()
	wr, _ := next(t, wch)
	if !wr.IsProgressNotify() || wr.Header.Revision != 2 {
		t.Errorf("after one interval: %+v, want progress at revision 2", wr)
	}
	mustPut(t, cli, "k", "v")
	if evs, _ := collect(t, wch, 1); evString(evs) != "PUT k=v@3" {
		t.Errorf("events %s", evString(evs))
	}
}

// TestWatchProtocol drives the stream protocol directly: ID allocation, create failures, cancel,
// progress requests, and their headers.
func TestWatchProtocol(t *testing.T) {
	_, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	mustPut(t, cli, "a", "0") // 2
	ws, err := pb.NewWatchClient(cli.ActiveConnection()).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(req *pb.WatchRequest) {
		t.Helper()
		if err := ws.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	create := func(c *pb.WatchCreateRequest) {
		send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: c}})
	}
	expect := func(want string) *pb.WatchResponse {
		t.Helper()
		r, err := ws.Recv()
		if err != nil {
			t.Fatalf("recv, want %s: %v", want, err)
		}
		got := fmt.Sprintf("id=%d created=%v canceled=%v reason=%q rev=%d events=%d",
			r.WatchId, r.Created, r.Canceled, r.CancelReason, r.Header.GetRevision(), len(r.Events))
		if got != want {
			t.Fatalf("response %s, want %s", got, want)
		}
		if h := r.Header; h.ClusterId != defaultClusterID || h.MemberId != defaultMemberID || h.RaftTerm != 2 {
			t.Errorf("header %v lacks the member's identity", h)
		}
		return r
	}

	create(&pb.WatchCreateRequest{Key: []byte("a")})
	expect(`id=0 created=true canceled=false reason="" rev=2 events=0`)
	create(&pb.WatchCreateRequest{Key: []byte("b"), WatchId: 7})
	expect(`id=7 created=true canceled=false reason="" rev=2 events=0`)
	create(&pb.WatchCreateRequest{Key: []byte("c")})
	expect(`id=1 created=true canceled=false reason="" rev=2 events=0`)
	create(&pb.WatchCreateRequest{Key: []byte("d"), WatchId: 7})
	expect(`id=-1 created=true canceled=true reason="mvcc: duplicate watch ID provided on the WatchStream" rev=2 events=0`)
	create(&pb.WatchCreateRequest{Key: []byte("z"), RangeEnd: []byte("a")})
	expect(`id=-1 created=true canceled=true reason="mvcc: watcher range is empty" rev=2 events=0`)
	create(&pb.WatchCreateRequest{Key: []byte("a"), StartRevision: -1})
	expect(`id=-1 created=true canceled=true reason="etcdserver: mvcc: required revision has been compacted" rev=2 events=0`)

	send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: 7}}})
	expect(`id=7 created=false canceled=true reason="" rev=2 events=0`)
	// Unknown IDs get no answer: the next response is the progress one.
	send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: 99}}})
	send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
	expect(`id=-1 created=false canceled=false reason="" rev=2 events=0`)
	// A request with nothing set is ignored and the stream goes on.
	send(&pb.WatchRequest{})

	mustPut(t, cli, "b", "x") // 3: the canceled watcher 7 must not see it
	mustPut(t, cli, "a", "1") // 4
	r := expect(`id=0 created=false canceled=false reason="" rev=4 events=1`)
	if ev := r.Events[0]; ev.Type != mvccpb.PUT || string(ev.Kv.Key) != "a" || ev.Kv.ModRevision != 4 {
		t.Errorf("event %v, want PUT a at 4", ev)
	}
	// An ID freed by cancel can be reused, and the new watcher starts clean.
	create(&pb.WatchCreateRequest{Key: []byte("b"), WatchId: 7, StartRevision: 3})
	expect(`id=7 created=true canceled=false reason="" rev=4 events=0`)
	r = expect(`id=7 created=false canceled=false reason="" rev=4 events=1`)
	if ev := r.Events[0]; string(ev.Kv.Key) != "b" || ev.Kv.ModRevision != 3 {
		t.Errorf("event %v, want b at 3", ev)
	}
}

// TestWatchAfterClientHalfClose: as in etcd, closing the send side ends nothing; events still flow.
func TestWatchAfterClientHalfClose(t *testing.T) {
	_, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	ws, err := pb.NewWatchClient(cli.ActiveConnection()).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("k")}}}); err != nil {
		t.Fatal(err)
	}
	if err := ws.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if r, err := ws.Recv(); err != nil || !r.Created {
		t.Fatalf("first response %v, %v; want created", r, err)
	}
	mustPut(t, cli, "k", "v")
	if r, err := ws.Recv(); err != nil || len(r.Events) != 1 {
		t.Fatalf("after half-close: %v, %v; want the event", r, err)
	}
}

// bigWrites puts n values of size bytes under big/, at revisions 2..n+1.
func bigWrites(t *testing.T, cli *clientv3.Client, n, size int) {
	t.Helper()
	for i := range n {
		mustPut(t, cli, fmt.Sprintf("big/%03d", i), strings.Repeat(string(rune('a'+i%26)), size))
	}
}

const fragmentLimit = store.DefaultMaxRequestBytes + etcdgrpc.GRPCOverheadBytes

func TestWatchFragment(t *testing.T) {
	_, cli := newClient(t, store.Options{})
	ctx := testContext(t)
	const n, size = 30, 100 << 10 // one catch-up response of about 3 MiB
	bigWrites(t, cli, n, size)

	t.Run("clientv3 reassembles", func(t *testing.T) {
		wch := cli.Watch(ctx, "big/", clientv3.WithPrefix(), clientv3.WithRev(2), clientv3.WithFragment())
		evs, resps := collect(t, wch, n)
		if len(resps) != 1 {
			t.Errorf("%d responses, want the fragments joined into 1", len(resps))
		}
		for i, ev := range evs {
			if ev.Kv.ModRevision != int64(i+2) || len(ev.Kv.Value) != size {
				t.Fatalf("event %d: revision %d, %d bytes", i, ev.Kv.ModRevision, len(ev.Kv.Value))
			}
		}
	})

	raw := func(fragment bool) []*pb.WatchResponse {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ws, err := pb.NewWatchClient(cli.ActiveConnection()).Watch(wctx)
		if err != nil {
			t.Fatal(err)
		}
		err = ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
			Key: []byte("big/"), RangeEnd: []byte("big0"), StartRevision: 2, Fragment: fragment,
		}}})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := ws.Recv(); err != nil || !r.Created {
			t.Fatalf("first response %v, %v; want created", r, err)
		}
		var out []*pb.WatchResponse
		for events := 0; events < n; {
			r, err := ws.Recv()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
			events += len(r.Events)
		}
		return out
	}

	t.Run("fragments on the wire", func(t *testing.T) {
		frags := raw(true)
		if len(frags) < 2 {
			t.Fatalf("%d responses, want several fragments", len(frags))
		}
		rev := int64(2)
		for i, f := range frags {
			if last := i == len(frags)-1; f.Fragment == last {
				t.Errorf("fragment %d of %d has fragment=%v", i, len(frags), f.Fragment)
			}
			if len(f.Events) == 0 {
				t.Errorf("fragment %d has no event", i)
			}
			if sz := proto.Size(f); sz >= fragmentLimit && len(f.Events) > 1 {
				t.Errorf("fragment %d is %d bytes with %d events, limit %d", i, sz, len(f.Events), fragmentLimit)
			}
			for _, ev := range f.Events {
				if ev.Kv.ModRevision != rev {
					t.Fatalf("fragment %d: event at %d, want %d", i, ev.Kv.ModRevision, rev)
				}
				rev++
			}
		}
	})

	t.Run("whole without the option", func(t *testing.T) {
		resps := raw(false)
		if len(resps) != 1 || resps[0].Fragment || proto.Size(resps[0]) < fragmentLimit {
			t.Errorf("%d responses (first fragment=%v), want one response over the limit", len(resps), resps[0].Fragment)
		}
	})
}

// waitNoLeak waits until no goroutine is left beyond those the ignore options name.
func waitNoLeak(t *testing.T, opts ...goleak.Option) {
	t.Helper()
	deadline := time.Now().Add(testutil.WaitTimeout)
	for {
		err := goleak.Find(opts...)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left: %v", err)
		}
	}
}

// TestWatchClientDisconnect cuts a client off while its watch stream is backed up (it stopped
// reading, so the server's sends and the store's stream channel are full) and checks the server
// serves on and keeps no goroutine for the lost stream.
func TestWatchClientDisconnect(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	lis := bufconn.Listen(1 << 20)
	srv := etcdgrpc.NewServer(st, etcdgrpc.Options{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() {
		srv.Stop()
		<-served
	}()
	dial := func() *clientv3.Client {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints: []string{"bufconn"},
			Logger:    zap.NewNop(),
			DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
				return lis.DialContext(ctx)
			})},
		})
		if err != nil {
			t.Fatal(err)
		}
		return cli
	}
	writer := dial()
	defer writer.Close()
	ctx := testContext(t)
	mustPut(t, writer, "warmup", "x")
	before := goleak.IgnoreCurrent()

	reader := dial()
	ws, err := pb.NewWatchClient(reader.ActiveConnection()).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("big/"), RangeEnd: []byte("big0")}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := ws.Recv(); err != nil || !r.Created {
		t.Fatalf("first response %v, %v; want created", r, err)
	}
	// Far more than gRPC's windows and the store's 128-response channel hold.
	bigWrites(t, writer, 400, 16<<10)
	if err := reader.Close(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	waitNoLeak(t, before)

	// The server goes on serving the other client, watches included.
	wch := writer.Watch(ctx, "big/", clientv3.WithPrefix(), clientv3.WithRev(st.Rev()))
	if evs, _ := collect(t, wch, 1); len(evs) != 1 || evs[0].Kv.ModRevision != st.Rev() {
		t.Errorf("watch after the disconnect: %s", evString(evs))
	}
}
