package prune

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what Run needs from a connection: a *pgx.Conn or a *pgxpool.Pool.
// Each statement runs in its own (implicit) transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Result is what a prune did.
type Result struct {
	Cutoff  time.Time // rows created before it were eligible
	Slots   []string  // relay slots the guard checked
	Deleted int64     // rows deleted (dry run: rows that would be)
	Batches int       // DELETE statements that removed rows
	// Kept counts eligible rows left in place: rows recorded in
	// outbox_rejected (kept for inspection) and rows another transaction
	// held locked (skipped, not waited for).
	Kept int64
}

// Run checks the guard (see guard) and then deletes the eligible rows in
// batches of at most cfg.BatchSize, each DELETE its own short transaction
// that skips rows locked by others, so inserts and other writers never wait
// on it. It returns what it deleted so far also when it fails or ctx ends.
//
// Deleting outbox rows emits no events: the publication publishes inserts
// only (docs/design.md#insert-only-publication).
func Run(ctx context.Context, db DB, cfg Config, log *slog.Logger) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	cfg = cfg.withDefaults()
	cat, err := cfg.mapping().Check(ctx, db)
	if err != nil {
		return Result{}, err
	}
	createdAt, err := cat.CreatedAtColumn("outbox prune")
	if err != nil {
		return Result{}, err
	}
	table, id := cat.QuotedTable(), pgx.Identifier{cat.EventID}.Sanitize()
	rejectedID := "r.event_id"
	if cat.Types[cat.EventID] != "uuid" {
		rejectedID = "r.event_id::text"
	}

	var res Result
	res.Cutoff, res.Slots, err = guard(ctx, db, cfg)
	if err != nil {
		return res, err
	}
	eligible := fmt.Sprintf(`FROM %s o WHERE o.%s < $1
		AND NOT EXISTS (SELECT 1 FROM outbox_rejected r WHERE %s = o.%s)`, table, createdAt, rejectedID, id)
	if cfg.DryRun {
		err := db.QueryRow(ctx, "SELECT count(*) "+eligible, res.Cutoff).Scan(&res.Deleted)
		if err != nil {
			return res, fmt.Errorf("count outbox rows: %w", err)
		}
		return res, countKept(ctx, db, table, createdAt, &res, true)
	}
	del := fmt.Sprintf(`DELETE FROM %s WHERE %s IN (
		SELECT o.%s %s ORDER BY o.%s LIMIT $2 FOR UPDATE SKIP LOCKED)`, table, id, id, eligible, createdAt)
	for {
		tag, err := db.Exec(ctx, del, res.Cutoff, cfg.BatchSize)
		if err != nil {
			return res, fmt.Errorf("delete outbox rows: %w", err)
		}
		n := tag.RowsAffected()
		if n == 0 {
			break
		}
		res.Deleted += n
		res.Batches++
		log.Debug("pruned outbox batch", "rows", n, "total", res.Deleted)
	}
	return res, countKept(ctx, db, table, createdAt, &res, false)
}

// countKept counts the rows older than the cutoff that stay: all of them
// minus, in a dry run, those that would go.
func countKept(ctx context.Context, db DB, table, createdAt string, res *Result, dry bool) error {
	err := db.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s WHERE %s < $1", table, createdAt), res.Cutoff).Scan(&res.Kept)
	if err != nil {
		return fmt.Errorf("count kept outbox rows: %w", err)
	}
	if dry {
		res.Kept -= res.Deleted
	}
	return nil
}
