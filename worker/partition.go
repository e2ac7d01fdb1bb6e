package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventforge/eventforge/internal/shared/failpoint"
	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/tracing"
	"github.com/eventforge/eventforge/worker/dlq"
)

// errStopped reports that the session ended before the work was done; the
// messages not marked come again, to this worker or another.
var errStopped = errors.New("consumer group session ended")

// partitionWorker applies the messages of one claimed partition in offset
// order. One goroutine (the claim loop) owns it.
type partitionWorker struct {
	r         *Runner
	topic     string
	partition int32
	key       string // topic/partition, its key in the outages
	log       *slog.Logger

	in    <-chan *sarama.ConsumerMessage // the claim's messages
	batch []*sarama.ConsumerMessage      // being processed
	ahead []*sarama.ConsumerMessage      // taken from in to look ahead; processed next
	dead  deadStreak
}

func (r *Runner) newPartitionWorker(topic string, partition int32, in <-chan *sarama.ConsumerMessage) *partitionWorker {
	return &partitionWorker{r: r, topic: topic, partition: partition, key: fmt.Sprintf("%s/%d", topic, partition),
		log: r.cfg.Logger.With("topic", topic, "partition", partition), in: in}
}

// popAhead returns the oldest message taken to look ahead, or nil.
func (p *partitionWorker) popAhead() *sarama.ConsumerMessage {
	if len(p.ahead) == 0 {
		return nil
	}
	m := p.ahead[0]
	p.ahead = p.ahead[1:]
	return m
}

// pop returns the next message, looked at ahead or waiting in the claim,
// without blocking; nil when there is none.
func (p *partitionWorker) pop() *sarama.ConsumerMessage {
	if m := p.popAhead(); m != nil {
		return m
	}
	return receive(p.in)
}

// process handles msgs, consecutive messages of the partition, and calls
// mark with each offset once its outcome is durable: its transaction
// committed, or its dead letter acked. Runs of well-formed events go
// through applyRun; malformed records are dead-lettered where they stand.
// It returns errStopped when the session ends between transactions.
func (p *partitionWorker) process(ctx context.Context, msgs []*sarama.ConsumerMessage, mark func(offset int64)) error {
	p.batch = msgs
	defer func() { p.batch = nil }()
	evs := make([]Event, len(msgs))
	bad := make([]error, len(msgs))
	for i, m := range msgs {
		if evs[i], bad[i] = p.r.decodeRecord(ctx, p.key, m); errors.Is(bad[i], errStopped) {
			return errStopped
		}
	}
	for i := 0; i < len(msgs); {
		if ctx.Err() != nil {
			return errStopped
		}
		if bad[i] != nil {
			spans := p.traceRun(msgs[i : i+1])
			err := p.deadLetter(ctx, msgs[i], bad[i], 1, spans.spanContext(0))
			if err != nil {
				spans.end()
				return err
			}
			spans.settle(0, spanDeadLettered, 1)
			mark(msgs[i].Offset)
			i++
			continue
		}
		j := i + 1
		for j < len(msgs) && bad[j] == nil {
			j++
		}
		if err := p.applyRun(ctx, msgs[i:j], evs[i:j], mark); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// applyRun applies well-formed events: all in one transaction when there
// are several, and one by one (with retries and dead letters) when there is
// one or the batch fails, so a poison event cannot take its neighbours with
// it.
func (p *partitionWorker) applyRun(ctx context.Context, msgs []*sarama.ConsumerMessage, evs []Event, mark func(int64)) error {
	spans := p.traceRun(msgs)
	defer spans.end()
	if len(evs) > 1 {
		var results []Result
		err := p.attempt(spans.context(ctx, -1), "batch", func(ctx context.Context) (err error) {
			results, err = applyBatch(ctx, p.r.db, p.r.cfg.Consumer, p.r.handler, evs)
			return err
		})
		if err == nil {
			if err := p.applied(evs, results); err != nil {
				return err
			}
			for k, res := range results {
				spans.settle(k, res.String(), 1)
			}
			mark(msgs[len(msgs)-1].Offset)
			return nil
		}
		p.r.m.batchFallbacks.Inc()
		level := slog.LevelInfo
		if classify(err).waits() {
			level = slog.LevelDebug // the first event's attempt logs the outage, or its retry
		}
		p.log.Log(ctx, level, "batch failed; applying its events one by one", "events", len(evs), "error", err)
	}
	for k := range evs {
		if ctx.Err() != nil {
			return errStopped
		}
		if err := p.applyOne(ctx, msgs[k], evs[k], spans, k); err != nil {
			return err
		}
		mark(msgs[k].Offset)
	}
	return nil
}

// applied records that evs were applied with results: their transaction
// committed.
func (p *partitionWorker) applied(evs []Event, results []Result) error {
	p.r.outages.healthy(p.key)
	p.dead = deadStreak{}
	if err := p.afterCommit(evs); err != nil {
		return err
	}
	for _, res := range results {
		p.r.m.count(p.topic, res.String(), 1)
	}
	p.r.m.deadLetters.handled(p.topic, evs, results)
	return nil
}

// tries is the account of one event's failed attempts.
type tries struct {
	start    time.Time
	attempts int           // spent on the event's own failures
	waits    int           // waits for an outage
	waited   time.Duration // spent in outages: not the event's retry time
	outage   bool          // the events behind it failed the same way
	cause    string        // of the outage (causeOf)
}

// applyOne applies one event, retrying in place while the partition waits
// (see onFailure): its own failures within the attempt and time budget, an
// outage until it ends. It returns once the event is applied or
// dead-lettered. spans[k] is the event's process span.
func (p *partitionWorker) applyOne(ctx context.Context, m *sarama.ConsumerMessage, ev Event, spans *eventSpans, k int) error {
	t := tries{start: time.Now()}
	for n := 1; ; n++ {
		began := time.Now()
		var res Result
		err := p.attempt(spans.context(ctx, k), "single", func(ctx context.Context) (err error) {
			res, err = ApplyOnce(ctx, p.r.db, p.r.cfg.Consumer, p.r.handler, ev)
			return err
		})
		if err == nil {
			err = p.applied([]Event{ev}, []Result{res})
			spans.settle(k, res.String(), n)
			return err
		}
		waits := t.waits
		wait, deadLetter := p.onFailure(ctx, m, ev, err, &t)
		if deadLetter {
			if err := p.deadLetter(ctx, m, err, max(t.attempts, 1), spans.spanContext(k)); err != nil {
				return err
			}
			spans.settle(k, spanDeadLettered, n)
			return nil
		}
		spans.retry(k, n, err)
		if t.waits > waits {
			t.waited += time.Since(began) + wait
		}
		p.r.m.retried(p.topic)
		if !sleep(ctx, wait) {
			return errStopped
		}
	}
}

// onFailure decides what follows the failed attempt err of ev: a wait
// before the next attempt, or (deadLetter) the dead-letter topic. A
// database the probe finds not working, a missing schema object and a
// handler's DependencyUnavailable make the partition wait without spending
// attempts. Any other failure spends one (a rejected event all of them) and
// is retried within the budget; once it is spent, the event is
// dead-lettered only when it fails alone (see alone), else the partition
// waits for the outage the events behind it show.
func (p *partitionWorker) onFailure(ctx context.Context, m *sarama.ConsumerMessage, ev Event, err error, t *tries) (wait time.Duration, deadLetter bool) {
	cfg := &p.r.cfg
	v := p.r.judge(ctx, err)
	switch {
	case v.kind == kindPermanent:
		p.dead = deadStreak{}
		t.attempts++
		return 0, true
	case v.kind.waits():
		return p.waitOut(m, ev, v, t), false
	}
	if t.outage && causeOf(err) != t.cause { // the outage is over; the event fails otherwise now
		t.outage, t.attempts, t.start, t.waited = false, 0, time.Now(), 0
	}
	if !t.outage {
		t.attempts++
		wait = p.r.backoff.delay(t.attempts)
		retry := v.kind != kindRejected && t.attempts < cfg.MaxAttempts
		if retry && time.Since(t.start)-t.waited+wait <= cfg.MaxRetryTime {
			p.log.Info("apply failed; retrying", append(messageAttrs(m), "offset", ev.Offset, "attempt", t.attempts, "retry_in", wait, "error", err)...)
			return wait, false
		}
	}
	if !p.alone(ctx, ev, err) {
		t.outage, t.cause = true, causeOf(err)
		return p.waitOut(m, ev, verdict{kind: kindRepeated, why: err}, t), false
	}
	if perr := p.r.probe(ctx); perr != nil { // the database went away while the neighbours ran
		return p.waitOut(m, ev, verdict{kind: kindUnavailable, why: perr}, t), false
	}
	p.dead.add(err)
	return 0, true
}

// waitOut records that the partition waits before retrying ev for the
// outage v shows, and returns the wait.
func (p *partitionWorker) waitOut(m *sarama.ConsumerMessage, ev Event, v verdict, t *tries) time.Duration {
	t.waits++
	wait := p.r.backoff.delay(t.waits)
	attrs := append(messageAttrs(m), "topic", p.topic, "partition", p.partition, "offset", ev.Offset, "retry_in", wait)
	if obj := undefinedObject(v.why); obj != "" {
		attrs = append(attrs, "object", obj)
	}
	p.r.outages.of(v.kind).fail(p.key, "partition waits: "+v.kind.String(), v.why, attrs...)
	return wait
}

// attempt runs one transaction. Its context outlives the session's: a
// transaction in flight when the partition is revoked finishes (within
// ApplyTimeout) rather than being cut, and its offset is then committed by
// Cleanup.
func (p *partitionWorker) attempt(ctx context.Context, mode string, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.r.cfg.ApplyTimeout)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	tracing.Observe(p.r.m.applySeconds.WithLabelValues(mode), time.Since(start).Seconds(), trace.SpanContextFromContext(ctx))
	return err
}

// deadLetter produces m's dead letter and waits for the broker's ack before
// returning, retrying until it gets one or the session ends: only then may
// the caller mark the original offset (docs/design.md#bounded-retries).
// The dead letter's traceparent is sc, the event's process span, when valid.
func (p *partitionWorker) deadLetter(ctx context.Context, m *sarama.ConsumerMessage, cause error, attempts int, sc trace.SpanContext) error {
	if hook := p.r.cfg.hooks.beforeDeadLetter; hook != nil {
		hook(m)
	}
	info := dlq.Info{Error: cause.Error(), Attempts: attempts, Trace: sc}
	for n := 1; ; n++ {
		err := p.r.dl.send(m, info)
		if err == nil {
			break
		}
		wait := p.r.backoff.delay(n)
		p.r.outages.deadLetter.fail(p.key, "dead letter not acked; partition waits", err,
			append(messageAttrs(m), "topic", p.topic, "partition", p.partition, "offset", m.Offset, "retry_in", wait)...)
		if !sleep(ctx, wait) {
			return errStopped
		}
	}
	p.r.outages.deadLetter.ok(p.key)
	p.r.m.count(p.topic, resultDLQ, 1)
	p.r.m.deadLetters.add(m)
	p.log.Warn("dead-lettered", append(messageAttrs(m), "offset", m.Offset, "attempts", attempts, "dlq", dlq.Topic(m.Topic), "error", cause)...)
	return p.recordDeadLetter(ctx, m)
}

// recordDeadLetter writes the 'dlq' inbox row of m's event once its dead
// letter was acked, so that a later copy of the event is a duplicate rather
// than a second dead letter. It waits while the database is away; any
// other failure is logged and leaves the event unrecorded (a copy would be
// dead-lettered again, as before the inbox knew dead letters).
func (p *partitionWorker) recordDeadLetter(ctx context.Context, m *sarama.ConsumerMessage) error {
	id, ok := eventID(m)
	if !ok {
		return nil // malformed: no event to recognise
	}
	for n := 1; ; n++ {
		err := p.attempt(ctx, "single", func(ctx context.Context) error {
			return recordDeadLetter(ctx, p.r.db, p.r.cfg.Consumer, id)
		})
		if err == nil {
			p.r.outages.healthy(p.key)
			return nil
		}
		v := p.r.judge(ctx, err)
		if v.kind != kindUnavailable && v.kind != kindSchema {
			p.log.Warn("dead letter not recorded in the inbox; a copy of the event would be dead-lettered again",
				append(messageAttrs(m), "offset", m.Offset, "error", err)...)
			return nil
		}
		wait := p.r.backoff.delay(n)
		p.r.outages.of(v.kind).fail(p.key, "partition waits: "+v.kind.String(), v.why,
			append(messageAttrs(m), "topic", p.topic, "partition", p.partition, "offset", m.Offset, "retry_in", wait)...)
		if !sleep(ctx, wait) {
			return errStopped
		}
	}
}

// eventID is the event_id header of m, when it is a UUID.
func eventID(m *sarama.ConsumerMessage) (uuid.UUID, bool) {
	for _, h := range m.Headers {
		if h != nil && string(h.Key) == outbox.HeaderEventID {
			id, err := uuid.ParseBytes(h.Value)
			return id, err == nil
		}
	}
	return uuid.UUID{}, false
}

// afterCommit runs between a transaction's commit and the marking of its
// offsets: the window a crash turns into a redelivery.
func (p *partitionWorker) afterCommit(evs []Event) error {
	failpoint.Hit(failpoint.WorkerAfterCommitBeforeOffset)
	if hook := p.r.cfg.hooks.afterCommit; hook != nil {
		return hook(evs)
	}
	return nil
}

// messageAttrs are the log attributes that identify m's event, read from the
// record as found so they exist for malformed records too: event_id and
// traceparent headers, and the key as aggregate_id. The traceparent an outbox
// row carried follows the event into these lines.
func messageAttrs(m *sarama.ConsumerMessage) []any {
	attrs := make([]any, 0, 6)
	if id, ok := outbox.EventIDHeader(m.Headers); ok {
		attrs = append(attrs, "event_id", id)
	}
	var traceparent string
	for _, h := range m.Headers {
		if h != nil && string(h.Key) == outbox.HeaderTraceparent {
			traceparent = string(h.Value)
		}
	}
	attrs = append(attrs, "aggregate_id", string(m.Key))
	if traceparent != "" {
		attrs = append(attrs, outbox.HeaderTraceparent, traceparent)
	}
	return attrs
}
