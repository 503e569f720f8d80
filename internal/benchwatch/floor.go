package benchwatch

import (
	"bufio"
	"fmt"
	"net"
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
}

// Floor is the least any watch server and its clients in this process can spend per event per
// watcher, for comparison with Fanout's CPU per event: for each of watchers loopback TCP connections,
// a writer goroutine woken by a channel send per event writes the event's frame (a 300-byte object),
// flushing (one write(2)) only when no event is waiting, as a watch handler does, and a reader
// goroutine reads the frames; events go out at rate per second in bursts of burst. There is no HTTP,
// no cache and no encoding.
func Floor(watchers, events, rate, burst int) (FloorResult, error) {
	if watchers <= 0 || events <= 0 || rate <= 0 {
		return FloorResult{}, fmt.Errorf("%w: watchers %d, events %d, rate %d: want positive counts", ErrConfig, watchers, events, rate)
	}
	burst = max(burst, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return FloorResult{}, err
	}
	defer ln.Close()
	frame := []byte(`{"type":"MODIFIED","object":{` + fmt.Sprintf(`"pad":"%0300d"`, 0) + "}}\n")
	chans := make([]chan []byte, 0, watchers)
	var conns []net.Conn
	var wg sync.WaitGroup
	received := make([]int, watchers)
	var flushes atomic.Int64
	stop := func() {
		for _, ch := range chans {
			close(ch)
		}
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}
	for w := range watchers {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			stop()
			return FloorResult{}, err
		}
		server, err := ln.Accept()
		if err != nil {
			client.Close()
			stop()
			return FloorResult{}, err
		}
		conns = append(conns, client, server)
		ch := make(chan []byte, 100)
		chans = append(chans, ch)
		wg.Go(func() {
			bw := bufio.NewWriterSize(server, 4<<10)
			for f := range ch {
				bw.Write(f)
				if len(ch) == 0 && flushes.Add(1) > 0 && bw.Flush() != nil {
					// The reader is gone: drop the rest.
					for range ch {
					}
					return
				}
			}
		})
		wg.Go(func() {
			buf := make([]byte, 32<<10)
			want := events * len(frame)
			for got := 0; got < want; {
				k, err := client.Read(buf)
				if err != nil {
					// The writer's next flush fails and it drains its channel.
					client.Close()
					return
				}
				got += k
				received[w] = got / len(frame)
			}
		})
	}
	var ru0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := range events {
		if i%burst == 0 {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d)
			}
		}
		for _, ch := range chans {
			ch <- frame
		}
	}
	for _, ch := range chans {
		close(ch)
	}
	chans = nil
	wg.Wait()
	elapsed := time.Since(start)
	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	for _, c := range conns {
		c.Close()
	}
	total := 0
	for _, r := range received {
		total += r
	}
	if total != events*watchers {
		return FloorResult{}, fmt.Errorf("%d of %d frames received", total, events*watchers)
	}
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	return FloorResult{
		EventsPerSec:   float64(total) / elapsed.Seconds(),
		CPUPerEvent:    time.Duration(cpu / int64(total)),
		EventsPerWrite: float64(total) / float64(max(flushes.Load(), 1)),
	}, nil
}
