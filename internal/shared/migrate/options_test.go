package migrate_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/migrate"
)

// column is the first column of a query's rows.
func column(t *testing.T, conn *pgx.Conn, sql string, args ...any) []string {
	t.Helper()
	rows, err := conn.Query(t.Context(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// tables lists the tables of schemas public and app, schema-qualified.
func tables(t *testing.T, conn *pgx.Conn) []string {
	return column(t, conn, `SELECT schemaname || '.' || tablename FROM pg_tables
		WHERE schemaname IN ('public', 'app') ORDER BY 1`)
}

func publicationTables(t *testing.T, conn *pgx.Conn, pub string) []string {
	return column(t, conn, `SELECT schemaname || '.' || tablename FROM pg_publication_tables
		WHERE pubname = $1 ORDER BY 1`, pub)
}

// TestRunCreatesTheDemoOnlyWhenAsked: without Demo the database gets what
// the pipeline needs and no orders; with Demo (run again on the same
// database) it gets the demo's tables too.
func TestRunCreatesTheDemoOnlyWhenAsked(t *testing.T) {
	conn := connect(t, freshDatabase(t))
	if _, err := migrate.Run(t.Context(), conn, migrate.Options{}); err != nil {
		t.Fatal(err)
	}
	pipeline := []string{"public.outbox", "public.outbox_rejected", "public.processed_events", "public.relay_state", "public.schema_migrations"}
	if got := tables(t, conn); !slices.Equal(got, pipeline) {
		t.Errorf("without demo: tables %v, want %v", got, pipeline)
	}
	if got := publicationTables(t, conn, "eventforge_outbox"); !slices.Equal(got, []string{"public.outbox"}) {
		t.Errorf("publication covers %v, want [public.outbox]", got)
	}
	applied, err := migrate.Run(t.Context(), conn, migrate.Options{Demo: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(applied, []string{"0004_api_idempotency", "demo_0001_orders"}) {
		t.Errorf("demo run applied %v, want only the demo's migrations", applied)
	}
	withDemo := append(slices.Clone(pipeline), "public.api_idempotency", "public.orders")
	slices.Sort(withDemo)
	if got := tables(t, conn); !slices.Equal(got, withDemo) {
		t.Errorf("with demo: tables %v, want %v", got, withDemo)
	}
	assertContractSchema(t, conn)
}

// TestRunOnAnApplicationOutbox: a database whose application has its own
// outbox table gets only the relay's tables and a publication of that table;
// a second run changes nothing.
func TestRunOnAnApplicationOutbox(t *testing.T) {
	conn := connect(t, freshDatabase(t))
	if _, err := conn.Exec(t.Context(), `CREATE SCHEMA app; CREATE TABLE app.events (
		event_id uuid PRIMARY KEY, aggregate_type text NOT NULL, aggregate_id text NOT NULL,
		event_type text NOT NULL, payload jsonb NOT NULL, headers jsonb NOT NULL DEFAULT '{}',
		tenant text, created_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	opts := migrate.Options{OutboxTable: "app.events", Publication: "app_events"}
	applied, err := migrate.Run(t.Context(), conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(applied, []string{"0003_relay_state", "0006_relay_state_recover_since"}) {
		t.Errorf("applied %v, want only the relay's tables", applied)
	}
	want := []string{"app.events", "public.outbox_rejected", "public.relay_state", "public.schema_migrations"}
	if got := tables(t, conn); !slices.Equal(got, want) {
		t.Errorf("tables %v, want %v", got, want)
	}
	if got := publicationTables(t, conn, "app_events"); !slices.Equal(got, []string{"app.events"}) {
		t.Errorf("publication app_events covers %v, want [app.events]", got)
	}
	var inserts, updates bool
	if err := conn.QueryRow(t.Context(), "SELECT pubinsert, pubupdate FROM pg_publication WHERE pubname = 'app_events'").Scan(&inserts, &updates); err != nil || !inserts || updates {
		t.Errorf("publication inserts=%v updates=%v (%v), want inserts only", inserts, updates, err)
	}
	if again, err := migrate.Run(t.Context(), conn, opts); err != nil || len(again) != 0 {
		t.Errorf("second run: applied %v, err %v; want nothing", again, err)
	}
	// The default publication name, already taken by another table, is refused.
	if _, err := conn.Exec(t.Context(), "CREATE TABLE other (x int); CREATE PUBLICATION taken FOR TABLE other"); err != nil {
		t.Fatal(err)
	}
	_, err = migrate.Run(t.Context(), conn, migrate.Options{OutboxTable: "app.events", Publication: "taken"})
	if err == nil || !strings.Contains(err.Error(), "publication taken exists but does not cover app.events") {
		t.Errorf("publication of another table: %v, want it refused", err)
	}
}

// TestRunRefusesAMissingOrIncompleteOutbox: an application outbox that does
// not exist or lacks a column the relay reads is reported, and nothing is
// created.
func TestRunRefusesAMissingOrIncompleteOutbox(t *testing.T) {
	conn := connect(t, freshDatabase(t))
	_, err := migrate.Run(t.Context(), conn, migrate.Options{OutboxTable: "events"})
	if err == nil || !strings.Contains(err.Error(), "outbox table public.events does not exist") {
		t.Errorf("missing table: %v", err)
	}
	if _, err := conn.Exec(t.Context(), "CREATE TABLE events (event_id uuid, aggregate_type text, aggregate_id text, payload jsonb)"); err != nil {
		t.Fatal(err)
	}
	_, err = migrate.Run(t.Context(), conn, migrate.Options{OutboxTable: "events"})
	if err == nil || !strings.Contains(err.Error(), "lacks column(s) event_type, headers") {
		t.Errorf("incomplete table: %v", err)
	}
	if got := tables(t, conn); !slices.Equal(got, []string{"public.events"}) {
		t.Errorf("tables %v after refused runs, want only public.events", got)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tt := range []struct {
		opts migrate.Options
		bad  string
	}{
		{migrate.Options{}, ""},
		{migrate.Options{OutboxTable: "events"}, ""},
		{migrate.Options{OutboxTable: "app.events", Publication: "p_1"}, ""},
		{migrate.Options{OutboxTable: "a.b.c"}, "--outbox-table"},
		{migrate.Options{OutboxTable: `x"; DROP TABLE y`}, "--outbox-table"},
		{migrate.Options{OutboxTable: ".events"}, "--outbox-table"},
		{migrate.Options{Publication: "bad name"}, "--publication"},
	} {
		err := tt.opts.Validate()
		if (tt.bad == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.bad)) {
			t.Errorf("%+v: %v, want error about %q", tt.opts, err, tt.bad)
		}
	}
}

// TestRunOnADatabaseMigratedBeforeTheSets: a database migrated before the
// sets existed has 0001_schema … 0004_api_idempotency recorded (0001 then
// created orders too). The files kept their versions when they moved, so
// nothing of those applies again (only the later 0005_inbox_result and
// 0006_relay_state_recover_since); --demo
// only records the orders file, a no-op.
func TestRunOnADatabaseMigratedBeforeTheSets(t *testing.T) {
	conn := connect(t, freshDatabase(t))
	if _, err := migrate.Run(t.Context(), conn, migrate.Options{Demo: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "DELETE FROM schema_migrations WHERE version LIKE 'demo\\_%' OR version >= '0005'"); err != nil {
		t.Fatal(err)
	}
	old := column(t, conn, "SELECT version FROM schema_migrations ORDER BY 1")
	if want := []string{"0001_schema", "0002_publication", "0003_relay_state", "0004_api_idempotency"}; !slices.Equal(old, want) {
		t.Fatalf("recorded %v, want the versions of before the sets %v", old, want)
	}
	if applied, err := migrate.Run(t.Context(), conn, migrate.Options{}); err != nil || !slices.Equal(applied, []string{"0005_inbox_result", "0006_relay_state_recover_since"}) {
		t.Fatalf("plain run: applied %v, %v; want only what came after the sets", applied, err)
	}
	if applied, err := migrate.Run(t.Context(), conn, migrate.Options{Demo: true}); err != nil || !slices.Equal(applied, []string{"demo_0001_orders"}) {
		t.Fatalf("demo run: applied %v, %v; want only demo_0001_orders", applied, err)
	}
	assertContractSchema(t, conn)
}
