// Package slots reads and drops PostgreSQL replication slots for operators:
// the rows of pg_replication_slots with the lag and retained WAL they imply,
// and the relay_state rows in which EventForge's relays record the slots they
// streamed from.
//
// Imports (floor: shared library): no other EventForge package.
package slots

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Errors callers branch on with errors.Is.
var (
	ErrSlotNotFound = errors.New("replication slot not found")
	ErrSlotActive   = errors.New("replication slot is active")
	ErrWrongDB      = errors.New("replication slot belongs to another database")
)

// Querier is what the functions of this package need from a connection; a
// *pgx.Conn, a *pgxpool.Pool or a pgx.Tx all fit.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Slot is one row of pg_replication_slots with the numbers an operator reads.
// Byte counts are nil where PostgreSQL reports NULL (for example a physical
// slot has no confirmed_flush_lsn; safe_wal_size is NULL when
// max_slot_wal_keep_size is -1 or the slot is lost).
type Slot struct {
	Name      string `json:"slot"`
	Plugin    string `json:"plugin"`
	Type      string `json:"slot_type"`
	Database  string `json:"database"`
	Temporary bool   `json:"temporary"`
	Active    bool   `json:"active"`
	ActivePID int32  `json:"active_pid,omitempty"` // 0 when inactive
	// WALStatus is reserved, extended, unreserved or lost (see the
	// PostgreSQL documentation of pg_replication_slots).
	WALStatus         string `json:"wal_status"`
	ConfirmedFlushLSN string `json:"confirmed_flush_lsn,omitempty"`
	RestartLSN        string `json:"restart_lsn,omitempty"`
	// CurrentLSN is pg_current_wal_lsn() at the time of the reading; the
	// byte counts below are relative to it.
	CurrentLSN    string `json:"current_lsn"`
	LagBytes      *int64 `json:"lag_bytes"`          // current - confirmed_flush_lsn
	RetainedBytes *int64 `json:"retained_wal_bytes"` // current - restart_lsn
	SafeWALSize   *int64 `json:"safe_wal_size_bytes"`
	// Failover is set on a slot that PostgreSQL 17 and later synchronise
	// to standbys (created or altered with FAILOVER); always false before 17.
	Failover bool `json:"failover"`
	// Synced is true on a standby for a slot synchronised from the
	// primary: after a promotion the relay resumes from it. Always false
	// on a primary and before PostgreSQL 17.
	Synced bool `json:"synced"`
}

// WALStatuses are the values of pg_replication_slots.wal_status, in order of
// growing danger.
var WALStatuses = []string{"reserved", "extended", "unreserved", "lost"}

// slotQuery reads every slot against one reading of the current WAL position,
// so that the lag and retained numbers of a row are consistent. The failover
// and synced columns (PostgreSQL 17) are read through to_jsonb, NULL (false)
// on older servers. On a standby pg_current_wal_lsn() fails, so the current
// position is the last WAL replayed there.
const slotQuery = `WITH w AS (SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END AS lsn)
SELECT s.slot_name::text, coalesce(s.plugin::text, ''), s.slot_type, coalesce(s.database::text, ''),
       s.temporary, s.active, s.active_pid, coalesce(s.wal_status, ''),
       coalesce(s.confirmed_flush_lsn::text, ''), coalesce(s.restart_lsn::text, ''), w.lsn::text,
       (w.lsn - s.confirmed_flush_lsn)::bigint, (w.lsn - s.restart_lsn)::bigint, s.safe_wal_size,
       coalesce((to_jsonb(s)->>'failover')::boolean, false), coalesce((to_jsonb(s)->>'synced')::boolean, false)
FROM pg_replication_slots s CROSS JOIN w`

// Status reads the slot named name, whichever database it belongs to (slot
// names are unique in the cluster). A missing slot is ErrSlotNotFound.
func Status(ctx context.Context, q Querier, name string) (Slot, error) {
	got, err := query(ctx, q, slotQuery+" WHERE s.slot_name = $1", name)
	if err != nil {
		return Slot{}, fmt.Errorf("read replication slot %s: %w", name, err)
	}
	if len(got) == 0 {
		return Slot{}, fmt.Errorf("%w: %s", ErrSlotNotFound, name)
	}
	return got[0], nil
}

// List reads the logical slots of the connection's database, by name.
func List(ctx context.Context, q Querier) ([]Slot, error) {
	got, err := query(ctx, q, slotQuery+" WHERE s.database = current_database() ORDER BY s.slot_name")
	if err != nil {
		return nil, fmt.Errorf("list replication slots: %w", err)
	}
	return got, nil
}

func query(ctx context.Context, q Querier, sql string, args ...any) ([]Slot, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Slot, error) {
		var (
			s   Slot
			pid *int32
		)
		err := row.Scan(&s.Name, &s.Plugin, &s.Type, &s.Database, &s.Temporary, &s.Active, &pid, &s.WALStatus,
			&s.ConfirmedFlushLSN, &s.RestartLSN, &s.CurrentLSN, &s.LagBytes, &s.RetainedBytes, &s.SafeWALSize,
			&s.Failover, &s.Synced)
		if pid != nil {
			s.ActivePID = *pid
		}
		return s, err
	})
}
