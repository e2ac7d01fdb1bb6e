package worker

import (
	"context"
	"errors"
	"io"
	"net"

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
	// kindUnavailable means the database cannot be reached. The event is
	// not at fault, so it is retried until the database answers again
	// without spending the attempt budget: dead-lettering during an outage
	// would drain the topic into the dead-letter topic.
	kindUnavailable
)

func (k kind) String() string {
	switch k {
	case kindPermanent:
		return "permanent"
	case kindUnavailable:
		return "database unavailable"
	default:
		return "transient"
	}
}

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

// classify decides how to treat err. A lost database connection wins over a
// handler's verdict, since the event did not cause it.
func classify(err error) kind {
	if isUnavailable(err) {
		return kindUnavailable
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
	case "40001", "40P01", // serialization failure, deadlock detected
		"55P03", "57014", // lock not available, query canceled (timeouts)
		"23503": // foreign key: the referenced row may arrive later
		return kindTransient
	case "57P01", "57P02", "57P03", // admin shutdown, crash shutdown, cannot connect now
		"53300", // too many connections
		"25006", // read-only transaction: a standby answered during a failover
		"42501": // insufficient privilege: an operator must grant it; the event is not at fault
		return kindUnavailable
	}
	if len(code) < 2 {
		return kindTransient
	}
	switch code[:2] {
	case "08": // connection exception
		return kindUnavailable
	case "22", "23", "42": // data exception, integrity violation, syntax or access rule
		return kindPermanent
	}
	return kindTransient
}

// isUnavailable reports a failure to reach the database or a connection lost
// mid-transaction. A timeout of our own apply deadline is not one: the
// database answered too slowly for this event, which counts as an attempt.
func isUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return classifySQLState(pe.Code) == kindUnavailable
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) ||
		errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
