package benchwatch

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrConfig is matched by the error of a Config that Fanout or Floor refuses.
var ErrConfig = errors.New("benchwatch: invalid config")

// Config is one fan-out run.
type Config struct {
	// Addr is the server's host:port; Path the watch request's path and query, whose stream must
	// begin after StartRV.
	Addr    string
	Path    string
	StartRV int64
	// Watchers is how many watches read; Writes how many writes Write makes, at Rate per second in
	// bursts of Burst back-to-back writes (default 1).
	Watchers, Writes, Rate, Burst int
	// Write makes write i: an update whose object carries "seq":"i" (a JSON string), so that each
	// watch's frame i can be checked.
	Write func(i int) error
	// Timeout bounds the wait for the last event after the last write; default 2 minutes.
	Timeout time.Duration
}

// Result is what a run measured. Its figures cover the whole process: the server under test, the
// writer and the readers.
type Result struct {
	Watchers int
	// Events is how many frames the watches got in all; Elapsed from the first write until the last
	// watch had every write (or gave up).
	Events  int64
	Elapsed time.Duration
	// Latency holds every frame's write-to-receipt time in µs, sorted.
	Latency []int32
	// WriteLatency holds every write's duration (the call to Config.Write) in µs, sorted.
	WriteLatency []int32
	// CPU is the process's user and system time over the run; Mallocs its heap allocations.
	CPU     time.Duration
	Mallocs uint64
	Chunks  int64
	// Bytes is what the frames the watches got took, newlines included (BytesPerEvent).
	Bytes int64
	// Failed names each watch that fell short of every write, and why.
	Failed []string
	// TimedOut is set when the events did not all arrive within Config.Timeout.
	TimedOut bool
}

// Percentile is the write-to-receipt latency below which fraction p of the frames arrived.
func (r Result) Percentile(p float64) time.Duration { return percentile(r.Latency, p) }

// WritePercentile is the duration below which fraction p of the writes completed.
func (r Result) WritePercentile(p float64) time.Duration { return percentile(r.WriteLatency, p) }

func percentile(sorted []int32, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return time.Duration(sorted[int(p*float64(len(sorted)-1))]) * time.Microsecond
}

// Metric is one figure and its unit, as b.ReportMetric takes them.
type Metric struct {
	Value float64
	Unit  string
}

// Metrics are the run's figures: events/s, p50-ms and p99-ms (write to receipt), write-p99-ms (the
// writes themselves), cpu-ns/event, allocs/event, events/chunk, bytes/event, failed-watchers, each
// unit prefixed with prefix.
func (r Result) Metrics(prefix string) []Metric {
	events := float64(max(r.Events, 1))
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return []Metric{
		{float64(r.Events) / r.Elapsed.Seconds(), prefix + "events/s"},
		{ms(r.Percentile(0.50)), prefix + "p50-ms"},
		{ms(r.Percentile(0.99)), prefix + "p99-ms"},
		{ms(r.WritePercentile(0.99)), prefix + "write-p99-ms"},
		{float64(r.CPU.Nanoseconds()) / events, prefix + "cpu-ns/event"},
		{float64(r.Mallocs) / events, prefix + "allocs/event"},
		{float64(r.Events) / float64(max(r.Chunks, 1)), prefix + "events/chunk"},
		{float64(r.Bytes) / events, prefix + "bytes/event"},
		{float64(len(r.Failed)), prefix + "failed-watchers"},
	}
}

// BytesPerEvent is the frames' average size, newline included: the frame size of a Floor to compare
// the run with (0 if no frame arrived).
func (r Result) BytesPerEvent() int {
	if r.Events == 0 {
		return 0
	}
	return int(r.Bytes / r.Events)
}

// Problem describes what went wrong in the run, "" if every watch got every write in time.
func (r Result) Problem() string {
	var parts []string
	if r.TimedOut {
		parts = append(parts, fmt.Sprintf("only %d of the events delivered in time", r.Events))
	}
	for i, f := range r.Failed {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("... and %d more failed watchers", len(r.Failed)-i))
			break
		}
		parts = append(parts, f)
	}
	return strings.Join(parts, "; ")
}

// Fanout opens the watches (each is registered once its headers arrived), then makes the writes at
// the configured rate while the watches read, and waits until every watch has every write, one fails
// or the timeout passes. It returns an error, with every connection closed, if a watch cannot be
// opened or a write fails; a watch that falls short is a Result.Failed entry instead.
func Fanout(cfg Config) (Result, error) {
	if cfg.Burst <= 0 {
		cfg.Burst = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.Watchers <= 0 || cfg.Writes <= 0 || cfg.Rate <= 0 || cfg.Write == nil {
		return Result{}, fmt.Errorf("%w: watchers %d, writes %d, rate %d, write set %t: want positive counts and a Write",
			ErrConfig, cfg.Watchers, cfg.Writes, cfg.Rate, cfg.Write != nil)
	}
	n := cfg.Writes
	sent := make([]atomic.Int64, n) // UnixNano of each write's start
	streams := make([]*Stream, 0, cfg.Watchers)
	closeAll := func() {
		for _, s := range streams {
			s.Close()
		}
	}
	for w := range cfg.Watchers {
		s, err := Open(cfg.Addr, cfg.Path, n)
		if err != nil {
			closeAll()
			return Result{}, fmt.Errorf("watch %d: %w", w, err)
		}
		streams = append(streams, s)
	}
	var readers sync.WaitGroup
	for _, s := range streams {
		readers.Go(func() { s.ReadAll(cfg.StartRV, sent) })
	}
	var ru0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)

	start := time.Now()
	writeLatency := make([]int32, 0, n)
	interval := time.Second / time.Duration(cfg.Rate)
	for i := range n {
		if i%cfg.Burst == 0 {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d)
			}
		}
		t0 := time.Now()
		sent[i].Store(t0.UnixNano())
		err := cfg.Write(i)
		writeLatency = append(writeLatency, int32(time.Since(t0)/time.Microsecond))
		if err != nil {
			closeAll()
			readers.Wait()
			return Result{}, fmt.Errorf("write %d: %w", i, err)
		}
	}
	done := make(chan struct{})
	go func() {
		readers.Wait()
		close(done)
	}()
	r := Result{Watchers: cfg.Watchers}
	timer := time.NewTimer(cfg.Timeout)
	select {
	case <-done:
	case <-timer.C:
		r.TimedOut = true
		closeAll()
		<-done
	}
	timer.Stop()
	r.Elapsed = time.Since(start)

	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	closeAll()
	for w, s := range streams {
		r.Events += int64(s.Got)
		r.Chunks += s.Chunks
		r.Bytes += s.Bytes
		r.Latency = append(r.Latency, s.Latency...)
		if s.Err != nil {
			r.Failed = append(r.Failed, fmt.Sprintf("watcher %d: %v", w, s.Err))
		}
	}
	slices.Sort(r.Latency)
	slices.Sort(writeLatency)
	r.WriteLatency = writeLatency
	r.CPU = time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	r.Mallocs = ms1.Mallocs - ms0.Mallocs
	return r, nil
}
