package main

import "fmt"

// The benchmarks of interop/sidebyside and the units they report; each reports listwatch's figure
// and the other side's ("etcd" for the store benchmarks, "upstream" for the rest).
func vsEtcd(bench, unit string) (figure, figure) {
	return figure{bench, "listwatch-" + unit}, figure{bench, "etcd-" + unit}
}

func vsUpstream(bench, unit string) (figure, figure) {
	return figure{bench, "listwatch-" + unit}, figure{bench, "upstream-" + unit}
}

// tableRows are the rows of the table, in order, with issue 16's goals.
func tableRows() []row {
	var rows rowList
	rows.store()
	rows.cache()
	for _, rate := range []int{100, 300} {
		rows.http(rate)
	}
	lw, up := vsUpstream("BenchmarkStart", "start-ms")
	rows.add("start to the first list (Go test API), ms", lw, up, false, goal{kind: aheadBy, bound: 1})
	return rows
}

// rowList is the table's rows as they are added.
type rowList []row

// add adds the row of one figure of both sides; higher says a higher figure is better.
func (rows *rowList) add(label string, lw, up figure, higher bool, g goal) {
	*rows = append(*rows, row{label: label, lw: lw, up: up, higher: higher, goal: g})
}

// store adds the rows of the store benchmarks (listwatch's store against etcd's mvcc).
func (rows *rowList) store() {
	lw, up := vsEtcd("BenchmarkStorePut", "puts/s")
	rows.add("store: puts/s, no watchers", lw, up, true, goal{kind: aheadBy, bound: 50})
	for _, n := range []int{1, 100, 1000, 10000} {
		lw, up := vsEtcd(fmt.Sprintf("BenchmarkStoreFanout/watchers=%d", n), "deliveries/s")
		rows.add(fmt.Sprintf("store: put + fan-out to %d, deliveries/s", n), lw, up, true, goal{kind: aheadBy, bound: 5})
		lw, up = vsEtcd(fmt.Sprintf("BenchmarkStoreFanout/watchers=%d", n), "cpu-ns/delivery")
		rows.add("  same, CPU ns/delivery (whole process)", lw, up, false, goal{})
	}
	lw, up = vsEtcd("BenchmarkStoreCatchUp", "events/s")
	rows.add("store: lagging watcher catch-up, events/s", lw, up, true, goal{})
	lw, up = vsEtcd("BenchmarkStoreWatcherMemory", "B/watcher")
	rows.add("store: heap per idle watcher, B", lw, up, false, goal{kind: below, bound: 350, unit: " B"})
}

// cache adds the rows of the cache benchmarks (listwatch's cache against upstream's Cacher).
func (rows *rowList) cache() {
	for _, n := range []int{100, 1000, 10000} {
		for _, f := range []string{"none", "selector", "indexed"} {
			lw, up := vsUpstream(fmt.Sprintf("BenchmarkCacheDispatch/watchers=%d/filter=%s", n, f), "deliveries/s")
			rows.add(fmt.Sprintf("cache: %d watchers, %s, deliveries/s", n, f), lw, up, true, goal{kind: aheadBy, bound: 1})
			lw, up = vsUpstream(fmt.Sprintf("BenchmarkCacheDispatch/watchers=%d/filter=%s", n, f), "cpu-ns/delivery")
			rows.add("  same, CPU ns/delivery (whole process)", lw, up, false, goal{})
		}
	}
	at := func(n int) string { return fmt.Sprintf("BenchmarkCacheDispatch/watchers=%d/filter=none", n) }
	for _, c := range []struct{ label, unit string }{
		{"cache: ns/delivery, 10000 over 1000 watchers", "ns/delivery"},
		{"cache: CPU ns/delivery, 10000 over 1000 watchers", "cpu-ns/delivery"},
	} {
		*rows = append(*rows, row{
			label:   c.label,
			higher:  false,
			goal:    goal{kind: atMost, bound: 2, unit: "x"},
			benches: []string{at(1000), at(10000)},
			computed: func(r results) (float64, float64, bool, bool) {
				ratio := func(side string) (float64, bool) {
					big, ok1 := figure{at(10000), side + "-" + c.unit}.get(r)
					small, ok2 := figure{at(1000), side + "-" + c.unit}.get(r)
					if !ok1 || !ok2 || small == 0 {
						return 0, false
					}
					return big / small, true
				}
				l, lok := ratio("listwatch")
				u, uok := ratio("upstream")
				return l, u, lok, uok
			},
		})
	}
	lw, up := vsUpstream("BenchmarkCacheWatcherMemory", "B/watcher")
	rows.add("cache: memory per watcher (heap+stack), B", lw, up, false, goal{kind: aheadBy, bound: 1})
	lw, up = vsUpstream("BenchmarkCachedEventMemory", "B/event")
	rows.add("cache: memory per cached event, B", lw, up, false, goal{kind: aheadBy, bound: 1})
}

// http adds the rows of the HTTP fan-out benchmark at rate writes/s (listwatch's chain against a
// real apiserver).
func (rows *rowList) http(rate int) {
	b := fmt.Sprintf("BenchmarkHTTPFanout/rate=%d", rate)
	prefix := fmt.Sprintf("http, 1000 watchers at %d writes/s: ", rate)
	offered := float64(rate) * 1000
	lwEv, upEv := vsUpstream(b, "events/s")
	*rows = append(*rows, row{
		label:   prefix + "delivered/sent",
		higher:  true,
		goal:    goal{kind: atLeast, bound: 0.95},
		benches: []string{b},
		computed: func(r results) (float64, float64, bool, bool) {
			l, lok := lwEv.get(r)
			u, uok := upEv.get(r)
			return l / offered, u / offered, lok, uok
		},
	})
	lw, up := vsUpstream(b, "p50-ms")
	rows.add(prefix+"p50 ms", lw, up, false, goal{kind: aheadBy, bound: 1})
	lw, up = vsUpstream(b, "p99-ms")
	g := goal{kind: aheadBy, bound: 1}
	if rate == 300 {
		g = goal{kind: below, bound: 50, unit: " ms"}
	}
	rows.add(prefix+"p99 ms", lw, up, false, g)
	lw, up = vsUpstream(b, "cpu-ns/event")
	rows.add(prefix+"CPU ns/event", lw, up, false, goal{kind: aheadBy, bound: 1})
	lwCPU, upCPU := lw, up
	*rows = append(*rows, row{
		label:   prefix + "CPU/floor",
		goal:    goal{kind: atMost, bound: 2, unit: "x"},
		benches: []string{b},
		computed: func(r results) (float64, float64, bool, bool) {
			floor, ok := figure{b, "floor-cpu-ns/event"}.get(r)
			over := func(f figure) (float64, bool) {
				v, vok := f.get(r)
				if !vok || !ok || floor == 0 {
					return 0, false
				}
				return v / floor, true
			}
			l, lok := over(lwCPU)
			u, uok := over(upCPU)
			return l, u, lok, uok
		},
	})
	lw, up = vsUpstream(b, "failed-watchers")
	rows.add(prefix+"dropped", lw, up, false, goal{kind: atMost, bound: 0})
}
