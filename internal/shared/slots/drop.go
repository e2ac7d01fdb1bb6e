package slots

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Beginner is a Querier that can open a transaction.
type Beginner interface {
	Querier
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Dropped says what Drop removed; either field may be nil, never both.
type Dropped struct {
	Slot   *Slot        // the slot as it was just before the drop
	Record *RelayRecord // its relay_state row
}

// Drop drops the slot named name and deletes its relay_state row, so that a
// later `cdc run` creates a fresh slot instead of refusing to start. It
// refuses a slot that is active (ErrSlotActive, naming the PID that holds it)
// or that belongs to another database (ErrWrongDB). When only the
// relay_state row exists, it deletes the row; when neither exists it returns
// ErrSlotNotFound.
//
// Dropping a slot skips every change it had not yet delivered; the recovery
// is republishing from the outbox table.
func Drop(ctx context.Context, db Beginner, name string) (Dropped, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return Dropped{}, fmt.Errorf("begin: %w", err)
	}
	// Rolled back on every early return; the slot drop itself is not
	// transactional, so it comes last before the commit.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	var d Dropped
	s, err := Status(ctx, tx, name)
	switch {
	case errors.Is(err, ErrSlotNotFound):
	case err != nil:
		return Dropped{}, err
	default:
		d.Slot = &s
		if err := droppable(ctx, tx, s); err != nil {
			return Dropped{}, err
		}
	}
	if d.Record, err = deleteRecord(ctx, tx, name); err != nil {
		return Dropped{}, err
	}
	if d.Slot == nil && d.Record == nil {
		return Dropped{}, fmt.Errorf("%w: %s (and no relay_state row for it)", ErrSlotNotFound, name)
	}
	if d.Slot != nil {
		if _, err := tx.Exec(ctx, "SELECT pg_drop_replication_slot($1)", name); err != nil {
			return Dropped{}, dropError(name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return Dropped{}, fmt.Errorf("commit deletion of relay_state row %s: %w", name, err)
	}
	return d, nil
}

func droppable(ctx context.Context, q Querier, s Slot) error {
	if s.Active {
		return fmt.Errorf("%w: replication slot %s is active for PID %d: stop the relay that reads it first",
			ErrSlotActive, s.Name, s.ActivePID)
	}
	rows, err := q.Query(ctx, "SELECT current_database()::text")
	if err != nil {
		return fmt.Errorf("read current database: %w", err)
	}
	db, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("read current database: %w", err)
	}
	if s.Database != db {
		return fmt.Errorf("%w: replication slot %s belongs to database %q, not %q: connect to that database to drop it",
			ErrWrongDB, s.Name, s.Database, db)
	}
	return nil
}

func deleteRecord(ctx context.Context, q Querier, name string) (*RelayRecord, error) {
	ok, err := hasRelayState(ctx, q)
	if err != nil || !ok {
		return nil, err
	}
	rows, err := q.Query(ctx, "DELETE FROM relay_state r WHERE slot_name = $1 RETURNING "+recordColumns, name)
	if err != nil {
		return nil, fmt.Errorf("delete relay_state row %s: %w", name, err)
	}
	recs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[RelayRecord])
	if err != nil {
		return nil, fmt.Errorf("delete relay_state row %s: %w", name, err)
	}
	if len(recs) == 0 {
		return nil, nil
	}
	return &recs[0], nil
}

func dropError(name string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case pgerrcode.ObjectInUse: // became active since we looked
			return fmt.Errorf("%w: %s", ErrSlotActive, pe.Message)
		case pgerrcode.UndefinedObject: // dropped by someone else since we looked
			return fmt.Errorf("%w: %s (dropped concurrently)", ErrSlotNotFound, name)
		}
	}
	return fmt.Errorf("drop replication slot %s: %w", name, err)
}
