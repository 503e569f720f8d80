package proptest

import (
	"fmt"
	"testing"
	"time"

	"github.com/listwatch/listwatch/internal/testutil"
	"github.com/listwatch/listwatch/proptest/chaintest"
)

// TestChainQuietNamespaceClientKept: over HTTP, a client watching namespace a that does not read
// while its watch replays more of a's state than the connection and the watcher's buffers hold is
// kept open however many writes namespace b gets meanwhile, and then receives everything: the watch
// cache offers it only a's events (cacher.go Watch registers it under the request's namespace). A
// watcher registered cluster-wide would have its input filled by b's events and be closed.
func TestChainQuietNamespaceClientKept(t *testing.T) {
	c, err := chaintest.New(chaintest.Options{SocketBuffer: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	m := c.NewModel()
	write := func(p chaintest.Pod) {
		t.Helper()
		if _, err := c.CreatePod(p); err != nil {
			t.Fatal(err)
		}
		if err := m.Observe(c.Store, p.EtcdKey()); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		write(chaintest.Pod{Namespace: "a", Name: fmt.Sprintf("p%02d", i), Payload: 32000})
	}
	if _, err := c.SyncCache(); err != nil {
		t.Fatal(err)
	}
	spec := chaintest.WatchSpec{Namespace: "a", ResourceVersion: "0"}
	exp, err := m.Expect(spec)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.OpenPausedWatch(spec, nil)
	if err != nil || w.Code != 200 {
		t.Fatalf("watch: %v %d", err, w.Code)
	}
	defer w.Disconnect()
	for i := range 40 {
		write(chaintest.Pod{Namespace: "b", Name: fmt.Sprintf("p%02d", i)})
		c.CacheClock.Step(200 * time.Millisecond)
	}
	if _, err := c.SyncCache(); err != nil {
		t.Fatal(err)
	}
	c.CacheClock.Step(2 * time.Second)
	w.Resume()
	complete := func() bool {
		frames, _, _ := w.Frames()
		v, err := m.Check(exp, frames)
		if err != nil {
			t.Fatal(err)
		}
		return v.Complete || w.Ended()
	}
	if err := testutil.Poll("the client of a to read a's state", complete, nil); err != nil {
		t.Fatal(err)
	}
	if frames, end, _ := w.Frames(); end != chaintest.Open {
		t.Fatalf("the watch of quiet namespace a ended (%s) after %d of its 20 events: the server closed it for b's traffic", end, len(frames))
	}
}
