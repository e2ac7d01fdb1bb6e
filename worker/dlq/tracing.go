package dlq

import (
	"context"
	"strconv"

	"github.com/IBM/sarama"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventforge/eventforge/internal/shared/tracing"
)

// traceReplay starts the producer span of a replay of l when tracing is on:
// a child of the span the dead letter's traceparent names (the worker's
// process span that gave up), so the replayed event stays in its trace. msg
// is the record to send: its traceparent becomes the span's. A dead letter
// without one starts its event's own trace (tracing.WithEventRoot).
func traceReplay(l Letter, msg *sarama.ProducerMessage) trace.Span {
	if !tracing.Enabled() {
		return nil
	}
	ctx := tracing.WithEventRoot(tracing.FromHeaders(context.Background(), l.Headers), l.EventID)
	_, span := tracing.Tracer().Start(ctx, "send "+msg.Topic,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(tracing.Messaging(tracing.OpSend, msg.Topic, l.EventID,
			attribute.String("eventforge.replay_of", l.Topic+"/"+strconv.Itoa(int(l.Partition))+"@"+strconv.FormatInt(l.Offset, 10)))...))
	msg.Headers = tracing.SetRecordHeaders(msg.Headers, span.SpanContext())
	return span
}

// endReplay ends a replay's span with where the record went, or its error.
func endReplay(span trace.Span, partition int32, offset int64, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(
			attribute.String("messaging.destination.partition.id", strconv.Itoa(int(partition))),
			attribute.Int64("messaging.kafka.offset", offset))
	}
	span.End()
}
