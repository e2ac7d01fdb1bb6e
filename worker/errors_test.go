package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventforge/eventforge/internal/outbox"
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
		{"wrapped permanent", fmt.Errorf("handle: %w", Permanent(errors.New("never"))), kindPermanent},
		{"malformed", fmt.Errorf("%w: no event_id", outbox.ErrMalformed), kindPermanent},
		{"serialization failure", pg(pgerrcode.SerializationFailure), kindTransient},
		{"deadlock", fmt.Errorf("apply: %w", pg(pgerrcode.DeadlockDetected)), kindTransient},
		{"lock not available", pg(pgerrcode.LockNotAvailable), kindTransient},
		{"statement timeout", pg(pgerrcode.QueryCanceled), kindTransient},
		{"foreign key", pg(pgerrcode.ForeignKeyViolation), kindTransient},
		{"unique violation", pg(pgerrcode.UniqueViolation), kindPermanent},
		{"invalid json", pg(pgerrcode.InvalidTextRepresentation), kindPermanent},
		{"syntax error", pg(pgerrcode.SyntaxError), kindPermanent},
		{"insufficient privilege waits for a grant", pg(pgerrcode.InsufficientPrivilege), kindUnavailable},
		{"admin shutdown", pg(pgerrcode.AdminShutdown), kindUnavailable},
		{"crash shutdown", pg(pgerrcode.CrashShutdown), kindUnavailable},
		{"starting up", pg(pgerrcode.CannotConnectNow), kindUnavailable},
		{"too many connections", pg(pgerrcode.TooManyConnections), kindUnavailable},
		{"disk full", fmt.Errorf("insert: %w", pg(pgerrcode.DiskFull)), kindUnavailable},
		{"out of memory", pg(pgerrcode.OutOfMemory), kindUnavailable},
		{"I/O error", pg(pgerrcode.IOError), kindUnavailable},
		{"connection exception", pg(pgerrcode.ConnectionFailure), kindUnavailable},
		{"read only (failover)", pg(pgerrcode.ReadOnlySQLTransaction), kindUnavailable},
		{"undefined table waits", pg(pgerrcode.UndefinedTable), kindSchema},
		{"undefined column waits", fmt.Errorf("run: %w", pg(pgerrcode.UndefinedColumn)), kindSchema},
		{"invalid schema name waits", pg(pgerrcode.InvalidSchemaName), kindSchema},
		{"missing table beats permanent verdict", Permanent(pg(pgerrcode.UndefinedTable)), kindSchema},
		{"other class", pg(pgerrcode.RaiseException), kindTransient},
		{"connect error", &pgconn.ConnectError{}, kindUnavailable},
		{"connect error with a password refused", fmt.Errorf("x: %w", &pgconn.ConnectError{}), kindUnavailable},
		{"conn closed", fmt.Errorf("begin: %w", pgconn.ErrConnClosed), kindUnavailable},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), kindUnavailable},
		{"net error", &net.OpError{Op: "dial", Err: errors.New("refused")}, kindUnavailable},
		{"lost connection beats permanent verdict", Permanent(io.ErrUnexpectedEOF), kindUnavailable},
		{"pool acquire timeout", begin(context.DeadlineExceeded), kindUnavailable},
		{"connect timeout", begin(&net.OpError{Op: "dial", Err: timeoutErr{}}), kindUnavailable},
		{"begin timeout in a connect error", begin(&pgconn.ConnectError{}), kindUnavailable},
		{"timeout inside the transaction is probed", fmt.Errorf("apply: %w", context.DeadlineExceeded), kindTimeout},
		{"read timeout inside the transaction is probed", &net.OpError{Op: "read", Err: timeoutErr{}}, kindTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classify(tt.err); got != tt.want {
				t.Errorf("classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
			if got := IsPermanent(tt.err); got != (tt.want == kindPermanent) {
				t.Errorf("IsPermanent(%v) = %v", tt.err, got)
			}
		})
	}
}

// timeoutErr is a net.Error that timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

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
