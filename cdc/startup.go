package cdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"

	ipg "github.com/eventforge/eventforge/internal/pgconn"
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
