package console

import (
	"context"
	"fmt"
	"strings"
)

// gateWaiters are the backends of the demo database waiting at a gate (an
// advisory lock the console holds), with their open transaction id.
func (r *run) gateWaiters(ctx context.Context, key int64) ([]backend, error) {
	return r.backends(ctx, `SELECT a.pid, coalesce(a.backend_xid::text, ''), coalesce(a.application_name, '') FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		WHERE l.locktype = 'advisory' AND NOT l.granted AND l.classid = 0 AND l.objid = $1 AND a.datname = current_database()`, key)
}

// uniqueWaiters are the backends waiting for another transaction to end
// (an insert of a key that transaction inserted).
func (r *run) uniqueWaiters(ctx context.Context) ([]backend, error) {
	return r.backends(ctx, `SELECT a.pid, coalesce(a.backend_xid::text, ''), coalesce(a.application_name, '') FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		WHERE l.locktype = 'transactionid' AND NOT l.granted AND a.datname = current_database()`)
}

// backend is a PostgreSQL backend of one of the demo processes.
type backend struct {
	pid int
	xid string
	app string
}

func (r *run) backends(ctx context.Context, sql string, args ...any) ([]backend, error) {
	rows, err := r.obs.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read pg_locks: %w", err)
	}
	defer rows.Close()
	var out []backend
	for rows.Next() {
		var b backend
		if err := rows.Scan(&b.pid, &b.xid, &b.app); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// writeLocks names the tables a backend's open transaction has written to
// (its RowExclusiveLock relation locks).
func (r *run) writeLocks(ctx context.Context, pid int) (string, error) {
	rows, err := r.obs.pool.Query(ctx, `SELECT relation::regclass::text FROM pg_locks
		WHERE pid = $1 AND locktype = 'relation' AND mode = 'RowExclusiveLock' AND granted
		  AND relation::regclass::text IN ('orders', 'outbox', 'processed_events') ORDER BY 1`, pid)
	if err != nil {
		return "", fmt.Errorf("read pg_locks: %w", err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return "", err
		}
		names = append(names, n)
	}
	return strings.Join(names, ", "), rows.Err()
}

// visibleRows counts the order's rows other sessions see.
func (r *run) visibleRows(ctx context.Context) (orders, outbox int, err error) {
	err = r.obs.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders WHERE id = $1), (SELECT count(*) FROM outbox WHERE aggregate_id = $1)`, r.orderID).Scan(&orders, &outbox)
	return orders, outbox, err
}
