package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventforge/eventforge/internal/shared/outbox"
)

func TestClassify(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "x"} }
	begin := func(err error) error { return fmt.Errorf("%w: %w", errBegin, err) }
	tests := []struct {
		name string
		err  error
		want kind
	}{
		{"plain error", errors.New("boom"), kindTransient},
		{"handler says transient", Transient(errors.New("later")), kindTransient},
		{"handler says permanent", Permanent(errors.New("never")), kindPermanent},
		{"handler says its dependency is down", fmt.Errorf("call: %w", DependencyUnavailable(errors.New("503"))), kindDependency},
		{"wrapped permanent", fmt.Errorf("handle: %w", Permanent(errors.New("never"))), kindPermanent},
		{"malformed", fmt.Errorf("%w: no event_id", outbox.ErrMalformed), kindPermanent},
		{"serialization failure", pg(pgerrcode.SerializationFailure), kindTransient},
		{"deadlock", fmt.Errorf("apply: %w", pg(pgerrcode.DeadlockDetected)), kindTransient},
		{"lock not available", pg(pgerrcode.LockNotAvailable), kindTransient},
		{"statement timeout", pg(pgerrcode.QueryCanceled), kindTransient},
		{"foreign key", pg(pgerrcode.ForeignKeyViolation), kindTransient},
		{"unique violation", pg(pgerrcode.UniqueViolation), kindRejected},
		{"invalid json", pg(pgerrcode.InvalidTextRepresentation), kindRejected},
		{"syntax error", pg(pgerrcode.SyntaxError), kindRejected},
		// What the database raises about itself to a handler's statement
		// is the event's failure unless the probe finds the database
		// down (Runner.judge): the type alone decides nothing.
		{"insufficient privilege (row-level security) is the event's", pg(pgerrcode.InsufficientPrivilege), kindRejected},
		{"admin shutdown", pg(pgerrcode.AdminShutdown), kindTransient},
		{"too many connections", pg(pgerrcode.TooManyConnections), kindTransient},
		{"disk full", fmt.Errorf("insert: %w", pg(pgerrcode.DiskFull)), kindTransient},
		{"connection exception", pg(pgerrcode.ConnectionFailure), kindTransient},
		{"read only", pg(pgerrcode.ReadOnlySQLTransaction), kindTransient},
		{"connect error", &pgconn.ConnectError{}, kindTransient},
		{"conn closed", fmt.Errorf("begin: %w", pgconn.ErrConnClosed), kindTransient},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), kindTransient},
		{"a handler's net error", fmt.Errorf("call service: %w", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}), kindTransient},
		{"timeout", fmt.Errorf("apply: %w", context.DeadlineExceeded), kindTransient},
		{"pool acquire timeout", begin(context.DeadlineExceeded), kindTransient},
		{"undefined table waits", pg(pgerrcode.UndefinedTable), kindSchema},
		{"undefined column waits", fmt.Errorf("run: %w", pg(pgerrcode.UndefinedColumn)), kindSchema},
		{"invalid schema name waits", pg(pgerrcode.InvalidSchemaName), kindSchema},
		{"undefined function waits", pg(pgerrcode.UndefinedFunction), kindSchema},
		{"undefined object (a type) waits", fmt.Errorf("run: %w", pg(pgerrcode.UndefinedObject)), kindSchema},
		{"missing table beats permanent verdict", Permanent(pg(pgerrcode.UndefinedTable)), kindSchema},
		{"other class", pg(pgerrcode.RaiseException), kindTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.err); got != tt.want {
				t.Errorf("classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
			if got := IsPermanent(tt.err); got != (tt.want == kindPermanent || tt.want == kindRejected) {
				t.Errorf("IsPermanent(%v) = %v", tt.err, got)
			}
		})
	}
}

// TestSameCause: failures of different events share a cause when their
// SQLSTATE, or their innermost error without what names the event, is the
// same.
func TestSameCause(t *testing.T) {
	refused := func(port string) error {
		return fmt.Errorf("handle order.created event 1b4e28ba-2fa1-11d2-883f-0016d3cca427: %w",
			&url.Error{Op: "Post", URL: "http://127.0.0.1:" + port + "/x", Err: &net.OpError{Op: "dial", Net: "tcp",
				Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}})
	}
	tests := []struct {
		name string
		a, b error
		same bool
	}{
		{"same SQLSTATE, other messages", &pgconn.PgError{Code: "42501", Message: `new row violates row-level security policy for table "a"`},
			fmt.Errorf("x: %w", &pgconn.PgError{Code: "42501", Message: "permission denied for table b"}), true},
		{"other SQLSTATE", &pgconn.PgError{Code: "42501"}, &pgconn.PgError{Code: "23505"}, false},
		{"connection refused for two events", refused("8080"), refused("8080"), true},
		{"refused and reset", refused("8080"), fmt.Errorf("y: %w", syscall.ECONNRESET), false},
		{"too few rows of two aggregates", fmt.Errorf("%w: 0 rows for order.created of aggregate %q", errTooFew, "o-1"),
			fmt.Errorf("%w: 0 rows for order.created of aggregate %q", errTooFew, "o-22"), true},
		{"texts naming the event", errors.New(`order "o-1" has 3 lines`), errors.New(`order "o-17" has 12 lines`), true},
		{"different texts", errors.New("quota exceeded"), errors.New("service unavailable"), false},
		{"joined: the first branch", errors.Join(syscall.ECONNREFUSED, errors.New("a")), errors.Join(syscall.ECONNREFUSED, errors.New("b")), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sameCause(tt.a, tt.b); got != tt.same {
				t.Errorf("sameCause = %v (%q, %q), want %v", got, causeOf(tt.a), causeOf(tt.b), tt.same)
			}
		})
	}
}

var errTooFew = errors.New("statement affected too few rows")

// TestUndefinedObject: the log line of a schema wait names the object.
func TestUndefinedObject(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&pgconn.PgError{Code: pgerrcode.UndefinedFunction, Message: "function bump(text) does not exist"}, "function bump(text)"},
		{fmt.Errorf("run: %w", &pgconn.PgError{Code: pgerrcode.UndefinedObject, Message: `type "mood" does not exist`}), `type "mood"`},
		{&pgconn.PgError{Code: pgerrcode.UndefinedTable, Message: `relation "orders" does not exist`}, `relation "orders"`},
		{&pgconn.PgError{Code: pgerrcode.UniqueViolation, Message: "duplicate key"}, ""},
		{errors.New("x"), ""},
	} {
		if got := undefinedObject(tt.err); got != tt.want {
			t.Errorf("undefinedObject(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestClassifiedKeepsChain(t *testing.T) {
	base := errors.New("base")
	for _, err := range []error{Permanent(base), Transient(base)} {
		if !errors.Is(err, base) || err.Error() != "base" {
			t.Errorf("%v: lost the wrapped error", err)
		}
	}
	if Permanent(nil) != nil || Transient(nil) != nil {
		t.Error("nil must stay nil")
	}
}
