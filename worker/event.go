package worker

import (
	"context"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/worker/dlq"
)

// Event is one consumed outbox event: the decoded record plus where it was
// read from.
type Event struct {
	outbox.Event
	Topic     string
	Partition int32
	Offset    int64
	// Replayed reports a record that `dlq replay` republished (it carries
	// the dlq.HeaderReplay header, which is not among Headers): the inbox
	// applies it although the event was dead-lettered before.
	Replayed bool
}

// Handler applies one event. Apply runs inside the inbox transaction it is
// given, after the event's processed_events row was inserted: everything it
// writes through tx commits together with that row, or not at all. It must
// not commit or roll back tx, and must not keep it after returning.
//
// Return nil to commit, ErrSkip to commit without effect (counted as
// skipped), Permanent(err) to dead-letter the event at once,
// DependencyUnavailable(err) when a service the handler needs is down (the
// partition waits without spending attempts), Transient(err) or any other
// error to roll back and retry (see Config for the bounds). An event whose
// retries are spent is dead-lettered only when the events behind it do not
// fail the same way. Apply may run for an event whose transaction is then
// rolled back (a failed attempt, or a trial that tells an outage from a
// poison event), so calls it makes outside tx must bear repeating.
type Handler interface {
	Apply(ctx context.Context, tx pgx.Tx, ev Event) error
}

// BatchHandler is a Handler that can also apply a run of events at once,
// for instance by pipelining their statements in one round trip. In batch
// mode the Runner calls ApplyBatch instead of Apply for the events of a run
// that are new to the inbox, in offset order, inside the batch transaction.
// It must have the effect of calling Apply for each event in order, and
// reports per event whether it was skipped (Apply's ErrSkip). Any error
// fails the whole run, which is then redone one event at a time with Apply.
type BatchHandler interface {
	Handler
	ApplyBatch(ctx context.Context, tx pgx.Tx, evs []Event) (skipped []bool, err error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, tx pgx.Tx, ev Event) error

// Apply calls f.
func (f HandlerFunc) Apply(ctx context.Context, tx pgx.Tx, ev Event) error { return f(ctx, tx, ev) }

// decode turns a consumed record into an Event; errors wrap
// outbox.ErrMalformed.
func decode(m *sarama.ConsumerMessage) (Event, error) {
	e, err := outbox.Parse(m.Key, m.Value, m.Headers)
	if err != nil {
		return Event{}, err
	}
	e.CommitTime = m.Timestamp
	_, replayed := e.Headers[dlq.HeaderReplay]
	if replayed {
		delete(e.Headers, dlq.HeaderReplay)
	}
	return Event{Event: *e, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Replayed: replayed}, nil
}
