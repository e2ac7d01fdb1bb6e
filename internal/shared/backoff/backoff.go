// Package backoff holds the waiting shared by every retry loop of EventForge:
// exponential delays with a cap, "equal jitter", and a sleep that ends with
// its context.
//
// Imports (floor: shared library): no other EventForge package.
package backoff

import (
	"context"
	"time"
)

// Exponential is first doubled n times, capped at most (n = 0 gives first).
func Exponential(first, most time.Duration, n int) time.Duration {
	d := first
	for i := 0; i < n && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// Jitter returns a point in the upper half of d chosen by r in [0, 1), so
// clients that failed together do not retry together ("equal jitter").
func Jitter(d time.Duration, r float64) time.Duration {
	half := d / 2
	return half + time.Duration(r*float64(d-half))
}

// Sleep waits d or until ctx ends, reporting whether it waited d out.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
