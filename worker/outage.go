package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// outage keeps the logs of one cause of failure (the database, Kafka)
// quiet while it lasts: several partitions failing again and again write one
// WARN line when the first of them fails and one INFO line when the last of
// them recovers; the failures in between go to DEBUG and to the metrics.
type outage struct {
	cause string // "database", "schema", "kafka", "dead-letter"
	log   *slog.Logger
	now   func() time.Time
	// waiting and errors are the cause's series; nil in unit tests.
	waiting prometheus.Gauge
	errors  prometheus.Counter

	n        atomic.Int64 // len(failing), read without the lock
	mu       sync.Mutex
	failing  map[string]bool // keys (partitions) failing now
	since    time.Time       // start of the outage
	failures int             // since the start
	last     error
}

func newOutage(cause string, log *slog.Logger, now func() time.Time) *outage {
	return &outage{cause: cause, log: log, now: now, failing: map[string]bool{}}
}

// fail records a failure of key. The first failure of an outage is logged
// at WARN with msg and attrs, the others at DEBUG.
func (o *outage) fail(key, msg string, err error, attrs ...any) {
	o.mu.Lock()
	began := len(o.failing) == 0
	if began {
		o.since, o.failures = o.now(), 0
	}
	if !o.failing[key] {
		o.failing[key] = true
		o.n.Add(1)
	}
	o.failures++
	o.last = err
	waiting := len(o.failing)
	o.mu.Unlock()
	if o.errors != nil {
		o.errors.Inc()
		o.waiting.Set(float64(waiting))
	}
	level := slog.LevelDebug
	if began {
		level = slog.LevelWarn
		msg += " (outage begins; further failures are logged at DEBUG until it ends)"
	}
	o.log.Log(context.Background(), level, msg, append(attrs, "cause", o.cause, "error", err)...)
}

// ok records that key works. When it was the last key failing, the outage
// ends with one INFO line. Cheap when there is no outage.
func (o *outage) ok(key string) {
	if o.n.Load() == 0 {
		return
	}
	o.mu.Lock()
	if !o.failing[key] {
		o.mu.Unlock()
		return
	}
	delete(o.failing, key)
	o.n.Add(-1)
	waiting, failures, lasted := len(o.failing), o.failures, o.now().Sub(o.since)
	o.mu.Unlock()
	if o.waiting != nil {
		o.waiting.Set(float64(waiting))
	}
	if waiting == 0 {
		o.log.Info("outage ended", "cause", o.cause, "lasted", lasted.Round(time.Millisecond), "failures", failures)
	}
}

// err describes the outage going on, or returns nil.
func (o *outage) err() error {
	if o.n.Load() == 0 {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.failing) == 0 {
		return nil
	}
	return fmt.Errorf("%s outage for %s, %d waiting, %d failures: %w",
		o.cause, o.now().Sub(o.since).Round(time.Second), len(o.failing), o.failures, o.last)
}
