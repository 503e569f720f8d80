package chaintest

import (
	"fmt"
	"runtime"
	"sync"
	"time"
)

// MemPeak samples runtime.MemStats until Stop and keeps the highest figures seen.
type MemPeak struct {
	stop chan struct{}
	done chan struct{}

	mu                        sync.Mutex
	heapInuse, heapAlloc, sys uint64
	samples                   int
}

// StartMemPeak collects garbage (so that what earlier tests left does not count), then samples
// every interval (and once at once).
func StartMemPeak(interval time.Duration) *MemPeak {
	runtime.GC()
	p := &MemPeak{stop: make(chan struct{}), done: make(chan struct{})}
	p.Sample()
	go func() {
		defer close(p.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.Sample()
			}
		}
	}()
	return p
}

// Sample reads the figures now.
func (p *MemPeak) Sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.heapInuse = max(p.heapInuse, ms.HeapInuse)
	p.heapAlloc = max(p.heapAlloc, ms.HeapAlloc)
	p.sys = max(p.sys, ms.Sys)
	p.samples++
}

// Stop ends the sampling and waits for the sampler.
func (p *MemPeak) Stop() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
	p.Sample()
}

// HeapInuse is the highest HeapInuse seen, in bytes.
func (p *MemPeak) HeapInuse() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heapInuse
}

func (p *MemPeak) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("peak HeapInuse %.1f MiB, HeapAlloc %.1f MiB, Sys %.1f MiB (%d samples)",
		mib(p.heapInuse), mib(p.heapAlloc), mib(p.sys), p.samples)
}

// LiveHeap collects garbage and returns HeapAlloc: the bytes still reachable. It collects twice: one
// collection moves what the sync.Pools hold (gRPC's and the encoders' buffers, as many as the
// schedule happened to need at once) into their victim caches, where it stays reachable; the second
// frees it. One collection left 0 to 5 MiB of pooled buffers in the figure, varying run to run.
func LiveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// MiB converts bytes.
func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// MiB converts bytes to mebibytes for reports.
func MiB(b uint64) float64 { return mib(b) }
