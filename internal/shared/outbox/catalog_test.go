package outbox_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/testsupport/testenv"
)

// TestCheckAndScanAgainstPostgreSQL: Check finds a table and its column
// types (through domains), refuses a missing table, and SelectList with Scan
// read rows back as events, bytea byte for byte.
func TestCheckAndScanAgainstPostgreSQL(t *testing.T) {
	url := testenv.Shared(t).NewEmptyDatabase(t)
	db, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(t.Context())
	for _, sql := range []string{
		`CREATE DOMAIN blob AS bytea`,
		`CREATE SCHEMA "Inv"`,
		`CREATE TABLE "Inv"."Out box" (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid int8 NOT NULL,
			type text NOT NULL, payload blob, tenant text, at timestamptz NOT NULL DEFAULT now())`,
		`INSERT INTO "Inv"."Out box" (id, aggregatetype, aggregateid, type, payload, tenant) VALUES
			('4d47e190-0402-4048-bc2c-89dd54343cdc', 'order', 7, 'Created', '\xff00fe', 'acme'),
			('9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d', 'order', 7, 'Deleted', NULL, NULL)`,
	} {
		if _, err := db.Exec(t.Context(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	m, _ := outbox.Preset(outbox.PresetDebezium)
	m.Table, m.CreatedAt, m.ExtraHeaders = "Inv.Out box", "at", []string{"tenant:x-tenant"}
	cat, err := m.Check(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	if cat.Types["payload"] != "bytea" || outbox.KindOf(cat.Types["payload"]) != outbox.PayloadBinary {
		t.Fatalf("payload type %q", cat.Types["payload"])
	}
	rows, err := db.Query(t.Context(), "SELECT "+cat.SelectList()+" FROM "+cat.QuotedTable()+" ORDER BY type")
	if err != nil {
		t.Fatal(err)
	}
	var got []outbox.Row
	for rows.Next() {
		r, err := cat.Scan(rows)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if rows.Err() != nil || len(got) != 2 {
		t.Fatalf("rows %d, %v", len(got), rows.Err())
	}
	e := got[0].Event
	if e.ID.String() != "4d47e190-0402-4048-bc2c-89dd54343cdc" || e.AggregateType != "order" || e.AggregateID != "7" ||
		e.EventType != "Created" || !bytes.Equal(e.Payload, []byte{0xff, 0, 0xfe}) || e.Headers["x-tenant"] != "acme" ||
		got[0].CreatedAt.IsZero() || got[0].Problem != "" {
		t.Fatalf("row 1 %+v", got[0])
	}
	if !got[1].Event.NoPayload || got[1].Problem != "" || len(got[1].Event.Headers) != 0 {
		t.Fatalf("row 2 (NULL payload, tombstone policy) %+v", got[1])
	}

	m.Table = "Inv.missing"
	if _, err := m.Check(t.Context(), db); !errors.Is(err, outbox.ErrMapping) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing table: %v", err)
	}
}
