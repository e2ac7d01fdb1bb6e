// Package backfill publishes the outbox rows a new replication slot's
// exported snapshot sees, before anything is streamed from the slot: it
// imports the snapshot, reads its rows in the order the relay publishes them
// (cdc/outboxscan), hands each to the relay's produce path within the
// in-flight window and returns once the broker acknowledged every one. For a
// slot created without a backfill it counts the rows the slot will never
// deliver, for the relay's warning.
//
// The relay plugs in through Producer, declared here: a producer session
// whose acks go to the backfill's tracker. The package never builds a Kafka
// record, and leaves to the relay what a failure means for it (retry, or
// stop).
//
// Imports (floor: shared library): cdc/ack, cdc/outboxscan,
// internal/shared/outbox and pgx/pglogrepl; never the relay (cdc).
package backfill

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/eventforge/eventforge/cdc/ack"
	"github.com/eventforge/eventforge/cdc/outboxscan"
	"github.com/eventforge/eventforge/internal/shared/outbox"
)

// Producer is the relay's produce path as a backfill uses it.
type Producer interface {
	// Start starts a producer session whose acks go to tr; ctx ends with
	// the backfill. An error of the session's production ends the
	// backfill through fail, with the error as the cause.
	Start(ctx context.Context, tr *ack.Tracker, fail context.CancelCauseFunc) (Feed, error)
}

// Feed is one producer session of a backfill.
type Feed interface {
	// Send builds row's record, adds it to the tracker the session was
	// started with and hands it to the producer. It waits only for the
	// handover; when ctx ends first it returns ctx's cause.
	Send(ctx context.Context, row *outbox.Row) error
	// Close ends the session: no Send follows. It returns once the
	// producer ended, or gave up waiting for it.
	Close()
}

// Job is one backfill.
type Job struct {
	Slot    string // named in the log
	Range   outboxscan.Range
	Catalog *outbox.Catalog
	// ConsistentPoint is the new slot's: streaming starts there. The rows
	// are one transaction for the ack tracker, labelled with it.
	ConsistentPoint   pglogrepl.LSN
	MaxInFlightEvents int
	MaxInFlightBytes  int64
	Log               *slog.Logger
}

// Run publishes job's rows, read through q (a transaction of the slot's
// snapshot), through a producer session of p, and returns once the broker
// acknowledged every one. The tracker bounds the rows in flight. It returns
// ctx's error when ctx ended, otherwise the error that ended the backfill
// (a production error wins over what the scan saw of it); the caller
// decides what the error means.
func Run(ctx context.Context, job Job, q outboxscan.Querier, p Producer) error {
	began := time.Now()
	log := job.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log.Info("backfilling outbox rows committed before the new slot", "since", sinceText(job.Range), "consistent_point", job.ConsistentPoint)
	tr := ack.New(job.MaxInFlightEvents, job.MaxInFlightBytes)
	// A producer error cancels the backfill with its cause, as it ends a
	// stream session.
	bctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	feed, err := p.Start(bctx, tr, fail)
	if err != nil {
		return err
	}
	n, err := publish(bctx, job, q, tr, feed)
	if err == nil {
		tr.Commit(job.ConsistentPoint)
		err = awaitAcks(bctx, tr)
	}
	if err == nil && bctx.Err() != nil {
		err = context.Cause(bctx) // never report a cut-short scan as complete
	}
	feed.Close()
	if cause := context.Cause(bctx); cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	log.Info("backfill acknowledged; streaming follows", "events", n, "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// publish hands every row of the job's range to feed, in outboxscan.Read's
// order, waiting while the in-flight window is full.
func publish(ctx context.Context, job Job, q outboxscan.Querier, tr *ack.Tracker, feed Feed) (int64, error) {
	var n int64
	tr.Begin()
	err := outboxscan.Read(ctx, q, job.Catalog, job.Range, "the backfill", func(row *outbox.Row) error {
		for !tr.HasRoom() {
			select {
			case <-tr.Changed():
			case <-ctx.Done():
				return errStopped
			}
		}
		if err := feed.Send(ctx, row); err != nil {
			if ctx.Err() != nil {
				return errStopped
			}
			return err
		}
		n++
		return nil
	})
	if errors.Is(err, errStopped) {
		err = context.Cause(ctx)
	}
	return n, err
}

// errStopped ends a scan whose context ended.
var errStopped = errors.New("stopped")

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

// sinceText is the range's lower bound for a log line: "all" without one.
func sinceText(rng outboxscan.Range) string {
	if rng.Since.IsZero() {
		return "all"
	}
	return rng.Since.UTC().Format(time.RFC3339Nano)
}
