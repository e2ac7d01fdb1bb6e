package prune_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/prune"
)

// TestPruneHonoursTheMapping prunes an outbox with other names: its table,
// its text event id and its created-at column, keeping a rejected event.
func TestPruneHonoursTheMapping(t *testing.T) {
	t.Parallel()
	_, conn, _ := confirmedDatabase(t)
	exec(t, conn, `CREATE SCHEMA app`)
	exec(t, conn, `CREATE TABLE app.events (id text PRIMARY KEY, kind text NOT NULL, ref text NOT NULL,
		body bytea, written timestamptz NOT NULL)`)
	exec(t, conn, `INSERT INTO app.events SELECT gen_random_uuid()::text, 'k', 'r', '\x00', now() - make_interval(secs => $1)
		FROM generate_series(1, 30)`, (2 * day).Seconds())
	exec(t, conn, `INSERT INTO app.events SELECT gen_random_uuid()::text, 'k', 'r', '\x00', now() FROM generate_series(1, 5)`)
	exec(t, conn, `INSERT INTO outbox_rejected (event_id, lsn, topic, reason)
		SELECT id::uuid, '0/1', 'k', 'too large' FROM app.events WHERE written < now() - interval '1 day' LIMIT 1`)
	m := outbox.Mapping{Table: "app.events", EventID: "id", Topic: "kind", Key: "ref", Payload: "body", CreatedAt: "written"}

	res, err := prune.Run(t.Context(), conn, prune.Config{OlderThan: day, BatchSize: 7, Mapping: m}, discard)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 29 || res.Kept != 1 {
		t.Errorf("result = %+v, want 29 deleted, 1 kept", res)
	}
	if left := count(t, conn, "SELECT count(*) FROM app.events"); left != 6 {
		t.Errorf("%d rows left, want 5 young and 1 rejected", left)
	}

	// Without a created-at column (Debezium's table has none) prune refuses.
	m.CreatedAt = ""
	_, err = prune.Run(t.Context(), conn, prune.Config{OlderThan: day, Mapping: m}, discard)
	if err == nil || !strings.Contains(err.Error(), "outbox prune needs a created-at column") {
		t.Fatalf("prune without created-at: %v", err)
	}
	// A mapping the table does not match is refused before anything.
	m.CreatedAt, m.Key = "written", "aggregate_id"
	_, err = prune.Run(t.Context(), conn, prune.Config{OlderThan: day, Mapping: m}, discard)
	if !errors.Is(err, outbox.ErrMapping) {
		t.Fatalf("mismatched mapping: %v", err)
	}
}
