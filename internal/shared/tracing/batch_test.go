package tracing

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestParseTraceparent(t *testing.T) {
	const good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		in      string
		ok      bool
		sampled bool
	}{
		{good, true, true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true, false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03", true, true},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-later", true, true}, // a later version may add fields
		{good + "-x", false, false}, // version 00 has none
		{"", false, false},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false, false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false, false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false, false}, // lower-case hex only
		{"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0", false, false},
	} {
		sc, ok := ParseTraceparent(tc.in)
		if ok != tc.ok || (ok && sc.IsSampled() != tc.sampled) {
			t.Errorf("ParseTraceparent(%q) = %v sampled %v, want %v sampled %v", tc.in, ok, sc.IsSampled(), tc.ok, tc.sampled)
		}
		if b, bok := ParseTraceparent([]byte(tc.in)); bok != ok || !b.Equal(sc) {
			t.Errorf("ParseTraceparent([]byte(%q)) differs from the string's", tc.in)
		}
		if ok && tc.in == good && FormatTraceparent(sc) != good {
			t.Errorf("round trip %q", FormatTraceparent(sc))
		}
	}
}

// Records acked from many goroutines end their batch's span exactly once,
// after the last of them.
func TestBatchEndsOnceAfterItsLastRecord(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	defer Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))()
	defer SetIdleGrace(0)()
	var b Batcher
	var batches []*Batch
	for range MaxBatch {
		batches = append(batches, b.Join(trace.SpanContext{}, uuid.New(), "orders", time.Now()))
	}
	if batches[0] != batches[MaxBatch-1] {
		t.Fatal("records joined before any ack went to different batches")
	}
	var wg sync.WaitGroup
	for i, bt := range batches {
		wg.Go(func() {
			if i%10 == 0 {
				bt.Abandon()
				return
			}
			bt.Acked(Ack{ID: uuid.New(), Partition: int32(i % 3), Offset: int64(i)})
		})
	}
	wg.Wait()
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	var count int64
	for _, a := range ended[0].Attributes() {
		if a.Key == attrBatchCount {
			count = a.Value.AsInt64()
		}
	}
	if want := int64(MaxBatch - (MaxBatch+9)/10); count != want {
		t.Errorf("message count %d, want %d acked", count, want)
	}
}

// A sampled batch offers its span as exemplar for its first record and for
// each later one at least twice as slow as the last that had it.
func TestBatchOffersExemplarsForItsFirstAndMuchSlowerRecords(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	defer Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))()
	var b Batcher
	secs := []float64{1, 1.5, 2.5, 3, 4.9, 6}
	var bt *Batch
	for range secs {
		bt = b.Join(trace.SpanContext{}, uuid.New(), "orders", time.Now())
	}
	var got []float64
	for _, s := range secs {
		if sc := bt.Acked(Ack{Seconds: s}); sc.IsValid() {
			if !sc.Equal(bt.SpanContext()) {
				t.Fatalf("exemplar %v, want the batch's span", sc)
			}
			got = append(got, s)
		}
	}
	if want := []float64{1, 2.5, 6}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("exemplars for %v, want %v", got, want)
	}
}

// A batch whose records were all acked waits the idle grace for more: a
// record that comes within it joins; the span ends once the grace passed,
// at the time its last record settled, and a record after that starts a
// new batch.
func TestAnIdleBatchTakesRecordsWithinItsGrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	defer Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))()
	defer SetIdleGrace(100 * time.Millisecond)()
	var b Batcher
	first := b.Join(trace.SpanContext{}, uuid.New(), "orders", time.Now())
	first.Acked(Ack{Seconds: 0.001})
	second := b.Join(trace.SpanContext{}, uuid.New(), "orders", time.Now())
	if second != first {
		t.Fatal("a record within the grace started a new batch")
	}
	second.Acked(Ack{Seconds: 0.001})
	settled := time.Now()
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans ended within the grace", n)
	}
	ended := waitEnded(t, rec, 1)
	if end := ended[0].EndTime(); end.After(settled) {
		t.Errorf("span ended at %v, after its last record settled (%v)", end, settled)
	}
	if got := attrInt(ended[0], attrBatchCount); got != 2 {
		t.Errorf("message count %d, want 2", got)
	}
	if b.Join(trace.SpanContext{}, uuid.New(), "orders", time.Now()) == first {
		t.Error("a record joined a batch whose span ended")
	}
}

// Root batches (rows without a traceparent) take MaxRootBatch records, a
// writer's trace MaxBatch (its links); a full batch ends at its last ack,
// without waiting the grace.
func TestBatchLimits(t *testing.T) {
	writer, _ := ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	for _, tc := range []struct {
		name   string
		writer trace.SpanContext
		limit  int
	}{
		{"root", trace.SpanContext{}, MaxRootBatch},
		{"writer", writer, MaxBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			defer Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))()
			defer SetIdleGrace(time.Hour)()
			var b Batcher
			var batches []*Batch
			for range tc.limit + 1 {
				batches = append(batches, b.Join(tc.writer, uuid.New(), "orders", time.Now()))
			}
			if batches[0] != batches[tc.limit-1] || batches[tc.limit] == batches[0] {
				t.Fatalf("batch boundary not after %d records", tc.limit)
			}
			for _, bt := range batches[:tc.limit] {
				bt.Acked(Ack{Seconds: 0.001})
			}
			ended := rec.Ended()
			if len(ended) != 1 || attrInt(ended[0], attrBatchCount) != int64(tc.limit) {
				t.Fatalf("%d spans ended, want the full batch's at once", len(ended))
			}
		})
	}
}

func waitEnded(t *testing.T, rec *tracetest.SpanRecorder, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ended := rec.Ended(); len(ended) >= n {
			return ended
		}
	}
	t.Fatalf("%d spans ended, want %d", len(rec.Ended()), n)
	return nil
}

func attrInt(s sdktrace.ReadOnlySpan, key string) int64 {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.AsInt64()
		}
	}
	return -1
}

// A record of a writer's trace links its batch's span to its writer's span
// with its event id: one allocation, the id's text (the links' attribute
// slices share the batch's array).
func TestLinkingARecordAllocatesOnlyItsID(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	defer Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))()
	writers := make([]trace.SpanContext, MaxBatch)
	for i := range writers {
		writers[i] = trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{byte(i + 1)}, TraceFlags: trace.FlagsSampled})
	}
	var b Batcher
	first := b.Join(writers[0], uuid.New(), "orders", time.Now())
	id, i := uuid.New(), 1
	allocs := testing.AllocsPerRun(MaxBatch-2, func() {
		if b.Join(writers[i], id, "orders", time.Now()) != first {
			t.Fatal("a record of the trace left the batch")
		}
		i++
	})
	if allocs > 1.5 {
		t.Errorf("%.2f allocations per linked record, want 1", allocs)
	}
	if links := first.span.(sdktrace.ReadOnlySpan).Links(); len(links) != i-1 || links[len(links)-1].Attributes[0].Value.AsString() != id.String() {
		t.Errorf("%d links, want %d, each with its message id", len(links), i-1)
	}
}

// An unsampled batch (sampling left its root out) is not counted in
// flight: acks do not end it; it takes records by count, and by commit
// time within unsampledSpread of its first.
func TestAnUnsampledBatchTakesRecordsByCountAndCommitTime(t *testing.T) {
	defer Use(sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())))()
	defer SetIdleGrace(0)()
	var b Batcher
	t0 := time.Now()
	first := b.Join(trace.SpanContext{}, uuid.New(), "orders", t0)
	if first.recording || first.SpanContext().IsSampled() || !first.SpanContext().IsValid() {
		t.Fatal("want an unsampled batch with a span context for its records")
	}
	first.Acked(Ack{Seconds: 0.001})
	if b.Join(trace.SpanContext{}, uuid.New(), "orders", t0.Add(time.Millisecond)) != first {
		t.Fatal("an ack ended an unsampled batch")
	}
	if b.Join(trace.SpanContext{}, uuid.New(), "orders", t0.Add(2*unsampledSpread)) == first {
		t.Fatal("a row committed long after the first joined its unsampled batch")
	}
	var last *Batch
	start := b.Join(trace.SpanContext{}, uuid.New(), "orders", time.Time{})
	for range MaxRootBatch {
		last = b.Join(trace.SpanContext{}, uuid.New(), "orders", time.Time{})
	}
	if last == start {
		t.Fatalf("an unsampled batch took more than %d records", MaxRootBatch)
	}
}
