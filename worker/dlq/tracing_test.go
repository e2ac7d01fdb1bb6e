package dlq

import (
	"errors"
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/eventforge/eventforge/internal/shared/tracing"
)

const workerTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestReplayContinuesTheLettersTrace: a replay's producer span is a child
// of the span the dead letter names, and the republished record carries it.
func TestReplayContinuesTheLettersTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	defer tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))()
	for _, tc := range []struct {
		name string
		err  error
	}{{"acked", nil}, {"refused", errors.New("no")}} {
		t.Run(tc.name, func(t *testing.T) {
			l := Letter{Topic: "orders.dlq", Partition: 1, Offset: 5, EventID: "e-1",
				Headers: []sarama.RecordHeader{{Key: []byte(tracing.Traceparent), Value: []byte(workerTraceparent)}}}
			msg := l.Republish()
			span := traceReplay(l, msg)
			endReplay(span, 2, 9, tc.err)
			ended := rec.Ended()
			s := ended[len(ended)-1]
			if s.Parent().SpanID().String() != "00f067aa0ba902b7" || s.Name() != "send orders" {
				t.Fatalf("replay span %q parent %v", s.Name(), s.Parent())
			}
			if got := string(msg.Headers[0].Value); got != tracing.FormatTraceparent(s.SpanContext()) {
				t.Fatalf("republished traceparent %q, want the replay span's", got)
			}
			if failed := s.Status().Code.String() == "Error"; failed != (tc.err != nil) {
				t.Fatalf("status %v for error %v", s.Status(), tc.err)
			}
		})
	}
}

// TestReplayOfALetterWithoutTraceparent: a dead letter that carries no
// traceparent (its event was not sampled) is replayed in its event's own
// trace, sampled as the relay and the worker decided on it.
func TestReplayOfALetterWithoutTraceparent(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	sampling := tracing.Sampling{Name: tracing.SamplerParentBasedTraceIDRatio, Ratio: 0.5}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampling.Sampler()), sdktrace.WithIDGenerator(tracing.IDGenerator()), sdktrace.WithSpanProcessor(rec))
	defer tracing.UseSampled(tp, sampling)()
	for range 20 {
		id := uuid.New()
		l := Letter{Topic: "orders.dlq", EventID: id.String()}
		span := traceReplay(l, l.Republish())
		sc := span.SpanContext()
		endReplay(span, 0, 1, nil)
		if sc.TraceID() != tracing.RootTraceID(id) || sc.IsSampled() != tracing.SampleRoot(id) {
			t.Fatalf("replay of %s: trace %s sampled %v, want %s sampled %v", id, sc.TraceID(), sc.IsSampled(), tracing.RootTraceID(id), tracing.SampleRoot(id))
		}
	}
}

func TestNoReplaySpanWhenTracingIsOff(t *testing.T) {
	l := Letter{Topic: "orders.dlq", Headers: []sarama.RecordHeader{{Key: []byte(tracing.Traceparent), Value: []byte(workerTraceparent)}}}
	msg := l.Republish()
	if span := traceReplay(l, msg); span != nil || string(msg.Headers[0].Value) != workerTraceparent {
		t.Fatalf("tracing off: span %v, traceparent %q", span, msg.Headers[0].Value)
	}
}
