package worker

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventforge/eventforge/internal/outbox"
)

// ErrSkip is returned by a Handler that leaves an event without effect on
// purpose: the transaction commits with the event's inbox row and the event
// counts as skipped. Like fs.SkipDir it is a signal, not a failure.
var ErrSkip = errors.New("skip event")

// kind is how the Runner treats a failed apply.
type kind int

const (
	// kindTransient is retried in place, within the attempt and time
	// budget, then dead-lettered. Unclassified errors are transient.
	kindTransient kind = iota
	// kindPermanent is dead-lettered at once: retrying cannot fix it.
	kindPermanent
	// kindUnavailable means the database cannot be reached or cannot work
	// (shut down, out of disk, memory or connections). The event is not at
	// fault, so it is retried until the database answers again without
	// spending the attempt budget: dead-lettering during an outage would
	// drain the topic into the dead-letter topic.
	kindUnavailable
	// kindSchema means a schema object is missing (a table, a column, a
	// schema): the database is not migrated, or not the right one. Like
	// kindUnavailable it is waited out, never dead-lettered, since every
	// event would fail the same way.
	kindSchema
	// kindTimeout is a statement that ran out of time inside a transaction
	// that had begun: a slow event (transient) or a database that stopped
	// answering (unavailable). A probe of the database tells which.
	kindTimeout
)

func (k kind) String() string {
	switch k {
	case kindPermanent:
		return "permanent"
	case kindUnavailable:
		return "database unavailable"
	case kindSchema:
		return "database schema missing"
	case kindTimeout:
		return "timeout"
	default:
		return "transient"
	}
}

// waits reports whether the partition waits for the database, without
// spending attempts, on a failure of kind k.
func (k kind) waits() bool { return k == kindUnavailable || k == kindSchema }

// classifiedError carries a handler's verdict on its own failure.
type classifiedError struct {
	err  error
	kind kind
}

func (e *classifiedError) Error() string { return e.err.Error() }
func (e *classifiedError) Unwrap() error { return e.err }

// Permanent marks err as a failure that retrying cannot fix: the event goes
// to the dead-letter topic without further attempts. Nil stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &classifiedError{err: err, kind: kindPermanent}
}

// Transient marks err as a failure worth retrying in place (the default for
// errors the Runner cannot classify). Nil stays nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &classifiedError{err: err, kind: kindTransient}
}

// IsPermanent reports whether the Runner dead-letters err at once: a
// handler's Permanent verdict, a malformed record, or a PostgreSQL error
// that a retry cannot change (bad data, bad SQL, a broken constraint).
func IsPermanent(err error) bool { return classify(err) == kindPermanent }

// classify decides how to treat err. A database that cannot be reached or
// lacks its schema wins over a handler's verdict, since the event did not
// cause it.
func classify(err error) kind {
	if k := classifyDatabase(err); k != kindTransient {
		return k
	}
	var c *classifiedError
	if errors.As(err, &c) {
		return c.kind
	}
	if errors.Is(err, outbox.ErrMalformed) {
		return kindPermanent
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return classifySQLState(pe.Code)
	}
	return kindTransient
}

// classifySQLState maps a SQLSTATE to a kind; see PostgreSQL's Appendix A.
func classifySQLState(code string) kind {
	switch code {
	case pgerrcode.SerializationFailure, pgerrcode.DeadlockDetected,
		pgerrcode.LockNotAvailable, pgerrcode.QueryCanceled, // timeouts
		pgerrcode.ForeignKeyViolation: // the referenced row may arrive later
		return kindTransient
	case pgerrcode.AdminShutdown, pgerrcode.CrashShutdown, pgerrcode.CannotConnectNow,
		pgerrcode.IOError,
		pgerrcode.ReadOnlySQLTransaction, // a standby answered during a failover
		pgerrcode.InsufficientPrivilege:  // an operator must grant it; the event is not at fault
		return kindUnavailable
	case pgerrcode.UndefinedTable, pgerrcode.UndefinedColumn, pgerrcode.InvalidSchemaName:
		return kindSchema
	}
	switch {
	case pgerrcode.IsConnectionException(code), // 08
		pgerrcode.IsInsufficientResources(code): // 53: disk full, out of memory, too many connections
		return kindUnavailable
	case pgerrcode.IsDataException(code), pgerrcode.IsIntegrityConstraintViolation(code),
		pgerrcode.IsSyntaxErrororAccessRuleViolation(code):
		return kindPermanent
	}
	return kindTransient
}

// classifyDatabase tells the failures of the database itself from the
// others (kindTransient): a failure to reach it or a connection lost
// mid-transaction (kindUnavailable), a missing schema object (kindSchema),
// and a timeout (kindTimeout, or kindUnavailable when the transaction could
// not even begin: the database, not the event, is slow).
func classifyDatabase(err error) kind {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || errors.Is(err, errBegin) && isTimeout(err) {
		// Whatever the server said (a password changed, a database
		// renamed): no event can be applied until an operator acts.
		return kindUnavailable
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if k := classifySQLState(pe.Code); k.waits() {
			return k
		}
		return kindTransient
	}
	if isTimeout(err) {
		return kindTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return kindUnavailable
	}
	return kindTransient
}

// isTimeout reports a deadline that passed: ours (ApplyTimeout, a pool
// acquire) or the network's.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// errBegin marks a failure to begin a transaction: to acquire a connection,
// connect or send BEGIN. The event has not run yet, so whatever went wrong
// is the database's.
var errBegin = errors.New("begin transaction")
