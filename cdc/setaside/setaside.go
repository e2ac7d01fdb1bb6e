// Package setaside owns outbox_rejected: the events the relay will not
// produce (a row it cannot decode, a topic no event may go to, a record the
// broker refuses for good). It records them, loads the ones a replay must
// skip, and defines RejectError, the error that sets one event aside
// instead of stopping the relay.
//
// Imports (floor: library, the relay's own): pgx, pglogrepl and uuid only.
package setaside

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// Record writes an event the relay will not produce to outbox_rejected. A
// replay of the same INSERT (same event id and LSN) is a no-op.
func Record(ctx context.Context, conn *pgx.Conn, id uuid.UUID, lsn pglogrepl.LSN, topic, reason string) error {
	_, err := conn.Exec(ctx, `INSERT INTO outbox_rejected (event_id, lsn, topic, reason) VALUES ($1, $2::pg_lsn, $3, $4)
		ON CONFLICT (event_id, lsn) DO NOTHING`, id, lsn.String(), topic, reason)
	if err != nil {
		return fmt.Errorf("record rejected event %s: %w", id, err)
	}
	return nil
}

// Key is one INSERT set aside: its event id and WAL position. The position
// tells it apart from a later row with the same event id (allowed once the
// first row is deleted), which must be produced.
type Key struct {
	ID  uuid.UUID
	LSN pglogrepl.LSN
}

// Set holds the INSERTs already in outbox_rejected.
type Set map[Key]struct{}

// Add puts one INSERT in the set.
func (s Set) Add(id uuid.UUID, lsn pglogrepl.LSN) { s[Key{id, lsn}] = struct{}{} }

// Has reports whether the INSERT is in the set.
func (s Set) Has(id uuid.UUID, lsn pglogrepl.LSN) bool {
	_, ok := s[Key{id, lsn}]
	return ok
}

// Load returns the INSERTs at or after from that are already in
// outbox_rejected, so a replay skips them instead of producing them.
func Load(ctx context.Context, conn *pgx.Conn, from pglogrepl.LSN) (Set, error) {
	rows, err := conn.Query(ctx, "SELECT event_id, lsn::text FROM outbox_rejected WHERE lsn >= $1::pg_lsn", from.String())
	if err != nil {
		return nil, fmt.Errorf("read outbox_rejected: %w", err)
	}
	out := Set{}
	var (
		id  uuid.UUID
		pos string
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &pos}, func() error {
		lsn, err := pglogrepl.ParseLSN(pos)
		if err != nil {
			return err
		}
		out.Add(id, lsn)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read outbox_rejected: %w", err)
	}
	return out, nil
}

// RejectError sets one event aside: the relay records it in outbox_rejected
// with Reason and goes on, instead of retrying a session that would fail on
// the same row forever.
type RejectError struct{ Reason string }

func (e *RejectError) Error() string { return "event rejected: " + e.Reason }

// Reason is the reason err sets its event aside, or "" when err is not a
// *RejectError.
func Reason(err error) string {
	var re *RejectError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}
