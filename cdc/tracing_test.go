package cdc

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventforge/eventforge/internal/outbox"
	"github.com/eventforge/eventforge/internal/tracing"
)

const rowTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// tracedPending builds the pending event of an outbox row whose headers
// carry rowTraceparent, and passes it through traceSend as publish does.
func tracedPending(t *testing.T, commit time.Time) (*pending, *outbox.Event) {
	t.Helper()
	e := &outbox.Event{ID: uuid.New(), AggregateType: "orders", AggregateID: "o-1", EventType: "order.created",
		Payload: []byte(`{}`), Headers: map[string]string{tracing.Traceparent: rowTraceparent}, CommitTime: commit}
	p := &pending{id: e.ID, lsn: 0x1234, commit: commit}
	if err := outbox.NewBuilder("").Build(&p.rec, e); err != nil {
		t.Fatal(err)
	}
	(&stream{}).traceSend(e, p)
	p.msg = &p.rec.Msg
	return p, e
}

func recordHeader(p *pending, key string) string {
	for _, h := range p.msg.Headers {
		if string(h.Key) == key {
			return string(h.Value)
		}
	}
	return ""
}

func TestProducerSpanContinuesTheRowsTraceAndEndsOnAck(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	defer tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))()
	commit := time.Now().Add(-1500 * time.Millisecond)
	p, e := tracedPending(t, commit)
	if p.rec.Span == nil {
		t.Fatal("no producer span on the record")
	}
	sc := p.rec.Span.SpanContext()
	if got := recordHeader(p, tracing.Traceparent); got != tracing.FormatTraceparent(sc) || got == rowTraceparent {
		t.Fatalf("record traceparent %q, want the producer span's %q", got, tracing.FormatTraceparent(sc))
	}
	p.msg.Partition, p.out.Offset = 3, 17
	hist := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "c2a", Buckets: []float64{10}})
	(&producerSession{m: &metrics{commitToAck: hist}}).ackObserved(p)

	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	s := ended[0]
	if s.Parent().SpanID().String() != "00f067aa0ba902b7" || s.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("parent %v, want the row's span", s.Parent())
	}
	if s.SpanKind() != trace.SpanKindProducer || s.Name() != "send orders" {
		t.Errorf("span %q kind %v", s.Name(), s.SpanKind())
	}
	if !s.StartTime().Equal(commit) || s.EndTime().Sub(s.StartTime()) < 1500*time.Millisecond {
		t.Errorf("span %v..%v, want it to start at the commit %v", s.StartTime(), s.EndTime(), commit)
	}
	attrs := map[attribute.Key]string{}
	for _, a := range s.Attributes() {
		attrs[a.Key] = a.Value.String()
	}
	for k, v := range map[attribute.Key]string{"messaging.system": "kafka", "messaging.destination.name": "orders",
		"messaging.message.id": e.ID.String(), "messaging.destination.partition.id": "3", "messaging.kafka.offset": "17",
		"messaging.kafka.message.key": "o-1"} {
		if attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, attrs[k], v)
		}
	}
	if attrs[attrCommitToAck] == "" {
		t.Error("no commit→ack attribute")
	}
	var m dto.Metric
	_ = hist.Write(&m)
	if ex := m.GetHistogram().GetBucket()[0].GetExemplar(); ex == nil || ex.GetLabel()[0].GetValue() != sc.TraceID().String() {
		t.Errorf("commit→ack exemplar %v, want trace %s", ex, sc.TraceID())
	}
}

func TestNoProducerSpanWhenTracingIsOff(t *testing.T) {
	p, _ := tracedPending(t, time.Now())
	if p.rec.Span != nil || recordHeader(p, tracing.Traceparent) != rowTraceparent {
		t.Fatalf("tracing off: span %v, traceparent %q; want none and the row's", p.rec.Span, recordHeader(p, tracing.Traceparent))
	}
	hist := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "c2a", Buckets: []float64{10}})
	(&producerSession{m: &metrics{commitToAck: hist}}).ackObserved(p)
	var m dto.Metric
	_ = hist.Write(&m)
	if m.GetHistogram().GetSampleCount() != 1 || m.GetHistogram().GetBucket()[0].GetExemplar() != nil {
		t.Errorf("histogram %v, want one observation without exemplar", m.GetHistogram())
	}
}
