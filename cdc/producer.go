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

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventforge/eventforge/cdc/ack"
	"github.com/eventforge/eventforge/cdc/produce"
	"github.com/eventforge/eventforge/internal/shared/failpoint"
	"github.com/eventforge/eventforge/internal/shared/kafka"
	"github.com/eventforge/eventforge/internal/shared/outbox"
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
	lsn    pglogrepl.LSN  // the INSERT's WAL position
	commit time.Time      // the transaction's commit time
	reason string         // set when the event cannot be produced at all
	out    produce.Record // msg as the produce engine sees it
	txn    pglogrepl.LSN  // exactly-once: the transaction's final LSN (its BEGIN's)
	end    pglogrepl.LSN  // exactly-once: set on a transaction-end marker (msg nil), its end LSN
	ends   bool           // exactly-once: msg is the position record that ends a Kafka transaction
	pool   *sync.Pool     // the stream's pool it came from, if any: release returns it there
}

// ackTracker is what the producer pipeline needs of the tracker.
type ackTracker interface {
	Ack(ack.Token)
}

// producerSession is one stream session's Kafka side: it feeds events to
// the produce engine (per-partition generations, docs/design.md#generations),
// in exactly-once mode through the feeder that cuts Kafka transactions. A refused
// record is retried, set aside in outbox_rejected, or ends the session or
// the relay, by error class (produce.Classify).
type producerSession struct {
	cfg      *Config
	log      *slog.Logger
	m        *metrics
	tr       ackTracker
	limits   *topics.Limits
	client   sarama.Client
	eng      *produce.Engine[*pending]
	sc       *sarama.Config
	topics   *topics.Manager
	maxBytes int // the producer's MaxMessageBytes: the record limit
	db       *pgx.Conn
	rejected setaside.Set // already in outbox_rejected: skipped on replay
	eos      *eosFeeder   // exactly-once mode: cuts eng's input into Kafka transactions

	published sync.Map // topic -> *topicCounters, saves label lookups per ack
}

func newProducerSession(ctx context.Context, cfg *Config, lim *topics.Limits, reqs *kafka.ProduceRequests, log *slog.Logger) (*producerSession, error) {
	maxBytes := lim.Current()
	sc, err := cfg.producerConfig(maxBytes)
	if err != nil {
		return nil, err
	}
	sc.MetricRegistry = reqs.Registry() // counts the session's produce requests
	client, err := connectKafka(ctx, cfg.Kafka.Brokers, sc)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		err = fmt.Errorf("connect to Kafka %v: %w", cfg.Kafka.Brokers, err)
		if kafka.Unrecoverable(err) { // wrong credentials or an untrusted broker: retrying cannot help
			return nil, fatal(kafka.Explain(err))
		}
		return nil, err
	}
	tp, err := topics.New(cfg.topicSettings(), client, lim)
	if err != nil {
		client.Close()
		return nil, err
	}
	ps := &producerSession{cfg: cfg, log: log, limits: lim, client: client, topics: tp, maxBytes: maxBytes, sc: sc}
	if err := ps.startProducer(ctx); err != nil {
		ps.close()
		return nil, err
	}
	return ps, nil
}

// startProducer starts the session's producer: the produce engine, in
// exactly-once mode the slot's transactional producer (which fences every
// earlier one) and the feeder that reads the position it left.
func (ps *producerSession) startProducer(ctx context.Context) error {
	h := pendingHooks{admit: ps.handle, delivered: ps.delivered, reject: ps.reject, tooLarge: ps.tooLarge, failed: ps.failed}
	txnID := ""
	if ps.cfg.ExactlyOnce {
		txnID, h.committing, h.committed = ps.sc.Producer.Transaction.ID, ps.committing, ps.committed
	}
	var err error
	if ps.eng, err = newEngine(ctx, ps.client, ps.sc, ps.maxBytes, txnID, h, ps.log); err != nil {
		return startError(ctx, err)
	}
	if ps.cfg.ExactlyOnce {
		ps.eos, err = newEOSFeeder(ctx, ps)
	}
	return err
}

// startError explains a producer that could not start.
func startError(ctx context.Context, err error) error {
	if ctx.Err() == nil && kafka.Unrecoverable(err) {
		return fatal(kafka.Explain(err))
	}
	return fmt.Errorf("start Kafka producer: %w", err)
}

// connectKafka is sarama.NewClient, given up when ctx ends: against an
// unreachable cluster the client retries its first metadata request for many
// seconds, and a shutdown must not wait for that. A client that connects
// after ctx ended is closed at once.
func connectKafka(ctx context.Context, brokers []string, sc *sarama.Config) (sarama.Client, error) {
	type conn struct {
		client sarama.Client
		err    error
	}
	ch := make(chan conn, 1)
	go func() {
		c, err := sarama.NewClient(brokers, sc)
		ch <- conn{c, err}
	}()
	select {
	case c := <-ch:
		return c.client, c.err
	case <-ctx.Done():
		go func() {
			if c := <-ch; c.err == nil {
				_ = c.client.Close()
			}
		}()
		return nil, context.Cause(ctx)
	}
}

// close discards a producer that never ran.
func (ps *producerSession) close() { ps.client.Close() }

// feed hands events to the producer and settles its results, until in
// closes or ctx ends. It checks sizes and records rejections, so the
// stream goroutine never waits on Kafka or on these writes.
func (ps *producerSession) feed(ctx context.Context, in <-chan *pending) error {
	if ps.eos != nil {
		return ps.eos.feed(ctx, in)
	}
	return ps.eng.Run(ctx, in, false)
}

// handle checks an event before it goes to the producer: false when it was
// settled here (recorded by an earlier session, or set aside now).
func (ps *producerSession) handle(ctx context.Context, p *pending) (bool, error) {
	if ps.skipReplay(p) {
		ps.tr.Ack(p.tok) // recorded by an earlier session
		return false, nil
	}
	if p.reason == "" {
		if err := ps.ensureTopic(ctx, p.msg.Topic); err != nil {
			if p.reason = setaside.Reason(err); p.reason == "" {
				return false, err
			}
			return false, ps.reject(ctx, p)
		}
		if ps.limits.Current() < ps.maxBytes {
			return false, errLimitLowered
		}
		if p.size > ps.maxBytes {
			p.reason = fmt.Sprintf("record of %d bytes exceeds the limit of %d bytes (--max-message-bytes, or the smallest max.message.bytes of the relay's topics)", p.size, ps.maxBytes)
		}
	}
	if p.reason != "" {
		return false, ps.reject(ctx, p)
	}
	return true, nil
}

// ensureTopic is topics.Manager.Ensure (a refused topic setting made
// fatal), given up when ctx ends: against an
// unreachable cluster its admin requests retry for many seconds, and a
// shutdown must not wait for them. An abandoned call ends on its own once
// the session has closed the client; nothing uses the session's topics
// after that.
func (ps *producerSession) ensureTopic(ctx context.Context, topic string) error {
	if ps.topics.Ensured(topic) {
		return nil // the usual case, without a goroutine
	}
	done := make(chan error, 1)
	go func() { done <- ensureTopicOrStop(ctx, ps.topics, topic) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// reject records the event durably before acking past it (docs/design.md#rejected-records).
func (ps *producerSession) reject(ctx context.Context, p *pending) error {
	if err := setaside.Record(ctx, ps.db, p.id, p.lsn, p.msg.Topic, p.reason); err != nil {
		return err
	}
	ps.rejected.Add(p.id, p.lsn)
	traceRejected(p)
	ps.m.rejected.Inc()
	ps.log.Warn("event rejected: recorded in outbox_rejected", append(eventAttrs(p), "lsn", p.lsn, "topic", p.msg.Topic, "reason", p.reason)...)
	ps.tr.Ack(p.tok)
	return nil
}

// delivered acks an event the broker acknowledged; nothing uses p after
// it (the stream may reuse it).
func (ps *producerSession) delivered(p *pending) {
	ps.tr.Ack(p.tok)
	failpoint.Hit(failpoint.CDCAfterAckBeforeConfirm)
	c := ps.counters(p.msg.Topic)
	c.events.Inc()
	c.bytes.Add(float64(p.size))
	ps.ackObserved(p) // commit→ack, with its part in the send span (which keeps nothing of p)
	p.release()
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
		if string(h.Key) == outbox.HeaderTraceparent {
			attrs = append(attrs, outbox.HeaderTraceparent, string(h.Value))
			break
		}
	}
	return attrs
}

// failed counts an error the producer handed back.
func (ps *producerSession) failed(*pending, error) { ps.m.publishErrors.Inc() }

// tooLarge decides on a record the broker refused as too large: the topic's
// limit is read again. A record over it is set aside with the broker's
// reason; otherwise its batch was too large, and the session restarts with
// the lower limit (the replay skips nothing: no event was recorded).
func (ps *producerSession) tooLarge(_ context.Context, p *pending, err error) (string, error) {
	conf, lerr := ps.topics.Config(p.msg.Topic)
	if lerr != nil {
		return "", fmt.Errorf("produce event %s to %s: %w; then %w", p.id, p.msg.Topic, err, lerr)
	}
	limit := conf.MaxMessageBytes - topics.BatchOverhead
	if p.size <= limit && limit < ps.maxBytes {
		ps.limits.Set(p.msg.Topic, limit)
		return "", errLimitLowered
	}
	return fmt.Sprintf("the broker refused the record (%d bytes) as too large (topic max.message.bytes %d): %v", p.size, limit+topics.BatchOverhead, err), nil
}

// producerCloseGrace bounds how long a session waits for the producer to
// close once the session is over; the drain before it is bounded by
// --shutdown-timeout.
const producerCloseGrace = 2 * time.Second

// startDrainers returns a channel that closes once the producer is done:
// the engine settles its own results, so it closes once the engine's
// senders ended, after feed returned.
func (ps *producerSession) startDrainers() <-chan struct{} {
	done := make(chan struct{})
	go func() { <-ps.eng.Done(); ps.eng.Wait(); close(done) }()
	return done
}

// shutdown ends a session's producer (feed closed its input): closing the
// client first makes records still in sarama fail at once instead of being
// retried against an unreachable broker; nothing acked is lost, since the
// stream confirmed only acked events. It waits at most producerCloseGrace:
// the drainers end on their own when sarama gives up.
func (ps *producerSession) shutdown(drained <-chan struct{}) {
	_ = ps.client.Close()
	t := time.NewTimer(producerCloseGrace)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		ps.log.Warn("the Kafka producer did not close in time; going on without it", "waited", producerCloseGrace)
	}
}

// handOver sizes p, adds it to the in-flight window of tr and hands it to
// feed, or stops when ctx ends.
func handOver(ctx context.Context, tr *ack.Tracker, feed chan<- *pending, p *pending) error {
	p.size = p.msg.ByteSize(recordVersion)
	p.tok = tr.Add(p.size)
	select {
	case feed <- p:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
