package benchwatch

import (
	"bufio"
	"fmt"
	"net"
	"slices"
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
	// Latency holds every frame's send-to-receipt time in µs, sorted: from the moment the sender
	// hands the event to the writers until a reader has the frame's last byte.
	Latency []int32
}

// Percentile is the send-to-receipt latency below which fraction p of the frames arrived: the least
// latency a watch server could give at the same rate, watchers and frame size on this machine.
func (r FloorResult) Percentile(p float64) time.Duration { return percentile(r.Latency, p) }

// FloorFrameBytes is the size of Floor's frame for a 300-byte object, the default of the benchmarks
// that run it alone.
const FloorFrameBytes = len(floorFramePrefix) + 300 + len(floorFrameSuffix)

// floorFramePrefix and floorFrameSuffix surround the padding of a Floor frame.
const floorFramePrefix, floorFrameSuffix = `{"type":"MODIFIED","object":{"pad":"`, "\"}}\n"

// FloorConfig is one Floor run: Watchers connections, each sent Events frames of FrameBytes (newline
// included: a Fanout run's Result.BytesPerEvent, so that both move the same bytes) at Rate per
// second in bursts of Burst; each connection is flushed when no frame is waiting, as the watch
// handler does, but not twice within FlushInterval (0: no such spacing, as upstream's handler).
type FloorConfig struct {
	Watchers, Events, Rate, Burst, FrameBytes int
	FlushInterval                             time.Duration
}

// Floor is the least any watch server and its clients in this process can spend per event per
// watcher, and the least latency they can give, for comparison with Fanout: for each watcher a
// loopback TCP connection, a writer goroutine woken by a channel send per event that writes the
// event's frame and flushes (one write(2)) as FloorConfig says, and a reader goroutine that reads the
// frames. There is no HTTP, no cache and no encoding.
func Floor(cfg FloorConfig) (FloorResult, error) {
	watchers, events, rate, frameBytes := cfg.Watchers, cfg.Events, cfg.Rate, cfg.FrameBytes
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
		flushInterval: cfg.FlushInterval, latency: make([][]int32, watchers),
		sentAt: make([]atomic.Int64, events)}
	for w := range watchers {
		if err := f.connect(ln, w, events); err != nil {
			f.stop()
			return FloorResult{}, err
		}
	}
	var ru0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	elapsed := f.send(events, rate, max(cfg.Burst, 1))
	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	f.stop()
	total := 0
	var latency []int32
	for _, l := range f.latency {
		total += len(l)
		latency = append(latency, l...)
	}
	slices.Sort(latency)
	if total != events*watchers {
		return FloorResult{}, fmt.Errorf("%d of %d frames received", total, events*watchers)
	}
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	return FloorResult{
		EventsPerSec:   float64(total) / elapsed.Seconds(),
		CPUPerEvent:    time.Duration(cpu / int64(total)),
		EventsPerWrite: float64(total) / float64(max(f.flushes.Load(), 1)),
		FrameBytes:     len(f.frame),
		Latency:        latency,
	}, nil
}

// floorRig is Floor's connections: per watcher, the channel its writer reads, and when its reader
// received each frame.
type floorRig struct {
	frame         []byte
	flushInterval time.Duration
	chans         []chan []byte
	conns         []net.Conn
	wg            sync.WaitGroup
	// latency is, per watcher, each frame it received, in order: its send-to-receipt time in µs.
	// sentAt is each event's send time in Unix ns, atomic as the reader learns of a frame through
	// the kernel, which the race detector does not see as an ordering.
	latency [][]int32
	sentAt  []atomic.Int64
	flushes atomic.Int64
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
	f.wg.Go(func() { f.write(server, ch) })
	f.wg.Go(func() {
		buf := make([]byte, 32<<10)
		want := events * len(f.frame)
		f.latency[w] = make([]int32, 0, events)
		for got := 0; got < want; {
			k, err := client.Read(buf)
			if err != nil {
				// The writer's next flush fails and it drains its channel.
				client.Close()
				return
			}
			now := time.Now().UnixNano()
			got += k
			for frame := len(f.latency[w]); frame < got/len(f.frame); frame++ {
				f.latency[w] = append(f.latency[w], int32((now-f.sentAt[frame].Load())/int64(time.Microsecond)))
			}
		}
	})
	return nil
}

// write writes the frames ch brings to conn, flushing when no frame is waiting but not twice within
// the flush interval: a frame that comes sooner waits, with those after it, until the interval is up.
func (f *floorRig) write(conn net.Conn, ch <-chan []byte) {
	bw := bufio.NewWriterSize(conn, 4<<10)
	var last time.Time
	for fr := range ch {
		bw.Write(fr)
		if len(ch) > 0 {
			continue
		}
		if wait := time.Until(last.Add(f.flushInterval)); f.flushInterval > 0 && wait > 0 {
			time.Sleep(wait)
			for len(ch) > 0 {
				bw.Write(<-ch)
			}
		}
		f.flushes.Add(1)
		if bw.Flush() != nil {
			// The reader is gone: drop the rest.
			for range ch {
			}
			return
		}
		last = time.Now()
	}
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
		f.sentAt[i].Store(time.Now().UnixNano())
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
