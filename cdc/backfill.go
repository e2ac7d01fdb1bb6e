package cdc

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/eventforge/eventforge/cdc/outboxscan"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A new slot is created with an exported snapshot: exactly the transactions
// committed before the slot's consistent point are visible in it, and
// exactly the later ones are streamed from the slot. Publishing the rows the
// snapshot sees, waiting for their acks, and only then streaming therefore
// publishes every row once, with each key's older rows before its newer ones.

// ErrBackfillUnfinished stops a relay started without a backfill on a slot
// whose backfill an earlier start did not finish: streaming would skip the
// rows it was to publish.
var ErrBackfillUnfinished = errors.New("the backfill of the slot did not finish")

// backfillPending is the relay_state position that marks a slot whose
// backfill has not been acknowledged yet: written before the slot is
// created, replaced by the consistent point once the backfill is acked. A
// relay that finds it recreates the slot and backfills again (nothing was
// streamed from the slot yet), so a crash mid-backfill loses nothing.
const backfillPending = pglogrepl.LSN(0)

// backfillRange is the rows a new slot publishes from its snapshot, and
// whether any were asked for.
func (c *Config) backfillRange() (outboxscan.Range, bool) {
	switch {
	case c.BackfillAll:
		return outboxscan.Range{}, true
	case !c.BackfillSince.IsZero():
		return outboxscan.Range{Since: c.BackfillSince}, true
	}
	return outboxscan.Range{}, false
}

// snapshotName is the shape of a name CREATE_REPLICATION_SLOT exports
// (e.g. 00000003-00000002-1); SET TRANSACTION SNAPSHOT takes no parameter.
var snapshotName = regexp.MustCompile(`^[0-9A-Fa-f-]{1,64}$`)

// snapshot is a read-only transaction that sees what a new slot's exported
// snapshot saw.
type snapshot struct {
	conn *pgx.Conn
	tx   pgx.Tx
}

// importSnapshot opens a connection and imports the exported snapshot name.
// It must run before the replication connection that exported it issues
// another command: the export ends with that command.
func importSnapshot(ctx context.Context, url, name string) (*snapshot, error) {
	if !snapshotName.MatchString(name) {
		return nil, fmt.Errorf("unexpected snapshot name %q", name)
	}
	conn, err := connectSQL(ctx, url)
	if err != nil {
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err == nil {
		_, err = tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+name+"'")
	}
	if err != nil {
		closeConn(ctx, conn.Close)
		return nil, fmt.Errorf("import snapshot %s of the new slot: %w", name, err)
	}
	return &snapshot{conn: conn, tx: tx}, nil
}

func (s *snapshot) close(ctx context.Context) {
	_ = s.tx.Rollback(context.WithoutCancel(ctx))
	closeConn(ctx, s.conn.Close)
}

// createSlot creates the slot with an exported snapshot and, before
// returning its consistent point (where streaming starts), publishes the
// rows the configuration asks for from that snapshot and waits for their
// acks; without a backfill it warns about the rows the slot will never see.
// With failover the slot is a failover slot (PostgreSQL 17), on every path
// that creates it: first run, recovery after slot drop, a repeated backfill.
func (r *Relay) createSlot(ctx context.Context, sqlConn *pgx.Conn, repl *pgconn.PgConn, failover bool) (pglogrepl.LSN, error) {
	slot := r.cfg.Slot
	rng, backfill := r.cfg.backfillRange()
	if backfill {
		// Before the slot exists: a crash between the two must not leave a
		// slot that a restart would stream from without the backfill.
		if err := writeState(ctx, sqlConn, slot, backfillPending); err != nil {
			return 0, err
		}
	}
	res, err := pglogrepl.ParseCreateReplicationSlot(repl.Exec(ctx, createSlotCommand(slot, failover)))
	if err != nil {
		return 0, fmt.Errorf("create replication slot %s: %w", slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return 0, fmt.Errorf("parse consistent point of slot %s: %w", slot, err)
	}
	snap, err := importSnapshot(ctx, r.cfg.PGURL, res.SnapshotName)
	if err != nil {
		return 0, err
	}
	defer snap.close(ctx)
	if backfill {
		if err := r.backfill(ctx, snap, sqlConn, rng, lsn); err != nil {
			return 0, err
		}
	} else {
		r.warnUnpublished(ctx, snap)
	}
	// From now on a missing slot means events may have been skipped.
	if err := writeState(ctx, sqlConn, slot, lsn); err != nil {
		return 0, err
	}
	return lsn, nil
}

func sinceText(rng outboxscan.Range) string {
	if rng.Since.IsZero() {
		return "all"
	}
	return rng.Since.UTC().Format(time.RFC3339Nano)
}

// warnUnpublished tells the operator about outbox rows committed before a
// slot created without a backfill: the slot will never deliver them.
func (r *Relay) warnUnpublished(ctx context.Context, snap *snapshot) {
	n, oldest, err := outboxscan.Count(ctx, snap.tx, r.catalog)
	if err != nil {
		r.log.Warn("new replication slot: could not count the outbox rows committed before it, which it will not deliver", "err", err)
		return
	}
	if n == 0 {
		return
	}
	r.log.Warn(fmt.Sprintf("new replication slot %s: %d outbox rows committed before it (oldest created_at %s) will not be published; "+
		"to publish them in order before the stream: stop the relay, run eventforge slot drop --slot %s --yes, and start eventforge cdc run with --backfill-since TIME or --backfill-all",
		r.cfg.Slot, n, oldest.UTC().Format(time.RFC3339), r.cfg.Slot), "unpublished_rows", n)
}

// redoBackfill handles a slot whose backfill an earlier start began but
// never finished (relay_state holds backfillPending): nothing was streamed
// from the slot, so it is dropped and created again with a new snapshot.
func (r *Relay) redoBackfill(ctx context.Context, sqlConn *pgx.Conn, repl *pgconn.PgConn, s slotState, failover bool) (pglogrepl.LSN, error) {
	slot := r.cfg.Slot
	if _, asked := r.cfg.backfillRange(); !asked {
		return 0, fatalf(ErrBackfillUnfinished, "the backfill of replication slot %s did not finish (relay_state holds %s): start eventforge cdc run with --backfill-since or --backfill-all again, or give it up with eventforge slot drop --slot %s --yes",
			slot, backfillPending, slot)
	}
	if s.exists {
		if _, err := sqlConn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err != nil {
			return 0, fmt.Errorf("drop replication slot %s of an unfinished backfill: %w", slot, err)
		}
	}
	r.log.Warn("the backfill of an earlier start did not finish: creating the slot again and repeating the backfill")
	return r.createSlot(ctx, sqlConn, repl, failover)
}
