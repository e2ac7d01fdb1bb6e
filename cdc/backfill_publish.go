package cdc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eventforge/eventforge/cdc/setaside"

	"github.com/eventforge/eventforge/cdc/outboxscan"

	"github.com/IBM/sarama"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/eventforge/eventforge/cdc/ack"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/tracing"
)

// backfill publishes rng's rows of the snapshot through a producer session
// of the relay's own (the same producer, record format, size limits,
// rejections and error handling as streamed events) and returns once the
// broker acknowledged every one. The rows are one transaction for the ack
// tracker, which bounds the in-flight window; lsn (the slot's consistent
// point) is only its label.
func (r *Relay) backfill(ctx context.Context, snap *snapshot, db *pgx.Conn, rng outboxscan.Range, lsn pglogrepl.LSN) error {
	began := time.Now()
	r.log.Info("backfilling outbox rows committed before the new slot", "since", sinceText(rng), "consistent_point", lsn)
	ps, err := newProducerSession(ctx, &r.cfg, r.limits, r.m.produceRequests, r.log)
	if err != nil {
		return err
	}
	tr := ack.New(r.cfg.MaxInFlightEvents, r.cfg.MaxInFlightBytes)
	// A producer error cancels the backfill with its cause, as it ends a
	// stream session.
	bctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	feed := make(chan *pending, r.cfg.MaxInFlightEvents+1)
	ps.log, ps.m, ps.tr, ps.db, ps.rejected = r.log, r.m, tr, db, setaside.Set{}
	drained := ps.startDrainers()
	var g errgroup.Group
	g.Go(func() error {
		err := ps.feed(bctx, feed)
		if err != nil {
			fail(err)
		}
		return err
	})
	n, err := r.feedSnapshot(bctx, snap, tr, feed, rng)
	if err == nil {
		tr.Commit(lsn)
		err = awaitAcks(bctx, tr)
	}
	if err == nil && bctx.Err() != nil {
		err = context.Cause(bctx) // never report a cut-short scan as complete
	}
	close(feed)
	_ = g.Wait()
	ps.shutdown(drained)
	if cause := context.Cause(bctx); cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if code, _ := pgErrorCode(err); pgerrcode.IsSyntaxErrororAccessRuleViolation(code) {
			// A missing privilege or column: retrying cannot fix it.
			return fatal(fmt.Errorf("backfill from the snapshot of slot %s: %w", r.cfg.Slot, err))
		}
		return fmt.Errorf("backfill from the snapshot of slot %s (the next attempt creates the slot again and repeats it): %w", r.cfg.Slot, err)
	}
	r.log.Info("backfill acknowledged; streaming follows", "events", n, "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// feedSnapshot hands every row of rng in the snapshot to the feeder, in
// outboxscan.Read's order, waiting while the in-flight window is full.
func (r *Relay) feedSnapshot(ctx context.Context, snap *snapshot, tr *ack.Tracker, feed chan<- *pending, rng outboxscan.Range) (int64, error) {
	build := outbox.NewBuilder(r.cfg.TopicPrefix).WithFormat(&r.catalog.Mapping)
	var spans tracing.Batcher
	var n int64
	tr.Begin()
	err := outboxscan.Read(ctx, snap.tx, r.catalog, rng, "the backfill", func(row *outbox.Row) error {
		for !tr.HasRoom() {
			select {
			case <-tr.Changed():
			case <-ctx.Done():
				return errStopped
			}
		}
		e := &row.Event
		p := &pending{id: e.ID} // no commit time: commit-to-ack is the stream's latency
		switch {
		case row.Problem != "": // the relay's rule for a streamed row too: see pgoutput.RowError
			p.reason = row.Problem
			p.rec.Msg = sarama.ProducerMessage{Topic: build.Topic(e)}
		default:
			if err := build.Build(&p.rec, e); err != nil {
				if outbox.IsUnavailable(err) {
					return err // an outage, never a reason to set the row aside
				}
				p.reason = err.Error()
				p.rec.Msg = sarama.ProducerMessage{Topic: build.Topic(e)}
			}
		}
		traceRecord(&spans, e, p)
		p.msg = &p.rec.Msg
		p.msg.Metadata = p
		p.size = p.msg.ByteSize(recordVersion)
		p.tok = tr.Add(p.size)
		n++
		select {
		case feed <- p:
			return nil
		case <-ctx.Done():
			return errStopped
		}
	})
	if errors.Is(err, errStopped) {
		err = context.Cause(ctx)
	}
	return n, err
}

// awaitAcks waits until the broker acknowledged every event in flight.
func awaitAcks(ctx context.Context, tr *ack.Tracker) error {
	for {
		if n, _ := tr.InFlight(); n == 0 {
			return nil
		}
		select {
		case <-tr.Changed():
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
