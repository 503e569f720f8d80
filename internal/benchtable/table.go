package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// results are the parsed benchmark output: metrics by benchmark name (without the -GOMAXPROCS
// suffix) and unit, the failed benchmarks, and the uptime lines.
type results struct {
	metrics map[string]map[string]float64
	failed  map[string]bool
	load    []string
}

var (
	benchLine = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)$`)
	failLine  = regexp.MustCompile(`--- FAIL: (Benchmark\S+?)(-\d+)?$`)
	loadLine  = regexp.MustCompile(`load averages?:`)
	// figuresLine is how a benchmark that failed after measuring logs its figures.
	figuresLine = regexp.MustCompile(`figures \(not valid\): (.*)$`)
)

func parse(r io.Reader) (results, error) {
	res := results{metrics: map[string]map[string]float64{}, failed: map[string]bool{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	lastFailed := ""
	for sc.Scan() {
		line := sc.Text()
		if m := failLine.FindStringSubmatch(line); m != nil {
			res.failed[m[1]] = true
			lastFailed = m[1]
			continue
		}
		if loadLine.MatchString(line) {
			res.load = append(res.load, strings.TrimSpace(line))
			continue
		}
		if m := figuresLine.FindStringSubmatch(line); m != nil && lastFailed != "" {
			res.add(lastFailed, strings.Fields(m[1]))
			continue
		}
		if m := benchLine.FindStringSubmatch(line); m != nil {
			res.add(m[1], strings.Fields(m[3]))
		}
	}
	return res, sc.Err()
}

// add records the value-unit pairs of fields for bench.
func (res results) add(bench string, fields []string) {
	if len(fields)%2 != 0 {
		return
	}
	ms := res.metrics[bench]
	if ms == nil {
		ms = map[string]float64{}
		res.metrics[bench] = ms
	}
	for i := 0; i < len(fields); i += 2 {
		if v, err := strconv.ParseFloat(fields[i], 64); err == nil {
			ms[fields[i+1]] = v
		}
	}
}

// figure is one benchmark metric.
type figure struct {
	bench, unit string
}

func (f figure) get(r results) (float64, bool) {
	v, ok := r.metrics[f.bench][f.unit]
	return v, ok
}

// goalKind is what a goal constrains.
type goalKind int

const (
	noGoal goalKind = iota
	// aheadBy: listwatch ahead of upstream by at least the factor.
	aheadBy
	// below: listwatch's figure below the bound.
	below
	// atMost: listwatch's figure at most the bound.
	atMost
	// atLeast: listwatch's figure at least the bound.
	atLeast
)

type goal struct {
	kind  goalKind
	bound float64
	unit  string // of the bound, for below and atMost
}

func (g goal) String() string {
	switch g.kind {
	case aheadBy:
		return fmt.Sprintf(">= %gx", g.bound)
	case below:
		return fmt.Sprintf("< %g%s", g.bound, g.unit)
	case atMost:
		return fmt.Sprintf("<= %g%s", g.bound, g.unit)
	case atLeast:
		return fmt.Sprintf(">= %g%s", g.bound, g.unit)
	}
	return "-"
}

// row is one line of the table. ratio, when set, replaces the two figures with computed ones (the
// cost per delivery at 10000 watchers over that at 1000).
type row struct {
	label    string
	lw, up   figure
	higher   bool // higher is better
	goal     goal
	computed func(r results) (lw, up float64, lwOK, upOK bool)
	benches  []string // benchmarks whose failure fails the row; default lw's and up's
}

// status evaluates the row: its figures, how far listwatch is ahead, and the goal's verdict.
func (rw row) eval(r results) (lw, up, ahead float64, lwOK, upOK bool, verdict string) {
	if rw.computed != nil {
		lw, up, lwOK, upOK = rw.computed(r)
	} else {
		lw, lwOK = rw.lw.get(r)
		up, upOK = rw.up.get(r)
	}
	aheadOK := lwOK && upOK && lw != 0 && up != 0
	if aheadOK {
		if rw.higher {
			ahead = lw / up
		} else {
			ahead = up / lw
		}
	}
	benches := rw.benches
	if benches == nil {
		benches = []string{rw.lw.bench, rw.up.bench}
	}
	for _, b := range benches {
		if r.failed[b] || r.failed[parentOf(b)] {
			return lw, up, ahead, lwOK, upOK, "FAILED (see the log)"
		}
	}
	switch rw.goal.kind {
	case noGoal:
		if !lwOK && !upOK {
			return lw, up, ahead, lwOK, upOK, "no data"
		}
		return lw, up, ahead, lwOK, upOK, "-"
	case aheadBy:
		if !aheadOK {
			return lw, up, ahead, lwOK, upOK, "no data"
		}
		if ahead >= rw.goal.bound {
			return lw, up, ahead, lwOK, upOK, "met"
		}
		return lw, up, ahead, lwOK, upOK, fmt.Sprintf("missed (%.2gx short of %gx)", rw.goal.bound/ahead, rw.goal.bound)
	case below, atMost:
		if !lwOK {
			return lw, up, ahead, lwOK, upOK, "no data"
		}
		met := lw < rw.goal.bound || (rw.goal.kind == atMost && lw == rw.goal.bound)
		if met {
			return lw, up, ahead, lwOK, upOK, "met"
		}
		return lw, up, ahead, lwOK, upOK, fmt.Sprintf("missed (%s over)", human(lw-rw.goal.bound))
	case atLeast:
		if !lwOK {
			return lw, up, ahead, lwOK, upOK, "no data"
		}
		if lw >= rw.goal.bound {
			return lw, up, ahead, lwOK, upOK, "met"
		}
		return lw, up, ahead, lwOK, upOK, fmt.Sprintf("missed (%s under)", human(rw.goal.bound-lw))
	}
	return lw, up, ahead, lwOK, upOK, "-"
}

// parentOf is the benchmark a sub-benchmark runs under: its failure is reported on both.
func parentOf(b string) string {
	if i := strings.IndexByte(b, '/'); i >= 0 {
		return b[:i]
	}
	return b
}

// human formats a figure with three significant digits and a k/M suffix.
func human(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', digits(a/1e6), 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', digits(a/1e3), 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', digits(a), 64)
}

func digits(a float64) int {
	switch {
	case a >= 100:
		return 0
	case a >= 10:
		return 1
	case a >= 1:
		return 2
	}
	return 3
}

// write prints the table of rows over r.
func write(w io.Writer, rows []row, r results) {
	const format = "%-52s %10s %10s %9s %9s  %s\n"
	fmt.Fprintln(w, "upstream: etcd v3.7.3 mvcc over bbolt (store rows), k8s.io/apiserver v0.37.2 Cacher over its etcd3 storage (cache rows),")
	fmt.Fprintln(w, "apiextensions-apiserver v0.37.2 over listwatch's etcd API (http rows), embedded etcd + that apiserver (start; listwatch: listwatchtest).")
	fmt.Fprintln(w, "ahead by: listwatch over upstream, or upstream over listwatch where lower is better. Throughput is the")
	fmt.Fprintln(w, "best of alternating runs; the CPU rows (the process's CPU time per delivery) change least when the machine is shared.")
	fmt.Fprintf(w, format, "", "listwatch", "upstream", "ahead by", "goal", "")
	for _, rw := range rows {
		lw, up, ahead, lwOK, upOK, verdict := rw.eval(r)
		cell := func(v float64, ok bool) string {
			if !ok {
				return "-"
			}
			return human(v)
		}
		aheadCell := "-"
		if lwOK && upOK && ahead != 0 {
			aheadCell = strconv.FormatFloat(ahead, 'f', digits(ahead), 64) + "x"
		}
		fmt.Fprintf(w, format, rw.label, cell(lw, lwOK), cell(up, upOK), aheadCell, rw.goal, verdict)
	}
	for _, l := range r.load {
		fmt.Fprintf(w, "load: %s\n", l)
	}
}
