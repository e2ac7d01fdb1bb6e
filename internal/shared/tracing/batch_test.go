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
