package cdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/IBM/sarama"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"

	"github.com/eventforge/eventforge/cdc/ack"
	"github.com/eventforge/eventforge/cdc/backfill"
	"github.com/eventforge/eventforge/cdc/outboxscan"
	"github.com/eventforge/eventforge/cdc/setaside"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/tracing"
)

// ErrBackfillUnfinished stops a relay started without a backfill on a slot
// whose backfill an earlier start did not finish: streaming would skip the
// rows it was to publish.
var ErrBackfillUnfinished = errors.New("the backfill of the slot did not finish")

// backfillPending is the relay_state position that marks a slot whose
// backfill has not been acknowledged yet: written before the slot is
// created, replaced by the consistent point once the backfill is acked. A
// relay that finds it recreates the slot and backfills again (nothing was
// streamed from the slot yet), so a crash mid-backfill loses nothing.
const backfillPending = pglogrepl.LSN(0)

// backfillRange is the rows a new slot publishes from its snapshot, and
// whether any were asked for.
func (c *Config) backfillRange() (outboxscan.Range, bool) {
	switch {
	case c.BackfillAll:
		return outboxscan.Range{}, true
	case !c.BackfillSince.IsZero():
		return outboxscan.Range{Since: c.BackfillSince}, true
	}
	return outboxscan.Range{}, false
}

// createSlot creates the slot with an exported snapshot and, before
// returning its consistent point (where streaming starts), publishes the
// rows the configuration asks for from that snapshot and waits for their
// acks; without a backfill it warns about the rows the slot will never see.
// With failover the slot is a failover slot (PostgreSQL 17), on every path
// that creates it: first run, recovery after slot drop, a repeated backfill.
func (r *Relay) createSlot(ctx context.Context, sqlConn *pgx.Conn, repl *pgconn.PgConn, failover bool) (pglogrepl.LSN, error) {
	slot := r.cfg.Slot
	rng, fill := r.cfg.backfillRange()
	if fill {
		// Before the slot exists: a crash between the two must not leave a
		// slot that a restart would stream from without the backfill.
		if err := writeState(ctx, sqlConn, slot, backfillPending); err != nil {
			return 0, err
		}
	}
	res, err := pglogrepl.ParseCreateReplicationSlot(repl.Exec(ctx, createSlotCommand(slot, failover)))
	if err != nil {
		return 0, fmt.Errorf("create replication slot %s: %w", slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return 0, fmt.Errorf("parse consistent point of slot %s: %w", slot, err)
	}
	snap, err := backfill.Import(ctx, res.SnapshotName, func(ctx context.Context) (*pgx.Conn, error) { return connectSQL(ctx, r.cfg.PGURL) })
	if err != nil {
		return 0, err
	}
	defer snap.Close(ctx)
	if fill {
		if err := r.backfill(ctx, snap, sqlConn, rng, lsn); err != nil {
			return 0, err
		}
	} else {
		backfill.WarnUnpublished(ctx, snap.Tx(), r.catalog, slot, r.log)
	}
	// From now on a missing slot means events may have been skipped.
	if err := writeState(ctx, sqlConn, slot, lsn); err != nil {
		return 0, err
	}
	return lsn, nil
}

// redoBackfill handles a slot whose backfill an earlier start began but
// never finished (relay_state holds backfillPending): nothing was streamed
// from the slot, so it is dropped and created again with a new snapshot.
func (r *Relay) redoBackfill(ctx context.Context, sqlConn *pgx.Conn, repl *pgconn.PgConn, s slotState, failover bool) (pglogrepl.LSN, error) {
	slot := r.cfg.Slot
	if _, asked := r.cfg.backfillRange(); !asked {
		return 0, fatalf(ErrBackfillUnfinished, "the backfill of replication slot %s did not finish (relay_state holds %s): start eventforge cdc run with --backfill-since or --backfill-all again, or give it up with eventforge slot drop --slot %s --yes",
			slot, backfillPending, slot)
	}
	if s.exists {
		if _, err := sqlConn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err != nil {
			return 0, fmt.Errorf("drop replication slot %s of an unfinished backfill: %w", slot, err)
		}
	}
	r.log.Warn("the backfill of an earlier start did not finish: creating the slot again and repeating the backfill")
	return r.createSlot(ctx, sqlConn, repl, failover)
}

// backfill publishes rng's rows of the snapshot (package backfill) through
// a producer session of the relay's own: the same producer, record format,
// size limits, rejections and error handling as streamed events. lsn is
// the slot's consistent point.
func (r *Relay) backfill(ctx context.Context, snap *backfill.Snapshot, db *pgx.Conn, rng outboxscan.Range, lsn pglogrepl.LSN) error {
	job := backfill.Job{Slot: r.cfg.Slot, Range: rng, Catalog: r.catalog, ConsistentPoint: lsn,
		MaxInFlightEvents: r.cfg.MaxInFlightEvents, MaxInFlightBytes: r.cfg.MaxInFlightBytes, Log: r.log}
	bp := &backfillProducer{r: r, db: db}
	err := backfill.Run(ctx, job, snap.Tx(), bp)
	switch {
	case err == nil:
		return nil
	case bp.startErr != nil:
		return bp.startErr // the producer session's own, already explained
	case ctx.Err() != nil:
		return ctx.Err()
	}
	if code, _ := pgErrorCode(err); pgerrcode.IsSyntaxErrororAccessRuleViolation(code) {
		// A missing privilege or column: retrying cannot fix it.
		return fatal(fmt.Errorf("backfill from the snapshot of slot %s: %w", r.cfg.Slot, err))
	}
	return fmt.Errorf("backfill from the snapshot of slot %s (the next attempt creates the slot again and repeats it): %w", r.cfg.Slot, err)
}

// backfillProducer is the relay's produce path as a backfill uses it
// (backfill.Producer).
type backfillProducer struct {
	r        *Relay
	db       *pgx.Conn // outbox_rejected writes
	startErr error     // the producer session could not start
}

// Start starts a producer session whose acks go to tr, and its feeder: a
// producer error ends the backfill through fail, as it ends a stream
// session.
func (bp *backfillProducer) Start(ctx context.Context, tr *ack.Tracker, fail context.CancelCauseFunc) (backfill.Feed, error) {
	r := bp.r
	ps, err := newProducerSession(ctx, &r.cfg, r.limits, r.m.produceRequests, r.log)
	if err != nil {
		bp.startErr = err
		return nil, err
	}
	feed := make(chan *pending, r.cfg.MaxInFlightEvents+1)
	ps.log, ps.m, ps.tr, ps.db, ps.rejected = r.log, r.m, tr, bp.db, setaside.Set{}
	bf := &backfillFeed{ps: ps, tr: tr, feed: feed, drained: ps.startDrainers(),
		build: outbox.NewBuilder(r.cfg.TopicPrefix).WithFormat(&r.catalog.Mapping)}
	bf.g.Go(func() error {
		err := ps.feed(ctx, feed)
		if err != nil {
			fail(err)
		}
		return err
	})
	return bf, nil
}

// backfillFeed is one producer session of a backfill (backfill.Feed).
type backfillFeed struct {
	ps      *producerSession
	tr      *ack.Tracker
	feed    chan *pending
	drained <-chan struct{}
	g       errgroup.Group
	build   *outbox.Builder
	spans   tracing.Batcher
}

// Send builds row's record as the stream builds an event's, with the
// relay's rule for a row that cannot become one (see pgoutput.RowError):
// it is set aside. It has no commit time: commit-to-ack is the stream's
// latency.
func (bf *backfillFeed) Send(ctx context.Context, row *outbox.Row) error {
	e := &row.Event
	p := &pending{id: e.ID}
	switch {
	case row.Problem != "":
		p.reason = row.Problem
		p.rec.Msg = sarama.ProducerMessage{Topic: bf.build.Topic(e)}
	default:
		if err := bf.build.Build(&p.rec, e); err != nil {
			if outbox.IsUnavailable(err) {
				return err // an outage, never a reason to set the row aside
			}
			p.reason = err.Error()
			p.rec.Msg = sarama.ProducerMessage{Topic: bf.build.Topic(e)}
		}
	}
	traceRecord(&bf.spans, e, p)
	p.msg = &p.rec.Msg
	p.msg.Metadata = p
	return handOver(ctx, bf.tr, bf.feed, p)
}

// Close closes the feed, waits for the feeder and shuts the producer down.
func (bf *backfillFeed) Close() {
	close(bf.feed)
	_ = bf.g.Wait()
	bf.ps.shutdown(bf.drained)
}
