package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/worker"
)

func TestApplyOnceTwice(t *testing.T) {
	f := newFixture(t, 1)
	f.insertOrders(t, "o-1")
	ev := worker.Event{Event: *f.orderEvent("o-1")}
	ctx := context.Background()
	for i, want := range []worker.Result{worker.Applied, worker.Duplicate, worker.Duplicate} {
		got, err := worker.ApplyOnce(ctx, f.pool, "c", counting, ev)
		if err != nil || got != want {
			t.Fatalf("delivery %d: %v, %v; want %v", i+1, got, err, want)
		}
	}
	if n := f.count(t, `SELECT amount FROM orders WHERE id = 'o-1'`); n != 1 {
		t.Errorf("effect applied %d times", n)
	}
	// Another consumer has its own inbox.
	if got, err := worker.ApplyOnce(ctx, f.pool, "other", counting, ev); err != nil || got != worker.Applied {
		t.Errorf("other consumer: %v, %v", got, err)
	}
}

func TestApplyOnceConcurrent(t *testing.T) {
	f := newFixture(t, 1)
	f.insertOrders(t, "o-1")
	ev := worker.Event{Event: *f.orderEvent("o-1")}
	ctx := context.Background()
	const n = 8
	conns := make([]*pgx.Conn, n)
	for i := range conns {
		c, err := pgx.Connect(ctx, f.dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		conns[i] = c
	}
	// Every goroutine holds its transaction open after the handler ran until
	// all have inserted (or blocked on) the inbox row, so they truly overlap.
	var inserted sync.WaitGroup
	inserted.Add(1)
	h := worker.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
		inserted.Wait()
		return counting.Apply(ctx, tx, ev)
	})
	results := make([]worker.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	startLine := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-startLine
			results[i], errs[i] = worker.ApplyOnce(ctx, conns[i], "c", h, ev)
		})
	}
	close(startLine)
	// Wait until the other 7 are blocked on the first one's inbox row.
	waitFor(t, 10*time.Second, "7 inbox inserts waiting on a lock", func() bool {
		return f.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == n-1
	})
	inserted.Done()
	wg.Wait()
	counts := map[worker.Result]int{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("goroutine %d: %v", i, errs[i])
		}
		counts[results[i]]++
	}
	if counts[worker.Applied] != 1 || counts[worker.Duplicate] != n-1 {
		t.Errorf("results %v, want 1 applied and %d duplicates", counts, n-1)
	}
	if got := f.count(t, `SELECT amount FROM orders WHERE id = 'o-1'`); got != 1 {
		t.Errorf("effect applied %d times", got)
	}
	if got := f.count(t, `SELECT count(*) FROM processed_events`); got != 1 {
		t.Errorf("%d inbox rows", got)
	}
}

func TestApplyOnceRollsBackOnError(t *testing.T) {
	f := newFixture(t, 1)
	ev := worker.Event{Event: *f.orderEvent("missing")}
	_, err := worker.ApplyOnce(context.Background(), f.pool, "c", counting, ev)
	if err == nil {
		t.Fatal("missing order applied")
	}
	if n := f.count(t, `SELECT count(*) FROM processed_events`); n != 0 {
		t.Errorf("failed apply left %d inbox rows", n)
	}
	// worker.ErrSkip commits the inbox row without effect.
	skip := worker.HandlerFunc(func(context.Context, pgx.Tx, worker.Event) error { return worker.ErrSkip })
	if res, err := worker.ApplyOnce(context.Background(), f.pool, "c", skip, ev); err != nil || res != worker.Skipped {
		t.Fatalf("skip: %v, %v", res, err)
	}
	if n := f.count(t, `SELECT count(*) FROM processed_events`); n != 1 {
		t.Errorf("skipped event left %d inbox rows, want 1", n)
	}
	if res, _ := worker.ApplyOnce(context.Background(), f.pool, "c", skip, ev); res != worker.Duplicate {
		t.Errorf("skipped event delivered again: %v, want duplicate", res)
	}
}

func TestApplyBatchDuplicatesInsideBatch(t *testing.T) {
	f := newFixture(t, 1)
	f.insertOrders(t, "a", "b")
	a, b := worker.Event{Event: *f.orderEvent("a")}, worker.Event{Event: *f.orderEvent("b")}
	ctx := context.Background()
	if _, err := worker.ApplyOnce(ctx, f.pool, "c", counting, b); err != nil {
		t.Fatal(err)
	}
	got, err := worker.ApplyBatch(ctx, f.pool, "c", counting, []worker.Event{a, b, a})
	if err != nil {
		t.Fatal(err)
	}
	want := []worker.Result{worker.Applied, worker.Duplicate, worker.Duplicate}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("results %v, want %v", got, want)
		}
	}
	if n := f.count(t, `SELECT sum(amount) FROM orders`); n != 2 {
		t.Errorf("effects %d, want 2", n)
	}
	// A failing event rolls the whole batch back.
	c := worker.Event{Event: *f.orderEvent("c")}
	f.insertOrders(t, "d")
	d := worker.Event{Event: *f.orderEvent("d")}
	if _, err := worker.ApplyBatch(ctx, f.pool, "c", counting, []worker.Event{d, c}); err == nil {
		t.Fatal("batch with a missing order committed")
	}
	if n := f.count(t, `SELECT amount FROM orders WHERE id = 'd'`); n != 0 {
		t.Error("rolled-back batch left an effect")
	}
	if n := f.count(t, `SELECT count(*) FROM processed_events WHERE event_id = $1`, d.ID); n != 0 {
		t.Error("rolled-back batch left an inbox row")
	}
}
