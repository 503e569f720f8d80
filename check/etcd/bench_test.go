package etcd

import (
	"fmt"
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
