package cdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Advisory lock of a slot's session, so that only one relay prepares
// (creates, backfills) and streams a slot at a time. A slot is only
// "active" once a walsender streams from it, which is after the backfill.
const slotLockClass = 0x45564647 // "EVFG"

// lockSlot takes the session's slot lock on conn; it is released when conn
// closes. It returns a *standbyError when another relay holds it.
func lockSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1, hashtext($2))", slotLockClass, slot).Scan(&ok); err != nil {
		return fmt.Errorf("lock slot %s: %w", slot, err)
	}
	if ok {
		return nil
	}
	var pid int32
	err := conn.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND classid = $1::int8::oid AND objid = (hashtext($2)::int8 & 4294967295)::oid AND objsubid = 2`, slotLockClass, slot).Scan(&pid)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("read holder of slot lock %s: %w", slot, err)
	}
	return &standbyError{pid: pid}
}
