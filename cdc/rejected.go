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

// rejectedKey is one INSERT set aside: its event id and WAL position. The
// position tells it apart from a later row with the same event id (allowed
// once the first row is deleted), which must be produced.
type rejectedKey struct {
	id  uuid.UUID
	lsn pglogrepl.LSN
}

// rejectedSet holds the INSERTs already in outbox_rejected.
type rejectedSet map[rejectedKey]struct{}

func (s rejectedSet) add(id uuid.UUID, lsn pglogrepl.LSN) { s[rejectedKey{id, lsn}] = struct{}{} }

func (s rejectedSet) has(id uuid.UUID, lsn pglogrepl.LSN) bool {
	_, ok := s[rejectedKey{id, lsn}]
	return ok
}

// loadRejected returns the INSERTs at or after from that are already in
// outbox_rejected, so a replay skips them instead of producing them.
func loadRejected(ctx context.Context, conn *pgx.Conn, from pglogrepl.LSN) (rejectedSet, error) {
	rows, err := conn.Query(ctx, "SELECT event_id, lsn::text FROM outbox_rejected WHERE lsn >= $1::pg_lsn", from.String())
	if err != nil {
		return nil, fmt.Errorf("read outbox_rejected: %w", err)
	}
	out := rejectedSet{}
	var (
		id  uuid.UUID
		pos string
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &pos}, func() error {
		lsn, err := pglogrepl.ParseLSN(pos)
		if err != nil {
			return err
		}
		out.add(id, lsn)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read outbox_rejected: %w", err)
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

// skipReplay reports whether p's INSERT (event id and WAL position) was
// recorded in outbox_rejected by an earlier session. A row whose event id
// could not be read (uuid.Nil) is recorded again instead: the insert is
// idempotent per (event_id, lsn).
func (ps *producerSession) skipReplay(p *pending) bool {
	return p.id != uuid.Nil && ps.rejected.has(p.id, p.lsn)
}
