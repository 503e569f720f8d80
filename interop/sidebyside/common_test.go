package sidebyside

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// processCPU is the user and system time the process has used. A run's share of it, per delivery,
// is a figure other work on the machine hardly changes, where the run's wall time grows with it.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// lowest keeps, per name, the lowest value it was given.
type lowest map[string]float64

func (l lowest) add(name string, v float64) {
	if old, ok := l[name]; !ok || v < old {
		l[name] = v
	}
}

// settle collects garbage so that one side's leftovers do not run the other side's GC.
func settle() {
	runtime.GC()
	runtime.GC()
}

// report puts both figures of a store benchmark and their ratio (listwatch over etcd) on b.
func report(b *testing.B, figures map[string]float64, unit string) {
	reportVs(b, figures, "etcd", unit)
}

// reportVs puts listwatch's figure, the other side's and their ratio (listwatch over other) on b.
func reportVs(b *testing.B, figures map[string]float64, other, unit string) {
	b.ReportMetric(figures["listwatch"], "listwatch-"+unit)
	b.ReportMetric(figures[other], other+"-"+unit)
	b.ReportMetric(figures["listwatch"]/figures[other], "ratio")
}

// sidesFrom returns the sides the environment variable env names (comma-separated), or both
// listwatch and upstream when it is unset, so that one side can be profiled alone. A name that is
// neither fails the benchmark.
func sidesFrom(b testing.TB, env string) []string {
	v := os.Getenv(env)
	if v == "" {
		return []string{"listwatch", "upstream"}
	}
	names := strings.Split(v, ",")
	for _, name := range names {
		if name != "listwatch" && name != "upstream" {
			b.Fatalf("%s=%q: unknown side %q, want listwatch, upstream or both, comma-separated", env, v, name)
		}
	}
	return names
}

// rounds is how many times each side of a throughput benchmark runs, alternately, with the best run
// of each counted: SIDEBYSIDE_ROUNDS, default 3. Other builds and tests share the machine and only
// ever slow a run down, so the best of a few runs is the figure they disturbed least, and alternating
// the sides keeps a burst of load from falling on one side only.
func rounds() int {
	if n, err := strconv.Atoi(os.Getenv("SIDEBYSIDE_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 3
}

// best runs run for each name in turn, rounds() times over, and returns each name's best figure: the
// highest if higher is better, else the lowest.
func best(names []string, higher bool, run func(name string) float64) map[string]float64 {
	figures := map[string]float64{}
	for r := range rounds() {
		for _, name := range names {
			settle()
			v := run(name)
			if old, ok := figures[name]; r == 0 || !ok || (higher && v > old) || (!higher && v < old) {
				figures[name] = v
			}
		}
	}
	return figures
}

// pacer keeps a producer at most a few windows ahead of its slowest consumer: each of n consumers
// acknowledges the windows it finished, in order, and the producer waits until every consumer
// finished a window. A consumer that fails releases the producer.
type pacer struct {
	n         int32
	acks      []atomic.Int32
	completed atomic.Int64 // the highest window every consumer finished; windows complete in order
	notify    chan struct{}
	failed    chan struct{}
	once      sync.Once
	msg       string
}

func newPacer(consumers, windows int) *pacer {
	p := &pacer{n: int32(consumers), acks: make([]atomic.Int32, windows), notify: make(chan struct{}, 1), failed: make(chan struct{})}
	p.completed.Store(-1)
	return p
}

func (p *pacer) ack(window int) {
	if p.acks[window].Add(1) == p.n {
		p.completed.Store(int64(window))
		select {
		case p.notify <- struct{}{}:
		default:
		}
	}
}

// wait waits until every consumer finished window; false if one failed.
func (p *pacer) wait(window int) bool {
	return p.waitTimeout(window, 0)
}

// waitTimeout is wait with a limit (0: none); false if a consumer failed or the time is up.
func (p *pacer) waitTimeout(window int, limit time.Duration) bool {
	var timeout <-chan time.Time
	if limit > 0 {
		t := time.NewTimer(limit)
		defer t.Stop()
		timeout = t.C
	}
	for p.completed.Load() < int64(window) {
		select {
		case <-p.notify:
		case <-p.failed:
			return false
		case <-timeout:
			return false
		}
	}
	return true
}

func (p *pacer) fail(msg string) {
	p.once.Do(func() {
		p.msg = msg
		close(p.failed)
	})
}

// failure is the first failure's message, "" if none; call it once the consumers are done.
func (p *pacer) failure() string {
	select {
	case <-p.failed:
		return p.msg
	default:
		return ""
	}
}

// heapInUse is the live heap after a full collection.
func heapInUse() int64 {
	settle()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// memInUse is the live heap plus goroutine stacks after a full collection.
func memInUse() int64 {
	m := memStats()
	return int64(m.HeapAlloc + m.StackInuse)
}

// memStats are the memory statistics after a full collection.
func memStats() runtime.MemStats {
	settle()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
