package cdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"

	ipg "github.com/eventforge/eventforge/internal/shared/pgconn"
)

// ErrWalLevel stops the relay: logical decoding needs wal_level = logical,
// which only a server restart changes.
var ErrWalLevel = errors.New("wal_level is not logical")

// permanentConnectError reports whether a failed connection attempt cannot
// heal by retrying, so the relay stops with it instead of retrying forever
// while /healthz says 200: bad credentials or an unknown role
// (class 28), an unknown database, a role without the privilege to connect
// or replicate, a server certificate that does not verify. Everything else
// (connection refused, a server starting or shutting down, too many
// connections, a timeout) is transient.
func permanentConnectError(err error) bool {
	code, _ := pgErrorCode(err)
	switch code {
	case pgerrcode.InvalidAuthorizationSpecification, // 28000: no such role, no pg_hba entry
		pgerrcode.InvalidPassword,       // 28P01
		pgerrcode.InvalidCatalogName,    // 3D000: no such database
		pgerrcode.InsufficientPrivilege: // 42501: no CONNECT or REPLICATION
		return true
	}
	return ipg.CertificateError(err)
}

// checkWalLevel stops the relay on a server that cannot decode its WAL
// logically: creating or reading the slot would fail on every retry.
func checkWalLevel(ctx context.Context, conn *pgx.Conn) error {
	var level string
	if err := conn.QueryRow(ctx, "SHOW wal_level").Scan(&level); err != nil {
		return fmt.Errorf("read wal_level: %w", err)
	}
	if level != "logical" {
		return fatalf(ErrWalLevel, "wal_level is %s, logical decoding needs logical: set wal_level = logical in postgresql.conf and restart PostgreSQL", level)
	}
	return nil
}

// ErrBackfillPrivilege stops a relay asked to backfill a slot it creates
// whose role may not read the outbox table: the slot would be created and
// the backfill then refused.
var ErrBackfillPrivilege = errors.New("no SELECT on the outbox table for the backfill")

// backfillPrivilegeSQL reads the role and whether it may read the outbox
// table ($1 schema, $2 table).
const backfillPrivilegeSQL = `SELECT current_user::text, has_table_privilege(format('%I.%I', $1::text, $2::text), 'SELECT')`

// checkBackfillPrivilege stops the relay, before it creates the slot s is
// missing, when a backfill is asked for and its role lacks SELECT on the
// outbox table. A slot that exists makes the backfill flags moot, and
// nothing is checked then.
func (r *Relay) checkBackfillPrivilege(ctx context.Context, conn *pgx.Conn, s slotState) error {
	if _, asked := r.cfg.backfillRange(); !asked || s.exists {
		return nil
	}
	schema, table, err := r.cfg.outboxTable()
	if err != nil {
		return err
	}
	var role string
	var ok bool
	if err := conn.QueryRow(ctx, backfillPrivilegeSQL, schema, table).Scan(&role, &ok); err != nil {
		return fmt.Errorf("check SELECT on the outbox table: %w", err)
	}
	if !ok {
		return fatalf(ErrBackfillPrivilege, "role %q lacks SELECT on %s.%s: the backfill (--backfill-since, --backfill-all) reads the outbox rows of the new slot's snapshot; GRANT SELECT ON %s.%s TO %s, or start without a backfill",
			role, schema, table, schema, table, role)
	}
	return nil
}
