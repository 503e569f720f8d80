package benchwatch

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// FloorResult is what Floor measured: delivered frames per second and the process's CPU time per
// delivered frame.
type FloorResult struct {
	EventsPerSec float64
	CPUPerEvent  time.Duration
	// EventsPerWrite is how many frames each write(2) carried on average: the batching that the
	// "flush only when no event is waiting" rule gave.
	EventsPerWrite float64
	// FrameBytes is each frame's size, newline included.
	FrameBytes int
}

// FloorFrameBytes is the size of Floor's frame for a 300-byte object, the default of the benchmarks
// that run it alone.
const FloorFrameBytes = len(floorFramePrefix) + 300 + len(floorFrameSuffix)

// floorFramePrefix and floorFrameSuffix surround the padding of a Floor frame.
const floorFramePrefix, floorFrameSuffix = `{"type":"MODIFIED","object":{"pad":"`, "\"}}\n"

// Floor is the least any watch server and its clients in this process can spend per event per
// watcher, for comparison with Fanout's CPU per event: for each of watchers loopback TCP connections,
// a writer goroutine woken by a channel send per event writes the event's frame (frameBytes long,
// newline included: a Fanout run's Result.BytesPerEvent, so that both move the same bytes),
// flushing (one write(2)) only when no event is waiting, as a watch handler does, and a reader
// goroutine reads the frames; events go out at rate per second in bursts of burst. There is no HTTP,
// no cache and no encoding.
func Floor(watchers, events, rate, burst, frameBytes int) (FloorResult, error) {
	if watchers <= 0 || events <= 0 || rate <= 0 {
		return FloorResult{}, fmt.Errorf("%w: watchers %d, events %d, rate %d: want positive counts", ErrConfig, watchers, events, rate)
	}
	pad := frameBytes - len(floorFramePrefix) - len(floorFrameSuffix)
	if pad < 0 {
		return FloorResult{}, fmt.Errorf("%w: frame of %d bytes: want at least %d", ErrConfig, frameBytes, frameBytes-pad)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return FloorResult{}, err
	}
	defer ln.Close()
	f := &floorRig{frame: []byte(floorFramePrefix + strings.Repeat("0", pad) + floorFrameSuffix),
		received: make([]int, watchers)}
	for w := range watchers {
		if err := f.connect(ln, w, events); err != nil {
			f.stop()
			return FloorResult{}, err
		}
	}
	var ru0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	elapsed := f.send(events, rate, max(burst, 1))
	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	f.stop()
	total := 0
	for _, r := range f.received {
		total += r
	}
	if total != events*watchers {
		return FloorResult{}, fmt.Errorf("%d of %d frames received", total, events*watchers)
	}
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	return FloorResult{
		EventsPerSec:   float64(total) / elapsed.Seconds(),
		CPUPerEvent:    time.Duration(cpu / int64(total)),
		EventsPerWrite: float64(total) / float64(max(f.flushes.Load(), 1)),
		FrameBytes:     len(f.frame),
	}, nil
}

// floorRig is Floor's connections: per watcher, the channel its writer reads, and what its reader
// received.
type floorRig struct {
	frame    []byte
	chans    []chan []byte
	conns    []net.Conn
	wg       sync.WaitGroup
	received []int
	flushes  atomic.Int64
}

// connect opens watcher w's connection and starts its writer, which flushes only when no frame is
// waiting, and its reader, which reads events frames.
func (f *floorRig) connect(ln net.Listener, w, events int) error {
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	server, err := ln.Accept()
	if err != nil {
		client.Close()
		return err
	}
	f.conns = append(f.conns, client, server)
	ch := make(chan []byte, 100)
	f.chans = append(f.chans, ch)
	f.wg.Go(func() {
		bw := bufio.NewWriterSize(server, 4<<10)
		for fr := range ch {
			bw.Write(fr)
			if len(ch) == 0 && f.flushes.Add(1) > 0 && bw.Flush() != nil {
				// The reader is gone: drop the rest.
				for range ch {
				}
				return
			}
		}
	})
	f.wg.Go(func() {
		buf := make([]byte, 32<<10)
		want := events * len(f.frame)
		for got := 0; got < want; {
			k, err := client.Read(buf)
			if err != nil {
				// The writer's next flush fails and it drains its channel.
				client.Close()
				return
			}
			got += k
			f.received[w] = got / len(f.frame)
		}
	})
	return nil
}

// send sends every watcher events frames at rate per second in bursts of burst, closes the
// channels and waits until every writer and reader is done; it returns the time that took.
func (f *floorRig) send(events, rate, burst int) time.Duration {
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := range events {
		if i%burst == 0 {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d)
			}
		}
		for _, ch := range f.chans {
			ch <- f.frame
		}
	}
	for _, ch := range f.chans {
		close(ch)
	}
	f.chans = nil
	f.wg.Wait()
	return time.Since(start)
}

// stop closes the channels not yet closed and every connection, and waits for the goroutines.
func (f *floorRig) stop() {
	for _, ch := range f.chans {
		close(ch)
	}
	f.chans = nil
	for _, c := range f.conns {
		c.Close()
	}
	f.wg.Wait()
}
