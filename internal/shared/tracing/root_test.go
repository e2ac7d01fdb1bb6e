package tracing

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestSamplingFromEnv(t *testing.T) {
	pbOn := sdktrace.ParentBased(sdktrace.AlwaysSample()).Description()
	for _, tc := range []struct {
		name, sampler, arg string
		want               string // the sampler's description
		bad                bool   // an error reports the setting
	}{
		{"unset: parent-based always-on", "", "", pbOn, false},
		{"always_on", "always_on", "", sdktrace.AlwaysSample().Description(), false},
		{"always_off", " ALWAYS_OFF ", "", sdktrace.NeverSample().Description(), false},
		{"parentbased_always_on", "parentbased_always_on", "", pbOn, false},
		{"parentbased_always_off", "parentbased_always_off", "", sdktrace.ParentBased(sdktrace.NeverSample()).Description(), false},
		{"traceidratio", "traceidratio", "0.25", sdktrace.TraceIDRatioBased(0.25).Description(), false},
		{"traceidratio without ratio: 1", "traceidratio", "", sdktrace.TraceIDRatioBased(1).Description(), false},
		{"parentbased_traceidratio", "parentbased_traceidratio", "0.01", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01)).Description(), false},
		{"ratio above 1: 1", "parentbased_traceidratio", "2", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(1)).Description(), true},
		{"ratio not a number: 1", "traceidratio", "half", sdktrace.TraceIDRatioBased(1).Description(), true},
		{"negative ratio: 1", "traceidratio", "-0.5", sdktrace.TraceIDRatioBased(1).Description(), true},
		{"unknown: the default", "jaeger_remote", "", pbOn, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{EnvSampler: tc.sampler, EnvSamplerArg: tc.arg}
			s, err := SamplingFromEnv(func(k string) string { return env[k] })
			if got := s.Sampler().Description(); got != tc.want || (err != nil) != tc.bad {
				t.Errorf("SamplingFromEnv = %s, %v; want %s (error %v)", got, err, tc.want, tc.bad)
			}
		})
	}
}

// TestRootTraceIDIsFixedAndSpread: an event's own trace id is always the
// same, never invalid, and spread so that a trace-id-ratio sampler keeps
// about its ratio of random (v4) and time-ordered (v7) event ids alike,
// although their version and variant bits are fixed.
func TestRootTraceIDIsFixedAndSpread(t *testing.T) {
	id := uuid.MustParse("0c5b6f43-6a8a-4a33-9f5e-0d5f8a6c7e21")
	// The documented mix (docs/tracing.md, "Sampling"), computed outside
	// Go from the text: it must never change, or a relay and a worker of
	// two versions would decide apart.
	if got := RootTraceID(id).String(); got != wantRootTrace {
		t.Fatalf("RootTraceID(%s) = %s, want %s", id, got, wantRootTrace)
	}
	if RootTraceID(id) == RootTraceID(uuid.New()) {
		t.Fatal("RootTraceID is not a function of the event id")
	}
	if !RootTraceID(uuid.Nil).IsValid() {
		t.Fatal("the nil event id has an invalid trace id")
	}
	const n, ratio = 20000, 0.25
	s := sdktrace.TraceIDRatioBased(ratio)
	for name, gen := range map[string]func() uuid.UUID{"v4": uuid.New, "v7": func() uuid.UUID { return uuid.Must(uuid.NewV7()) }} {
		kept := 0
		for range n {
			r := s.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: RootTraceID(gen())})
			if r.Decision == sdktrace.RecordAndSample {
				kept++
			}
		}
		if got := float64(kept) / n; got < ratio-0.02 || got > ratio+0.02 {
			t.Errorf("%s event ids: %.3f sampled at ratio %.2f", name, got, ratio)
		}
	}
}

// wantRootTrace is RootTraceID of 0c5b6f43-6a8a-4a33-9f5e-0d5f8a6c7e21.
const wantRootTrace = "add0e2c4f0a22c211603e7d46f5957b2"

// sampledProvider turns tracing on with sampler, as Setup does (its ids
// and its root decisions), spans to a recorder.
func sampledProvider(t *testing.T, s Sampling) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(s.Sampler()), sdktrace.WithIDGenerator(IDGenerator()), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(UseSampled(tp, s))
	return rec
}

// TestRelayAndWorkerDecideRootsAlike: for rows without a traceparent the
// relay joins a send span exactly for the events the sampler samples
// (SampleRoot); a worker's span for such a record (no traceparent, its
// event id) is in the event's own trace and sampled the same, so a record
// the relay left out carries nothing and is left out downstream too.
func TestRelayAndWorkerDecideRootsAlike(t *testing.T) {
	sampledProvider(t, Sampling{Name: SamplerParentBasedTraceIDRatio, Ratio: 0.3})
	defer SetIdleGrace(0)()
	var b Batcher
	var first *Batch
	var firstID uuid.UUID
	sampled := 0
	const n = 1000
	for range n {
		id := uuid.New()
		bt := b.Join(trace.SpanContext{}, id, "orders", time.Now())
		_, span := Tracer().Start(WithEventRoot(context.Background(), id.String()), "process orders")
		sc := span.SpanContext()
		span.End()
		if want := SampleRoot(id); (bt != nil) != want || sc.IsSampled() != want {
			t.Fatalf("event %s: relay span %v, worker sampled %v, SampleRoot %v", id, bt != nil, sc.IsSampled(), want)
		}
		if sc.TraceID() != RootTraceID(id) {
			t.Fatalf("event %s: worker's root trace %s, want %s", id, sc.TraceID(), RootTraceID(id))
		}
		if bt != nil {
			sampled++
			if first == nil {
				first, firstID = bt, id
			}
		}
	}
	if sampled < n/5 || sampled > n*2/5 {
		t.Fatalf("%d of %d roots sampled at 0.3", sampled, n)
	}
	if sc := first.SpanContext(); sc.TraceID() != RootTraceID(firstID) || !sc.IsSampled() || !first.recording {
		t.Fatalf("the first sampled root's send span is in trace %s (sampled %v), want %s", sc.TraceID(), sc.IsSampled(), RootTraceID(firstID))
	}
}

// TestWithEventRootKeepsAParent: a record with a traceparent stays in its
// trace; an event id that is not a UUID leaves the trace to the generator.
func TestWithEventRootKeepsAParent(t *testing.T) {
	sampledProvider(t, Sampling{Name: SamplerParentBasedAlwaysOn})
	parent, _ := ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	id := uuid.New()
	ctx := WithEventRoot(trace.ContextWithRemoteSpanContext(context.Background(), parent), id.String())
	if _, span := Tracer().Start(ctx, "p"); span.SpanContext().TraceID() != parent.TraceID() {
		t.Fatal("a record's own traceparent lost to its event's trace")
	}
	_, a := Tracer().Start(WithEventRoot(context.Background(), "e-1"), "p")
	_, b := Tracer().Start(WithEventRoot(context.Background(), "e-1"), "p")
	if !a.SpanContext().IsValid() || a.SpanContext().TraceID() == b.SpanContext().TraceID() {
		t.Fatal("ids that are not UUIDs do not get fresh random traces")
	}
}

// TestSampleRootAllocatesNothing: the relay asks it of every row without
// a traceparent.
func TestSampleRootAllocatesNothing(t *testing.T) {
	sampledProvider(t, Sampling{Name: SamplerParentBasedTraceIDRatio, Ratio: 0.01})
	id := uuid.New()
	if n := testing.AllocsPerRun(1000, func() { SampleRoot(id) }); n != 0 {
		t.Fatalf("SampleRoot: %v allocations", n)
	}
}
