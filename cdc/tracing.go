package cdc

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/tracing"
)

// traceRecord puts p's record in a send span of b when tracing is on
// (docs/tracing.md): the span of the records of one trace sent together,
// not one span per event, which would cost the relay more than the rest of
// its work when many records share a trace (rows without a traceparent, or
// a job's rows in its trace). The record's traceparent becomes the span's;
// the span is a child of the row's sampled traceparent (or Debezium's
// tracingspancontext) when there is one. A row whose traceparent is not
// sampled passes unchanged; a record already set aside keeps its writer's
// traceparent for traceRejected. It runs before p's size is taken: the
// headers it adds count.
func traceRecord(b *tracing.Batcher, e *outbox.Event, p *pending) {
	if !tracing.Enabled() {
		return
	}
	writer := writerContext(e.Headers)
	if p.reason != "" { // set aside, never sent: keep its writer's context for its span
		if writer.IsValid() && tracing.HeaderValue(p.rec.Msg.Headers, tracing.Traceparent) == nil {
			p.rec.Msg.Headers = tracing.SetRecordHeaders(p.rec.Msg.Headers, writer)
		}
		return
	}
	bt := b.Join(writer, p.id, p.rec.Msg.Topic, p.commit)
	if bt == nil {
		return
	}
	p.rec.Msg.Headers = bt.Mark(p.rec.Msg.Headers)
	p.rec.Trace = bt
}

// writerContext is the span context an outbox row's headers carry: parsed
// without allocating unless a tracestate comes with it.
func writerContext(headers map[string]string) trace.SpanContext {
	tp := headers[tracing.Traceparent]
	if tp == "" {
		return trace.SpanContext{}
	}
	if headers[tracing.Tracestate] != "" {
		return trace.SpanContextFromContext(tracing.FromMap(context.Background(), headers))
	}
	sc, _ := tracing.ParseTraceparent(tp)
	return sc
}

// traceSend is traceRecord for the stream's records.
func (s *stream) traceSend(e *outbox.Event, p *pending) { traceRecord(&s.spans, e, p) }

// batchOf is the send span batch of p, nil when p is untraced.
func batchOf(p *pending) *tracing.Batch {
	bt, _ := p.rec.Trace.(*tracing.Batch)
	return bt
}

// ackObserved records the broker's ack of p: the commit→ack histogram
// (with the trace id of p's send span as exemplar, once a batch, when it is
// sampled) and p's part in that span.
func (ps *producerSession) ackObserved(p *pending) {
	sc, secs := traceAcked(p)
	if !p.commit.IsZero() {
		tracing.Observe(ps.m.commitToAck, secs, sc)
	}
}

// traceAcked settles p's part in its send span, if any, and returns the
// span context to give its commit→ack observation as exemplar (invalid for
// none) and that commit→ack time (0 without a commit time).
func traceAcked(p *pending) (trace.SpanContext, float64) {
	var secs float64
	if !p.commit.IsZero() {
		secs = time.Since(p.commit).Seconds()
	}
	bt := batchOf(p)
	if bt == nil {
		return trace.SpanContext{}, secs
	}
	p.rec.Trace = nil
	a := tracing.Ack{ID: p.id, Key: p.msg.Key, Partition: p.msg.Partition, Offset: p.out.Offset, Seconds: secs}
	if p.out.Msg == nil { // not the produce engine's: the exactly-once producer set the offset
		a.Offset = p.msg.Offset
	}
	return bt.Acked(a), secs
}

// traceRejected records that p was set aside in outbox_rejected: a send
// span of its own with the reason, in its writer's trace (or its batch's).
func traceRejected(p *pending) {
	bt := batchOf(p)
	p.rec.Trace = nil
	if !tracing.Enabled() && bt == nil {
		return
	}
	var writer trace.SpanContext
	if p.msg != nil {
		writer, _ = tracing.ParseTraceparent(tracing.HeaderValue(p.msg.Headers, tracing.Traceparent))
	}
	topic := ""
	if p.msg != nil {
		topic = p.msg.Topic
	}
	tracing.Rejected(bt, writer, p.id, topic, p.reason, p.commit)
}
