package worker

import (
	"errors"
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventforge/eventforge/internal/shared/tracing"
	"github.com/eventforge/eventforge/worker/dlq"
)

const relayTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func tracedRecord(offset int64, key string) *sarama.ConsumerMessage {
	return &sarama.ConsumerMessage{Topic: "orders", Partition: 2, Offset: offset, Key: []byte(key), Headers: []*sarama.RecordHeader{
		{Key: []byte("event_id"), Value: []byte("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")},
		{Key: []byte(tracing.Traceparent), Value: []byte(relayTraceparent)},
	}}
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	out := map[attribute.Key]string{}
	for _, a := range s.Attributes() {
		out[a.Key] = a.Value.String()
	}
	return out
}

// TestProcessSpansAreChildrenOfTheRecordsSpan: one consumer span per record,
// a child of the span its traceparent names, ended with its result, the
// attempt and the aggregate id; a span not settled ends as retried.
func TestProcessSpansAreChildrenOfTheRecordsSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	defer tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))()
	p := &partitionWorker{r: &Runner{cfg: Config{Group: "g", Consumer: "c"}}}
	spans := p.traceRun([]*sarama.ConsumerMessage{tracedRecord(7, "o-1"), tracedRecord(8, "o-2"), tracedRecord(9, "o-3")})
	if got := trace.SpanContextFromContext(spans.context(t.Context(), 1)); !got.Equal(spans.spanContext(1)) {
		t.Fatal("context does not carry the record's span")
	}
	spans.retry(1, 1, errors.New("boom"))
	spans.settle(0, Applied.String(), 1)
	spans.settle(1, spanDeadLettered, 3)
	spans.end()
	spans.settle(0, Duplicate.String(), 9) // settled once only

	ended := rec.Ended()
	if len(ended) != 3 {
		t.Fatalf("%d spans ended, want 3", len(ended))
	}
	want := []struct{ result, attempt, offset, key string }{
		{"applied", "1", "7", "o-1"}, {"dead-lettered", "3", "8", "o-2"}, {"retried", "0", "9", "o-3"},
	}
	for i, s := range ended {
		a := spanAttrs(s)
		if s.Parent().SpanID().String() != "00f067aa0ba902b7" || s.SpanKind() != trace.SpanKindConsumer || s.Name() != "process orders" {
			t.Errorf("span %d: %q kind %v parent %v", i, s.Name(), s.SpanKind(), s.Parent())
		}
		w := want[i]
		if a[attrResult] != w.result || a[attrAttempt] != w.attempt || a["messaging.kafka.offset"] != w.offset ||
			a[attrAggregateID] != w.key || a["messaging.system"] != "kafka" || a["messaging.consumer.group.name"] != "g" ||
			a["messaging.message.id"] != "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b" {
			t.Errorf("span %d attributes %v, want %+v", i, a, w)
		}
	}
	if ev := ended[1].Events(); len(ev) != 1 || ev[0].Name != "retry" {
		t.Errorf("dead-lettered span events %v, want one retry", ev)
	}
}

// TestDeadLetterContinuesFromTheProcessSpan: the dead letter's traceparent
// names the worker's span, so the letter and its replay stay in the trace.
func TestDeadLetterContinuesFromTheProcessSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	defer tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))()
	p := &partitionWorker{r: &Runner{cfg: Config{Group: "g", Consumer: "c"}}}
	m := tracedRecord(7, "o-1")
	spans := p.traceRun([]*sarama.ConsumerMessage{m})
	letter := dlq.Message(m, dlq.Info{Error: "x", Attempts: 1, Trace: spans.spanContext(0)})
	var tp string
	n := 0
	for _, h := range letter.Headers {
		if string(h.Key) == tracing.Traceparent {
			tp, n = string(h.Value), n+1
		}
	}
	if n != 1 || tp != tracing.FormatTraceparent(spans.spanContext(0)) {
		t.Fatalf("dead letter traceparent %q (%d headers), want the process span's", tp, n)
	}
	if plain := dlq.Message(m, dlq.Info{Error: "x"}); string(plain.Headers[1].Value) != relayTraceparent {
		t.Fatalf("untraced dead letter lost the record's traceparent: %v", plain.Headers)
	}
}

func TestNoProcessSpansWhenTracingIsOff(t *testing.T) {
	p := &partitionWorker{r: &Runner{}}
	spans := p.traceRun([]*sarama.ConsumerMessage{tracedRecord(1, "k")})
	if spans != nil || spans.spanContext(0).IsValid() {
		t.Fatal("spans with tracing off")
	}
	spans.settle(0, "applied", 1) // a nil *eventSpans does nothing
	spans.end()
}

// TestARecordWithoutTraceparentIsInItsEventsTrace: a record the relay left
// unsampled carries no traceparent; its process span is the root of its
// event's own trace (tracing.RootTraceID of its event_id), which the
// worker's sampler decides on as the relay's did (tracing.SampleRoot).
func TestARecordWithoutTraceparentIsInItsEventsTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	sampling := tracing.Sampling{Name: tracing.SamplerParentBasedTraceIDRatio, Ratio: 0.5}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampling.Sampler()), sdktrace.WithIDGenerator(tracing.IDGenerator()), sdktrace.WithSpanProcessor(rec))
	defer tracing.UseSampled(tp, sampling)()
	p := &partitionWorker{r: &Runner{cfg: Config{Group: "g", Consumer: "c"}}}
	msgs := make([]*sarama.ConsumerMessage, 100)
	ids := make([]uuid.UUID, len(msgs))
	for i := range msgs {
		ids[i] = uuid.New()
		msgs[i] = &sarama.ConsumerMessage{Topic: "orders", Offset: int64(i), Key: []byte("o-1"),
			Headers: []*sarama.RecordHeader{{Key: []byte("event_id"), Value: []byte(ids[i].String())}}}
	}
	spans := p.traceRun(msgs)
	sampled := 0
	for i, id := range ids {
		sc := spans.spanContext(i)
		if sc.TraceID() != tracing.RootTraceID(id) || sc.IsSampled() != tracing.SampleRoot(id) {
			t.Fatalf("record %d: trace %s sampled %v, want %s sampled %v", i, sc.TraceID(), sc.IsSampled(), tracing.RootTraceID(id), tracing.SampleRoot(id))
		}
		if sc.IsSampled() {
			sampled++
		}
	}
	spans.end()
	if sampled == 0 || sampled == len(ids) || len(rec.Ended()) != sampled {
		t.Fatalf("%d of %d sampled, %d spans exported", sampled, len(ids), len(rec.Ended()))
	}
}
