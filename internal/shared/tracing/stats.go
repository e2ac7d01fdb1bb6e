package tracing

import (
	"context"
	"sync/atomic"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Stats counts what became of the spans this process recorded since Setup.
// The batch span processor queues ended spans for an export goroutine and
// drops a span when its queue is full (OTEL_BSP_MAX_QUEUE_SIZE): ending a
// span never waits for the exporter, so the relay's acks never wait on the
// trace backend. Once Shutdown has flushed the queue, Dropped is exact.
type Stats struct {
	Ended    int64 // sampled spans ended
	Exported int64 // spans the exporter sent
	Failed   int64 // spans in exports that failed
}

// Dropped is the spans ended that were neither exported nor failed: dropped
// by a full queue (or still queued, before Shutdown).
func (s Stats) Dropped() int64 { return max(0, s.Ended-s.Exported-s.Failed) }

// spanCounts are the counters behind SpanStats.
var spanCounts struct{ ended, exported, failed atomic.Int64 }

// SpanStats is the counts since the process started.
func SpanStats() Stats {
	return Stats{Ended: spanCounts.ended.Load(), Exported: spanCounts.exported.Load(), Failed: spanCounts.failed.Load()}
}

// countingProcessor counts the sampled spans handed to the batch processor.
type countingProcessor struct{ sdktrace.SpanProcessor }

func (p countingProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.SpanContext().IsSampled() {
		spanCounts.ended.Add(1)
	}
	p.SpanProcessor.OnEnd(s)
}

// countingExporter counts the spans it exported, or failed to.
type countingExporter struct{ sdktrace.SpanExporter }

func (e countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		spanCounts.failed.Add(int64(len(spans)))
	} else {
		spanCounts.exported.Add(int64(len(spans)))
	}
	return err
}

// newProcessor is the batch span processor of exp, counted. Its settings
// are the SDK's, which OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_EXPORT_TIMEOUT,
// OTEL_BSP_MAX_QUEUE_SIZE and OTEL_BSP_MAX_EXPORT_BATCH_SIZE override; it
// never blocks OnEnd (a full queue drops the span).
func newProcessor(exp sdktrace.SpanExporter, opts ...sdktrace.BatchSpanProcessorOption) sdktrace.SpanProcessor {
	return countingProcessor{sdktrace.NewBatchSpanProcessor(countingExporter{exp}, opts...)}
}
