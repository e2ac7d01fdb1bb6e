package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/worker"
	"github.com/eventforge/eventforge/worker/dlq"
)

// TestApplyReplayedFlipsDeadLetterRow: an event whose inbox row says it was
// dead-lettered is a duplicate, unless the record was republished by dlq
// replay: then it is applied once, in batch mode and one by one, and a
// second replay is a duplicate.
func TestApplyReplayedFlipsDeadLetterRow(t *testing.T) {
	f := newFixture(t, 1)
	ctx := context.Background()
	for _, mode := range []string{"batch", "single"} {
		t.Run(mode, func(t *testing.T) {
			f.exec(t, `TRUNCATE orders, processed_events`)
			f.insertOrders(t, "o0", "o1", "o2")
			evs := make([]worker.Event, 3)
			for i := range evs {
				evs[i] = worker.Event{Event: *f.orderEvent(fmt.Sprintf("o%d", i))}
			}
			for _, i := range []int{0, 1} { // dead-lettered before
				f.exec(t, `INSERT INTO processed_events (consumer, event_id, result) VALUES ('c', $1, 'dlq')`, evs[i].ID)
			}
			replayed := evs[0]
			replayed.Replayed = true
			// Event 0 replayed (twice in the batch), event 1 a plain copy,
			// event 2 new.
			in := []worker.Event{replayed, evs[1], evs[2], replayed}
			want := []worker.Result{worker.Applied, worker.Duplicate, worker.Applied, worker.Duplicate}
			got := make([]worker.Result, len(in))
			if mode == "batch" {
				var err error
				if got, err = worker.ApplyBatch(ctx, f.pool, "c", counting, in); err != nil {
					t.Fatal(err)
				}
			} else {
				for i, ev := range in {
					var err error
					if got[i], err = worker.ApplyOnce(ctx, f.pool, "c", counting, ev); err != nil {
						t.Fatal(err)
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("results %v, want %v", got, want)
			}
			if res, err := worker.ApplyOnce(ctx, f.pool, "c", counting, replayed); err != nil || res != worker.Duplicate {
				t.Fatalf("second replay: %v, %v; want a duplicate", res, err)
			}
			for i, want := range []int{1, 0, 1} {
				if n := f.count(t, `SELECT amount FROM orders WHERE id = $1`, fmt.Sprintf("o%d", i)); n != want {
					t.Errorf("order o%d applied %d times, want %d", i, n, want)
				}
			}
			if n := f.count(t, `SELECT count(*) FROM processed_events WHERE result = 'dlq'`); n != 1 {
				t.Errorf("%d dlq rows, want 1 (event 1's)", n)
			}
		})
	}
}

// TestRunnerCopyOfDeadLetteredEventIsDuplicate: a copy of an event that was
// dead-lettered (a relay republish, a producer retry) is recognised by the
// inbox and counted as a duplicate instead of being retried and
// dead-lettered again; dlq replay still applies the event exactly once.
func TestRunnerCopyOfDeadLetteredEventIsDuplicate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	f.insertOrders(t, "a", "b")
	var fixed atomic.Bool
	h := worker.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
		if !fixed.Load() {
			return worker.Permanent(errors.New("handler bug"))
		}
		return counting(ctx, tx, ev)
	})
	a, b := f.orderEvent("a"), f.orderEvent("b")
	produce(t, f.brokers, a, b)
	cfg := f.config()
	cfg.BatchSize = 10
	r := start(t, cfg, f.pool, h)
	waitFor(t, 30*time.Second, "both events dead-lettered", func() bool { return r.events(f.topic, resultDLQ) == 2 })
	waitFor(t, 10*time.Second, "dead letters recorded in the inbox", func() bool {
		return f.count(t, `SELECT count(*) FROM processed_events WHERE result = 'dlq'`) == 2
	})

	produce(t, f.brokers, a, b) // copies
	waitFor(t, 30*time.Second, "copies handled", func() bool { return r.events(f.topic, resultDuplicate) == 2 })
	if n := r.events(f.topic, resultDLQ); n != 2 {
		t.Errorf("%d dead letters after the copies, want 2", n)
	}
	if ls := deadLetters(t, f.brokers, f.topic); len(ls) != 2 {
		t.Errorf("%d records in the dead-letter topic, want 2", len(ls))
	}

	// The bug fixed, both are replayed (together: one batch) and applied
	// once; replaying again is absorbed.
	fixed.Store(true)
	replay(t, f)
	waitFor(t, 30*time.Second, "replayed events applied", func() bool { return r.events(f.topic, resultApplied) == 2 })
	replay(t, f)
	waitFor(t, 30*time.Second, "second replay seen as duplicates", func() bool { return r.events(f.topic, resultDuplicate) == 4 })
	for _, id := range []string{"a", "b"} {
		if n := f.count(t, `SELECT amount FROM orders WHERE id = $1`, id); n != 1 {
			t.Errorf("order %s applied %d times, want 1", id, n)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM processed_events WHERE result = 'applied'`); n != 2 {
		t.Errorf("%d applied inbox rows, want 2", n)
	}
	if n := r.events(f.topic, resultDLQ); n != 2 {
		t.Errorf("%d dead letters in all, want 2", n)
	}
}

// replay republishes every dead letter of the fixture's topic as dlq replay
// --all does.
func replay(t testing.TB, f *fixture) {
	t.Helper()
	plan := dlq.Select(deadLetters(t, f.brokers, f.topic), dlq.Selection{All: true})
	sc := kafka.Config{Brokers: f.brokers}.IdempotentProducer(kafka.ProducerOptions{})
	p, err := sarama.NewSyncProducer(f.brokers, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := dlq.Replay(p, plan); err != nil {
		t.Fatal(err)
	}
}
