package watch

import (
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

// blockLogger reports how long a watch spent blocked on a full buffer: the waits of each interval are
// summed and, if they exceed threshold, logged once at the end of the interval.
//
// Mirrors etcd3/block_logger.go blockLogger.
type blockLogger struct {
	interval      time.Duration
	threshold     time.Duration
	msg           string
	objectType    string
	groupResource schema.GroupResource
	clock         clock.PassiveClock
	logger        *slog.Logger

	mu          sync.Mutex
	lastLogTime time.Time
	eventCount  int
	timeWaiting time.Duration
}

func newBlockLogger(interval, threshold time.Duration, msg, objectType string, gr schema.GroupResource, clk clock.PassiveClock, logger *slog.Logger) *blockLogger {
	return &blockLogger{
		interval:      interval,
		threshold:     threshold,
		msg:           msg,
		objectType:    objectType,
		groupResource: gr,
		clock:         clk,
		logger:        logger,
		lastLogTime:   clk.Now(),
	}
}

func (l *blockLogger) recordWait(wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.eventCount++
	l.timeWaiting += wait
	now := l.clock.Now()
	window := now.Sub(l.lastLogTime)
	if window < l.interval {
		return
	}
	if l.timeWaiting > l.threshold {
		l.logger.Info(l.msg,
			"objectType", l.objectType,
			"groupResource", l.groupResource.String(),
			"eventCount", l.eventCount,
			"timeWaiting", l.timeWaiting,
			"window", window)
	}
	l.eventCount = 0
	l.timeWaiting = 0
	l.lastLogTime = now
}
