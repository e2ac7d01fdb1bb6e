package cdc

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// recordRejected writes an event the relay will not produce to
// outbox_rejected. A replay of the same INSERT (same event id and LSN) is a
// no-op.
func recordRejected(ctx context.Context, conn *pgx.Conn, id uuid.UUID, lsn pglogrepl.LSN, topic, reason string) error {
	_, err := conn.Exec(ctx, `INSERT INTO outbox_rejected (event_id, lsn, topic, reason) VALUES ($1, $2::pg_lsn, $3, $4)
		ON CONFLICT (event_id, lsn) DO NOTHING`, id, lsn.String(), topic, reason)
	if err != nil {
		return fmt.Errorf("record rejected event %s: %w", id, err)
	}
	return nil
}

// loadRejected returns the events at or after from that are already in
// outbox_rejected, so a replay skips them instead of producing them.
func loadRejected(ctx context.Context, conn *pgx.Conn, from pglogrepl.LSN) (map[uuid.UUID]bool, error) {
	rows, err := conn.Query(ctx, "SELECT event_id FROM outbox_rejected WHERE lsn >= $1::pg_lsn", from.String())
	if err != nil {
		return nil, fmt.Errorf("read outbox_rejected: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("read outbox_rejected: %w", err)
	}
	out := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}
