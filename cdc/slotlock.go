package cdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Advisory lock of a slot's session, so that only one relay prepares a slot
// (creates it, backfills) at a time: a slot is only "active" once a
// walsender streams from it, which is after the backfill. Once streaming,
// the active slot is the lock, and the session lets the advisory lock go.
const slotLockClass = 0x45564647 // "EVFG"

// lockSlot takes the session's slot lock on conn; it is released by
// unlockSlot or when conn closes. It returns a *standbyError when another
// relay holds it. TCP keepalives on conn let the server end the session of
// a relay that vanished (and so free the lock) within seconds, not hours.
func lockSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	var ok bool
	err := conn.QueryRow(ctx, `SELECT set_config('tcp_keepalives_idle', '10', false), set_config('tcp_keepalives_interval', '5', false),
		set_config('tcp_keepalives_count', '3', false), pg_try_advisory_lock($1, hashtext($2))`, slotLockClass, slot).Scan(nil, nil, nil, &ok)
	if err != nil {
		return fmt.Errorf("lock slot %s: %w", slot, err)
	}
	if ok {
		return nil
	}
	var pid int32
	err = conn.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND classid = $1::int8::oid AND objid = (hashtext($2)::int8 & 4294967295)::oid AND objsubid = 2`, slotLockClass, slot).Scan(&pid)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("read holder of slot lock %s: %w", slot, err)
	}
	return &standbyError{pid: pid}
}

// unlockSlot lets the slot lock go once the slot is active: a failure only
// keeps it until the session's connection closes.
func unlockSlot(ctx context.Context, conn *pgx.Conn, slot string) {
	_, _ = conn.Exec(ctx, "SELECT pg_advisory_unlock($1, hashtext($2))", slotLockClass, slot)
}
