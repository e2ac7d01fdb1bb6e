package cdc

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventforge/eventforge/internal/outbox"
	"github.com/eventforge/eventforge/internal/tracing"
)

// Attributes of the relay's producer span beyond the messaging conventions.
const (
	attrCommitToAck = "eventforge.commit_to_ack_seconds"
	attrLSN         = "eventforge.lsn"
)

// traceSend starts p's producer span when tracing is on: a child of the span
// context the outbox row carried (its traceparent and tracestate headers),
// started at the transaction's commit so that the span's length is the
// commit→ack time. The record's traceparent (and tracestate) become the
// span's, so the consumer continues from it. It runs before p's size is
// taken: the headers it adds count.
func (s *stream) traceSend(e *outbox.Event, p *pending) {
	if !tracing.Enabled() || p.reason != "" || (s.cfg != nil && s.cfg.ExactlyOnce) {
		return // exactly-once records are acked per Kafka transaction, elsewhere: no span
	}
	ctx := context.Background()
	if e.Headers[tracing.Traceparent] != "" {
		ctx = tracing.FromMap(ctx, e.Headers)
	}
	start := time.Now()
	if !p.commit.IsZero() && p.commit.Before(start) {
		start = p.commit
	}
	msg := &p.rec.Msg
	// Name and attributes only once the sampler kept the span: an event it
	// drops costs its ids and its traceparent header, no more.
	_, span := tracing.Tracer().Start(ctx, "send", producerKind, trace.WithTimestamp(start))
	msg.Headers = tracing.SetRecordHeaders(msg.Headers, span.SpanContext())
	if !span.IsRecording() {
		return
	}
	span.SetName("send " + msg.Topic)
	span.SetAttributes(tracing.Messaging(tracing.OpSend, msg.Topic, e.ID.String(),
		attribute.String("messaging.kafka.message.key", e.AggregateID),
		attribute.Int64(attrLSN, int64(p.lsn)))...)
	p.rec.Span = span
}

// producerKind is the option of every producer span, made once.
var producerKind = trace.WithSpanKind(trace.SpanKindProducer)

// ackObserved records the broker's ack of p: the commit→ack histogram
// (with p's trace id as exemplar when it is sampled) and the end of its
// producer span, with the partition and offset the broker gave.
func (ps *producerSession) ackObserved(p *pending) {
	span := p.rec.Span
	var secs float64
	if !p.commit.IsZero() {
		secs = time.Since(p.commit).Seconds()
	}
	if span == nil {
		if !p.commit.IsZero() {
			ps.m.commitToAck.Observe(secs)
		}
		return
	}
	if !p.commit.IsZero() {
		tracing.Observe(ps.m.commitToAck, secs, span.SpanContext())
	}
	// One call: the span's attributes grow once.
	attrs := [3]attribute.KeyValue{
		attribute.String("messaging.destination.partition.id", strconv.Itoa(int(p.msg.Partition))),
		attribute.Float64(attrCommitToAck, secs),
		attribute.Int64("messaging.kafka.offset", p.out.Offset),
	}
	n := len(attrs)
	if p.out.Offset < 0 { // the broker answered a duplicate without an offset
		n--
	}
	span.SetAttributes(attrs[:n]...)
	span.End()
	p.rec.Span = nil
}
