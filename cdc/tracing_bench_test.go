package cdc

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/eventforge/eventforge/internal/shared/outbox"
	"github.com/eventforge/eventforge/internal/shared/tracing"
)

// BenchmarkTracedEvent is the relay's per-event tracing work, record build
// included as the yardstick: traceSend at publish and ackObserved at the
// ack, tracing off, sampling everything (batched to an exporter that drops
// the spans), 1% and nothing (the per-row root decision alone); rows
// without a traceparent (each event its own root decision; the relay's
// spans are roots) and rows with a sampled one (a writer's trace, linked).
func BenchmarkTracedEvent(b *testing.B) {
	for _, tc := range []struct {
		name     string
		sampling *tracing.Sampling // nil: tracing off
		writer   bool              // rows carry a sampled traceparent
	}{
		{"off", nil, false},
		{"on-100%", &tracing.Sampling{Name: tracing.SamplerParentBasedAlwaysOn}, false},
		{"on-1%", &tracing.Sampling{Name: tracing.SamplerParentBasedTraceIDRatio, Ratio: 0.01}, false},
		{"on-0%", &tracing.Sampling{Name: tracing.SamplerParentBasedTraceIDRatio, Ratio: 0}, false},
		{"writer-off", nil, true},
		{"writer-on-100%", &tracing.Sampling{Name: tracing.SamplerParentBasedAlwaysOn}, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.sampling != nil {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(tc.sampling.Sampler()), sdktrace.WithIDGenerator(tracing.IDGenerator()),
					sdktrace.WithBatcher(tracetest.NewNoopExporter(), sdktrace.WithMaxQueueSize(1<<16)))
				defer func() { _ = tp.Shutdown(context.Background()) }()
				defer tracing.UseSampled(tp, *tc.sampling)()
			}
			build := outbox.NewBuilder("")
			e := &outbox.Event{ID: uuid.New(), AggregateType: "orders", AggregateID: "o-123456", EventType: "order.created",
				Payload: []byte(`{"id":"o-123456","amount":1200,"currency":"EUR"}`), CommitTime: time.Now()}
			if tc.writer {
				e.Headers = map[string]string{tracing.Traceparent: benchTraceparent}
			}
			s := &stream{}
			ps := &producerSession{m: &metrics{commitToAck: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Buckets: commitToAckBuckets()})}}
			b.ReportAllocs()
			// Acks come back a window at a time, as from a draining relay
			// with many records in flight.
			window := make([]*pending, 0, benchWindow)
			ack := func() {
				for _, p := range window {
					p.out.Offset = 1
					ps.ackObserved(p)
				}
				window = window[:0]
			}
			for b.Loop() {
				e.ID = uuid.New() // each event its own root decision
				p := &pending{id: e.ID, commit: e.CommitTime}
				if err := build.Build(&p.rec, e); err != nil {
					b.Fatal(err)
				}
				s.traceSend(e, p)
				p.msg = &p.rec.Msg
				if window = append(window, p); len(window) == benchWindow {
					ack()
				}
			}
			ack()
		})
	}
}

// benchWindow is how many records BenchmarkTracedEvent has in flight.
const benchWindow = 1000

const benchTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
