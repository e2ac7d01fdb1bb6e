package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/outbox"
)

// RepublishResult counts what Republish did.
type RepublishResult struct {
	Published int64 // acknowledged by the broker
	Rejected  int64 // recorded in outbox_rejected instead (too large, invalid topic, bad headers)
}

// Republish produces the outbox rows created in [since, until) (until zero:
// no upper bound) again, with their original event IDs, through the same
// idempotent producer and message format as the relay, in created_at order.
// It is the recovery after a lost slot: consumers dedupe by event ID. The
// timestamp of each record is the row's created_at (the commit time is not
// stored). Any producer error stops it; running it again is safe.
func Republish(ctx context.Context, cfg Config, since, until time.Time, log *slog.Logger) (RepublishResult, error) {
	var res RepublishResult
	cfg = cfg.withDefaults()
	if err := cfg.Kafka.Validate(); err != nil {
		return res, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db, err := connectSQL(ctx, cfg.PGURL)
	if err != nil {
		return res, err
	}
	defer db.Close(context.WithoutCancel(ctx))
	side, err := connectSQL(ctx, cfg.PGURL)
	if err != nil {
		return res, err
	}
	defer side.Close(context.WithoutCancel(ctx))

	cat, err := checkMapping(ctx, db, cfg.Mapping)
	if err != nil {
		return res, err
	}
	rng := outboxRange{since: since, until: until}
	if _, err := cat.CreatedAtColumn(republishCommand); err != nil {
		return res, err
	}
	lim := newLimits(cfg.MaxMessageBytes)
	badTopics, err := learnTopics(ctx, &cfg, cat, db, lim, rng)
	if err != nil {
		return res, err
	}
	sc, err := cfg.producerConfig(lim.current())
	if err != nil {
		return res, err
	}
	prod, err := sarama.NewAsyncProducer(cfg.Kafka.Brokers, sc)
	if err != nil {
		return res, fmt.Errorf("start Kafka producer: %w", err)
	}
	pctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	var wg sync.WaitGroup
	var published atomic.Int64
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range prod.Successes() {
			published.Add(1)
		}
	}()
	go func() {
		defer wg.Done()
		for pe := range prod.Errors() {
			fail(fmt.Errorf("produce to %s: %w", pe.Msg.Topic, pe.Err))
		}
	}()
	rejected, scanErr := republishRows(pctx, &cfg, cat, db, side, prod, lim.current(), badTopics, rng, log)
	prod.AsyncClose()
	wg.Wait()
	res.Published, res.Rejected = published.Load(), rejected
	if cause := context.Cause(pctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return res, cause
	}
	if scanErr != nil {
		return res, scanErr
	}
	return res, ctx.Err()
}

// learnTopics ensures every topic of the range exists and learns its limit
// before the producer is configured. It returns the topics no event may go
// to (invalid, internal or missing names), with the reason.
func learnTopics(ctx context.Context, cfg *Config, cat *outbox.Catalog, q rowQuerier, lim *limits, rng outboxRange) (map[string]string, error) {
	types, err := outboxTypes(ctx, q, cat, rng, republishCommand)
	if err != nil {
		return nil, err
	}
	if len(types) == 0 {
		return nil, nil
	}
	sc, err := cfg.producerConfig(cfg.MaxMessageBytes)
	if err != nil {
		return nil, err
	}
	client, err := sarama.NewClient(cfg.Kafka.Brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("connect to Kafka %v: %w", cfg.Kafka.Brokers, err)
	}
	defer client.Close()
	tp, err := newTopics(cfg, client, lim)
	if err != nil {
		return nil, err
	}
	bad := map[string]string{}
	for _, t := range types {
		if err := tp.ensure(ctx, cfg.TopicPrefix+t); err != nil {
			if reason := rejection(err); reason != "" {
				bad[cfg.TopicPrefix+t] = reason
				continue
			}
			return nil, err
		}
	}
	return bad, nil
}

func republishRows(ctx context.Context, cfg *Config, cat *outbox.Catalog, q rowQuerier, side *pgx.Conn, prod sarama.AsyncProducer, maxBytes int,
	badTopics map[string]string, rng outboxRange, log *slog.Logger) (int64, error) {
	var rejected int64
	build := outbox.NewBuilder(cfg.TopicPrefix).WithFormat(&cat.Mapping)
	err := readOutbox(ctx, q, cat, rng, republishCommand, func(row *outbox.Row) error {
		e := &row.Event
		rec := new(outbox.Record)
		err := build.Build(rec, e)
		msg := &rec.Msg
		reason := badTopics[e.Topic(cfg.TopicPrefix)]
		switch {
		case reason != "":
		case row.Problem != "": // the relay's rule too: see pgoutput.RowError
			reason = row.Problem
		case err != nil:
			reason = err.Error()
		case msg.ByteSize(recordVersion) > maxBytes:
			reason = fmt.Sprintf("record of %d bytes exceeds the limit of %d bytes (republish)", msg.ByteSize(recordVersion), maxBytes)
		}
		if reason != "" {
			if err := recordRejected(ctx, side, e.ID, 0, e.Topic(cfg.TopicPrefix), reason); err != nil {
				return err
			}
			rejected++
			log.Warn("event rejected: recorded in outbox_rejected", "event_id", e.ID, "reason", reason)
			return nil
		}
		select {
		case prod.Input() <- msg:
			return nil
		case <-ctx.Done():
			return errStopped
		}
	})
	if errors.Is(err, errStopped) {
		err = nil // the caller reports why ctx ended
	}
	return rejected, err
}

// republishCommand names `outbox republish` in errors about the mapping.
const republishCommand = "outbox republish"

// errStopped ends a scan of the outbox whose context ended.
var errStopped = errors.New("stopped")
