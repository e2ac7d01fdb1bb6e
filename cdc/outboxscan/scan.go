// Package outboxscan reads outbox rows with SQL, by their created-at
// column, in the order the relay publishes them: the snapshot backfill and
// `outbox republish` go through it (streaming reads the slot instead).
//
// Imports (floor: library, the relay's own): internal/shared/outbox and pgx only.
package outboxscan

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// Querier is a connection or a transaction (the backfill reads inside
// the slot's exported snapshot).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Range selects outbox rows by their created-at column: at or after
// since, before until; a zero bound is open.
type Range struct{ Since, Until time.Time }

// Bounded reports whether either bound is set.
func (r Range) Bounded() bool { return !r.Since.IsZero() || !r.Until.IsZero() }

// Where is the range as a SQL condition on cat's created-at column. A
// bounded range needs that column; command names what needs it.
func (r Range) Where(cat *outbox.Catalog, command string) (string, []any, error) {
	where, args := "TRUE", []any{}
	if !r.Bounded() {
		return where, args, nil
	}
	col, err := cat.CreatedAtColumn(command)
	if err != nil {
		return "", nil, err
	}
	if !r.Since.IsZero() {
		args = append(args, r.Since)
		where += fmt.Sprintf(" AND %s >= $%d", col, len(args))
	}
	if !r.Until.IsZero() {
		args = append(args, r.Until)
		where += fmt.Sprintf(" AND %s < $%d", col, len(args))
	}
	return where, args, nil
}

// Types returns the distinct topic-column values of the rows in r.
func Types(ctx context.Context, q Querier, cat *outbox.Catalog, r Range, command string) ([]string, error) {
	where, args, err := r.Where(cat, command)
	if err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, "SELECT DISTINCT "+pgx.Identifier{cat.Topic}.Sanitize()+"::text FROM "+cat.QuotedTable()+" WHERE "+where, args...)
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	return types, nil
}

// Count counts all rows and returns the oldest created-at (zero when
// there are none or the mapping has no created-at column).
func Count(ctx context.Context, q Querier, cat *outbox.Catalog) (int64, time.Time, error) {
	oldestCol := "NULL::timestamptz"
	if col, err := cat.CreatedAtColumn(""); err == nil {
		oldestCol = "min(" + col + ")::timestamptz"
	}
	var (
		n      int64
		oldest *time.Time
	)
	if err := q.QueryRow(ctx, "SELECT count(*), "+oldestCol+" FROM "+cat.QuotedTable()).Scan(&n, &oldest); err != nil {
		return 0, time.Time{}, fmt.Errorf("count outbox rows: %w", err)
	}
	if oldest == nil {
		return n, time.Time{}, nil
	}
	return n, *oldest, nil
}

// Order is the order rows are published in, which is the per-key
// order consumers see. A row's commit order is not stored, so:
//   - with track_commit_timestamp on, the commit timestamp of the row's
//     transaction comes first (commit order for writers that serialize a
//     key's transactions, e.g. by locking the aggregate's row); rows older
//     than the setting come first;
//   - then the created-at column, by default the transaction's start time:
//     commit order for a key whose transactions do not overlap;
//   - then the transaction (age of xmin), the statement within it (cmin), and
//     the row's physical position: one transaction's rows come in statement
//     order, but the rows ONE statement inserts may come in another order
//     when several sessions write the table at once (the heap does not keep
//     insertion order), so events of one key that must stay ordered go in
//     separate statements.
func Order(ctx context.Context, q Querier, cat *outbox.Catalog) (string, error) {
	var on bool
	if err := q.QueryRow(ctx, "SELECT current_setting('track_commit_timestamp')::bool").Scan(&on); err != nil {
		return "", fmt.Errorf("read track_commit_timestamp: %w", err)
	}
	rest := "age(xmin) DESC, cmin::text::bigint, ctid"
	if col, err := cat.CreatedAtColumn(""); err == nil {
		rest = col + ", " + rest
	}
	if on {
		return "pg_xact_commit_timestamp(xmin) NULLS FIRST, " + rest, nil
	}
	return rest, nil
}

// Read calls fn with each row of r in Order. A row whose
// Problem is set cannot become a record (the relay rejects it). fn's error
// stops the scan.
func Read(ctx context.Context, q Querier, cat *outbox.Catalog, r Range, command string, fn func(row *outbox.Row) error) error {
	order, err := Order(ctx, q, cat)
	if err != nil {
		return err
	}
	where, args, err := r.Where(cat, command)
	if err != nil {
		return err
	}
	rows, err := q.Query(ctx, "SELECT "+cat.SelectList()+" FROM "+cat.QuotedTable()+" WHERE "+where+" ORDER BY "+order, args...)
	if err != nil {
		return fmt.Errorf("read outbox: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		row, err := cat.Scan(rows)
		if err != nil {
			return err
		}
		if err := fn(&row); err != nil {
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
