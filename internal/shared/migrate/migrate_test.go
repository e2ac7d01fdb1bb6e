package migrate_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/migrate"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// freshDatabase is an empty database.
func freshDatabase(t *testing.T) string {
	t.Helper()
	return testenv.Shared(t).NewEmptyDatabase(t)
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func load(t *testing.T) []migrate.Migration {
	t.Helper()
	ms, err := migrate.Embedded(migrate.Options{Demo: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("no migrations embedded")
	}
	return ms
}

func TestLoadIsOrdered(t *testing.T) {
	ms := load(t)
	if !slices.IsSortedFunc(ms, func(a, b migrate.Migration) int { return compare(a.Version, b.Version) }) {
		t.Fatalf("migrations out of order: %v", ms)
	}
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestApplyFreshThenNoOp(t *testing.T) {
	url := freshDatabase(t)
	ms := load(t)
	conn := connect(t, url)
	applied, err := migrate.Apply(t.Context(), conn, ms)
	if err != nil {
		t.Fatalf("first run: %v", err)
	}
	if len(applied) != len(ms) {
		t.Fatalf("first run applied %v, want all %d", applied, len(ms))
	}
	again, err := migrate.Apply(t.Context(), conn, ms)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if len(again) != 0 {
		t.Fatalf("second run applied %v, want nothing", again)
	}
	var recorded int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM schema_migrations").Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if recorded != len(ms) {
		t.Fatalf("schema_migrations has %d rows, want %d", recorded, len(ms))
	}
	assertContractSchema(t, conn)
}

func TestConcurrentRunsApplyEachMigrationOnce(t *testing.T) {
	url := freshDatabase(t)
	ms := load(t)
	const runners = 4
	var wg sync.WaitGroup
	results := make([][]string, runners)
	errs := make([]error, runners)
	for i := range runners {
		conn := connect(t, url)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = migrate.Apply(context.Background(), conn, ms)
		}()
	}
	wg.Wait()
	total := 0
	for i := range runners {
		if errs[i] != nil {
			t.Fatalf("runner %d: %v", i, errs[i])
		}
		total += len(results[i])
	}
	if total != len(ms) {
		t.Fatalf("runners applied %d migrations in all, want %d exactly once each: %v", total, len(ms), results)
	}
	assertContractSchema(t, connect(t, url))
}

func TestFailedMigrationLeavesNoRecord(t *testing.T) {
	url := freshDatabase(t)
	conn := connect(t, url)
	bad := []migrate.Migration{{Version: "0001_ok", SQL: "CREATE TABLE a (x int)"}, {Version: "0002_bad", SQL: "CREATE TABLE b (x int); SELECT no_such_column FROM a"}}
	if _, err := migrate.Apply(t.Context(), conn, bad); err == nil {
		t.Fatal("broken migration applied without error")
	}
	var versions []string
	rows, _ := conn.Query(t.Context(), "SELECT version FROM schema_migrations ORDER BY 1")
	versions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(versions, []string{"0001_ok"}) {
		t.Fatalf("recorded %v, want only 0001_ok", versions)
	}
	var bExists bool
	_ = conn.QueryRow(t.Context(), "SELECT to_regclass('b') IS NOT NULL").Scan(&bExists)
	if bExists {
		t.Fatal("table b of the failed migration exists: it was not rolled back")
	}
}

// assertContractSchema checks the contract's tables, keys and publication
// against pg_catalog.
func assertContractSchema(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	ctx := t.Context()
	wantColumns := map[string][]string{
		"orders":           {"id text NO", "status text NO", "customer text YES", "amount bigint YES", "currency text YES", "created_at timestamp with time zone NO", "updated_at timestamp with time zone NO"},
		"outbox":           {"event_id uuid NO", "aggregate_type text NO", "aggregate_id text NO", "event_type text NO", "payload jsonb NO", "headers jsonb NO", "created_at timestamp with time zone NO"},
		"processed_events": {"consumer text NO", "event_id uuid NO", "processed_at timestamp with time zone NO", "result text NO"},
	}
	for table, want := range wantColumns {
		rows, err := conn.Query(ctx, `SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' ||
				CASE WHEN a.attnotnull THEN 'NO' ELSE 'YES' END
			FROM pg_attribute a WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, table)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s columns = %v, want %v", table, got, want)
		}
	}
	wantPK := map[string]string{"orders": "id", "outbox": "event_id", "processed_events": "consumer,event_id"}
	for table, want := range wantPK {
		var got string
		err := conn.QueryRow(ctx, `SELECT string_agg(a.attname, ',' ORDER BY k.ord)
			FROM pg_constraint c, unnest(c.conkey) WITH ORDINALITY k(attnum, ord)
			JOIN pg_attribute a ON a.attrelid = $1::regclass AND a.attnum = k.attnum
			WHERE c.conrelid = $1::regclass AND c.contype = 'p'`, table).Scan(&got)
		if err != nil || got != want {
			t.Errorf("%s primary key = %q (err %v), want %q", table, got, err, want)
		}
	}
	var ins, upd, del, trunc bool
	var tables []string
	err := conn.QueryRow(ctx, `SELECT pubinsert, pubupdate, pubdelete, pubtruncate FROM pg_publication WHERE pubname = 'eventforge_outbox'`).
		Scan(&ins, &upd, &del, &trunc)
	if err != nil {
		t.Fatalf("publication eventforge_outbox: %v", err)
	}
	if !ins || upd || del || trunc {
		t.Errorf("publication publishes insert=%v update=%v delete=%v truncate=%v, want inserts only", ins, upd, del, trunc)
	}
	rows, err := conn.Query(ctx, `SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = 'eventforge_outbox'`)
	if err != nil {
		t.Fatal(err)
	}
	if tables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || !slices.Equal(tables, []string{"public.outbox"}) {
		t.Errorf("publication tables = %v (err %v), want [public.outbox]", tables, err)
	}
}
