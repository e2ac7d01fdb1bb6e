package worker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/worker"
)

func TestApplyOnceTwice(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// TestApplyBatch: one transaction per batch, duplicates (inside the batch
// or already in the inbox) without a second effect, and a poison event
// rolling the whole batch back; with every handler kind.
func TestApplyBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	ctx := context.Background()
	handlers := map[string]worker.Handler{"go": counting, "sql": sqlCounting(t, f), "sql-pipelined": sqlCountingPipelined(t, f)}
	tests := []struct {
		name      string
		processed []int // events (by index) already applied before the batch
		batch     []int // the batch, as indexes of events of orders o0..o3
		missing   bool  // order o3 does not exist: event 3 is poison
		want      []worker.Result
	}{
		{name: "all new", batch: []int{0, 1, 2}, want: []worker.Result{worker.Applied, worker.Applied, worker.Applied}},
		{name: "repeated inside the batch", batch: []int{0, 1, 0, 0}, want: []worker.Result{worker.Applied, worker.Applied, worker.Duplicate, worker.Duplicate}},
		{name: "already processed", processed: []int{1}, batch: []int{0, 1, 2}, want: []worker.Result{worker.Applied, worker.Duplicate, worker.Applied}},
		{name: "all processed", processed: []int{0, 1}, batch: []int{1, 0, 1}, want: []worker.Result{worker.Duplicate, worker.Duplicate, worker.Duplicate}},
		{name: "poison rolls back", batch: []int{0, 3, 1}, missing: true},
		{name: "poison after an already processed one", processed: []int{0}, batch: []int{0, 1, 3}, missing: true},
	}
	for kind, h := range handlers {
		for _, tt := range tests {
			t.Run(kind+"/"+tt.name, func(t *testing.T) {
				f.exec(t, `TRUNCATE orders, processed_events`)
				orders := []string{"o0", "o1", "o2", "o3"}
				if tt.missing {
					orders = orders[:3]
				}
				f.insertOrders(t, orders...)
				evs := make([]worker.Event, 4)
				for i := range evs {
					evs[i] = worker.Event{Event: *f.orderEvent(fmt.Sprintf("o%d", i))}
				}
				for _, i := range tt.processed {
					if _, err := worker.ApplyOnce(ctx, f.pool, "c", h, evs[i]); err != nil {
						t.Fatal(err)
					}
				}
				var batch []worker.Event
				for _, i := range tt.batch {
					batch = append(batch, evs[i])
				}
				got, err := worker.ApplyBatch(ctx, f.pool, "c", h, batch)
				wantAmount := map[int]int{} // per event: its order's amount after the batch
				for _, i := range tt.processed {
					wantAmount[i] = 1
				}
				if tt.missing {
					if err == nil {
						t.Fatalf("batch with a poison event committed: %v", got)
					}
				} else {
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(got) != fmt.Sprint(tt.want) {
						t.Fatalf("results %v, want %v", got, tt.want)
					}
					for _, i := range tt.batch {
						wantAmount[i] = 1
					}
				}
				for i := range 3 {
					if n := f.count(t, `SELECT amount FROM orders WHERE id = $1`, fmt.Sprintf("o%d", i)); n != wantAmount[i] {
						t.Errorf("order o%d has amount %d, want %d", i, n, wantAmount[i])
					}
				}
				if n := f.count(t, `SELECT count(*) FROM processed_events`); n != len(wantAmount) {
					t.Errorf("%d inbox rows, want %d", n, len(wantAmount))
				}
			})
		}
	}
}
