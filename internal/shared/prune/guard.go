package prune

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/slots"
)

// ErrUnsafe wraps every refusal of the guard: pruning now could delete a row
// that was never published, or that a recovery would republish.
var ErrUnsafe = errors.New("refusing to prune")

// guard decides the cutoff and proves that every outbox row created before it
// has been published, or refuses. The proof, in this order:
//
//  1. cutoff = now() - OlderThan.
//  2. No transaction of this database that started before the cutoff is still
//     open, and no prepared transaction exists: so every row with
//     created_at < cutoff (created_at defaults to the inserting transaction's
//     start) is committed or rolled back by now.
//  3. p = pg_current_wal_insert_lsn(): every such commit ends below p.
//  4. Every slot in relay_state (the slots EventForge relays stream from)
//     exists, is not lost, and confirms p within RelayWait. A relay confirms
//     a position only once the broker has acknowledged every event of every
//     transaction ending at or below it (docs/design.md#ordered-acks).
//
// A relay_state row whose slot is missing or lost refuses too: the recovery
// republishes from the outbox table, and needs the rows.
func guard(ctx context.Context, db DB, cfg Config) (cutoff time.Time, checked []string, err error) {
	if err := db.QueryRow(ctx, "SELECT clock_timestamp() - make_interval(secs => $1)", cfg.OlderThan.Seconds()).Scan(&cutoff); err != nil {
		return cutoff, nil, fmt.Errorf("compute cutoff: %w", err)
	}
	if err := noOldTransactions(ctx, db, cutoff); err != nil {
		return cutoff, nil, err
	}
	var target string
	if err := db.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&target); err != nil {
		return cutoff, nil, fmt.Errorf("read WAL position: %w", err)
	}
	p, err := pglogrepl.ParseLSN(target)
	if err != nil {
		return cutoff, nil, fmt.Errorf("parse WAL position %q: %w", target, err)
	}
	recs, err := slots.RelayRecords(ctx, db)
	if err != nil {
		return cutoff, nil, err
	}
	if len(recs) == 0 {
		return cutoff, nil, fmt.Errorf("%w: no relay has streamed from this database (relay_state is empty), so nothing shows the outbox rows were published", ErrUnsafe)
	}
	deadline := time.Now().Add(cfg.RelayWait)
	for _, r := range recs {
		if err := waitConfirmed(ctx, db, r, p, deadline, cfg.Poll); err != nil {
			return cutoff, nil, err
		}
		checked = append(checked, r.Slot)
	}
	return cutoff, checked, nil
}

// noOldTransactions refuses while a client transaction of this database that
// started before the cutoff is open, or while the role cannot see them all.
// Walsenders and other server processes insert no outbox rows.
func noOldTransactions(ctx context.Context, db DB, cutoff time.Time) error {
	const clients = "datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
	var (
		pid   int
		since time.Time
	)
	err := db.QueryRow(ctx, "SELECT pid, xact_start FROM pg_stat_activity WHERE "+clients+
		" AND xact_start < $1 ORDER BY xact_start LIMIT 1", cutoff).Scan(&pid, &since)
	switch {
	case err == nil:
		return fmt.Errorf("%w: the transaction of PID %d, open since %s (before the cutoff %s), may still commit outbox rows older than the cutoff that no relay has seen",
			ErrUnsafe, pid, since.UTC().Format(time.RFC3339), cutoff.UTC().Format(time.RFC3339))
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("read open transactions: %w", err)
	}
	var hidden int
	err = db.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE "+clients+" AND query = '<insufficient privilege>'").Scan(&hidden)
	if err != nil {
		return fmt.Errorf("read open transactions: %w", err)
	}
	if hidden > 0 {
		return fmt.Errorf("%w: %d sessions of this database are hidden from this role, so their open transactions cannot be checked: grant it pg_read_all_stats",
			ErrUnsafe, hidden)
	}
	var gid string
	err = db.QueryRow(ctx, "SELECT coalesce((SELECT gid FROM pg_prepared_xacts WHERE database = current_database() ORDER BY prepared LIMIT 1), '')").Scan(&gid)
	if err != nil {
		return fmt.Errorf("read prepared transactions: %w", err)
	}
	if gid != "" {
		return fmt.Errorf("%w: prepared transaction %q may still commit outbox rows of any age: commit or roll it back first", ErrUnsafe, gid)
	}
	return nil
}

// waitConfirmed polls the slot of r until its confirmed_flush_lsn reaches p.
func waitConfirmed(ctx context.Context, db DB, r slots.RelayRecord, p pglogrepl.LSN, deadline time.Time, poll time.Duration) error {
	for {
		s, err := slots.Status(ctx, db, r.Slot)
		if errors.Is(err, slots.ErrSlotNotFound) {
			return fmt.Errorf("%w: replication slot %s is missing although relay_state says the relay confirmed %s on it (last at %s): events after that need `eventforge cdc run --backfill-since`, which reads these rows (see docs/runbook.md)",
				ErrUnsafe, r.Slot, r.ConfirmedLSN, r.UpdatedAt.UTC().Format(time.RFC3339))
		}
		if err != nil {
			return err
		}
		if s.WALStatus == "lost" {
			return fmt.Errorf("%w: replication slot %s is lost (wal_status lost): its recovery republishes from these rows (see docs/runbook.md)", ErrUnsafe, r.Slot)
		}
		confirmed, err := pglogrepl.ParseLSN(s.ConfirmedFlushLSN)
		if err == nil && confirmed >= p {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: replication slot %s has not confirmed WAL position %s yet (confirmed %s, lag %s, active %v): is the relay running and keeping up? (eventforge slot status)",
				ErrUnsafe, r.Slot, p, s.ConfirmedFlushLSN, bytesOrNull(s.LagBytes), s.Active)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

func bytesOrNull(n *int64) string {
	if n == nil {
		return "unknown"
	}
	return fmt.Sprintf("%d bytes", *n)
}
