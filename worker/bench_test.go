package worker_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventforge/eventforge/internal/outbox"
)

// TestBacklogThroughput measures events/s applied from a backlog by one
// Runner with the demo SQL handler, in batch mode and one by one. It is a
// measurement, not a check, so it runs only with EVENTFORGE_BENCH=1:
//
//	EVENTFORGE_BENCH=1 go test -run TestBacklogThroughput -v -timeout 30m ./worker/
//
// EVENTFORGE_BENCH_EVENTS sets the backlog (default 200000).
func TestBacklogThroughput(t *testing.T) {
	if os.Getenv("EVENTFORGE_BENCH") != "1" {
		t.Skip("measurement: set EVENTFORGE_BENCH=1")
	}
	n := 200000
	if v, err := strconv.Atoi(os.Getenv("EVENTFORGE_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	for _, batch := range []int{100, 1} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			f := newFixture(t, 6)
			ids := make([]string, n)
			evs := make([]*outbox.Event, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("order-%07d", i)
				evs[i] = f.orderEvent(ids[i])
			}
			f.insertOrders(t, ids...)
			produce(t, f.brokers, evs...)
			pcfg, err := pgxpool.ParseConfig(f.dbURL)
			if err != nil {
				t.Fatal(err)
			}
			pcfg.MaxConns = 8
			pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			cfg := f.config()
			cfg.BatchSize = batch
			cfg.CommitInterval = time.Second
			r := start(t, cfg, pool, sqlCounting(t, f))
			waitFor(t, time.Minute, "group joined", func() bool { return r.Ready(context.Background()) == nil })
			begin := time.Now()
			waitFor(t, 30*time.Minute, "backlog applied", func() bool { return r.events(f.topic, resultApplied) == n })
			took := time.Since(begin)
			if got := f.count(t, `SELECT count(*) FROM orders WHERE amount = 1`); got != n {
				t.Errorf("%d of %d orders applied once", got, n)
			}
			t.Logf("RESULT batch-size=%d events=%d seconds=%.1f events/s=%.0f", batch, n, took.Seconds(), float64(n)/took.Seconds())
		})
	}
}
