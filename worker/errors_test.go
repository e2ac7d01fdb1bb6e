package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eventforge/eventforge/internal/outbox"
)

func TestClassify(t *testing.T) {
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "x"} }
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
		{"serialization failure", pg("40001"), kindTransient},
		{"deadlock", fmt.Errorf("apply: %w", pg("40P01")), kindTransient},
		{"lock not available", pg("55P03"), kindTransient},
		{"statement timeout", pg("57014"), kindTransient},
		{"foreign key", pg("23503"), kindTransient},
		{"unique violation", pg("23505"), kindPermanent},
		{"invalid json", pg("22P02"), kindPermanent},
		{"undefined table", pg("42P01"), kindPermanent},
		{"insufficient privilege waits for a grant", pg("42501"), kindUnavailable},
		{"admin shutdown", pg("57P01"), kindUnavailable},
		{"starting up", pg("57P03"), kindUnavailable},
		{"too many connections", pg("53300"), kindUnavailable},
		{"connection exception", pg("08006"), kindUnavailable},
		{"read only (failover)", pg("25006"), kindUnavailable},
		{"other class", pg("P0001"), kindTransient},
		{"connect error", &pgconn.ConnectError{}, kindUnavailable},
		{"conn closed", fmt.Errorf("begin: %w", pgconn.ErrConnClosed), kindUnavailable},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), kindUnavailable},
		{"net error", &net.OpError{Op: "dial", Err: errors.New("refused")}, kindUnavailable},
		{"lost connection beats permanent verdict", Permanent(io.ErrUnexpectedEOF), kindUnavailable},
		{"our deadline", fmt.Errorf("apply: %w", context.DeadlineExceeded), kindTransient},
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
