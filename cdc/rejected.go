package cdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"

	"github.com/eventforge/eventforge/cdc/pgoutput"
	"github.com/eventforge/eventforge/cdc/setaside"
)

// RejectError sets one event aside: the relay records it in outbox_rejected
// with Reason and goes on (see package setaside).
type RejectError = setaside.RejectError

// setAside handles a row the decoder refused (pgoutput.ErrBadRow): it takes
// the row's place in the ack order like any event and goes to the feeder to
// be recorded in outbox_rejected, so the slot confirms past it only once it
// is recorded. Other decode errors end the session.
func (s *stream) setAside(ctx context.Context, err error, lsn pglogrepl.LSN) error {
	var re *pgoutput.RowError
	if !errors.As(err, &re) {
		return fmt.Errorf("decode pgoutput message at %s: %w", lsn, err)
	}
	p := &pending{id: re.EventID, lsn: lsn, commit: s.commitTime, reason: re.Error()}
	topic := ""
	if re.AggregateType != "" {
		topic = s.cfg.TopicPrefix + re.AggregateType
	}
	p.msg = &sarama.ProducerMessage{Topic: topic, Metadata: p}
	return handOver(ctx, s.tr, s.feed, p)
}

// skipReplay reports whether p's INSERT (event id and WAL position) was
// recorded in outbox_rejected by an earlier session. A row whose event id
// could not be read (uuid.Nil) is recorded again instead: the insert is
// idempotent per (event_id, lsn).
func (ps *producerSession) skipReplay(p *pending) bool {
	return p.id != uuid.Nil && ps.rejected.Has(p.id, p.lsn)
}
