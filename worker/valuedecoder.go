package worker

import (
	"context"
	"fmt"

	"github.com/IBM/sarama"

	backoffpkg "github.com/eventforge/eventforge/internal/shared/backoff"
	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// ValueDecoder reads a record's value into the payload handlers see: the
// schema registry's decoder turns Avro, Protobuf and JSON Schema values
// into JSON, so SQL handlers ($2) and Go handlers work unchanged.
//
// An error wrapping outbox.ErrUnavailable (the registry did not answer) is
// waited out: the partition retries the value with backoff and holds its
// place. Any other error is the value's: the record is poison,
// dead-lettered at once with the reason and its original bytes.
type ValueDecoder interface {
	Decode(ctx context.Context, value []byte) ([]byte, error)
}

// decodeRecord is decode after the configured ValueDecoder: the Event's
// payload is the decoded value; the record itself (dead-lettered as it
// is) keeps its bytes. errStopped when ctx ends during an outage.
func (r *Runner) decodeRecord(ctx context.Context, m *sarama.ConsumerMessage) (Event, error) {
	if r.cfg.ValueDecoder == nil || m.Value == nil {
		return decode(m)
	}
	for attempt := 1; ; attempt++ {
		v, err := r.cfg.ValueDecoder.Decode(ctx, m.Value)
		switch {
		case err == nil:
			c := *m
			c.Value = v
			ev, err := decode(&c)
			if err == nil {
				ev.PayloadKind = outbox.PayloadJSON
			}
			return ev, err
		case !outbox.IsUnavailable(err):
			return Event{}, fmt.Errorf("%w: %w", outbox.ErrMalformed, err)
		}
		wait := r.backoff.delay(attempt)
		r.cfg.Logger.Warn("schema registry unavailable; retrying the record", "topic", m.Topic, "partition", m.Partition,
			"offset", m.Offset, "err", err, "retry_in", wait)
		if !backoffpkg.Sleep(ctx, wait) {
			return Event{}, errStopped
		}
	}
}
