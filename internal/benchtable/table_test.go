package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const sample = ` 13:10:34 up  2:46,  0 user,  load average: 4.86, 4.69, 4.06
goos: linux
BenchmarkStorePut-2   	  100000	      8009 ns/op	    135944 etcd-puts/s	   2687893 listwatch-puts/s	        19.77 ratio
BenchmarkStoreFanout/watchers=1-2         	   20000	     13434 ns/op	     90094 etcd-deliveries/s	    692420 listwatch-deliveries/s	         7.685 ratio
BenchmarkStoreWatcherMemory-2   	       3	 222080831 ns/op	       476.2 etcd-B/watcher	       256.1 listwatch-B/watcher	         0.5379 ratio
BenchmarkCacheDispatch/watchers=1000/filter=none-2        	    2000	   1187936 ns/op	   2967963 listwatch-deliveries/s	       336.9 listwatch-ns/delivery	         1.941 ratio	   1528941 upstream-deliveries/s	       654.0 upstream-ns/delivery
BenchmarkCacheDispatch/watchers=10000/filter=none-2       	    2000	  28647079 ns/op	   2568555 listwatch-deliveries/s	       389.3 listwatch-ns/delivery	         6.187 ratio	    415155 upstream-deliveries/s	      2409 upstream-ns/delivery
BenchmarkHTTPFanout/rate=100-2         	     100	 1000 ns/op	 3000 listwatch-cpu-ns/event	 6000 upstream-cpu-ns/event	 2000 floor-cpu-ns/event	 0 listwatch-failed-watchers
BenchmarkHTTPFanout/rate=300-2         	--- FAIL: BenchmarkHTTPFanout/rate=300-2
    http_test.go:246: figures (not valid): 1.382e+05 listwatch-events/s  1143 listwatch-p50-ms  1540 listwatch-p99-ms  959 listwatch-failed-watchers
    http_test.go:248: listwatch: watcher 0: after 250 of 3000 events: EOF
--- FAIL: BenchmarkHTTPFanout
PASS
`

func TestParse(t *testing.T) {
	r, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.metrics["BenchmarkStorePut"]["listwatch-puts/s"]; got != 2687893 {
		t.Errorf("listwatch-puts/s %v", got)
	}
	if got := r.metrics["BenchmarkCacheDispatch/watchers=10000/filter=none"]["upstream-ns/delivery"]; got != 2409 {
		t.Errorf("upstream-ns/delivery %v", got)
	}
	if !r.failed["BenchmarkHTTPFanout/rate=300"] || !r.failed["BenchmarkHTTPFanout"] || len(r.failed) != 2 {
		t.Errorf("failed %v", r.failed)
	}
	if got := r.metrics["BenchmarkHTTPFanout/rate=300"]["listwatch-failed-watchers"]; got != 959 {
		t.Errorf("the failed run's logged figures: failed watchers %v, want 959", got)
	}
	if len(r.load) != 1 || !strings.Contains(r.load[0], "load average: 4.86") {
		t.Errorf("load %q", r.load)
	}
}

func TestGoals(t *testing.T) {
	r, _ := parse(strings.NewReader(sample))
	verdict := func(label string) string {
		for _, rw := range tableRows() {
			if rw.label == label {
				_, _, _, _, _, v := rw.eval(r)
				return v
			}
		}
		t.Fatalf("no row %q", label)
		return ""
	}
	for label, want := range map[string]string{
		"store: puts/s, no watchers":                   "missed (2.5x short of 50x)",
		"store: put + fan-out to 1, deliveries/s":      "met",
		"store: heap per idle watcher, B":              "met",
		"cache: 1000 watchers, none, deliveries/s":     "met",
		"cache: ns/delivery, 10000 over 1000 watchers": "met",
		"http, 1000 watchers at 300 writes/s: p99 ms":  "FAILED (see the log)",
		"cache: memory per cached event, B":            "no data",
		"store: lagging watcher catch-up, events/s":    "no data",
	} {
		if got := verdict(label); got != want {
			t.Errorf("%s: %q, want %q", label, got, want)
		}
	}
	// Failure mode of a bound: over it is missed, by how much.
	rw := row{label: "x", lw: figure{"B", "l"}, up: figure{"B", "u"}, goal: goal{kind: below, bound: 350}}
	res := results{metrics: map[string]map[string]float64{"B": {"l": 400, "u": 300}}, failed: map[string]bool{}}
	if _, _, ahead, _, _, v := rw.eval(res); v != "missed (50.0 over)" || ahead != 0.75 {
		t.Errorf("400 against < 350: %q, ahead %v", v, ahead)
	}
}

func TestTableMissingAndFailed(t *testing.T) {
	var buf bytes.Buffer
	r, _ := parse(strings.NewReader(""))
	write(&buf, tableRows(), r)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")[4:]
	if len(lines) != len(tableRows())+1 {
		t.Fatalf("%d lines for %d rows", len(lines), len(tableRows()))
	}
	for _, l := range lines[1:] {
		if !strings.HasSuffix(l, "no data") {
			t.Errorf("with no input: %q", l)
		}
	}
	buf.Reset()
	r, _ = parse(strings.NewReader(sample))
	write(&buf, tableRows(), r)
	out := buf.String()
	for _, want := range []string{"2.69M", "136k", "19.8x", ">= 50x", "load: 13:10:34 up", "1.16", "3.68"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
