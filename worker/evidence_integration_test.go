package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
	"github.com/eventforge/eventforge/worker"
)

// orders creates n orders named prefix-000… and returns their events.
func (f *fixture) orders(t testing.TB, prefix string, n int) []*outbox.Event {
	t.Helper()
	ids := make([]string, n)
	evs := make([]*outbox.Event, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%03d", prefix, i)
		evs[i] = f.orderEvent(ids[i])
	}
	f.insertOrders(t, ids...)
	return evs
}

// TestRunnerHandlerNetErrorIsTheEvents: a Go handler whose own call fails
// with a (wrapped) *net.OpError while the database is up is the event's
// failure: retried, then dead-lettered, and its neighbours applied; never a
// wait without end. The second poison event is the partition's last, with
// nothing behind it to tell an outage: it is dead-lettered too.
func TestRunnerHandlerNetErrorIsTheEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	evs := f.orders(t, "o", 4)
	poison := map[string]bool{evs[1].AggregateID: true, evs[3].AggregateID: true}
	h := worker.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
		if poison[ev.AggregateID] {
			return fmt.Errorf("call pricing for %s: %w", ev.AggregateID,
				&net.OpError{Op: "read", Net: "tcp", Err: &net.AddrError{Err: "connection reset by peer", Addr: "10.0.0.7:443"}})
		}
		return counting(ctx, tx, ev)
	})
	cfg := f.config()
	cfg.BatchSize = 1
	r := start(t, cfg, f.pool, h)
	produce(t, f.brokers, evs...)
	waitFor(t, 20*time.Second, "both poison events dead-lettered, the others applied", func() bool {
		return r.events(f.topic, resultDLQ) == 2 && r.events(f.topic, resultApplied) == 2
	})
	if got := r.metric("eventforge_worker_retries_total", "topic", f.topic); got != float64(2*(cfg.MaxAttempts-1)) {
		t.Errorf("retries = %v, want %d (every attempt of both)", got, 2*(cfg.MaxAttempts-1))
	}
	if got := f.count(t, `SELECT count(*) FROM orders WHERE amount = 1`); got != 2 {
		t.Errorf("%d orders applied, want 2", got)
	}
	ls := deadLetters(t, f.brokers, f.topic)
	if len(ls) != 2 || !strings.Contains(ls[0].Error, "connection reset by peer") {
		t.Errorf("dead letters %+v, want the two poison events with their error", ls)
	}
}

// downstream is an HTTP service that tests take down and bring back on the
// same address.
type downstream struct {
	addr  string
	calls sync.Map // aggregate id → *atomic.Int64 of successful calls
	mu    sync.Mutex
	srv   *http.Server
	// refuse, when set, makes a down service refuse connections (nothing
	// listens); else it answers 503 as a load balancer without backends.
	refuse bool
	down   atomic.Bool
}

func startDownstream(t *testing.T, refuse bool) *downstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &downstream{addr: ln.Addr().String(), refuse: refuse}
	d.serve(ln)
	t.Cleanup(func() { d.setDown(t, true) })
	return d
}

func (d *downstream) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.down.Load() {
			http.Error(w, "no healthy upstream", http.StatusServiceUnavailable)
			return
		}
		n, _ := d.calls.LoadOrStore(r.URL.Query().Get("id"), new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}), ReadHeaderTimeout: 5 * time.Second}
	d.srv = srv
	go func() { _ = srv.Serve(ln) }()
}

// setDown takes the service down or brings it back.
func (d *downstream) setDown(t *testing.T, down bool) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down.Store(down)
	if !d.refuse {
		return
	}
	if down {
		if d.srv != nil {
			_ = d.srv.Close()
			d.srv = nil
		}
		return
	}
	ln, err := net.Listen("tcp", d.addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", d.addr, err)
	}
	d.serve(ln)
}

// handler calls the service for each event before applying it, as a Go
// handler notifying another system would; it does not classify the error.
func (d *downstream) handler() worker.Handler {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	return worker.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
		u := "http://" + d.addr + "/notify?id=" + url.QueryEscape(ev.AggregateID)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("notify: %w", err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("notify %s: %s", ev.AggregateID, resp.Status)
		}
		return counting(ctx, tx, ev)
	})
}

// TestRunnerWaitsOutDownstreamOutage: a service every event's handler
// calls is down for 10 s while the database works. Consecutive distinct
// events fail the same way, so the partition waits (cause
// repeated-failure) instead of draining into the dead-letter topic: nothing
// is dead-lettered, and once the service is back every event is applied
// once. Down as refused connections and as 503 answers.
func TestRunnerWaitsOutDownstreamOutage(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		name := map[bool]string{false: "503", true: "connection refused"}[refuse]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const n = 12
			f := newFixture(t, 1)
			evs := f.orders(t, "o", n)
			d := startDownstream(t, refuse)
			d.setDown(t, true)
			downAt := time.Now()
			cfg := f.config()
			cfg.MaxBackoff = time.Second // the test's shorter wait
			r := start(t, cfg, f.pool, d.handler())
			produce(t, f.brokers, evs...)
			waitFor(t, 10*time.Second, "the partition waiting for the outage", func() bool {
				return r.metric("eventforge_worker_outage_waiting", "cause", "repeated-failure") == 1
			})
			time.Sleep(time.Until(downAt.Add(10 * time.Second))) // the rest of the outage
			if got := r.events(f.topic, resultDLQ); got != 0 {
				t.Fatalf("%d events dead-lettered while the service was down", got)
			}
			if err := r.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "repeated-failure outage") {
				t.Errorf("Ready = %v during the outage, want it named", err)
			}
			d.setDown(t, false)
			waitFor(t, 15*time.Second, "every event applied", func() bool { return r.events(f.topic, resultApplied) == n })
			if got := r.events(f.topic, resultDLQ); got != 0 {
				t.Errorf("%d events dead-lettered", got)
			}
			if got := f.count(t, `SELECT count(*) FROM orders WHERE amount = 1`); got != n {
				t.Errorf("%d of %d orders applied exactly once", got, n)
			}
			if got := r.metric("eventforge_worker_outage_waiting", "cause", "repeated-failure"); got != 0 {
				t.Errorf("still %v partitions waiting after the outage", got)
			}
		})
	}
}

// TestRunnerWaitsForFunctionCreatedLater: handler SQL newer than the schema
// (a rolling deploy: the function it calls is created 5 s after the events
// arrive) waits like a missing table, the log naming the function, and
// dead-letters nothing.
func TestRunnerWaitsForFunctionCreatedLater(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	evs := f.orders(t, "o", 6)
	h := worker.HandlerFunc(func(ctx context.Context, tx pgx.Tx, ev worker.Event) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT bump_order($1::text)`, ev.AggregateID).Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("order %q not found", ev.AggregateID)
		}
		return nil
	})
	cfg := f.config()
	var logs testenv.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r := start(t, cfg, f.pool, h)
	produce(t, f.brokers, evs...)
	waitFor(t, 15*time.Second, "the partitions waiting for the schema", func() bool {
		return r.metric("eventforge_worker_outage_waiting", "cause", "schema") >= 1
	})
	time.Sleep(5 * time.Second)
	if got := r.events(f.topic, resultDLQ); got != 0 {
		t.Fatalf("%d events dead-lettered while the function was missing", got)
	}
	f.exec(t, `CREATE FUNCTION bump_order(id text) RETURNS int LANGUAGE sql AS
		$$ WITH u AS (UPDATE orders SET amount = amount + 1 WHERE orders.id = bump_order.id RETURNING 1) SELECT count(*)::int FROM u $$`)
	waitFor(t, 15*time.Second, "every event applied", func() bool { return r.events(f.topic, resultApplied) == len(evs) })
	if got := r.events(f.topic, resultDLQ); got != 0 {
		t.Errorf("%d events dead-lettered", got)
	}
	if got := f.count(t, `SELECT count(*) FROM orders WHERE amount = 1`); got != len(evs) {
		t.Errorf("%d of %d orders applied exactly once", got, len(evs))
	}
	if !strings.Contains(logs.String(), `object="function bump_order(text)"`) {
		t.Errorf("no log line names the missing function:\n%s", logs.String())
	}
}

// TestRunnerRowLevelSecurityRefusesOneRow: a row-level-security policy
// refusing one event's row (SQLSTATE 42501, as a revoked privilege would
// raise) is that event's failure: it is dead-lettered, the others applied.
func TestRunnerRowLevelSecurityRefusesOneRow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	evs := f.orders(t, "o", 4)
	refused := evs[1].AggregateID
	pool := f.poolAs(t, "wrls", `GRANT SELECT, INSERT ON processed_events TO %[1]s`, `GRANT SELECT, UPDATE ON orders TO %[1]s`)
	f.exec(t, `ALTER TABLE orders ENABLE ROW LEVEL SECURITY`)
	f.exec(t, `CREATE POLICY workers ON orders USING (true) WITH CHECK (id <> '`+refused+`')`)
	cfg := f.config()
	cfg.BatchSize = 1
	r := start(t, cfg, pool, counting)
	produce(t, f.brokers, evs...)
	waitFor(t, 20*time.Second, "the refused event dead-lettered, the others applied", func() bool {
		return r.events(f.topic, resultDLQ) == 1 && r.events(f.topic, resultApplied) == len(evs)-1
	})
	ls := deadLetters(t, f.brokers, f.topic)
	if len(ls) != 1 || string(ls[0].Key) != refused || !strings.Contains(ls[0].Error, "row-level security") {
		t.Fatalf("dead letters %+v, want the refused order's", ls)
	}
	if got := f.count(t, `SELECT count(*) FROM orders WHERE amount = 1`); got != len(evs)-1 {
		t.Errorf("%d orders applied, want %d", got, len(evs)-1)
	}
}

// TestRunnerDefaultBudgetOutlastsLateRow: an event delivered before its
// business row is visible to the worker (here the row is committed 2 s
// after the first attempt) is applied, not dead-lettered, by the default
// retry budget even with the shortest waits its jitter allows.
func TestRunnerDefaultBudgetOutlastsLateRow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	ev := f.orderEvent("late")
	var first atomic.Int64 // unix nanos of the first attempt
	h := worker.HandlerFunc(func(ctx context.Context, tx pgx.Tx, e worker.Event) error {
		first.CompareAndSwap(0, time.Now().UnixNano())
		return counting(ctx, tx, e)
	})
	cfg := worker.DefaultConfig()
	cfg.Kafka, cfg.Group, cfg.Topics = f.config().Kafka, f.group, []string{f.topic}
	cfg.CommitInterval, cfg.Logger = 100*time.Millisecond, testLogger()
	worker.SetJitter(&cfg, func() float64 { return 0 })
	r := start(t, cfg, f.pool, h)
	produce(t, f.brokers, ev)
	waitFor(t, 15*time.Second, "the first attempt", func() bool { return first.Load() != 0 })
	time.Sleep(time.Until(time.Unix(0, first.Load()).Add(2 * time.Second)))
	f.insertOrders(t, "late")
	if r.handledOnce(t, f.topic, 15*time.Second) != resultApplied {
		t.Fatal("dead-lettered although its row became visible 2 s after the first attempt")
	}
}

// TestRunnerStartupNeedsInboxInsert: a role that may not insert into
// processed_events stops Run at start-up with one line naming the role and
// the privilege, instead of waiting on the first event.
func TestRunnerStartupNeedsInboxInsert(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	pool := f.poolAs(t, "wnoins", `GRANT SELECT ON processed_events TO %[1]s`)
	r := start(t, f.config(), pool, counting)
	err := r.exited(t, 15*time.Second)
	role := pool.Config().ConnConfig.User
	if err == nil || !strings.Contains(err.Error(), `role "`+role+`" lacks INSERT on processed_events`) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Run = %v, want one line naming the role and INSERT on processed_events", err)
	}
}

// poolAs creates a login role named after prefix with grants (%[1]s is the
// role) and returns a pool of the fixture's database logged in as it (the
// local cluster trusts loopback); both go at cleanup.
func (f *fixture) poolAs(t testing.TB, prefix string, grants ...string) *pgxpool.Pool {
	t.Helper()
	role := testenv.UniqueName(prefix)
	f.exec(t, `CREATE ROLE `+role+` LOGIN`)
	t.Cleanup(func() {
		f.exec(t, `DROP OWNED BY `+role)
		f.exec(t, `DROP ROLE `+role)
	})
	for _, g := range grants {
		f.exec(t, fmt.Sprintf(g, role))
	}
	u, err := url.Parse(f.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	pool, err := pgxpool.New(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
