package worker

import (
	"context"
	"strconv"

	"github.com/IBM/sarama"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/tracing"
)

// Attributes of the worker's process span beyond the messaging conventions.
const (
	attrResult      = "eventforge.result"
	attrAttempt     = "eventforge.attempt"
	attrAggregateID = "eventforge.aggregate_id"
	attrConsumer    = "eventforge.consumer"
)

// Span results besides Result's: the event is being retried when the
// session ended, or went to the dead-letter topic.
const (
	spanRetried      = "retried"
	spanDeadLettered = "dead-lettered"
)

// eventSpans are the process spans of a run of consecutive records, one per
// record, each a child of the producer span its record's traceparent names.
// A nil *eventSpans (tracing off) does nothing.
type eventSpans struct {
	spans []trace.Span
	done  []bool
}

// traceRun starts the process spans of msgs when tracing is on.
func (p *partitionWorker) traceRun(msgs []*sarama.ConsumerMessage) *eventSpans {
	if !tracing.Enabled() {
		return nil
	}
	s := &eventSpans{spans: make([]trace.Span, len(msgs)), done: make([]bool, len(msgs))}
	for i, m := range msgs {
		s.spans[i] = p.startSpan(m)
	}
	return s
}

func (p *partitionWorker) startSpan(m *sarama.ConsumerMessage) trace.Span {
	ctx := tracing.FromRecord(context.Background(), m.Headers)
	id, _ := outbox.EventIDHeader(m.Headers)
	ctx = tracing.WithEventRoot(ctx, id) // no traceparent: the trace the relay decided on
	_, span := tracing.Tracer().Start(ctx, "process "+m.Topic,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(tracing.Messaging(tracing.OpProcess, m.Topic, id,
			attribute.String("messaging.destination.partition.id", strconv.Itoa(int(m.Partition))),
			attribute.Int64("messaging.kafka.offset", m.Offset),
			attribute.String("messaging.consumer.group.name", p.r.cfg.Group),
			attribute.String("messaging.kafka.message.key", string(m.Key)),
			attribute.String(attrAggregateID, string(m.Key)),
			attribute.String(attrConsumer, p.r.cfg.Consumer))...))
	return span
}

// context returns ctx carrying the span of record k (the first record's
// for k < 0: a batch's transaction), so the handler's own spans join it and
// the apply histogram takes its trace id as exemplar.
func (s *eventSpans) context(ctx context.Context, k int) context.Context {
	if s == nil || len(s.spans) == 0 {
		return ctx
	}
	return trace.ContextWithSpan(ctx, s.spans[max(k, 0)])
}

// settle ends the span of record k with its result and the attempts spent.
func (s *eventSpans) settle(k int, result string, attempts int) {
	if s == nil || s.done[k] {
		return
	}
	s.done[k] = true
	s.spans[k].SetAttributes(attribute.String(attrResult, result), attribute.Int(attrAttempt, attempts))
	if result == spanDeadLettered {
		s.spans[k].SetStatus(codes.Error, "dead-lettered")
	}
	s.spans[k].End()
}

// retry notes a failed attempt of record k that will be retried.
func (s *eventSpans) retry(k, attempt int, err error) {
	if s == nil {
		return
	}
	s.spans[k].AddEvent("retry", trace.WithAttributes(attribute.Int(attrAttempt, attempt), attribute.String("error.message", err.Error())))
}

// end ends the spans not settled: their events were being retried when the
// run stopped (the session ended or a dead letter could not be sent).
func (s *eventSpans) end() {
	if s == nil {
		return
	}
	for k := range s.spans {
		s.settle(k, spanRetried, 0)
	}
}

// spanContext is the span context of record k, invalid when not traced.
func (s *eventSpans) spanContext(k int) trace.SpanContext {
	if s == nil {
		return trace.SpanContext{}
	}
	return s.spans[k].SpanContext()
}
