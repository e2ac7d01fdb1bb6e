package pgoutput

import (
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// Sentinel errors; every error Decode returns wraps one of them.
var (
	// ErrUnknownRelation: a row change names a relation id that no Relation
	// message has described since the last Reset.
	ErrUnknownRelation = errors.New("unknown relation")
	// ErrBadRow: an outbox INSERT lacks a required column or value, or holds
	// one that cannot be an event. Errors carry a *RowError.
	ErrBadRow = errors.New("bad outbox row")
	// ErrUnsupported: a message the decoder does not handle (streamed or
	// two-phase transactions, unknown message types, a binary value of a type
	// without a binary decoding: ErrBinaryType).
	ErrUnsupported = errors.New("unsupported pgoutput message")
	// ErrMalformed: a message that is truncated, has trailing bytes, or arrives
	// out of protocol order (Begin inside a transaction, Commit without Begin).
	ErrMalformed = errors.New("malformed pgoutput message")
)

// RowError describes an outbox row that cannot become an event. It wraps
// ErrBadRow.
type RowError struct {
	Relation string    // schema.table
	Column   string    // the offending column
	EventID  uuid.UUID // the row's event_id when it could be read, else uuid.Nil
	// AggregateType is the row's aggregate_type when it could be read, so
	// the relay can name the topic the event was meant for.
	AggregateType string
	Reason        string
}

func (e *RowError) Error() string {
	if e.EventID != uuid.Nil {
		return fmt.Sprintf("%s: %s event %s: column %s: %s", ErrBadRow, e.Relation, e.EventID, e.Column, e.Reason)
	}
	return fmt.Sprintf("%s: %s: column %s: %s", ErrBadRow, e.Relation, e.Column, e.Reason)
}

// Unwrap makes errors.Is(err, ErrBadRow) hold.
func (e *RowError) Unwrap() error { return ErrBadRow }

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}
