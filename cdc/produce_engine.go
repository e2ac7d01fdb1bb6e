package cdc

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"

	"github.com/eventforge/eventforge/cdc/produce"
	"github.com/eventforge/eventforge/internal/shared/failpoint"
)

// Retries of a partition's records the broker refused with a retriable
// error: after maxProduceAttempts sends the session restarts from the
// confirmed position instead (a new client, new connections).
const (
	maxProduceAttempts = 6
	produceRetryFirst  = 200 * time.Millisecond
	produceRetryMost   = 5 * time.Second
)

// pendingHooks are what a user of the produce engine does with events.
type pendingHooks struct {
	// admit checks an event before it is queued; false means it was
	// settled already (set aside or skipped).
	admit func(ctx context.Context, p *pending) (bool, error)
	// delivered is called once the broker acknowledged p.
	delivered func(p *pending)
	// reject records p (p.reason set) durably, then acks or counts it.
	reject func(ctx context.Context, p *pending) error
	// tooLarge decides on a record the broker refused alone as too large:
	// the reason to set it aside, or an error that ends the run.
	tooLarge func(ctx context.Context, p *pending, err error) (string, error)
	// failed sees every refusal, once per event it covers.
	failed func(p *pending, err error)
	// committing and committed, exactly-once only, are called just before
	// a Kafka transaction commits and with its outcome.
	committing func()
	committed  func(records int, err error)
}

// pendingOf is the event a record of the engine belongs to.
func pendingOf(r *produce.Record) *pending { return r.Msg.Metadata.(*pending) }

// record is p's record for the engine.
func (p *pending) record() *produce.Record {
	p.out.Msg, p.out.Size, p.out.Commit = p.msg, p.size, p.ends
	return &p.out
}

// newEngine starts the produce engine (docs/design.md#generations) on
// client, whose configuration sc gives compression and timeouts, for
// records of at most maxBytes; with a txnID it is that transactional id's
// producer (exactly-once), which fences every earlier one.
func newEngine(ctx context.Context, client sarama.Client, sc *sarama.Config, maxBytes int, txnID string, h pendingHooks, log *slog.Logger) (*produce.Engine[*pending], error) {
	cfg := produce.FromSarama(sc, maxBytes)
	cfg.MaxAttempts, cfg.RetryFirst, cfg.RetryMost = maxProduceAttempts, produceRetryFirst, produceRetryMost
	cfg.TransactionalID = txnID
	hooks := produce.Hooks{
		Admit: func(ctx context.Context, r *produce.Record) (bool, error) { return h.admit(ctx, pendingOf(r)) },
		Delivered: func(r *produce.Record) {
			if !r.Commit { // the position record acks nothing
				h.delivered(pendingOf(r))
			}
		},
		Committing: h.committing,
		Committed:  h.committed,
		Reject: func(ctx context.Context, r *produce.Record) error {
			p := pendingOf(r)
			if p.reason == "" {
				p.reason = r.Reason
			}
			return h.reject(ctx, p)
		},
		TooLarge: func(ctx context.Context, r *produce.Record, err error) (string, error) {
			return h.tooLarge(ctx, pendingOf(r), err)
		},
		Failed: func(r *produce.Record, err error) { h.failed(pendingOf(r), err) },
		// The records of a request are in Kafka, not yet acked.
		Produced: func() { failpoint.Hit(failpoint.CDCAfterProduceBeforeAck) },
		Fatal: func(r *produce.Record, err error) error {
			p := pendingOf(r)
			return fatal(fmt.Errorf("produce event %s to %s: %w: %s", p.id, p.msg.Topic, err, produce.FatalHint(err)))
		},
	}
	return produce.New(ctx, cfg, client, hooks, (*pending).record, log)
}
