package slots_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func connect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func createSlot(t testing.TB, conn *pgx.Conn, name string) {
	t.Helper()
	if _, err := conn.Exec(t.Context(), "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", name); err != nil {
		t.Fatalf("create slot %s: %v", name, err)
	}
}

func currentDB(t testing.TB, conn *pgx.Conn) string {
	t.Helper()
	var db string
	if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	return db
}

func insertEvents(t testing.TB, conn *pgx.Conn, n int) {
	t.Helper()
	_, err := conn.Exec(t.Context(), `INSERT INTO outbox (event_id, aggregate_type, aggregate_id, event_type, payload)
		SELECT gen_random_uuid(), 'orders', 'o-' || i, 'order.created', jsonb_build_object('i', i)
		FROM generate_series(1, $1) AS i`, n)
	if err != nil {
		t.Fatalf("insert events: %v", err)
	}
}
