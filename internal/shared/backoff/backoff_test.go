package backoff

import (
	"context"
	"testing"
	"time"
)

func TestExponential(t *testing.T) {
	const ms = time.Millisecond
	for n, want := range []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second} {
		if got := Exponential(100*ms, time.Second, n); got != want {
			t.Errorf("Exponential(n=%d) = %v, want %v", n, got, want)
		}
	}
	if got := Exponential(100*ms, time.Second, 1<<30); got != time.Second {
		t.Errorf("Exponential(huge n) = %v, want the cap", got)
	}
}

func TestJitterStaysInUpperHalf(t *testing.T) {
	for _, r := range []float64{0, 0.25, 0.5, 0.999} {
		got := Jitter(time.Second, r)
		if got < 500*time.Millisecond || got >= time.Second {
			t.Errorf("Jitter(1s, %v) = %v, want in [500ms, 1s)", r, got)
		}
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep did not wait out 1ms")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep on a cancelled context reported a full wait")
	}
}
