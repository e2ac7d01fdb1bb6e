package sqlhandler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// preparedKey keys the set of statement names prepared on a connection in
// its CustomData, so each connection parses and plans a statement once
// instead of once per event.
const preparedKey = "eventforge/sqlhandler.prepared"

// statementName names the prepared statement of sql; kind keeps a single and
// a batch statement with the same text apart (their parameter types differ).
func statementName(kind, sql string) string {
	sum := sha256.Sum256([]byte(sql))
	return "eventforge_" + kind + "_" + hex.EncodeToString(sum[:12])
}

// prepare makes sure the statement name exists on conn. A session-level
// prepared statement outlives the transaction it was made in, even a rolled
// back one.
func prepare(ctx context.Context, conn *pgconn.PgConn, name, sql string, oids []uint32) error {
	done, _ := conn.CustomData()[preparedKey].(map[string]bool)
	if done == nil {
		done = map[string]bool{}
		conn.CustomData()[preparedKey] = done
	}
	if done[name] {
		return nil
	}
	// A Prepare whose Describe failed still created the name; closing
	// first (a no-op when it is absent) lets the next attempt succeed.
	if err := conn.Deallocate(ctx, name); err != nil {
		return fmt.Errorf("close prepared statement: %w", err)
	}
	if _, err := conn.Prepare(ctx, name, sql, oids); err != nil {
		return fmt.Errorf("prepare statement: %w", err)
	}
	done[name] = true
	return nil
}

// forgetPrepared drops conn's record of prepared statements when err says
// one is gone (DEALLOCATE ALL, DISCARD ALL), so they are prepared again.
func forgetPrepared(conn *pgconn.PgConn, err error) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == pgerrcode.InvalidSQLStatementName {
		delete(conn.CustomData(), preparedKey)
	}
}
