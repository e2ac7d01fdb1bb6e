package cdc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/outbox"
)

// This file is the one place that reads outbox rows with SQL (the relay
// itself reads them from the slot): republish and the snapshot backfill both
// go through readOutbox, outboxTypes and countOutbox.

// rowQuerier is a connection or a transaction (the backfill reads inside
// the slot's exported snapshot).
type rowQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// outboxRange selects outbox rows by created_at: at or after since, before
// until; a zero bound is open.
type outboxRange struct{ since, until time.Time }

func (r outboxRange) where() (string, []any) {
	where, args := "TRUE", []any{}
	if !r.since.IsZero() {
		args = append(args, r.since)
		where += fmt.Sprintf(" AND created_at >= $%d", len(args))
	}
	if !r.until.IsZero() {
		args = append(args, r.until)
		where += fmt.Sprintf(" AND created_at < $%d", len(args))
	}
	return where, args
}

// outboxIdent is cfg's outbox table as a quoted SQL identifier.
func outboxIdent(cfg *Config) (string, error) {
	schema, table, err := cfg.outboxTable()
	if err != nil {
		return "", err
	}
	return pgx.Identifier{schema, table}.Sanitize(), nil
}

// outboxTypes returns the distinct aggregate types of the rows in r.
func outboxTypes(ctx context.Context, q rowQuerier, cfg *Config, r outboxRange) ([]string, error) {
	tbl, err := outboxIdent(cfg)
	if err != nil {
		return nil, err
	}
	where, args := r.where()
	rows, err := q.Query(ctx, "SELECT DISTINCT aggregate_type FROM "+tbl+" WHERE "+where, args...)
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	return types, nil
}

// countOutbox counts the rows in r and returns the oldest created_at (zero
// when there are none).
func countOutbox(ctx context.Context, q rowQuerier, cfg *Config, r outboxRange) (int64, time.Time, error) {
	tbl, err := outboxIdent(cfg)
	if err != nil {
		return 0, time.Time{}, err
	}
	where, args := r.where()
	var (
		n      int64
		oldest *time.Time
	)
	if err := q.QueryRow(ctx, "SELECT count(*), min(created_at) FROM "+tbl+" WHERE "+where, args...).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("count outbox rows: %w", err)
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, *oldest, nil
}

// outboxOrder is the order rows are published in, which is the per-key
// order consumers see. A row's commit order is not stored, so:
//   - with track_commit_timestamp on, the commit timestamp of the row's
//     transaction comes first (commit order for writers that serialize a
//     key's transactions, e.g. by locking the aggregate's row); rows older
//     than the setting come first;
//   - then created_at, by default the transaction's start time: commit order
//     for a key whose transactions do not overlap;
//   - then the transaction (age of xmin), the statement within it (cmin), and
//     the row's physical position: one transaction's rows come in statement
//     order, but the rows ONE statement inserts may come in another order
//     when several sessions write the table at once (the heap does not keep
//     insertion order), so events of one key that must stay ordered go in
//     separate statements.
func outboxOrder(ctx context.Context, q rowQuerier) (string, error) {
	var on bool
	if err := q.QueryRow(ctx, "SELECT current_setting('track_commit_timestamp')::bool").Scan(&on); err != nil {
		return "", fmt.Errorf("read track_commit_timestamp: %w", err)
	}
	const rest = "created_at, age(xmin) DESC, cmin::text::bigint, ctid"
	if on {
		return "pg_xact_commit_timestamp(xmin) NULLS FIRST, " + rest, nil
	}
	return rest, nil
}

// readOutbox calls fn with each row of r in outboxOrder. headersErr is set
// when the headers column is not an object of strings (the event is then
// rejected, as the relay rejects it). fn's error stops the scan.
func readOutbox(ctx context.Context, q rowQuerier, cfg *Config, r outboxRange, fn func(e *outbox.Event, headersErr error) error) error {
	tbl, err := outboxIdent(cfg)
	if err != nil {
		return err
	}
	order, err := outboxOrder(ctx, q)
	if err != nil {
		return err
	}
	where, args := r.where()
	rows, err := q.Query(ctx, `SELECT event_id, aggregate_type, aggregate_id, event_type, payload::text, headers::text, created_at
		FROM `+tbl+` WHERE `+where+` ORDER BY `+order, args...)
	if err != nil {
		return fmt.Errorf("read outbox: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			e       outbox.Event
			payload string
			headers string
		)
		if err := rows.Scan(&e.ID, &e.AggregateType, &e.AggregateID, &e.EventType, &payload, &headers, &e.CommitTime); err != nil {
			return fmt.Errorf("read outbox row: %w", err)
		}
		e.Payload = []byte(payload)
		hs, herr := outbox.StringHeaders([]byte(headers))
		e.Headers = hs
		if err := fn(&e, herr); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return context.Cause(ctx) // the scan may have ended early
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read outbox: %w", err)
	}
	return nil
}
