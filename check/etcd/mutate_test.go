package etcd

import (
	"bytes"
	"slices"
	"testing"
)

// A mutation breaks exactly one guarantee of a valid history. apply changes h (a copy) and reports
// whether it found a place to apply; pick chooses among the candidate places.
type mutation struct {
	name  string
	want  Guarantee
	apply func(h *History, res *Result, pick func(n int) int) bool
}

func cloneHistory(t testing.TB, h *History) *History {
	t.Helper()
	var buf bytes.Buffer
	if err := h.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	c, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// evAt is an event of a watch: watch, response and event index.
type evAt struct{ w, r, e int }

func watchEvents(h *History, w int) []evAt {
	var out []evAt
	for ri, r := range h.Watches[w].Responses {
		for ei := range r.Events {
			out = append(out, evAt{w, ri, ei})
		}
	}
	return out
}

func (p evAt) get(h *History) *Event { return &h.Watches[p.w].Responses[p.r].Events[p.e] }

func removeEvent(h *History, p evAt) {
	r := &h.Watches[p.w].Responses[p.r]
	r.Events = slices.Delete(r.Events, p.e, p.e+1)
	if len(r.Events) == 0 {
		h.Watches[p.w].Responses = slices.Delete(h.Watches[p.w].Responses, p.r, p.r+1)
	}
}

func hasFinal(w *Watch) bool {
	return slices.ContainsFunc(w.Responses, func(r WatchResponse) bool { return r.Canceled || r.IsCompacted() })
}

func created(w *Watch) *WatchResponse {
	for i := range w.Responses {
		if w.Responses[i].Created && !w.Responses[i].Canceled {
			return &w.Responses[i]
		}
	}
	return nil
}

// candidates collects the places f accepts, in a deterministic order.
func candidates[T any](n int, f func(i int) []T) []T {
	var out []T
	for i := range n {
		out = append(out, f(i)...)
	}
	return out
}

func choose[T any](c []T, pick func(int) int) (T, bool) {
	var zero T
	if len(c) == 0 {
		return zero, false
	}
	return c[pick(len(c))], true
}

func keyOf(w *Watch) Bytes {
	if w.Request.Key == "" {
		return "\x00"
	}
	return w.Request.Key
}

var mutations = []mutation{
	{"drop an event", Reliable, func(h *History, _ *Result, pick func(int) int) bool {
		c := candidates(len(h.Watches), func(w int) []evAt {
			evs := watchEvents(h, w)
			if len(evs) < 3 {
				return nil
			}
			return evs[1 : len(evs)-1]
		})
		p, ok := choose(c, pick)
		if ok {
			removeEvent(h, p)
		}
		return ok
	}},
	{"drop the first event", Resumable, func(h *History, _ *Result, pick func(int) int) bool {
		c := candidates(len(h.Watches), func(w int) []evAt {
			evs := watchEvents(h, w)
			if len(evs) < 2 || (h.Watches[w].Request.StartRevision == 0 && created(&h.Watches[w]) == nil) {
				return nil
			}
			return evs[:1]
		})
		p, ok := choose(c, pick)
		if ok {
			removeEvent(h, p)
		}
		return ok
	}},
	{"duplicate an event", Unique, func(h *History, _ *Result, pick func(int) int) bool {
		p, ok := choose(candidates(len(h.Watches), func(w int) []evAt { return watchEvents(h, w) }), pick)
		if ok {
			r := &h.Watches[p.w].Responses[p.r]
			r.Events = slices.Insert(r.Events, p.e+1, r.Events[p.e])
		}
		return ok
	}},
	{"swap two responses", Ordered, func(h *History, _ *Result, pick func(int) int) bool {
		c := candidates(len(h.Watches), func(w int) [][2]int {
			var out [][2]int
			rs := h.Watches[w].Responses
			for i := 0; i+1 < len(rs); i++ {
				if len(rs[i].Events) > 0 && len(rs[i+1].Events) > 0 {
					out = append(out, [2]int{w, i})
				}
			}
			return out
		})
		p, ok := choose(c, pick)
		if ok {
			rs := h.Watches[p[0]].Responses
			rs[p[1]].Events, rs[p[1]+1].Events = rs[p[1]+1].Events, rs[p[1]].Events
			rs[p[1]].Revision, rs[p[1]+1].Revision = rs[p[1]+1].Revision, rs[p[1]].Revision
		}
		return ok
	}},
	{"split a revision between responses", Atomic, func(h *History, _ *Result, pick func(int) int) bool {
		c := candidates(len(h.Watches), func(w int) []evAt {
			var out []evAt
			for _, p := range watchEvents(h, w) {
				evs := h.Watches[w].Responses[p.r].Events
				if p.e > 0 && evs[p.e-1].Kv.ModRevision == evs[p.e].Kv.ModRevision {
					out = append(out, p)
				}
			}
			return out
		})
		p, ok := choose(c, pick)
		if ok {
			rs := h.Watches[p.w].Responses
			second := rs[p.r]
			second.Events = slices.Clone(rs[p.r].Events[p.e:])
			rs[p.r].Events = rs[p.r].Events[:p.e]
			h.Watches[p.w].Responses = slices.Insert(rs, p.r+1, second)
		}
		return ok
	}},
	{"corrupt a prev_kv", PrevKV, func(h *History, _ *Result, pick func(int) int) bool {
		p, ok := choose(candidates(len(h.Watches), func(w int) []evAt {
			var out []evAt
			for _, p := range watchEvents(h, w) {
				if p.get(h).PrevKV != nil {
					out = append(out, p)
				}
			}
			return out
		}), pick)
		if ok {
			prev := *p.get(h).PrevKV
			prev.Value += "-corrupt"
			p.get(h).PrevKV = &prev
		}
		return ok
	}},
	{"progress notification behind an event", Bookmarkable, func(h *History, _ *Result, pick func(int) int) bool {
		c := candidates(len(h.Watches), func(w int) []int {
			var out []int
			for ri, r := range h.Watches[w].Responses {
				if len(r.Events) > 0 && r.Events[len(r.Events)-1].Kv.ModRevision >= 2 {
					out = append(out, w*1_000_000+ri)
				}
			}
			return out
		})
		p, ok := choose(c, pick)
		if ok {
			w, ri := p/1_000_000, p%1_000_000
			r := h.Watches[w].Responses[ri]
			prog := WatchResponse{Time: r.Time, Revision: r.Events[len(r.Events)-1].Kv.ModRevision - 1}
			h.Watches[w].Responses = slices.Insert(h.Watches[w].Responses, ri+1, prog)
		}
		return ok
	}},
	{"invent an event", Genuine, func(h *History, res *Result, pick func(int) int) bool {
		c := candidates(len(h.Watches), func(w int) []int {
			// a put: an invented delete could be the expiry of a lease
			if hasFinal(&h.Watches[w]) || created(&h.Watches[w]) == nil || slices.Contains(h.Watches[w].Request.Filters, FilterNoPut) {
				return nil
			}
			return []int{w}
		})
		w, ok := choose(c, pick)
		if !ok {
			return false
		}
		watch := &h.Watches[w]
		rev := max(max(int64(1), lastRefRev(res))+1, watch.Request.StartRevision, created(watch).Revision+1)
		ev := Event{Type: Put, Kv: KeyValue{Key: keyOf(watch), CreateRevision: rev, ModRevision: rev, Version: 1, Value: "invented"}}
		last := watch.Responses[len(watch.Responses)-1].Time
		watch.Responses = append(watch.Responses, WatchResponse{Time: last, Revision: rev, Events: []Event{ev}})
		return true
	}},
	{"event below the first revision", FirstRevision, func(h *History, _ *Result, pick func(int) int) bool {
		c := candidates(len(h.Watches), func(w int) []int {
			if len(watchEvents(h, w)) == 0 || (h.Watches[w].Request.StartRevision == 0 && created(&h.Watches[w]) == nil) {
				return nil
			}
			return []int{w}
		})
		w, ok := choose(c, pick)
		if ok {
			first := watchEvents(h, w)[0].get(h).Kv.ModRevision
			if h.Watches[w].Request.StartRevision > 0 {
				h.Watches[w].Request.StartRevision = first + 1
			} else {
				created(&h.Watches[w]).Revision = first
			}
		}
		return ok
	}},
	{"compaction answer the watch did not deserve", Compaction, func(h *History, _ *Result, pick func(int) int) bool {
		type cand struct {
			w    int
			comp *Operation
		}
		var comps []*Operation
		for i := range h.Operations {
			if o := &h.Operations[i]; o.Request.Compact != nil && o.Response != nil {
				comps = append(comps, o)
			}
		}
		c := candidates(len(h.Watches), func(w int) []cand {
			watch := &h.Watches[w]
			if hasFinal(watch) || created(watch) == nil {
				return nil
			}
			next := int64(0)
			if watch.Request.StartRevision > 0 {
				next = watch.Request.StartRevision
			} else {
				next = created(watch).Revision + 1
			}
			for _, r := range watch.Responses {
				for _, ev := range r.Events {
					next = max(next, ev.Kv.ModRevision+1)
				}
				if r.IsProgressNotify() {
					next = max(next, r.Revision+1)
				}
			}
			var out []cand
			for _, o := range comps {
				if o.Request.Compact.Revision <= next && o.Request.Compact.Revision > 0 {
					out = append(out, cand{w, o})
				}
			}
			return out
		})
		p, ok := choose(c, pick)
		if ok {
			watch := &h.Watches[p.w]
			t := max(watch.Responses[len(watch.Responses)-1].Time, p.comp.Call)
			watch.Responses = append(watch.Responses, WatchResponse{Time: t, Canceled: true,
				CompactRevision: p.comp.Request.Compact.Revision})
		}
		return ok
	}},
	{"missing compaction answer", Compaction, func(h *History, res *Result, pick func(int) int) bool {
		c := candidates(len(h.Watches), func(w int) []int {
			watch := &h.Watches[w]
			start := watch.Request.StartRevision
			if start <= 0 || len(watch.Responses) != 2 || !watch.Responses[1].IsCompacted() {
				return nil
			}
			for _, o := range h.Operations {
				if o.Request.Compact != nil && o.Response != nil && o.Return < watch.Call && o.Request.Compact.Revision > start {
					return []int{w}
				}
			}
			return nil
		})
		w, ok := choose(c, pick)
		if !ok {
			return false
		}
		watch := &h.Watches[w]
		wc := newWatchChecker(watch, w, nil, nil)
		t := watch.Responses[1].Time
		watch.Responses = watch.Responses[:1]
		var evs []Event
		for _, ev := range res.Events {
			if ev.Kv.ModRevision >= watch.Request.StartRevision && wc.wants(ev.Type, ev.Kv.Key) {
				if !watch.Request.PrevKV {
					ev.PrevKV = nil
				}
				evs = append(evs, ev)
			}
		}
		if len(evs) > 0 {
			watch.Responses = append(watch.Responses, WatchResponse{Time: t, Revision: lastRefRev(res), Events: evs})
		} else {
			watch.Responses = append(watch.Responses, WatchResponse{Time: t, Revision: max(lastRefRev(res), watch.Request.StartRevision)})
		}
		return true
	}},
	{"corrupt an event's value", Reliable, func(h *History, _ *Result, pick func(int) int) bool {
		p, ok := choose(candidates(len(h.Watches), func(w int) []evAt {
			var out []evAt
			for _, p := range watchEvents(h, w) {
				if p.get(h).Type == Put {
					out = append(out, p)
				}
			}
			return out
		}), pick)
		if ok {
			p.get(h).Kv.Value += "-corrupt"
		}
		return ok
	}},
	{"wrong is-create", IsCreate, func(h *History, _ *Result, pick func(int) int) bool {
		p, ok := choose(candidates(len(h.Watches), func(w int) []evAt {
			var out []evAt
			for _, p := range watchEvents(h, w) {
				if ev := p.get(h); ev.Type == Put && ev.Kv.Version > 1 {
					out = append(out, p)
				}
			}
			return out
		}), pick)
		if ok {
			ev := p.get(h)
			ev.Kv.CreateRevision = ev.Kv.ModRevision
		}
		return ok
	}},
	{"event outside the watched range", Filter, func(h *History, _ *Result, pick func(int) int) bool {
		p, ok := choose(candidates(len(h.Watches), func(w int) []evAt {
			wc := newWatchChecker(&h.Watches[w], w, nil, nil)
			if wc.kr.contains("zz-outside") {
				return nil
			}
			return watchEvents(h, w)
		}), pick)
		if ok {
			r := &h.Watches[p.w].Responses[p.r]
			ev := r.Events[p.e]
			ev.Kv.Key = "zz-outside"
			r.Events = slices.Insert(r.Events, p.e+1, ev)
		}
		return ok
	}},
	{"stale read", Linearizable, func(h *History, res *Result, pick func(int) int) bool {
		type cand struct{ op, kv int }
		c := candidates(len(h.Operations), func(i int) []cand {
			o := &h.Operations[i]
			if o.Request.Range == nil || o.Request.Range.Serializable || o.Response == nil || o.Response.Range == nil {
				return nil
			}
			var out []cand
			for j, kv := range o.Response.Range.Kvs {
				if kv.Version > 1 {
					out = append(out, cand{i, j})
				}
			}
			return out
		})
		p, ok := choose(c, pick)
		if !ok {
			return false
		}
		kv := &h.Operations[p.op].Response.Range.Kvs[p.kv]
		for i := len(res.Events) - 1; i >= 0; i-- {
			if ev := res.Events[i]; ev.Kv.Key == kv.Key && ev.Kv.ModRevision < kv.ModRevision && ev.Type == Put {
				value := ev.Kv.Value
				if h.Operations[p.op].Request.Range.KeysOnly {
					value = ""
				}
				kv.Value, kv.ModRevision, kv.Version = value, ev.Kv.ModRevision, kv.Version-1
				return true
			}
		}
		return false
	}},
	{"lost write", Linearizable, func(h *History, _ *Result, pick func(int) int) bool {
		type cand struct{ op, kv int }
		c := candidates(len(h.Operations), func(i int) []cand {
			o := &h.Operations[i]
			if o.Request.Range == nil || o.Request.Range.Serializable || o.Response == nil || o.Response.Range == nil || o.Response.Range.More {
				return nil
			}
			var out []cand
			for j, kv := range o.Response.Range.Kvs {
				if kv.Version == 1 {
					out = append(out, cand{i, j})
				}
			}
			return out
		})
		p, ok := choose(c, pick)
		if ok {
			r := h.Operations[p.op].Response.Range
			r.Kvs = slices.Delete(r.Kvs, p.kv, p.kv+1)
			r.Count--
		}
		return ok
	}},
	{"serializable read of a value never stored", Serializable, func(h *History, _ *Result, pick func(int) int) bool {
		type cand struct{ op, kv int }
		c := candidates(len(h.Operations), func(i int) []cand {
			o := &h.Operations[i]
			if o.Request.Range == nil || !o.Request.Range.Serializable || o.Response == nil || o.Response.Range == nil || o.Request.Range.KeysOnly {
				return nil
			}
			var out []cand
			for j := range o.Response.Range.Kvs {
				out = append(out, cand{i, j})
			}
			return out
		})
		p, ok := choose(c, pick)
		if ok {
			h.Operations[p.op].Response.Range.Kvs[p.kv].Value += "-corrupt"
		}
		return ok
	}},
}

func lastRefRev(res *Result) int64 {
	if len(res.Events) == 0 {
		return 1
	}
	return res.Events[len(res.Events)-1].Kv.ModRevision
}

// Transformations that keep a history valid: the checker must still accept it.
var validTransforms = []struct {
	name  string
	apply func(h *History, pick func(int) int) bool
}{
	{"forget write responses", func(h *History, pick func(int) int) bool {
		var c []int
		for i, o := range h.Operations {
			if o.Response != nil && !isReadOnly(&o.Request) && o.Request.LeaseGrant == nil {
				c = append(c, i)
			}
		}
		if len(c) == 0 {
			return false
		}
		for range 1 + pick(3) {
			i := c[pick(len(c))]
			o := &h.Operations[i]
			o.Response, o.Error, o.Unknown = nil, "context deadline exceeded", true
		}
		return true
	}},
	{"writes that never arrived", func(h *History, pick func(int) int) bool {
		var end int64
		for _, o := range h.Operations {
			end = max(end, o.Return)
		}
		for i := range 1 + pick(3) {
			call := int64(pick(int(end + 1)))
			req := put("phantom", string(rune('a'+i)))
			if pick(2) == 0 {
				req = Request{DeleteRange: &DeleteRangeRequest{Key: "a", RangeEnd: "\x00"}}
			}
			h.Operations = append(h.Operations, Operation{Client: 99, Call: call, Return: call + 1, Request: req,
				Error: "connection refused", Unknown: true})
		}
		return true
	}},
}
