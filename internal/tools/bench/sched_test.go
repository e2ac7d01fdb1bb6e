package bench

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestParseRates(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []Rate
		wantErr bool
	}{
		{"1000,5000,10000,50000/100", []Rate{{1000, 1}, {5000, 1}, {10000, 1}, {50000, 100}}, false},
		{" 200 ", []Rate{{200, 1}}, false},
		{"0", nil, true},
		{"-5", nil, true},
		{"100/0", nil, true},
		{"10/100", nil, true},
		{"abc", nil, true},
		{"", nil, true},
	} {
		got, err := ParseRates(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseRates(%q) err = %v, wantErr %v", tc.in, err, tc.wantErr)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("ParseRates(%q) = %v, want %v", tc.in, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("ParseRates(%q)[%d] = %v, want %v", tc.in, i, got[i], tc.want[i])
			}
		}
	}
	if r := (Rate{50000, 100}); r.TxnPerSec() != 500 || r.String() != "50000/100" {
		t.Errorf("Rate{50000,100}: %v txn/s, %q", r.TxnPerSec(), r.String())
	}
}

func TestParseStages(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"drain,steady,worker", []string{"drain", "steady", "worker"}, false},
		{"worker, drain,worker", []string{"worker", "drain"}, false},
		{"latency", nil, true},
		{",", nil, true},
	} {
		got, err := ParseStages(tc.in)
		if (err != nil) != tc.wantErr || len(got) != len(tc.want) {
			t.Errorf("ParseStages(%q) = %v, %v", tc.in, got, err)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("ParseStages(%q) = %v, want %v", tc.in, got, tc.want)
			}
		}
	}
}

func TestScheduleArithmetic(t *testing.T) {
	for _, tc := range []struct {
		name    string
		perSec  float64
		d       time.Duration
		total   int64
		elapsed time.Duration
		due     int64
		i       int64
		at      time.Duration
	}{
		{"5000/s for 60s", 5000, time.Minute, 300000, 0, 1, 5000, time.Second},
		{"5000/s after 10ms", 5000, time.Minute, 300000, 10 * time.Millisecond, 51, 1, 200 * time.Microsecond},
		{"500/s after 1s", 500, time.Minute, 30000, time.Second, 501, 250, 500 * time.Millisecond},
		{"capped at the total", 1000, time.Second, 1000, 5 * time.Second, 1000, 999, 999 * time.Millisecond},
		{"before the start", 1000, time.Second, 1000, -time.Millisecond, 0, 0, 0},
		{"fractional rate", 2.5, 4 * time.Second, 10, 1900 * time.Millisecond, 5, 3, 1200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSchedule(tc.perSec, tc.d)
			if s.total != tc.total {
				t.Errorf("total = %d, want %d", s.total, tc.total)
			}
			if got := s.dueBy(tc.elapsed); got != tc.due {
				t.Errorf("dueBy(%s) = %d, want %d", tc.elapsed, got, tc.due)
			}
			if got := s.at(tc.i); got != tc.at {
				t.Errorf("at(%d) = %s, want %s", tc.i, got, tc.at)
			}
		})
	}
}

// TestOpenLoopDoesNotWaitForSlowTransactions checks the writer is open loop:
// with transactions slower than the interval, it still starts them on time
// on other connections instead of stretching the schedule.
func TestOpenLoopDoesNotWaitForSlowTransactions(t *testing.T) {
	const perSec, conns = 200, 20
	s := newSchedule(perSec, 500*time.Millisecond) // 100 transactions, one every 5 ms
	var mu sync.Mutex
	seen := map[int64]bool{}
	res := runOpenLoop(context.Background(), s, conns, func(_ context.Context, i int64) error {
		time.Sleep(40 * time.Millisecond) // 8 intervals long
		mu.Lock()
		seen[i] = true
		mu.Unlock()
		return nil
	})
	if res.Scheduled != 100 || res.Done+res.Dropped+res.Errors != res.Scheduled {
		t.Fatalf("result %+v does not add up", res)
	}
	if res.Done != 100 || len(seen) != 100 || len(res.Commits) != 100 {
		t.Fatalf("%d of 100 transactions done, %d durations", res.Done, len(res.Commits))
	}
	if res.commitQuantile(0.5) < 40*time.Millisecond {
		t.Fatalf("commit p50 %s, but every transaction took 40ms", res.commitQuantile(0.5))
	}
}

// TestOpenLoopDropsWhatCannotStart checks a writer that cannot keep up shows
// a shortfall (dropped transactions) rather than running past its window.
func TestOpenLoopDropsWhatCannotStart(t *testing.T) {
	s := newSchedule(1000, 200*time.Millisecond) // 200 transactions
	res := runOpenLoop(context.Background(), s, 1, func(context.Context, int64) error {
		time.Sleep(100 * time.Millisecond)
		return nil
	})
	if res.Dropped == 0 || res.Done+res.Dropped != res.Scheduled {
		t.Fatalf("result %+v: want drops that add up to the schedule", res)
	}
	if !short(res.achieved(200*time.Millisecond), 1000) {
		t.Fatalf("achieved %.0f/s not flagged short of 1000/s", res.achieved(200*time.Millisecond))
	}
}

func TestCommitQuantile(t *testing.T) {
	var r openLoopResult
	if r.commitQuantile(0.5) != 0 {
		t.Fatal("no commits must give 0")
	}
	for i := 100; i >= 1; i-- {
		r.Commits = append(r.Commits, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := r.commitQuantile(tc.q); got != tc.want {
			t.Errorf("commitQuantile(%v) = %s, want %s", tc.q, got, tc.want)
		}
	}
}

func TestShort(t *testing.T) {
	for _, tc := range []struct {
		achieved, target float64
		want             bool
	}{{950, 1000, false}, {949, 1000, true}, {1000, 1000, false}, {0, 10, true}} {
		if got := short(tc.achieved, tc.target); got != tc.want {
			t.Errorf("short(%v, %v) = %v", tc.achieved, tc.target, got)
		}
	}
}
