package compactor

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/listwatch/listwatch/store"
)

// Modes, as etcd's --auto-compaction-mode takes them.
const (
	ModePeriodic = "periodic"
	ModeRevision = "revision"
)

// RevisionInterval is how often revision mode compacts (v3compactor/revision.go revInterval).
const RevisionInterval = 5 * time.Minute

// Target is what a compactor compacts: a *store.Store.
type Target interface {
	Rev() int64
	Compact(rev int64) (*store.CompactResponse, error)
}

// ErrBadRetention is returned by New for a mode or retention etcd would refuse; the error names it.
var ErrBadRetention = errors.New("bad auto-compaction setting")

// Compactor compacts a store in the background as etcd's v3compactor does; New starts it and Stop
// stops it and waits for its goroutine.
type Compactor struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// New parses etcd's --auto-compaction-mode and --auto-compaction-retention and starts compacting t
// on clk. Periodic mode takes a duration ("30m") or a whole number of hours ("1"); revision mode a
// whole number of revisions. A retention of "0" (or "") disables compaction: New returns nil, nil.
// It follows embed/config.go's parsing and v3compactor's Periodic and Revision.
func New(mode, retention string, clk clock.Clock, t Target) (*Compactor, error) {
	if retention == "" {
		retention = "0"
	}
	var run func(stop <-chan struct{})
	switch mode {
	case ModePeriodic:
		d, err := parsePeriod(retention)
		if err != nil || d == 0 {
			return nil, err
		}
		run = func(stop <-chan struct{}) { periodic(d, clk, t, stop) }
	case ModeRevision:
		n, err := strconv.ParseInt(retention, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: --auto-compaction-retention %q: revision mode takes a whole number of revisions", ErrBadRetention, retention)
		}
		if n == 0 {
			return nil, nil
		}
		run = func(stop <-chan struct{}) { revision(n, clk, t, stop) }
	default:
		return nil, fmt.Errorf("%w: --auto-compaction-mode %q: want %q or %q", ErrBadRetention, mode, ModePeriodic, ModeRevision)
	}
	c := &Compactor{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		run(c.stop)
	}()
	return c, nil
}

// parsePeriod reads a periodic retention: a whole number is hours, as etcd's flag has it.
func parsePeriod(s string) (time.Duration, error) {
	if h, err := strconv.ParseInt(s, 10, 64); err == nil && h >= 0 {
		return time.Duration(h) * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%w: --auto-compaction-retention %q: periodic mode takes a duration such as 30m or a whole number of hours", ErrBadRetention, s)
	}
	return d, nil
}

// Stop stops the compactor and waits for it; it is idempotent and safe on a nil Compactor.
func (c *Compactor) Stop() {
	if c == nil {
		return
	}
	c.once.Do(func() { close(c.stop) })
	<-c.done
}

// periodic is v3compactor/periodic.go Periodic.Run: it samples the revision every tenth of the period
// (at most an hour), keeps the samples of the last period, and once a period has passed since the
// start compacts to the oldest sample, then again every period (at most an hour) after each success.
func periodic(period time.Duration, clk clock.Clock, t Target, stop <-chan struct{}) {
	interval := min(period, time.Hour)
	retry := interval / 10
	keep := int(period/retry) + 1
	var revs []int64
	lastRev := int64(0)
	lastSuccess := clk.Now()
	base := period
	for {
		revs = append(revs, t.Rev())
		if len(revs) > keep {
			revs = revs[1:]
		}
		select {
		case <-stop:
			return
		case <-clk.After(retry):
		}
		rev := revs[0]
		if clk.Since(lastSuccess) < base || rev == lastRev {
			continue
		}
		base = interval
		if _, err := t.Compact(rev); err == nil || errors.Is(err, store.ErrCompacted) {
			lastRev, lastSuccess = rev, clk.Now()
		}
	}
}

// revision is v3compactor/revision.go Revision.Run: every five minutes it compacts to the current
// revision less the retention, unless that is not positive or was done already.
func revision(retention int64, clk clock.Clock, t Target, stop <-chan struct{}) {
	prev := int64(0)
	for {
		select {
		case <-stop:
			return
		case <-clk.After(RevisionInterval):
		}
		rev := t.Rev() - retention
		if rev <= 0 || rev == prev {
			continue
		}
		if _, err := t.Compact(rev); err == nil || errors.Is(err, store.ErrCompacted) {
			prev = rev
		}
	}
}
