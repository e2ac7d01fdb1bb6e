package sqlhandler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
	"github.com/eventforge/eventforge/worker"
	"github.com/eventforge/eventforge/worker/sqlhandler"
)

func connect(t *testing.T) *pgx.Conn {
	t.Helper()
	url := testenv.Shared(t).NewDatabase(t)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func compile(t *testing.T, conn *pgx.Conn, yaml string) (*sqlhandler.Handler, error) {
	t.Helper()
	spec, err := sqlhandler.Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return sqlhandler.New(context.Background(), conn.PgConn(), spec)
}

func TestNewRejectsBadSQL(t *testing.T) {
	conn := connect(t)
	tests := []struct {
		name, sql string
		want      []string
	}{
		{"syntax error", "UPDATE orders SET WHERE id = $1", []string{`handler "bad.type"`, "syntax error"}},
		{"missing table", "UPDATE orderz SET status = 'x' WHERE id = $1", []string{`handler "bad.type"`, `relation "orderz" does not exist`}},
		{"missing column", "UPDATE orders SET colour = 'x' WHERE id = $1", []string{`handler "bad.type"`, `column "colour"`}},
		{"missing function", "SELECT bump_order($1)", []string{`handler "bad.type"`, "function bump_order(text) does not exist", "eventforge migrate"}},
		{"missing type", "SELECT $1::mood", []string{`handler "bad.type"`, `type "mood" does not exist`, "eventforge migrate"}},
		{"type mismatch", "UPDATE orders SET amount = $2 WHERE id = $1", []string{`handler "bad.type"`, "jsonb"}},
		{"two statements", "UPDATE orders SET status = 'a' WHERE id = $1; DELETE FROM orders", []string{`handler "bad.type"`, "multiple commands"}},
		{"parameter out of range", "UPDATE orders SET status = $6 WHERE id = $1", []string{`handler "bad.type"`, "$6"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := compile(t, conn, "handlers:\n  good.type:\n    sql: SELECT 1\n  bad.type:\n    sql: \""+tt.sql+"\"\n")
			if err == nil {
				t.Fatal("invalid SQL accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "good.type") {
				t.Errorf("error %q blames the good handler", err)
			}
		})
	}
	// The connection stays usable after the failed prepares.
	if err := conn.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func event(typ, aggregate string, payload string) worker.Event {
	return worker.Event{Event: outbox.Event{ID: uuid.New(), AggregateType: "orders", AggregateID: aggregate, EventType: typ,
		Payload: []byte(payload), Headers: map[string]string{"source": "test"}, CommitTime: time.Now()}}
}

const handlersYAML = `
unknown: %s
handlers:
  order.created:
    sql: UPDATE orders SET status = 'processed', updated_at = now() WHERE id = $1
    expect_rows: 1
  order.noted:
    # every parameter, each with its declared type
    sql: >
      INSERT INTO orders (id, status, customer, amount, currency)
      VALUES ($3::text, $4, $5->>'source', ($2->>'amount')::bigint, $1)
    expect_rows: 1
  order.touched:
    sql: UPDATE orders SET updated_at = now() WHERE id = $1
    expect_rows: 0
`

func TestApply(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `INSERT INTO orders (id, status) VALUES ('o-1', 'created')`); err != nil {
		t.Fatal(err)
	}
	skip, err := compile(t, conn, strings.Replace(handlersYAML, "%s", "skip", 1))
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := compile(t, conn, strings.Replace(handlersYAML, "%s", "dlq", 1))
	if err != nil {
		t.Fatal(err)
	}
	noted := event("order.noted", "EUR", `{"amount": 42}`)
	tests := []struct {
		name    string
		h       *sqlhandler.Handler
		ev      worker.Event
		want    worker.Result
		wantErr func(error) bool
	}{
		{name: "one row", h: skip, ev: event("order.created", "o-1", `{}`), want: worker.Applied},
		{name: "missing order: too few rows", h: skip, ev: event("order.created", "nope", `{}`),
			wantErr: func(err error) bool { return errors.Is(err, sqlhandler.ErrTooFewRows) && !worker.IsPermanent(err) }},
		{name: "all parameters", h: skip, ev: noted, want: worker.Applied},
		{name: "expect_rows 0", h: skip, ev: event("order.touched", "nope", `{}`), want: worker.Applied},
		{name: "unknown type skipped", h: skip, ev: event("order.shipped", "o-1", `{}`), want: worker.Skipped},
		{name: "unknown type dead-lettered", h: dlq, ev: event("order.shipped", "o-1", `{}`),
			wantErr: func(err error) bool { return errors.Is(err, sqlhandler.ErrNoHandler) && worker.IsPermanent(err) }},
		{name: "bad payload is permanent", h: skip, ev: event("order.noted", "EUR", `{"amount": "lots"}`),
			wantErr: worker.IsPermanent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := worker.ApplyOnce(ctx, conn, "c", tt.h, tt.ev)
			if tt.wantErr != nil {
				if err == nil || !tt.wantErr(err) {
					t.Fatalf("ApplyOnce = %v, %v; want a matching error", got, err)
				}
				var n int
				if err := conn.QueryRow(ctx, `SELECT count(*) FROM processed_events WHERE event_id = $1`, tt.ev.ID).Scan(&n); err != nil || n != 0 {
					t.Errorf("failed event left %d inbox rows (%v)", n, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ApplyOnce = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	var status string
	if err := conn.QueryRow(ctx, `SELECT status FROM orders WHERE id = 'o-1'`).Scan(&status); err != nil || status != "processed" {
		t.Errorf("o-1 status %q (%v)", status, err)
	}
	var customer, currency, status2 string
	var amount int64
	err = conn.QueryRow(ctx, `SELECT status, customer, amount, currency FROM orders WHERE id = $1`, noted.ID.String()).Scan(&status2, &customer, &amount, &currency)
	if err != nil || status2 != "order.noted" || customer != "test" || amount != 42 || currency != "EUR" {
		t.Errorf("parameters landed as status %q customer %q amount %d currency %q (%v)", status2, customer, amount, currency, err)
	}
}

func TestApplyBatch(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `INSERT INTO orders (id, status) VALUES ('a', 'created'), ('b', 'created')`); err != nil {
		t.Fatal(err)
	}
	skip, err := compile(t, conn, strings.Replace(handlersYAML, "%s", "skip", 1))
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := compile(t, conn, strings.Replace(handlersYAML, "%s", "dlq", 1))
	if err != nil {
		t.Fatal(err)
	}
	status := func() string {
		var a, b string
		if err := conn.QueryRow(ctx, `SELECT (SELECT status FROM orders WHERE id = 'a'), (SELECT status FROM orders WHERE id = 'b')`).Scan(&a, &b); err != nil {
			t.Fatal(err)
		}
		return a + "," + b
	}
	batch := func(h *sqlhandler.Handler, evs ...worker.Event) ([]bool, error) {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		skipped, err := h.ApplyBatch(ctx, tx, evs)
		if err != nil {
			_ = tx.Rollback(ctx)
			return nil, err
		}
		return skipped, tx.Commit(ctx)
	}

	// A missing order in the middle fails the whole batch, naming it.
	missing := event("order.created", "nope", `{}`)
	_, err = batch(skip, event("order.created", "a", `{}`), missing, event("order.created", "b", `{}`))
	if !errors.Is(err, sqlhandler.ErrTooFewRows) || !strings.Contains(err.Error(), missing.ID.String()) {
		t.Fatalf("batch with a missing order: %v", err)
	}
	// A failing statement mid-pipeline fails the batch too.
	if _, err := batch(skip, event("order.created", "a", `{}`), event("order.noted", "x", `{"amount": "lots"}`)); !worker.IsPermanent(err) {
		t.Fatalf("batch with bad data: %v, want a permanent error", err)
	}
	if got := status(); got != "created,created" {
		t.Fatalf("failed batches left effects: %s", got)
	}
	// Unknown types: skipped in place, or the batch fails under dlq.
	skipped, err := batch(skip, event("order.created", "a", `{}`), event("order.shipped", "a", `{}`), event("order.created", "b", `{}`))
	if err != nil || len(skipped) != 3 || skipped[0] || !skipped[1] || skipped[2] {
		t.Fatalf("batch = %v, %v", skipped, err)
	}
	if got := status(); got != "processed,processed" {
		t.Errorf("statuses %s after the batch", got)
	}
	if _, err := batch(dlq, event("order.created", "a", `{}`), event("order.shipped", "a", `{}`)); !errors.Is(err, sqlhandler.ErrNoHandler) {
		t.Errorf("unknown type under dlq: %v", err)
	}
	if skipped, err := batch(skip, event("order.shipped", "a", `{}`)); err != nil || !skipped[0] {
		t.Errorf("all-unknown batch = %v, %v", skipped, err)
	}
}

// setBasedYAML records each event's payload n on its order, in order; the
// batch statement also marks currency 'batch' (the single one 'single'), so
// the test sees which statement ran.
const setBasedYAML = `
handlers:
  order.noted:
    sql: UPDATE orders SET customer = coalesce(customer, '') || ($2->>'n'), currency = 'single' WHERE id = $1
    batch_sql: >
      UPDATE orders o SET customer = coalesce(o.customer, '') || (e.p->>'n'), currency = 'batch'
      FROM unnest($1::text[], $2::jsonb[]) AS e(id, p) WHERE o.id = e.id RETURNING e.id
  order.grouped:
    # may change several rows per event
    sql: UPDATE orders SET currency = 'grouped' WHERE customer = $1
    batch_sql: >
      UPDATE orders o SET currency = 'grouped'
      FROM unnest($1::text[]) AS e(c) WHERE o.customer = e.c RETURNING e.c
  order.touched:
    sql: UPDATE orders SET customer = coalesce(customer, '') || 't' WHERE id = $1
  order.copied:
    # every parameter, each as an array element
    sql: SELECT 1
    expect_rows: 0
    batch_sql: >
      INSERT INTO orders (id, status, customer, amount, currency)
      SELECT e.id::text, e.typ, e.h->>'source', (e.p->>'amount')::bigint, e.agg
      FROM unnest($1::text[], $2::jsonb[], $3::uuid[], $4::text[], $5::jsonb[]) AS e(agg, p, id, typ, h)
`

func TestApplyBatchSetBased(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	h, err := compile(t, conn, setBasedYAML)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(evs ...worker.Event) error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		skipped, err := h.ApplyBatch(ctx, tx, evs)
		if err != nil {
			return err
		}
		for i, s := range skipped {
			if s {
				t.Errorf("event %d skipped", i)
			}
		}
		return tx.Commit(ctx)
	}
	reset := func() {
		if _, err := conn.Exec(ctx, `TRUNCATE orders; INSERT INTO orders (id, status) VALUES ('a', 'created'), ('b', 'created'), ('c', 'created')`); err != nil {
			t.Fatal(err)
		}
	}
	noted := func(agg, n string) worker.Event { return event("order.noted", agg, `{"n":"`+n+`"}`) }
	tests := []struct {
		name string
		evs  []worker.Event
		want string // id=customer/currency of a, b, c
	}{
		{"one set", []worker.Event{noted("a", "1"), noted("b", "2"), noted("c", "3")}, "a=1/batch b=2/batch c=3/batch"},
		{"a repeated aggregate starts a new set", []worker.Event{noted("a", "1"), noted("b", "2"), noted("a", "3"), noted("b", "4"), noted("a", "5")},
			"a=135/single b=24/batch c=/"},
		{"another type in between keeps the order", []worker.Event{noted("a", "1"), event("order.touched", "a", `{}`), noted("a", "2"), noted("b", "3")},
			"a=1t2/batch b=3/batch c=/"},
		{"a lone event runs the single statement", []worker.Event{noted("c", "9")}, "a=/ b=/ c=9/single"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reset()
			if err := batch(tt.evs...); err != nil {
				t.Fatal(err)
			}
			var got string
			if err := conn.QueryRow(ctx, `SELECT string_agg(id || '=' || coalesce(customer, '') || '/' || coalesce(currency, ''), ' ' ORDER BY id) FROM orders`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("orders %q, want %q", got, tt.want)
			}
		})
	}

	t.Run("too few rows fails the batch", func(t *testing.T) {
		reset()
		err := batch(noted("a", "1"), noted("missing", "2"), noted("b", "3"))
		if !errors.Is(err, sqlhandler.ErrTooFewRows) || !strings.Contains(err.Error(), `aggregate "missing"`) {
			t.Fatalf("batch with a missing order: %v", err)
		}
	})

	// expect_rows holds per event: one event changing 2 rows does not
	// make up for another changing none.
	t.Run("a multi-row event does not hide a missing row", func(t *testing.T) {
		reset()
		if _, err := conn.Exec(ctx, `UPDATE orders SET customer = 'x' WHERE id IN ('a', 'b')`); err != nil {
			t.Fatal(err)
		}
		grouped := func(c string) worker.Event { return event("order.grouped", c, `{}`) }
		err := batch(grouped("x"), grouped("nobody"))
		if !errors.Is(err, sqlhandler.ErrTooFewRows) || !strings.Contains(err.Error(), `aggregate "nobody"`) {
			t.Fatalf("batch where one event changed 2 rows and another 0: %v, want too few rows for nobody", err)
		}
		if err := batch(grouped("x"), event("order.noted", "c", `{"n":"1"}`)); err != nil {
			t.Fatalf("batch where every event changed its rows: %v", err)
		}
	})

	t.Run("every parameter as an array element", func(t *testing.T) {
		reset()
		tricky := `{"amount": 7, "s": "quote \" backslash \\ comma , brace } unicode é"}`
		evs := []worker.Event{event("order.copied", `cur"1\`, tricky), event("order.copied", "cur,{2}", `{"amount": 8}`)}
		evs[1].Headers = nil
		if err := batch(evs...); err != nil {
			t.Fatal(err)
		}
		for i, ev := range evs {
			var status, currency string
			var customer *string
			var amount int64
			err := conn.QueryRow(ctx, `SELECT status, customer, amount, currency FROM orders WHERE id = $1`, ev.ID.String()).Scan(&status, &customer, &amount, &currency)
			if err != nil || status != "order.copied" || currency != ev.AggregateID || amount != int64(7+i) {
				t.Errorf("event %d landed as status %q amount %d currency %q (%v)", i, status, amount, currency, err)
			}
			if wantSource := map[int]bool{0: true}[i]; (customer != nil && *customer == "test") != wantSource {
				t.Errorf("event %d: customer %v from the headers", i, customer)
			}
		}
	})
}

// TestNewRequiresAttributableBatchSQL: a batch_sql of a type that expects
// rows must return the aggregate of each row it changes; without rows to
// expect it need not.
func TestNewRequiresAttributableBatchSQL(t *testing.T) {
	conn := connect(t)
	const yaml = "handlers:\n  order.created:\n    sql: UPDATE orders SET status = 'x' WHERE id = $1\n    expect_rows: %d\n" +
		"    batch_sql: UPDATE orders o SET status = 'x' FROM unnest($1::text[]) AS e(id) WHERE o.id = e.id%s\n"
	if _, err := compile(t, conn, fmt.Sprintf(yaml, 1, "")); !errors.Is(err, sqlhandler.ErrBatchNotAttributable) {
		t.Errorf("batch_sql without RETURNING under expect_rows 1: %v", err)
	}
	for _, ok := range []string{fmt.Sprintf(yaml, 1, " RETURNING e.id"), fmt.Sprintf(yaml, 0, "")} {
		if _, err := compile(t, conn, ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

func TestNewRejectsBadBatchSQL(t *testing.T) {
	conn := connect(t)
	_, err := compile(t, conn, "handlers:\n  bad.type:\n    sql: SELECT 1\n    batch_sql: UPDATE orders SET status = 'x' WHERE id = $1\n")
	if err == nil || !strings.Contains(err.Error(), `handler "bad.type": invalid batch_sql`) {
		t.Fatalf("batch_sql comparing text to text[] accepted: %v", err)
	}
}

// TestStatementsPreparedAgain: after the session's prepared statements are
// dropped, the next attempt fails (and is retried by the worker) and the one
// after prepares them again.
func TestStatementsPreparedAgain(t *testing.T) {
	conn := connect(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `INSERT INTO orders (id, status) VALUES ('o-1', 'created')`); err != nil {
		t.Fatal(err)
	}
	h, err := compile(t, conn, strings.Replace(handlersYAML, "%s", "skip", 1))
	if err != nil {
		t.Fatal(err)
	}
	apply := func() error {
		_, err := worker.ApplyOnce(ctx, conn, "c", h, event("order.created", "o-1", `{}`))
		return err
	}
	if err := apply(); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.PgConn().Exec(ctx, `DEALLOCATE ALL`).ReadAll(); err != nil {
		t.Fatal(err)
	}
	// pgx's own statement cache (the inbox insert) and the handler's each
	// cost one failed attempt at most.
	for attempt := 1; ; attempt++ {
		err := apply()
		if err == nil {
			break
		}
		if worker.IsPermanent(err) || attempt == 3 {
			t.Fatalf("attempt %d after DEALLOCATE ALL: %v", attempt, err)
		}
	}
	if err := apply(); err != nil {
		t.Fatalf("prepared statements not reused: %v", err)
	}
}
