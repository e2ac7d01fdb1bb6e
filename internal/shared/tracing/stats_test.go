package tracing

import (
	"context"
	"errors"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// blockingExporter holds every export until release closes, then fails
// the exports when fail is set.
type blockingExporter struct {
	release chan struct{}
	fail    bool
}

func (e *blockingExporter) ExportSpans(ctx context.Context, _ []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	if e.fail {
		return errors.New("backend down")
	}
	return nil
}

func (*blockingExporter) Shutdown(context.Context) error { return nil }

// Ending spans never waits for a stuck exporter: a full queue drops them,
// and the counts tell how many were exported, failed and dropped.
func TestEndingSpansNeverWaitsForTheExporter(t *testing.T) {
	for _, fail := range []bool{false, true} {
		before := SpanStats()
		exp := &blockingExporter{release: make(chan struct{}), fail: fail}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(
			newProcessor(exp, sdktrace.WithMaxQueueSize(8), sdktrace.WithMaxExportBatchSize(4))))
		const spans = 1000
		start := time.Now()
		for range spans {
			_, sp := tp.Tracer("t").Start(context.Background(), "s")
			sp.End()
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("ending %d spans took %v with the exporter stuck", spans, took)
		}
		close(exp.release)
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		after := SpanStats()
		ended, exported, failed := after.Ended-before.Ended, after.Exported-before.Exported, after.Failed-before.Failed
		dropped := after.Dropped() - before.Dropped()
		if ended != spans || dropped == 0 || exported+failed+dropped != spans || (fail && exported != 0) || (!fail && failed != 0) {
			t.Errorf("fail=%v: ended %d, exported %d, failed %d, dropped %d of %d", fail, ended, exported, failed, dropped, spans)
		}
	}
}
