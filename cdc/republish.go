package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/eventforge/eventforge/cdc/topics"

	"github.com/eventforge/eventforge/cdc/setaside"

	"github.com/eventforge/eventforge/cdc/outboxscan"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/tracing"
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
	rng := outboxscan.Range{Since: since, Until: until}
	if _, err := cat.CreatedAtColumn(republishCommand); err != nil {
		return res, err
	}
	lim := topics.NewLimits(cfg.MaxMessageBytes, log)
	badTopics, err := learnTopics(ctx, &cfg, cat, db, lim, rng)
	if err != nil {
		return res, err
	}
	sc, err := cfg.producerConfig(lim.Current())
	if err != nil {
		return res, err
	}
	client, err := sarama.NewClient(cfg.Kafka.Brokers, sc)
	if err != nil {
		return res, fmt.Errorf("connect to Kafka %v: %w", cfg.Kafka.Brokers, err)
	}
	defer client.Close()
	rp := &republisher{cfg: &cfg, cat: cat, side: side, log: log, maxBytes: lim.Current(), badTopics: badTopics}
	res, err = rp.run(ctx, db, client, sc, rng)
	if err != nil {
		return res, err
	}
	return res, ctx.Err()
}

// republisher produces outbox rows through the produce engine, like the
// relay: per-partition generations in order, retriable errors retried in
// place, records the broker can never accept recorded in outbox_rejected,
// anything else the end of the run.
type republisher struct {
	cfg       *Config
	cat       *outbox.Catalog // the mapping, checked against the table
	side      *pgx.Conn       // outbox_rejected writes; only the dispatch loop uses it
	log       *slog.Logger
	maxBytes  int
	badTopics map[string]string
	res       RepublishResult
}

func (rp *republisher) run(ctx context.Context, db *pgx.Conn, client sarama.Client, sc *sarama.Config, rng outboxscan.Range) (RepublishResult, error) {
	eng, err := newEngine(ctx, client, sc, rp.maxBytes, "", pendingHooks{
		admit:     rp.admit,
		delivered: func(p *pending) { rp.res.Published++; traceAcked(p) },
		reject:    rp.reject,
		// The limits were read before the producer was configured: a
		// refusal means one changed during the run, and a new run reads
		// it again and sets aside only what is over it.
		tooLarge: func(_ context.Context, p *pending, err error) (string, error) {
			return "", fmt.Errorf("produce event %s to %s: %w (a topic's max.message.bytes changed during the run: run republish again)", p.id, p.msg.Topic, err)
		},
		failed: func(*pending, error) {},
	}, rp.log)
	if err != nil {
		return rp.res, startError(ctx, err)
	}
	rctx, stop := context.WithCancel(ctx)
	rows := make(chan *pending, republishWindow)
	var scanErr error
	var reader sync.WaitGroup
	reader.Add(1)
	go func() {
		defer reader.Done()
		defer close(rows)
		scanErr = readRepublishRows(rctx, rp.cfg, rp.cat, db, rows, rng)
	}()
	err = eng.Run(ctx, rows, true)
	stop()
	reader.Wait()
	if err != nil {
		return rp.res, err
	}
	return rp.res, scanErr
}

// republishWindow bounds the rows read ahead of the broker's acks.
const republishWindow = 4096

func (rp *republisher) admit(ctx context.Context, p *pending) (bool, error) {
	if p.reason == "" {
		p.reason = rp.badTopics[p.msg.Topic]
	}
	if p.reason == "" && p.size > rp.maxBytes {
		p.reason = fmt.Sprintf("record of %d bytes exceeds the limit of %d bytes (republish)", p.size, rp.maxBytes)
	}
	if p.reason != "" {
		return false, rp.reject(ctx, p)
	}
	return true, nil
}

func (rp *republisher) reject(ctx context.Context, p *pending) error {
	if err := setaside.Record(ctx, rp.side, p.id, 0, p.msg.Topic, p.reason); err != nil {
		return err
	}
	rp.res.Rejected++
	traceRejected(p)
	rp.log.Warn("event rejected: recorded in outbox_rejected", "event_id", p.id, "topic", p.msg.Topic, "reason", p.reason)
	return nil
}

// learnTopics ensures every topic of the range exists and learns its limit
// before the producer is configured. It returns the topics no event may go
// to (invalid, internal or missing names), with the reason.
func learnTopics(ctx context.Context, cfg *Config, cat *outbox.Catalog, q outboxscan.Querier, lim *topics.Limits, rng outboxscan.Range) (map[string]string, error) {
	types, err := outboxscan.Types(ctx, q, cat, rng, republishCommand)
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
	tp, err := topics.New(cfg.topicSettings(), client, lim)
	if err != nil {
		return nil, err
	}
	bad := map[string]string{}
	for _, t := range types {
		if err := ensureTopicOrStop(ctx, tp, cfg.TopicPrefix+t); err != nil {
			if reason := setaside.Reason(err); reason != "" {
				bad[cfg.TopicPrefix+t] = reason
				continue
			}
			return nil, err
		}
	}
	return bad, nil
}

// readRepublishRows sends the range's rows to out, in outboxscan.Read's order,
// each with the reason it cannot be produced when it cannot.
func readRepublishRows(ctx context.Context, cfg *Config, cat *outbox.Catalog, q outboxscan.Querier, out chan<- *pending, rng outboxscan.Range) error {
	build := outbox.NewBuilder(cfg.TopicPrefix).WithFormat(&cat.Mapping)
	var spans tracing.Batcher
	err := outboxscan.Read(ctx, q, cat, rng, republishCommand, func(row *outbox.Row) error {
		e := &row.Event
		p := &pending{id: e.ID}
		switch err := build.Build(&p.rec, e); {
		case row.Problem != "": // the relay's rule too: see pgoutput.RowError
			p.reason = row.Problem
		case outbox.IsUnavailable(err):
			return err // an outage, never a reason to set the row aside
		case err != nil:
			p.reason = err.Error()
		}
		p.msg = &p.rec.Msg
		p.msg.Topic = build.Topic(e)
		traceRecord(&spans, e, p)
		p.msg.Metadata = p
		p.size = p.msg.ByteSize(recordVersion)
		select {
		case out <- p:
			return nil
		case <-ctx.Done():
			return errStopped
		}
	})
	if errors.Is(err, errStopped) {
		err = nil // the caller reports why ctx ended
	}
	return err
}

// republishCommand names `outbox republish` in errors about the mapping.
const republishCommand = "outbox republish"

// errStopped ends a scan of the outbox whose context ended.
var errStopped = errors.New("stopped")
