package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	ipg "github.com/eventforge/eventforge/internal/shared/pgconn"
	"github.com/eventforge/eventforge/internal/shared/privileges"
)

// maxConnectBackoff caps the wait between attempts to reach the database at
// start-up, so the worker starts soon after the database is back.
const maxConnectBackoff = 5 * time.Second

// WaitForDatabase returns once db answers (a transaction begins), waiting
// with backoff while it cannot be reached, as the relay does: one WARN line
// when the wait begins, one INFO line when it ends, the attempts between at
// DEBUG. It fails at once on what waiting cannot mend (see IsFatalConnect),
// and returns ctx's error when ctx ends first.
func WaitForDatabase(ctx context.Context, db DB, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return waitForDatabase(ctx, db, newOutage("database", log, time.Now), newBackoff(DefaultRetryBackoff, maxConnectBackoff))
}

func waitForDatabase(ctx context.Context, db DB, o *outage, b backoff) error {
	for n := 1; ; n++ {
		err := ping(ctx, db)
		if err == nil {
			o.ok("start-up")
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("wait for PostgreSQL: %w", ctx.Err())
		}
		if IsFatalConnect(err) {
			return err
		}
		wait := b.delay(n)
		o.fail("start-up", "cannot reach PostgreSQL; waiting", err, "retry_in", wait)
		if !sleep(ctx, wait) {
			return fmt.Errorf("wait for PostgreSQL: %w", errors.Join(ctx.Err(), err))
		}
	}
}

// pingTimeout bounds one attempt to reach the database at start-up.
const pingTimeout = 10 * time.Second

// ping begins and rolls back a transaction within pingTimeout.
func ping(ctx context.Context, db DB) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	return tx.Rollback(ctx)
}

// IsFatalConnect reports a failure to connect that waiting cannot mend: the
// server refused the credentials (SQLSTATE class 28), the database does not
// exist (3D000), or the server's certificate does not verify.
func IsFatalConnect(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pgerrcode.IsInvalidAuthorizationSpecification(pe.Code) || pe.Code == pgerrcode.InvalidCatalogName) {
		return true
	}
	return ipg.CertificateError(err)
}

// ErrSchema is the failure of CheckSchema: the database lacks the worker's
// tables (it is not migrated, or not the right database).
var ErrSchema = errors.New("database schema missing")

// CheckSchema reports ErrSchema when the database behind db lacks what the
// Runner writes (processed_events with its columns): it prepares each inbox
// statement, which runs nothing. Other errors come back as they are.
func CheckSchema(ctx context.Context, db DB) error {
	return inStartupTx(ctx, db, func(ctx context.Context, tx pgx.Tx) error {
		conn := tx.Conn().PgConn()
		for _, sql := range inboxStatements {
			if _, err := conn.Prepare(ctx, "", sql, nil); err != nil {
				if classify(err) == kindSchema {
					return fmt.Errorf("%w: %s: %w; %w", ErrSchema, firstLine(sql), err, errRunMigrate)
				}
				return fmt.Errorf("check inbox statement: %w", err)
			}
		}
		return nil
	})
}

// checkInboxPrivileges reports (a *privileges.MissingError, one line) a
// role that may not write the inbox: without INSERT (and SELECT, which the
// batch insert's RETURNING needs) on processed_events no event can be
// applied, and finding it out on the first event would only make the
// partitions wait.
func checkInboxPrivileges(ctx context.Context, db DB) error {
	return inStartupTx(ctx, db, func(ctx context.Context, tx pgx.Tx) error {
		var role string
		if err := tx.QueryRow(ctx, "SELECT current_user").Scan(&role); err != nil {
			return fmt.Errorf("check privileges: %w", err)
		}
		return privileges.Worker(nil).Check(ctx, tx, role)
	})
}

// inStartupTx runs check in a transaction of db that it rolls back, within
// DefaultApplyTimeout.
func inStartupTx(ctx context.Context, db DB, check func(context.Context, pgx.Tx) error) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultApplyTimeout)
	defer cancel()
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", errBegin, err)
	}
	defer rollback(ctx, tx)
	return check(ctx, tx)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
