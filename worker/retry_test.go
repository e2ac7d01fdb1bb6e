package worker

import (
	"testing"
	"time"
)

func TestBackoffDelay(t *testing.T) {
	tests := []struct {
		name   string
		jitter float64
		n      int
		want   time.Duration
	}{
		{"first, no jitter", 0.999999999, 1, 100 * time.Millisecond},
		{"first, full jitter", 0, 1, 50 * time.Millisecond},
		{"doubles", 0.999999999, 3, 400 * time.Millisecond},
		{"capped", 0.999999999, 10, time.Second},
		{"capped, full jitter", 0, 40, 500 * time.Millisecond},
		{"huge n does not overflow", 0.5, 1 << 30, 750 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := backoff{first: 100 * time.Millisecond, max: time.Second, jitter: func() float64 { return tt.jitter }}
			got := b.delay(tt.n)
			if diff := got - tt.want; diff < -time.Microsecond || diff > time.Microsecond {
				t.Errorf("delay(%d) = %v, want %v", tt.n, got, tt.want)
			}
		})
	}
}

func TestBackoffJitterStaysInUpperHalf(t *testing.T) {
	b := newBackoff(10*time.Millisecond, time.Second)
	for n := 1; n <= 12; n++ {
		full := min(10*time.Millisecond<<(n-1), time.Second)
		for range 50 {
			if d := b.delay(n); d < full/2 || d > full {
				t.Fatalf("delay(%d) = %v, want within [%v, %v]", n, d, full/2, full)
			}
		}
	}
}

// TestDefaultBudgetOutlastsLateRows: with the default attempts and backoff,
// even the shortest jitter keeps retrying an event for longer than a
// business row committed with it takes to become visible.
func TestDefaultBudgetOutlastsLateRows(t *testing.T) {
	c := DefaultConfig()
	if got := c.ShortestRetrySpan(); got < LateRowWindow {
		t.Fatalf("the default budget retries for as little as %v, less than %v", got, LateRowWindow)
	}
	short := c
	short.MaxAttempts = 3
	if got := short.ShortestRetrySpan(); got != 300*time.Millisecond {
		t.Errorf("3 attempts from 200ms: shortest span %v, want 300ms", got)
	}
	short.MaxRetryTime = 100 * time.Millisecond
	if got := short.ShortestRetrySpan(); got != 100*time.Millisecond {
		t.Errorf("bounded by MaxRetryTime: %v, want 100ms", got)
	}
}
