package etcdgrpc_test

import (
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/listwatch/listwatch/etcdgrpc"
	"github.com/listwatch/listwatch/store"
)

// TestInProcessClientsHaveOwnStreams: clients Dialed to one InProcess share the store but not their
// watch streams. A watch from a future revision holds back every RequestProgress on its own stream
// (etcd's progressIfSync); a RequestProgress of another client is answered all the same. Close
// closes every client, also one its caller closed first, and is idempotent; Dial fails after it.
func TestInProcessClientsHaveOwnStreams(t *testing.T) {
	st := store.New(store.Options{})
	defer st.Close()
	p := etcdgrpc.ServeInProcess(st, etcdgrpc.Options{})
	t.Cleanup(func() { p.Close() })
	ctx := testContext(t)
	waiting, answering, closedEarly := mustDial(t, p), mustDial(t, p), mustDial(t, p)
	mustPut(t, answering, "k", "v")

	future := waiting.Watch(ctx, "k", clientv3.WithRev(st.Rev()+1), clientv3.WithCreatedNotify())
	if wr, _ := next(t, future); !wr.Created {
		t.Fatalf("first response %+v, want created", wr)
	}
	wch := answering.Watch(ctx, "k", clientv3.WithCreatedNotify())
	if wr, _ := next(t, wch); !wr.Created {
		t.Fatalf("first response %+v, want created", wr)
	}
	if wr := awaitRequestedProgress(t, answering, wch); wr.Header.Revision != st.Rev() {
		t.Errorf("progress at %d, want the store's revision %d", wr.Header.Revision, st.Rev())
	}
	if resp, err := closedEarly.Get(ctx, "k"); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("Get through the third client: %v %v", resp, err)
	}

	if err := closedEarly.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := p.Dial(); !errors.Is(err, etcdgrpc.ErrInProcessClosed) {
		t.Errorf("Dial after Close: %v, want ErrInProcessClosed", err)
	}
	for _, cli := range []*clientv3.Client{waiting, answering} {
		if cli.Ctx().Err() == nil {
			t.Error("a client Dialed before Close is still open")
		}
	}
}

func mustDial(t *testing.T, p *etcdgrpc.InProcess) *clientv3.Client {
	t.Helper()
	cli, err := p.Dial()
	if err != nil {
		t.Fatal(err)
	}
	return cli
}
