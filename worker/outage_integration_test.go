package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
	"github.com/eventforge/eventforge/worker"
)

// TestRunnerWaitsOutBlackholedDatabase: a database that stops answering
// without refusing (a dropped route: every statement and connection attempt
// runs into a timeout) is waited out. Although MaxAttempts is 2 and each
// transaction times out after 1 s, no event is dead-lettered, readiness
// says why the worker waits, every event is applied exactly once after the
// route heals, and the log holds one WARN line for the whole outage (not one
// per partition and retry) and one line when it ends.
func TestRunnerWaitsOutBlackholedDatabase(t *testing.T) {
	t.Parallel()
	const n = 200
	f := newFixture(t, 4)
	proxy := testenv.StartProxyAt(t, "127.0.0.1:0", pgHost(t, f.dbURL))
	pool, err := pgxpool.New(context.Background(), proxy.Via(t, f.dbURL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	ids := make([]string, n)
	evs := make([]*outbox.Event, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("order-%03d", i)
		evs[i] = f.orderEvent(ids[i])
	}
	f.insertOrders(t, ids...)
	// Slow the handler so the black hole finds events in flight.
	slow := worker.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
		time.Sleep(5 * time.Millisecond)
		return counting(ctx, tx, ev)
	})
	cfg := f.config()
	var logs testenv.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.MaxAttempts = 2
	cfg.ApplyTimeout = time.Second
	cfg.BatchSize = 4
	r := start(t, cfg, pool, slow)
	produce(t, f.brokers, evs...)
	waitFor(t, 30*time.Second, "some events applied", func() bool { return r.events(f.topic, resultApplied) >= n/10 })

	proxy.Freeze()
	time.Sleep(4 * time.Second) // several apply timeouts per partition
	if d := r.events(f.topic, resultDLQ); d != 0 {
		t.Fatalf("%d events dead-lettered while the database was black-holed", d)
	}
	if err := r.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "database outage") {
		t.Fatalf("Ready = %v while the database is black-holed, want the outage", err)
	}
	proxy.Thaw()
	waitFor(t, 60*time.Second, "every event handled", func() bool {
		return f.count(t, `SELECT count(*) FROM processed_events`) == n
	})
	waitFor(t, 15*time.Second, "ready again", func() bool { return r.Ready(context.Background()) == nil })
	if d := r.events(f.topic, resultDLQ); d != 0 {
		t.Errorf("%d events dead-lettered", d)
	}
	if got := f.count(t, `SELECT count(*) FROM orders WHERE amount = 1`); got != n {
		t.Errorf("%d of %d orders applied exactly once", got, n)
	}
	failures := r.metric("eventforge_worker_outage_errors_total", "cause", "database")
	warn, ended := 0, 0
	for _, line := range strings.Split(logs.String(), "\n") {
		switch {
		case strings.Contains(line, "level=WARN"):
			warn++
		case strings.Contains(line, "outage ended"):
			ended++
		}
	}
	// One outage (two if a slow moment after the heal starts another): a
	// WARN line when it begins and an end line, however many failures.
	if warn < 1 || warn > 2 || ended != warn || failures < float64(2*warn) {
		t.Errorf("%d WARN lines and %d end lines for %v failures, want one of each per outage:\n%s", warn, ended, failures, logs.String())
	}
	t.Logf("applied %d, duplicates %d, outage failures %v", r.events(f.topic, resultApplied), r.events(f.topic, resultDuplicate), failures)
}

// pgHost is the host:port of a PostgreSQL URL.
func pgHost(t testing.TB, u string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
}

// TestRunnerMissingSchema: a database without processed_events stops the
// Runner at start-up with "run eventforge migrate" instead of dead-lettering
// the topic; a table that disappears at run time (a wrong database behind a
// failover, a botched migration) makes the partitions wait, and they resume
// when it is back.
func TestRunnerMissingSchema(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	f.insertOrders(t, "a", "b")
	produce(t, f.brokers, f.orderEvent("a"))
	skip := worker.HandlerFunc(func(context.Context, pgx.Tx, worker.Event) error { return worker.ErrSkip })

	f.exec(t, `ALTER TABLE processed_events RENAME TO processed_events_away`)
	r := start(t, f.config(), f.pool, skip)
	err := r.exited(t, 30*time.Second)
	if !errors.Is(err, worker.ErrSchema) || !strings.Contains(err.Error(), "eventforge migrate") {
		t.Fatalf("Run on an unmigrated database returned %v, want ErrSchema naming eventforge migrate", err)
	}
	if n := r.events(f.topic, resultDLQ); n != 0 {
		t.Fatalf("%d events dead-lettered", n)
	}

	f.exec(t, `ALTER TABLE processed_events_away RENAME TO processed_events`)
	r = start(t, f.config(), f.pool, counting)
	waitFor(t, 30*time.Second, "first event applied", func() bool { return r.events(f.topic, resultApplied) == 1 })
	f.exec(t, `ALTER TABLE orders RENAME TO orders_away`)
	produce(t, f.brokers, f.orderEvent("b"))
	waitFor(t, 15*time.Second, "readiness reporting the missing table", func() bool {
		err := r.Ready(context.Background())
		return err != nil && strings.Contains(err.Error(), "eventforge migrate")
	})
	time.Sleep(time.Second) // more than MaxAttempts retries
	if n := r.events(f.topic, resultDLQ); n != 0 {
		t.Fatalf("%d events dead-lettered while a table was missing", n)
	}
	f.exec(t, `ALTER TABLE orders_away RENAME TO orders`)
	waitFor(t, 30*time.Second, "second event applied", func() bool { return r.events(f.topic, resultApplied) == 2 })
	if n := r.events(f.topic, resultDLQ); n != 0 {
		t.Errorf("%d events dead-lettered", n)
	}
}

// TestRunnerOutageSpendsNoRetryTime: the time a partition waits out an
// outage (here a handler's DependencyUnavailable) does not count against MaxRetryTime, so an event that meets one
// transient failure after a long outage is retried, not dead-lettered at
// once.
func TestRunnerOutageSpendsNoRetryTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	f.insertOrders(t, "a")
	began := time.Time{}
	transient := false
	h := worker.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
		if began.IsZero() {
			began = time.Now()
		}
		switch {
		case time.Since(began) < 1500*time.Millisecond: // a service the handler needs is down for a while
			return worker.DependencyUnavailable(errors.New("pricing service: 503 Service Unavailable"))
		case !transient:
			transient = true
			return &pgconn.PgError{Code: pgerrcode.SerializationFailure, Message: "could not serialize access"}
		}
		return counting(ctx, tx, ev)
	})
	cfg := f.config()
	cfg.BatchSize = 1
	cfg.MaxRetryTime = 500 * time.Millisecond
	cfg.MaxBackoff = 100 * time.Millisecond
	r := start(t, cfg, f.pool, h)
	produce(t, f.brokers, f.orderEvent("a"))
	if r.handledOnce(t, f.topic, 30*time.Second) != resultApplied {
		t.Fatal("dead-lettered at its first transient failure after an outage longer than MaxRetryTime")
	}
}

// TestRunnerKafkaErrorsLogOnce: consumer group sessions failing again and
// again (here: the topic does not exist yet) write one WARN line, not one
// per attempt, and one line when the group is joined at last.
func TestRunnerKafkaErrorsLogOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	cfg := f.config()
	cfg.Topics = []string{testenv.UniqueName("wt")}
	testenv.DeleteTopicsWithPrefixAtCleanup(t, f.brokers, cfg.Topics[0])
	var logs testenv.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r := start(t, cfg, f.pool, counting)
	waitFor(t, 15*time.Second, "several failed sessions", func() bool {
		return r.metric("eventforge_worker_outage_errors_total", "cause", "kafka") >= 3
	})
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d WARN lines for %v failed sessions, want 1:\n%s", n, r.metric("eventforge_worker_outage_errors_total", "cause", "kafka"), logs.String())
	}
	createTopic(t, f.brokers, cfg.Topics[0], 1)
	waitFor(t, 30*time.Second, "the group joined", func() bool { return r.Ready(context.Background()) == nil })
	waitFor(t, 5*time.Second, "the end of the outage logged", func() bool {
		return strings.Contains(logs.String(), "outage ended") && strings.Contains(logs.String(), "cause=kafka")
	})
}
