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
// place, as a schema-registry outage (logged when it begins and ends,
// counted in the outage metrics, and reported by Ready). Any other error is the value's: the record is poison,
// dead-lettered at once with the reason and its original bytes.
type ValueDecoder interface {
	Decode(ctx context.Context, value []byte) ([]byte, error)
}

// decodeRecord is decode after the configured ValueDecoder: the Event's
// payload is the decoded value; the record itself (dead-lettered as it
// is) keeps its bytes. A registry outage holds partition key in place
// until the registry answers; errStopped when ctx ends meanwhile.
func (r *Runner) decodeRecord(ctx context.Context, key string, m *sarama.ConsumerMessage) (Event, error) {
	if r.cfg.ValueDecoder == nil || m.Value == nil {
		return decode(m)
	}
	for attempt := 1; ; attempt++ {
		v, err := r.cfg.ValueDecoder.Decode(ctx, m.Value)
		if err == nil || !outbox.IsUnavailable(err) {
			r.outages.registry.ok(key) // it answered
		}
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
		r.outages.registry.fail(key, "schema registry unavailable; partition waits", err,
			"topic", m.Topic, "partition", m.Partition, "offset", m.Offset, "retry_in", wait)
		if !backoffpkg.Sleep(ctx, wait) {
			return Event{}, errStopped
		}
	}
}
