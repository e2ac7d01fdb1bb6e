package tracing

import (
	"context"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
		want Config
	}{
		{"nothing set: off", nil, false, Config{ServiceName: "svc", Protocol: ProtocolHTTP}},
		{"endpoint: on, http/protobuf", map[string]string{EnvEndpoint: "http://127.0.0.1:4318"}, true,
			Config{Endpoint: "http://127.0.0.1:4318", ServiceName: "svc", Protocol: ProtocolHTTP}},
		{"traces endpoint wins", map[string]string{EnvEndpoint: "http://a:4318", EnvTracesEndpoint: "http://b:4318/v1/traces"}, true,
			Config{Endpoint: "http://b:4318/v1/traces", ServiceName: "svc", Protocol: ProtocolHTTP}},
		{"grpc", map[string]string{EnvEndpoint: "http://a:4317", EnvProtocol: "grpc"}, true,
			Config{Endpoint: "http://a:4317", ServiceName: "svc", Protocol: ProtocolGRPC}},
		{"traces protocol wins", map[string]string{EnvEndpoint: "http://a:4317", EnvProtocol: "http/protobuf", EnvTracesProtocol: "grpc"}, true,
			Config{Endpoint: "http://a:4317", ServiceName: "svc", Protocol: ProtocolGRPC}},
		{"sdk disabled", map[string]string{EnvEndpoint: "http://a:4318", EnvSDKDisabled: "true"}, false,
			Config{Endpoint: "http://a:4318", ServiceName: "svc", Protocol: ProtocolHTTP, Disabled: true}},
		{"exporter none", map[string]string{EnvEndpoint: "http://a:4318", EnvTracesExporter: "none"}, false,
			Config{Endpoint: "http://a:4318", ServiceName: "svc", Protocol: ProtocolHTTP, Disabled: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := FromEnv("svc", func(k string) string { return tc.env[k] })
			got.Sampling, got.SamplingErr = Sampling{}, nil // TestSamplingFromEnv
			if got != tc.want || got.On() != tc.on {
				t.Errorf("FromEnv = %+v (on %v), want %+v (on %v)", got, got.On(), tc.want, tc.on)
			}
		})
	}
}

func TestValidateCollectsEveryError(t *testing.T) {
	err := Config{Endpoint: "http://a:4318", Protocol: "http/json"}.Validate()
	if err == nil || !strings.Contains(err.Error(), "http/json") || !strings.Contains(err.Error(), "service name") {
		t.Fatalf("Validate = %v, want the protocol and the service name", err)
	}
}

// TestSetupWithoutEndpointInstallsNothing: no endpoint, no tracing: the
// tracer is the no-op one and spans are not recorded.
func TestSetupWithoutEndpointInstallsNothing(t *testing.T) {
	shutdown, err := Setup(t.Context(), FromEnv("svc", func(string) string { return "" }))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	if Enabled() {
		t.Fatal("tracing on without an endpoint")
	}
	_, span := Tracer().Start(t.Context(), "x")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatal("the tracer records without an endpoint")
	}
}

func TestSetupWithEndpointTurnsTracingOn(t *testing.T) {
	c := Config{Endpoint: "http://127.0.0.1:1", Protocol: ProtocolHTTP, ServiceName: "svc"}
	shutdown, err := Setup(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if !Enabled() {
		t.Fatal("tracing off with an endpoint")
	}
	_, span := Tracer().Start(t.Context(), "x")
	if !span.SpanContext().IsValid() {
		t.Fatal("no span context with tracing on")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // nothing listens: do not wait for the export
	_ = shutdown(ctx)
	if Enabled() {
		t.Fatal("tracing still on after Shutdown")
	}
}

// TestSetupSamplesAsItsEnvironmentSays: Setup's provider takes the
// sampler of OTEL_TRACES_SAMPLER(_ARG) and the event-derived root traces,
// and the relay's root decisions (SampleRoot) are that sampler's.
func TestSetupSamplesAsItsEnvironmentSays(t *testing.T) {
	env := map[string]string{EnvEndpoint: "http://127.0.0.1:1", EnvSampler: SamplerParentBasedTraceIDRatio, EnvSamplerArg: "0.5"}
	shutdown, err := Setup(t.Context(), FromEnv("svc", func(k string) string { return env[k] }))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // nothing listens: do not wait for the export
		_ = shutdown(ctx)
	}()
	sampled := 0
	for range 200 {
		id := uuid.New()
		_, span := Tracer().Start(WithRootTrace(t.Context(), id), "x")
		sc := span.SpanContext()
		if sc.TraceID() != RootTraceID(id) || sc.IsSampled() != SampleRoot(id) {
			t.Fatalf("event %s: trace %s sampled %v; want %s sampled %v", id, sc.TraceID(), sc.IsSampled(), RootTraceID(id), SampleRoot(id))
		}
		if sc.IsSampled() {
			sampled++
		}
	}
	if sampled < 60 || sampled > 140 {
		t.Fatalf("%d of 200 sampled at 0.5", sampled)
	}
}

var (
	tid = trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	sid = trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
)

func TestFormatTraceparentMatchesThePropagator(t *testing.T) {
	for _, flags := range []trace.TraceFlags{0, trace.FlagsSampled} {
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags})
		m := propagation.MapCarrier{}
		Propagator().Inject(trace.ContextWithSpanContext(context.Background(), sc), m)
		if got := FormatTraceparent(sc); got != m[Traceparent] {
			t.Errorf("FormatTraceparent = %q, propagator %q", got, m[Traceparent])
		}
	}
}

func TestSetRecordHeaders(t *testing.T) {
	ts, _ := trace.ParseTraceState("k=v")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	h := func(k, v string) sarama.RecordHeader { return sarama.RecordHeader{Key: []byte(k), Value: []byte(v)} }
	for _, tc := range []struct {
		name string
		in   []sarama.RecordHeader
		sc   trace.SpanContext
		want map[string]string
		n    int
	}{
		{"appended", []sarama.RecordHeader{h("event_id", "e")}, sc, map[string]string{Traceparent: want}, 2},
		{"replaced in place, stale tracestate dropped", []sarama.RecordHeader{h(Traceparent, "00-x"), h(Tracestate, "old=1"), h("a", "b")}, sc,
			map[string]string{Traceparent: want, "a": "b"}, 2},
		{"tracestate carried", []sarama.RecordHeader{h(Traceparent, "00-x")}, sc.WithTraceState(ts),
			map[string]string{Traceparent: want, Tracestate: "k=v"}, 2},
		{"invalid span context: unchanged", []sarama.RecordHeader{h(Traceparent, "00-x")}, trace.SpanContext{},
			map[string]string{Traceparent: "00-x"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := SetRecordHeaders(tc.in, tc.sc)
			got := map[string]string{}
			for _, x := range out {
				got[string(x.Key)] = string(x.Value)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q (all %v)", k, got[k], v, got)
				}
			}
			if _, ok := tc.want[Tracestate]; !ok && got[Tracestate] != "" {
				t.Errorf("tracestate %q left", got[Tracestate])
			}
			if len(out) < tc.n {
				t.Errorf("%d headers, want at least %d", len(out), tc.n)
			}
		})
	}
}

func TestFromMapAndToMap(t *testing.T) {
	in := map[string]string{Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Tracestate: "k=v"}
	sc := trace.SpanContextFromContext(FromMap(context.Background(), in))
	if sc.TraceID() != tid || sc.SpanID() != sid || !sc.IsRemote() || sc.TraceState().Get("k") != "v" {
		t.Fatalf("FromMap = %v", sc)
	}
	out := map[string]string{Tracestate: "stale=1"}
	ToMap(trace.ContextWithSpanContext(context.Background(), sc.WithTraceState(trace.TraceState{})), out)
	if out[Traceparent] != in[Traceparent] || out[Tracestate] != "" {
		t.Fatalf("ToMap = %v", out)
	}
	if sc := trace.SpanContextFromContext(FromMap(context.Background(), map[string]string{})); sc.IsValid() {
		t.Fatal("a span context from no headers")
	}
}

func TestObserveKeepsTheTraceIDAsExemplar(t *testing.T) {
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	for _, tc := range []struct {
		name string
		sc   trace.SpanContext
		want string
	}{
		{"sampled", sampled, tid.String()},
		{"not sampled", sampled.WithTraceFlags(0), ""},
		{"no trace", trace.SpanContext{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Buckets: []float64{1}})
			Observe(h, 0.5, tc.sc)
			var m dto.Metric
			if err := h.Write(&m); err != nil {
				t.Fatal(err)
			}
			got := ""
			if ex := m.GetHistogram().GetBucket()[0].GetExemplar(); ex != nil {
				got = ex.GetLabel()[0].GetValue()
			}
			if got != tc.want || m.GetHistogram().GetSampleCount() != 1 {
				t.Errorf("exemplar %q, count %d; want %q, 1", got, m.GetHistogram().GetSampleCount(), tc.want)
			}
		})
	}
}

func TestFromProperties(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct{ name, text, tp, ts string }{
		{"as Debezium stores it", "#Thu Dec 04 10:02:00 UTC 2026\ntraceparent=" + tp + "\ntracestate=k\\=v\n", tp, "k=v"},
		{"colon and spaces, CRLF", "! comment\r\n  traceparent : " + tp + "\r\n", tp, ""},
		{"white space separator", "traceparent " + tp, tp, ""},
		{"none", "#only a comment\nuber-trace-id=abc:def:0:1\n", "", ""},
		{"empty", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, ts := FromProperties(tc.text)
			if tp != tc.tp || ts != tc.ts {
				t.Errorf("FromProperties = %q, %q; want %q, %q", tp, ts, tc.tp, tc.ts)
			}
		})
	}
}
