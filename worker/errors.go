package worker

import (
	"errors"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// ErrSkip is returned by a Handler that leaves an event without effect on
// purpose: the transaction commits with the event's inbox row and the event
// counts as skipped. Like fs.SkipDir it is a signal, not a failure.
var ErrSkip = errors.New("skip event")

// kind is how the Runner treats a failed apply once the database probe
// found the database working (see Runner.judge): the type of an error alone
// never makes a partition wait for the database.
type kind int

const (
	// kindTransient is retried in place, within the attempt and time
	// budget; then it is dead-lettered unless the events behind it fail
	// the same way (see partitionWorker.alone). Unclassified errors,
	// network errors of a handler included, are transient.
	kindTransient kind = iota
	// kindPermanent is a handler's Permanent verdict or a malformed record:
	// dead-lettered at once.
	kindPermanent
	// kindRejected is a PostgreSQL error that retrying the same event
	// cannot change (bad data, a broken constraint, a statement or a
	// row-level-security policy refusing the event): no retries, but
	// dead-lettered only when the events behind it do not fail the same
	// way, which would make it a broken deployment rather than a bad event.
	kindRejected
	// kindUnavailable is a database the probe found unreachable,
	// read-only, or refusing the worker's inbox insert. The event is not at
	// fault: the partition waits without spending attempts, since
	// dead-lettering would drain the topic.
	kindUnavailable
	// kindSchema is a missing schema object (a table, column, schema,
	// function, type …): a database not migrated yet, or handler SQL newer
	// than the schema during a rolling deploy. Waited out like
	// kindUnavailable.
	kindSchema
	// kindDependency is a handler's DependencyUnavailable verdict: a
	// service it needs is down. Waited out like kindUnavailable.
	kindDependency
	// kindRepeated is never a classification: it is the outage the Runner
	// finds when the events behind a failing one fail the same way while
	// the database works (a downstream service down, a privilege revoked).
	kindRepeated
)

func (k kind) String() string {
	switch k {
	case kindPermanent:
		return "permanent"
	case kindRejected:
		return "rejected"
	case kindUnavailable:
		return "database unavailable"
	case kindSchema:
		return "database schema missing"
	case kindDependency:
		return "dependency unavailable"
	case kindRepeated:
		return "consecutive events fail the same way"
	default:
		return "transient"
	}
}

// waits reports whether the partition waits, without spending attempts, on
// a failure of kind k.
func (k kind) waits() bool {
	return k == kindUnavailable || k == kindSchema || k == kindDependency || k == kindRepeated
}

// classifiedError carries a handler's verdict on its own failure.
type classifiedError struct {
	err  error
	kind kind
}

func (e *classifiedError) Error() string { return e.err.Error() }
func (e *classifiedError) Unwrap() error { return e.err }

// Permanent marks err as a failure that retrying cannot fix: the event goes
// to the dead-letter topic at once, without further attempts. Nil stays
// nil.
func Permanent(err error) error { return mark(err, kindPermanent) }

// Transient marks err as a failure worth retrying in place (the default for
// errors the Runner cannot classify): retried within the attempt budget,
// then dead-lettered unless the events behind it fail the same way. Nil
// stays nil.
func Transient(err error) error { return mark(err, kindTransient) }

// DependencyUnavailable marks err as the failure of something the handler
// needs and the event does not cause (an HTTP service down, a queue
// refusing connections): the partition waits with backoff, spending no
// attempts, until the handler stops saying so, and nothing is
// dead-lettered meanwhile. Nil stays nil.
func DependencyUnavailable(err error) error { return mark(err, kindDependency) }

func mark(err error, k kind) error {
	if err == nil {
		return nil
	}
	return &classifiedError{err: err, kind: k}
}

// IsPermanent reports whether the Runner dead-letters err without retrying
// it: a handler's Permanent verdict, a malformed record, or a PostgreSQL
// error that a retry cannot change (bad data, bad SQL, a broken constraint,
// a refused privilege).
func IsPermanent(err error) bool {
	k := classify(err)
	return k == kindPermanent || k == kindRejected
}

// classify decides how to treat err, a failed apply, when the database
// itself works. A missing schema object wins over a handler's verdict,
// since the event did not cause it.
func classify(err error) kind {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && isUndefinedObject(pe.Code) {
		return kindSchema
	}
	var c *classifiedError
	if errors.As(err, &c) {
		return c.kind
	}
	if errors.Is(err, outbox.ErrMalformed) {
		return kindPermanent
	}
	if pe != nil {
		return classifySQLState(pe.Code)
	}
	return kindTransient
}

// isUndefinedObject reports the SQLSTATEs of a schema object that does not
// exist: the same situation whether it is a table or a function.
func isUndefinedObject(code string) bool {
	switch code {
	case pgerrcode.UndefinedTable, pgerrcode.UndefinedColumn, pgerrcode.InvalidSchemaName,
		pgerrcode.UndefinedFunction, pgerrcode.UndefinedObject:
		return true
	}
	return false
}

// classifySQLState maps the SQLSTATE of a statement that failed while the
// database works to a kind; see PostgreSQL's Appendix A.
func classifySQLState(code string) kind {
	switch code {
	case pgerrcode.ForeignKeyViolation: // the referenced row may arrive later
		return kindTransient
	}
	switch {
	case pgerrcode.IsDataException(code), pgerrcode.IsIntegrityConstraintViolation(code),
		pgerrcode.IsSyntaxErrororAccessRuleViolation(code): // 42501 too: a row-level-security policy refuses this row
		return kindRejected
	}
	// Serialization failures, deadlocks, lock and statement timeouts, and
	// what a handler's own statement raised about connections (08) or
	// resources (53) while the probe found the database working.
	return kindTransient
}

// undefinedObject names the missing object of a schema error, e.g.
// `function bump(text)` or `relation "orders"`, or returns "".
func undefinedObject(err error) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || !isUndefinedObject(pe.Code) {
		return ""
	}
	return strings.TrimSuffix(pe.Message, " does not exist")
}

// errBegin marks a failure to begin a transaction: to acquire a connection,
// connect or send BEGIN.
var errBegin = errors.New("begin transaction")
