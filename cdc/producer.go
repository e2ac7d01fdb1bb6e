package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/cdc/ack"
	"github.com/eventforge/eventforge/internal/failpoint"
	"github.com/eventforge/eventforge/internal/kafka"
	"github.com/eventforge/eventforge/internal/outbox"
)

// errLimitLowered ends a session whose producer batches larger than a topic
// accepts; the next session starts with the lower limit.
var errLimitLowered = errors.New("a topic accepts smaller records than the producer batches: restarting the session")

// pending is one event between the stream and the broker's ack.
type pending struct {
	msg    *sarama.ProducerMessage
	rec    outbox.Record // msg's storage for an event the stream built
	tok    ack.Token
	size   int // sarama's encoded size of the record
	id     uuid.UUID
	lsn    pglogrepl.LSN // the INSERT's WAL position
	commit time.Time     // the transaction's commit time
	reason string        // set when the event cannot be produced at all
}

// ackTracker is what the producer pipeline needs of the tracker.
type ackTracker interface {
	Ack(ack.Token)
}

// producerSession is one stream session's Kafka side: it feeds events to an
// idempotent async producer and drains both of its result channels. Any
// producer error ends the session (CDC-RULES 14).
type producerSession struct {
	cfg      *Config
	log      *slog.Logger
	m        *metrics
	tr       ackTracker
	limits   *limits
	client   sarama.Client
	prod     sarama.AsyncProducer
	topics   *topics
	maxBytes int // the producer's MaxMessageBytes: the record limit
	db       *pgx.Conn
	rejected map[uuid.UUID]bool // already in outbox_rejected: skipped on replay
	suspects bool               // limits had refusals when the session began
	fail     func(error)

	published sync.Map // topic -> *topicCounters, saves label lookups per ack
}

func newProducerSession(cfg *Config, lim *limits) (*producerSession, error) {
	maxBytes := lim.current()
	sc, err := cfg.producerConfig(maxBytes)
	if err != nil {
		return nil, err
	}
	client, err := sarama.NewClient(cfg.Kafka.Brokers, sc)
	if err != nil {
		err = fmt.Errorf("connect to Kafka %v: %w", cfg.Kafka.Brokers, err)
		if kafka.Unrecoverable(err) { // wrong credentials or an untrusted broker: retrying cannot help
			return nil, fatal(kafka.Explain(err))
		}
		return nil, err
	}
	prod, err := sarama.NewAsyncProducerFromClient(client)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("start Kafka producer: %w", err)
	}
	tp, err := newTopics(cfg, client, lim)
	if err != nil {
		prod.AsyncClose()
		drainAll(prod)
		client.Close()
		return nil, err
	}
	return &producerSession{cfg: cfg, limits: lim, client: client, prod: prod, topics: tp, maxBytes: maxBytes}, nil
}

// close discards a producer that never ran.
func (ps *producerSession) close() {
	ps.prod.AsyncClose()
	drainAll(ps.prod)
	ps.client.Close()
}

func drainAll(p sarama.AsyncProducer) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range p.Successes() {
		}
	}()
	go func() {
		defer wg.Done()
		for range p.Errors() {
		}
	}()
	wg.Wait()
}

// feed hands events to the producer until in closes or ctx ends, then closes
// the producer's input. It checks sizes and records rejections, so the
// stream goroutine never waits on Kafka or on these writes.
func (ps *producerSession) feed(ctx context.Context, in <-chan *pending) error {
	defer ps.prod.AsyncClose()
	// Refusals are recorded only by a failing session: none appear in this one.
	ps.suspects = ps.limits.anyRefused()
	for {
		var p *pending
		ok := true
		select {
		case p, ok = <-in: // while events queue, without a full select
		default:
			select {
			case p, ok = <-in:
			case <-ctx.Done():
				return nil
			}
		}
		if !ok || ctx.Err() != nil {
			return nil
		}
		if err := ps.handle(ctx, p); err != nil {
			return err
		}
	}
}

func (ps *producerSession) handle(ctx context.Context, p *pending) error {
	if ps.skipReplay(p) {
		ps.tr.Ack(p.tok) // recorded by an earlier session
		return nil
	}
	if p.reason == "" {
		if err := ps.topics.ensure(ctx, p.msg.Topic); err != nil {
			if p.reason = rejection(err); p.reason == "" {
				return err
			}
			return ps.reject(ctx, p)
		}
		if ps.limits.current() < ps.maxBytes {
			return errLimitLowered
		}
		n := 0
		if ps.suspects {
			n = ps.limits.refusals(p.id.String())
		}
		switch {
		case p.size > ps.maxBytes:
			p.reason = fmt.Sprintf("record of %d bytes exceeds the limit of %d bytes (--max-message-bytes, or the smallest max.message.bytes of the relay's topics)", p.size, ps.maxBytes)
		case n >= 2:
			p.reason = fmt.Sprintf("the broker refused the record (%d bytes) as too large %d times", p.size, n)
		}
	}
	if p.reason != "" {
		return ps.reject(ctx, p)
	}
	select {
	case ps.prod.Input() <- p.msg:
	default:
		select {
		case ps.prod.Input() <- p.msg:
		case <-ctx.Done():
			return nil
		}
	}
	failpoint.Hit(failpoint.CDCAfterProduceBeforeAck)
	return nil
}

// reject records the event durably before acking past it (CDC-RULES 16).
func (ps *producerSession) reject(ctx context.Context, p *pending) error {
	if err := recordRejected(ctx, ps.db, p.id, p.lsn, p.msg.Topic, p.reason); err != nil {
		return err
	}
	ps.rejected[p.id] = true
	ps.m.rejected.Inc()
	ps.log.Warn("event rejected: recorded in outbox_rejected", append(eventAttrs(p), "lsn", p.lsn, "topic", p.msg.Topic, "reason", p.reason)...)
	ps.tr.Ack(p.tok)
	return nil
}

// successes acks each delivered event; it returns when the producer closes.
func (ps *producerSession) successes() error {
	for msg := range ps.prod.Successes() {
		p := msg.Metadata.(*pending)
		ps.tr.Ack(p.tok)
		failpoint.Hit(failpoint.CDCAfterAckBeforeConfirm)
		c := ps.counters(msg.Topic)
		c.events.Inc()
		c.bytes.Add(float64(p.size))
		if !p.commit.IsZero() {
			ps.m.commitToAck.Observe(time.Since(p.commit).Seconds())
		}
	}
	return nil
}

// topicCounters are the published counters of one topic.
type topicCounters struct{ events, bytes prometheus.Counter }

func (ps *producerSession) counters(topic string) *topicCounters {
	if c, ok := ps.published.Load(topic); ok {
		return c.(*topicCounters)
	}
	c := &topicCounters{events: ps.m.published.WithLabelValues(topic), bytes: ps.m.publishedB.WithLabelValues(topic)}
	ps.published.Store(topic, c)
	return c
}

// eventAttrs are the log attributes that identify p's event: its id, its
// aggregate id (the record key) and, when the outbox row carried one, its
// W3C traceparent.
func eventAttrs(p *pending) []any {
	attrs := []any{"event_id", p.id}
	if p.msg == nil {
		return attrs
	}
	if p.msg.Key != nil {
		if k, err := p.msg.Key.Encode(); err == nil {
			attrs = append(attrs, "aggregate_id", string(k))
		}
	}
	for _, h := range p.msg.Headers {
		if string(h.Key) == traceparentHeader {
			attrs = append(attrs, traceparentHeader, string(h.Value))
			break
		}
	}
	return attrs
}

// traceparentHeader is the W3C trace context header; an outbox row's
// headers column may carry it, and logs follow it end to end.
const traceparentHeader = "traceparent"

// errors drains failures: the first ends the session, since sarama moves on
// after a failed record and later ones could land behind a gap.
func (ps *producerSession) errors() error {
	first := true
	for pe := range ps.prod.Errors() {
		ps.m.publishErrors.Inc()
		p, _ := pe.Msg.Metadata.(*pending)
		if p != nil && errors.Is(pe.Err, sarama.ErrMessageSizeTooLarge) {
			ps.limits.refused(pe.Msg.Topic, p.id.String())
		}
		if first {
			first = false
			err := fmt.Errorf("produce to %s: %w", pe.Msg.Topic, pe.Err)
			if p != nil {
				err = fmt.Errorf("produce event %s to %s: %w", p.id, pe.Msg.Topic, pe.Err)
				ps.log.Warn("publish failed; the session restarts", append(eventAttrs(p), "topic", pe.Msg.Topic, "error", pe.Err)...)
			}
			ps.fail(err)
			// Records still buffered must fail rather than land behind the
			// failed one; a closed client makes every later send fail.
			_ = ps.client.Close()
		}
	}
	return nil
}
