package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func TestBatcher(t *testing.T) {
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	live, old := base.Add(-time.Millisecond), base.Add(-time.Minute)
	type step struct {
		after  time.Duration // clock advance before the call
		commit time.Time
		ready  int
		flush  bool
		want   bool
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"live records are never held", []step{{0, live, 1, false, true}}},
		{"unknown commit time is not held", []step{{0, time.Time{}, 1, false, true}}},
		{"a backlog record is held", []step{{0, old, 1, false, false}, {time.Millisecond, old, 5, false, false}}},
		{"held until the linger passed", []step{{0, old, 1, false, false}, {catchUpLinger, old, 3, false, true}}},
		{"held until a batch is ready", []step{{0, old, 1, false, false}, {0, old, catchUpBatch, false, true}}},
		{"the input ended: released", []step{{0, old, 1, false, false}, {0, old, 1, true, true}}},
		{"a release lasts until drained", []step{{0, old, catchUpBatch, false, true}, {0, old, 1, false, true}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := base
			b := newBatcher()
			b.now = func() time.Time { return now }
			for i, s := range tc.steps {
				now = now.Add(s.after)
				if got := b.release(s.commit, s.ready, s.flush); got != s.want {
					t.Fatalf("step %d: release = %v, want %v", i, got, s.want)
				}
			}
		})
	}
}

func TestBatcherHoldsAgainAfterDrained(t *testing.T) {
	now := time.Now()
	b := newBatcher()
	b.now = func() time.Time { return now }
	old := now.Add(-time.Minute)
	if !b.release(old, catchUpBatch, false) {
		t.Fatal("a full batch was held")
	}
	b.drained()
	if b.release(old, 1, false) {
		t.Fatal("after a drained release, a single backlog record went out at once")
	}
	if b.wake() == nil {
		t.Fatal("holding records without a wake-up")
	}
	b.drained()
	if b.wake() != nil {
		t.Fatal("a wake-up with nothing held")
	}
}

func TestBatcherWakeFires(t *testing.T) {
	b := newBatcher()
	if b.release(time.Now().Add(-time.Minute), 1, false) {
		t.Fatal("backlog record not held")
	}
	select {
	case <-b.wake():
	case <-time.After(10 * time.Second):
		t.Fatal("the wake-up never fired")
	}
	if !b.release(time.Now().Add(-time.Minute), 1, false) {
		t.Fatal("still held after the linger")
	}
}

// TestBacklogTrickleGoesOutInLargeRequests feeds the dispatcher records of
// distinct keys one by one with small gaps, as a WAL sender short of CPU
// does: live records go out as they come (no linger), records of a backlog
// are held back and handed over together, in a fraction of the requests.
func TestBacklogTrickleGoesOutInLargeRequests(t *testing.T) {
	const n = 400
	const linger = 20 * time.Millisecond // longer than in production: a clearer difference
	requests := func(t *testing.T, commit time.Time) (int, time.Duration) {
		b := mockCluster(t, "orders", sarama.NewMockProduceResponse(t))
		prod := mockProducer(t, b)
		d := newDispatcher(prod, slog.New(slog.DiscardHandler), n, dispatchHooks{
			admit:     func(context.Context, *pending) (bool, error) { return true, nil },
			delivered: func(*pending) {},
			reject:    func(context.Context, *pending) error { return errors.New("unexpected") },
			tooLarge:  func(context.Context, *pending, error) (string, error) { return "", errors.New("unexpected") },
			failed:    func(*pending, error) {},
		})
		d.batch.linger = linger
		var drainers sync.WaitGroup
		drainers.Add(2)
		go func() { defer drainers.Done(); d.successes() }()
		go func() { defer drainers.Done(); d.errors() }()
		in := make(chan *pending, n)
		go func() {
			defer close(in)
			for i := range n {
				p := testPending("orders", fmt.Sprint("k", i), fmt.Sprint(i))
				p.commit = commit
				in <- p
				time.Sleep(50 * time.Microsecond)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		began := time.Now()
		if err := d.run(ctx, in, true); err != nil {
			t.Fatal(err)
		}
		prod.AsyncClose()
		drainers.Wait()
		reqs, records := produced(b), 0
		for _, r := range reqs {
			records += len(r)
		}
		if records != n {
			t.Fatalf("%d records produced, want %d", records, n)
		}
		return len(reqs), time.Since(began)
	}
	live, _ := requests(t, time.Now())
	backlog, took := requests(t, time.Now().Add(-time.Hour))
	// A held batch goes out in a few requests (the producer sends the
	// first record at once and the rest together after it), and a batch
	// is held at most linger.
	most := 3*int(took/linger+1) + 2
	t.Logf("%d records in %d requests when live, %d as a backlog (%v, at most %d)", n, live, backlog, took, most)
	if backlog > most {
		t.Errorf("a backlog trickle went out in %d requests for %d records in %v, want at most %d", backlog, n, took, most)
	}
}
