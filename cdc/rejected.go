package cdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/cdc/pgoutput"
)

// recordRejected writes an event the relay will not produce to
// outbox_rejected. A replay of the same INSERT (same event id and LSN) is a
// no-op.
func recordRejected(ctx context.Context, conn *pgx.Conn, id uuid.UUID, lsn pglogrepl.LSN, topic, reason string) error {
	_, err := conn.Exec(ctx, `INSERT INTO outbox_rejected (event_id, lsn, topic, reason) VALUES ($1, $2::pg_lsn, $3, $4)
		ON CONFLICT (event_id, lsn) DO NOTHING`, id, lsn.String(), topic, reason)
	if err != nil {
		return fmt.Errorf("record rejected event %s: %w", id, err)
	}
	return nil
}

// loadRejected returns the events at or after from that are already in
// outbox_rejected, so a replay skips them instead of producing them.
func loadRejected(ctx context.Context, conn *pgx.Conn, from pglogrepl.LSN) (map[uuid.UUID]bool, error) {
	rows, err := conn.Query(ctx, "SELECT event_id FROM outbox_rejected WHERE lsn >= $1::pg_lsn", from.String())
	if err != nil {
		return nil, fmt.Errorf("read outbox_rejected: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("read outbox_rejected: %w", err)
	}
	out := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// RejectError sets one event aside: the relay records it in outbox_rejected
// with Reason and goes on, instead of retrying a session that would fail on
// the same row forever.
type RejectError struct{ Reason string }

func (e *RejectError) Error() string { return "event rejected: " + e.Reason }

// rejection is the reason err sets its event aside, or "" when err is not a
// *RejectError.
func rejection(err error) string {
	var re *RejectError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}

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
	p.size = p.msg.ByteSize(recordVersion)
	p.tok = s.tr.Add(p.size)
	select {
	case s.feed <- p:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// skipReplay reports whether p was recorded in outbox_rejected by an earlier
// session. A row whose event id could not be read (uuid.Nil) is recorded
// again instead: the insert is idempotent per (event_id, lsn).
func (ps *producerSession) skipReplay(p *pending) bool {
	return p.id != uuid.Nil && ps.rejected[p.id]
}
