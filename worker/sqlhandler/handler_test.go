package sqlhandler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/outbox"
	"github.com/eventforge/eventforge/internal/testenv"
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
