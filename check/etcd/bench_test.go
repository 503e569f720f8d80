package etcd

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// syntheticHistory is n sequential puts over keys keys, watched by: one watch on everything with
// prev_kv (one response per revision), one on everything from revision 1 (catch-up responses of 100
// revisions), one on the first key alone and one on the first half of the keys.
func syntheticHistory(n, keys int) (*History, int) {
	h := &History{}
	type state struct{ create, version int64 }
	live := map[string]*state{}
	var events []Event
	for i := range n {
		k := fmt.Sprintf("k%04d", i%keys)
		rev := int64(i + 2)
		st := live[k]
		ev := Event{Type: Put, Kv: KeyValue{Key: Bytes(k), Value: Bytes(fmt.Sprint(i)), ModRevision: rev}}
		if st == nil {
			st = &state{create: rev}
			live[k] = st
		} else {
			ev.PrevKV = &KeyValue{Key: Bytes(k), Value: Bytes(fmt.Sprint(i - keys)), CreateRevision: st.create, ModRevision: rev - int64(keys), Version: st.version}
		}
		st.version++
		ev.Kv.CreateRevision, ev.Kv.Version = st.create, st.version
		events = append(events, ev)
		t := int64(10 * (i + 1))
		h.Operations = append(h.Operations, Operation{Call: t, Return: t + 5, Request: put(k, fmt.Sprint(i)), Response: rev2(rev)})
	}
	end := int64(10*n + 100)
	all := Watch{Call: 1, Request: WatchRequest{Key: "k", RangeEnd: "l", PrevKV: true}, Responses: []WatchResponse{{Time: 2, Revision: 1, Created: true}}}
	catchUp := Watch{Call: 1, Request: WatchRequest{Key: "k", RangeEnd: "l", StartRevision: 1}, Responses: []WatchResponse{{Time: 2, Revision: 1, Created: true}}}
	one := Watch{Call: 1, Request: WatchRequest{Key: "k0000"}, Responses: []WatchResponse{{Time: 2, Revision: 1, Created: true}}}
	half := Watch{Call: 1, Request: WatchRequest{Key: "k", RangeEnd: Bytes(fmt.Sprintf("k%04d", keys/2))}, Responses: []WatchResponse{{Time: 2, Revision: 1, Created: true}}}
	total := 0
	var batch []Event
	for i, ev := range events {
		t := int64(10*(i+1) + 7)
		all.Responses = append(all.Responses, WatchResponse{Time: t, Revision: ev.Kv.ModRevision, Events: []Event{ev}})
		plain := ev
		plain.PrevKV = nil
		batch = append(batch, plain)
		if len(batch) == 100 || i == len(events)-1 {
			catchUp.Responses = append(catchUp.Responses, WatchResponse{Time: end, Revision: int64(n + 1), Events: batch})
			batch = nil
		}
		if ev.Kv.Key == "k0000" {
			one.Responses = append(one.Responses, WatchResponse{Time: t, Revision: ev.Kv.ModRevision, Events: []Event{plain}})
			total++
		}
		if ev.Kv.Key < Bytes(fmt.Sprintf("k%04d", keys/2)) {
			half.Responses = append(half.Responses, WatchResponse{Time: t, Revision: ev.Kv.ModRevision, Events: []Event{plain}})
			total++
		}
		total += 2
	}
	for _, w := range []*Watch{&all, &catchUp, &one, &half} {
		w.Responses = append(w.Responses, WatchResponse{Time: end + 1, Revision: int64(n + 1)})
	}
	h.Watches = []Watch{all, catchUp, one, half}
	return h, total
}

func rev2(r int64) *Response { return &Response{Revision: r, Put: &PutResponse{}} }

func TestSyntheticHistoryPasses(t *testing.T) {
	h, _ := syntheticHistory(2000, 50)
	wantOK(t, h)
}

// BenchmarkWatchCheck measures the watch checks alone, against a reference built once.
func BenchmarkWatchCheck(b *testing.B) {
	h, events := syntheticHistory(50_000, 500)
	res, err := Check(h, Options{Timeout: time.Minute})
	if err != nil || !res.OK() {
		b.Fatalf("%v %v", err, res.Err())
	}
	c := newChecker(h)
	ref := buildReference(res.Events, res.Events[len(res.Events)-1].Kv.ModRevision)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var r Result
		c.checkWatches(&r, ref)
		if len(r.Violations) > 0 {
			b.Fatal(r.Violations[0])
		}
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkCheck measures a whole check: linearizability search, replay on the model and
// watch checks.
func BenchmarkCheck(b *testing.B) {
	h, events := syntheticHistory(5_000, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := Check(h, Options{Timeout: time.Minute})
		if err != nil || !res.OK() {
			b.Fatalf("%v %v", err, res.Err())
		}
	}
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(len(h.Operations))*float64(b.N)/s, "ops/s")
	b.ReportMetric(float64(events)*float64(b.N)/s, "events/s")
}

// concurrentHistory is n requests of clients concurrent clients over keys keys (puts, deletes,
// ranges, txns), run on the model: request i takes effect at 10(i+1) and is called and returns
// within 5·clients of it, so that requests overlap but a client's do not; unknown of the writes
// lose their answer (unknown outcome), and of those every other one never took effect. One watch
// on everything receives every revision.
func concurrentHistory(n, clients, keys, unknown int, seed uint64) *History {
	rng := rand.New(rand.NewPCG(seed, 2))
	h := &History{}
	s := initialState(h)
	w := Watch{Call: 1, Request: WatchRequest{Key: "\x00", RangeEnd: "\x00"}, Responses: []WatchResponse{{Time: 2, Revision: 1, Created: true}}}
	key := func() Bytes { return Bytes(fmt.Sprintf("k%04d", rng.IntN(keys))) }
	lose := map[int]bool{}
	for len(lose) < unknown && len(lose) < n/2 {
		lose[rng.IntN(n)] = true
	}
	for i := range n {
		var req Request
		switch p := rng.IntN(10); {
		case p < 4:
			req = Request{Put: &PutRequest{Key: key(), Value: Bytes(fmt.Sprint(i))}}
		case p < 5:
			req = Request{DeleteRange: &DeleteRangeRequest{Key: key()}}
		case p < 8:
			k := key()
			req = Request{Range: &RangeRequest{Key: k, RangeEnd: k + "\x00\x00", Limit: 2}}
		default:
			k := key()
			req = Request{Txn: &TxnRequest{Compare: []Compare{{Key: k, Target: CompareVersion, Result: CompareLess, Version: 3}},
				Success: []RequestOp{{Put: &PutRequest{Key: k, Value: Bytes(fmt.Sprint(i))}}},
				Failure: []RequestOp{{Range: &RangeRequest{Key: k}}}}}
		}
		t := int64(10 * (i + 1))
		span := int64(5 * clients)
		op := Operation{Client: i % clients, Call: t - rng.Int64N(span), Return: t + rng.Int64N(span), Request: req}
		o := eval(s, &kvOp{req: &op.Request})
		lost := lose[i] && !isReadOnly(&req)
		if lost && i%2 == 1 {
			o = outcome{state: s} // it never took effect
		}
		if lost {
			op.Error, op.Unknown = "context deadline exceeded", true
		} else {
			op.Response = o.resp
		}
		if o.state.rev > s.rev {
			var evs []Event
			for _, ch := range o.changes {
				evs = append(evs, Event{Type: ch.typ, Kv: ch.kv})
			}
			w.Responses = append(w.Responses, WatchResponse{Time: t + 1, Revision: o.state.rev, Events: evs})
		}
		s = o.state
		h.Operations = append(h.Operations, op)
	}
	w.Responses = append(w.Responses, WatchResponse{Time: int64(10*n + 100), Revision: s.rev})
	h.Watches = []Watch{w}
	return h
}

func TestConcurrentHistoryPasses(t *testing.T) {
	for _, unknown := range []int{0, 50} {
		h := concurrentHistory(2000, 8, 50, unknown, 1)
		if got := sweepVerdict(h); got != VerdictLinearizable {
			t.Fatalf("%d unknown: the sweep says %q", unknown, got)
		}
		wantOK(t, h)
	}
}

// BenchmarkCheckSize measures a whole check of concurrentHistory by its number of requests (go test
// -run XXX -bench CheckSize -benchtime 1x for the 1M one).
func BenchmarkCheckSize(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) { benchCheck(b, concurrentHistory(n, 16, 1000, 0, 1)) })
	}
}

// BenchmarkCheckUnknown measures a whole check of 100k requests by the number of them whose
// outcome is unknown.
func BenchmarkCheckUnknown(b *testing.B) {
	for _, u := range []int{0, 10, 100, 1000, 10_000} {
		b.Run(fmt.Sprintf("unknown=%d", u), func(b *testing.B) { benchCheck(b, concurrentHistory(100_000, 16, 1000, u, 1)) })
	}
}

func benchCheck(b *testing.B, h *History) {
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := Check(h, Options{Timeout: 10 * time.Minute})
		if err != nil || !res.OK() {
			b.Fatalf("%v %v", err, res.Err())
		}
	}
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(len(h.Operations))*float64(b.N)/s, "ops/s")
	b.ReportMetric(s/float64(b.N), "s/check")
}
