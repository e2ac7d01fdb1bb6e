package worker

import (
	"context"
	"math/rand/v2"
	"time"

	backoffpkg "github.com/eventforge/eventforge/internal/shared/backoff"
)

// backoff computes the waits between attempts: first, doubling per retry,
// capped at max, with "equal jitter" (a random point in the upper half) so
// workers that failed together do not retry together.
type backoff struct {
	first, max time.Duration
	jitter     func() float64 // in [0, 1); rand.Float64 in production
}

func newBackoff(first, max time.Duration) backoff {
	return backoff{first: first, max: max, jitter: rand.Float64}
}

// delay is the wait before retry n (n ≥ 1: the wait after the first failure).
func (b backoff) delay(n int) time.Duration {
	return backoffpkg.Jitter(backoffpkg.Exponential(b.first, b.max, n-1), b.jitter())
}

// sleep waits d or until ctx ends, reporting whether it waited it out.
func sleep(ctx context.Context, d time.Duration) bool { return backoffpkg.Sleep(ctx, d) }

// LateRowWindow is the time a business row committed with its event may take
// to become visible to the worker after the event arrives (see
// docs/guarantees.md): a retry budget shorter than it could dead-letter a
// good event.
const LateRowWindow = 2 * time.Second

// ShortestRetrySpan is the least time between an event's first and last
// attempt that the budget of c (with its defaults applied) allows: every
// wait at its shortest jitter, within MaxRetryTime.
func (c Config) ShortestRetrySpan() time.Duration {
	b := backoff{first: c.RetryBackoff, max: c.MaxBackoff, jitter: func() float64 { return 0 }}
	var span time.Duration
	for n := 1; n < c.MaxAttempts; n++ {
		span += b.delay(n)
	}
	return min(span, c.MaxRetryTime)
}
