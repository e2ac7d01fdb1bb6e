package slots

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RelayRecord is a relay_state row: the relay's own memory that it streamed
// from a slot and the last position it confirmed there. A record whose slot
// is missing means events after ConfirmedLSN may never have been published.
type RelayRecord struct {
	Slot         string    `json:"slot"`
	ConfirmedLSN string    `json:"confirmed_lsn"`
	UpdatedAt    time.Time `json:"updated_at"`
	// RecoverSince is the earliest created_at that a transaction committed
	// after ConfirmedLSN can carry (the start of the oldest transaction
	// open before ConfirmedLSN was written); nil when the relay could not
	// tell. A recovery republishes from it.
	RecoverSince *time.Time `json:"recover_since,omitempty"`
}

// recordColumns reads a relay_state row; recover_since through to_jsonb, so
// that a database not yet migrated to it reads NULL.
const recordColumns = `slot_name, confirmed_lsn::text, updated_at, (to_jsonb(r)->>'recover_since')::timestamptz`

// RecoveryMargin is how far before a relay_state row's updated_at a
// recovery republishes when the row has no RecoverSince: rows carry their
// transaction's start time, and a transaction committed after the last
// confirmation may have started before it.
const RecoveryMargin = time.Hour

// RecoverFrom is the time from which a recovery of r's slot republishes
// outbox rows (by created_at): RecoverSince, else updated_at minus
// RecoveryMargin.
func (r RelayRecord) RecoverFrom() time.Time {
	if r.RecoverSince != nil {
		return *r.RecoverSince
	}
	return r.UpdatedAt.Add(-RecoveryMargin)
}

// RelayRecords reads every relay_state row of the connection's database, by
// slot name; none when the table does not exist (the database is not
// migrated).
func RelayRecords(ctx context.Context, q Querier) ([]RelayRecord, error) {
	ok, err := hasRelayState(ctx, q)
	if err != nil || !ok {
		return nil, err
	}
	rows, err := q.Query(ctx, "SELECT "+recordColumns+" FROM relay_state r ORDER BY slot_name")
	if err != nil {
		return nil, fmt.Errorf("read relay_state: %w", err)
	}
	recs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[RelayRecord])
	if err != nil {
		return nil, fmt.Errorf("read relay_state: %w", err)
	}
	return recs, nil
}

func hasRelayState(ctx context.Context, q Querier) (bool, error) {
	rows, err := q.Query(ctx, "SELECT to_regclass('relay_state') IS NOT NULL")
	if err != nil {
		return false, fmt.Errorf("look up relay_state: %w", err)
	}
	ok, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[bool])
	if err != nil {
		return false, fmt.Errorf("look up relay_state: %w", err)
	}
	return ok, nil
}

// ReadRelayRecord reads the relay_state row of slot; ok is false when there
// is none. Unlike RelayRecords it needs the table (the relay runs on a
// migrated database).
func ReadRelayRecord(ctx context.Context, q Querier, slot string) (rec RelayRecord, ok bool, err error) {
	rows, err := q.Query(ctx, "SELECT "+recordColumns+" FROM relay_state r WHERE slot_name = $1", slot)
	if err != nil {
		return rec, false, fmt.Errorf("read relay_state: %w", err)
	}
	recs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[RelayRecord])
	if err != nil {
		return rec, false, fmt.Errorf("read relay_state: %w", err)
	}
	if len(recs) == 0 {
		return rec, false, nil
	}
	return recs[0], true, nil
}

// WriteRelayState records lsn (a pg_lsn's text) as the position the relay
// confirmed on slot; it never moves the row backwards, and updated_at is
// when the row's position was confirmed: a lower position (a relay resuming
// on a promoted standby, whose synced slot is behind the row the old
// primary replicated) leaves both alone, so the recovery a missing slot
// proposes starts early enough.
func WriteRelayState(ctx context.Context, q Querier, slot, lsn string) error {
	return WriteRelayStateSince(ctx, q, slot, lsn, nil)
}

// WriteRelayStateSince is WriteRelayState that also records since as the
// row's recover_since when the position moves (nil: unknown).
func WriteRelayStateSince(ctx context.Context, q Querier, slot, lsn string, since *time.Time) error {
	sql := `INSERT INTO relay_state (slot_name, confirmed_lsn, updated_at, recover_since) VALUES ($1, $2::pg_lsn, now(), $3)
		ON CONFLICT (slot_name) DO UPDATE SET confirmed_lsn = EXCLUDED.confirmed_lsn, updated_at = now(), recover_since = EXCLUDED.recover_since
		WHERE EXCLUDED.confirmed_lsn > relay_state.confirmed_lsn`
	args := []any{slot, lsn, since}
	if since == nil { // also on a database not yet migrated to recover_since
		sql = `INSERT INTO relay_state (slot_name, confirmed_lsn, updated_at) VALUES ($1, $2::pg_lsn, now())
		ON CONFLICT (slot_name) DO UPDATE SET confirmed_lsn = EXCLUDED.confirmed_lsn, updated_at = now()
		WHERE EXCLUDED.confirmed_lsn > relay_state.confirmed_lsn`
		args = args[:2]
	}
	_, err := q.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("write relay_state: %w", err)
	}
	return nil
}
