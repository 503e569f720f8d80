package store_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/listwatch/listwatch/store"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is a store on a fake clock that the test drives step by step.
type env struct {
	t     *testing.T
	s     *store.Store
	clock *clocktesting.FakeClock
}

func newEnv(t *testing.T, opts store.Options) *env {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	opts.Clock = fc
	opts.ManualTick = true
	s := store.New(opts)
	t.Cleanup(func() { s.Close() })
	return &env{t: t, s: s, clock: fc}
}

// step advances the fake clock and runs the store's due work.
func (e *env) step(d time.Duration) {
	e.clock.Step(d)
	e.s.Tick()
}

func (e *env) put(k, v string) *store.PutResponse {
	e.t.Helper()
	r, err := e.s.Put(&store.PutRequest{Key: []byte(k), Value: []byte(v)})
	if err != nil {
		e.t.Fatalf("put %q: %v", k, err)
	}
	return r
}

func (e *env) del(k, end string) *store.DeleteRangeResponse {
	e.t.Helper()
	r, err := e.s.DeleteRange(&store.DeleteRangeRequest{Key: []byte(k), RangeEnd: []byte(end)})
	if err != nil {
		e.t.Fatalf("delete %q: %v", k, err)
	}
	return r
}

func (e *env) get(k string, rev int64) *store.KeyValue {
	e.t.Helper()
	r, err := e.s.Range(&store.RangeRequest{Key: []byte(k), Revision: rev})
	if err != nil {
		e.t.Fatalf("get %q@%d: %v", k, rev, err)
	}
	if len(r.Kvs) == 0 {
		return nil
	}
	return &r.Kvs[0]
}

func kv(k, v string, create, mod, ver int64) *store.KeyValue {
	out := &store.KeyValue{Key: []byte(k), CreateRevision: create, ModRevision: mod, Version: ver}
	if v != "" {
		out.Value = []byte(v)
	}
	return out
}
